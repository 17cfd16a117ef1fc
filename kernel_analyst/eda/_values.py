"""What the cells of a column look like: number styles, missing-value markers, dates.

Pure functions over lists of cell strings taken from a sample of the file; the loader
turns their answers into ``pd.read_csv`` options.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# pandas' default missing-value spellings (``na_values`` documentation).
PANDAS_NA = frozenset({
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
    "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
})
# Other spellings of "missing" seen in exports; used only where a column is otherwise numeric.
EXTRA_NA = ("-", "--", "---", ".", "?", "NONE", "none", "Null", "NIL", "nil", "n.a.", "N.A.",
            "missing", "MISSING", "#VALUE!", "#DIV/0!", "#REF!", "NaT")

_PLAIN = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_POINT = re.compile(r"^[+-]?(?P<int>\d*)\.(?P<frac>\d+)$")
_COMMA = re.compile(r"^[+-]?(?P<int>\d+),(?P<frac>\d+)$")
_DOT_GROUPS = re.compile(r"^[+-]?\d{1,3}(?P<groups>(\.\d{3})+)(?P<dec>,\d+)?$")
_COMMA_GROUPS = re.compile(r"^[+-]?\d{1,3}(?P<groups>(,\d{3})+)(?P<dec>\.\d+)?$")
_CODE = re.compile(r"^0\d+$")
_DIGITS = re.compile(r"^\d+$")


@dataclass(frozen=True)
class NumberStyle:
    """Decimal and thousands separators, with the evidence for them."""

    decimal: str = "."
    """``.`` or ``,``."""
    thousands: str | None = None
    """``,``, ``.`` or ``None``."""
    evidence: str = ""
    """Example cells that decided it (empty when nothing unusual was seen)."""


@dataclass
class _Votes:
    comma_decimal: list[str]
    point_decimal: list[str]
    dot_thousands: list[str]
    comma_thousands: list[str]
    comma_thousands_weak: list[str]


def number_style(cells: Iterable[str]) -> NumberStyle:
    """Decide decimal and thousands separators from every cell of the sample."""
    votes = _Votes([], [], [], [], [])
    for cell in cells:
        _vote(cell.strip(), votes)
    comma = len(votes.comma_decimal) + len(votes.dot_thousands)
    point = len(votes.point_decimal) + len(votes.comma_thousands)
    if comma > point:
        thousands = "." if votes.dot_thousands and not votes.point_decimal else None
        examples = (votes.comma_decimal + votes.dot_thousands)[:3]
        return NumberStyle(",", thousands, ", ".join(repr(e) for e in examples))
    commas = votes.comma_thousands + votes.comma_thousands_weak
    if commas and not votes.comma_decimal:
        return NumberStyle(".", ",", ", ".join(repr(e) for e in commas[:3]))
    return NumberStyle()


def _vote(cell: str, votes: _Votes) -> None:
    if m := _COMMA.match(cell):
        if len(m["frac"]) != 3 or m["int"].startswith("0") or len(m["int"]) > 3:
            votes.comma_decimal.append(cell)
        else:
            votes.comma_thousands_weak.append(cell)  # "6,718": thousands or 3 decimals
    elif m := _POINT.match(cell):
        if len(m["frac"]) != 3 or m["int"] in ("", "0") or m["int"].startswith("0") or len(m["int"]) > 3:
            votes.point_decimal.append(cell)
    elif m := _DOT_GROUPS.match(cell):
        votes.dot_thousands.append(cell)  # "200.000.000", "127.897,23"
    elif (m := _COMMA_GROUPS.match(cell)) and (m["dec"] or m["groups"].count(",") > 1):
        votes.comma_thousands.append(cell)  # "1,234,567", "1,234.5"


def is_number(cell: str, style: NumberStyle) -> bool:
    """True when ``cell`` reads as a number under ``style``."""
    text = cell.strip()
    if style.thousands and (_DOT_GROUPS if style.thousands == "." else _COMMA_GROUPS).match(text):
        text = text.replace(style.thousands, "")
    if style.decimal == ",":
        if "." in text:
            return False
        text = text.replace(",", ".")
    return bool(_PLAIN.match(text))


def missing_markers(cells: Sequence[str], style: NumberStyle, markers: Iterable[str] = ()) -> list[str]:
    """Extra missing-value spellings of an otherwise numeric column ([] if none).

    ``cells`` may be a sample of the column; ``markers`` are the :data:`EXTRA_NA`
    spellings found anywhere in it.
    """
    found = set(markers) | {c.strip() for c in cells if c.strip() in EXTRA_NA}
    present = [c.strip() for c in cells if c.strip() not in PANDAS_NA and c.strip() not in found]
    if not found or not all(is_number(c, style) for c in present):
        return []
    return sorted(found)


def is_code_column(cells: Sequence[str]) -> bool:
    """Digit strings with leading zeros (``01``, ``02`` ...): codes, to keep as text."""
    present = [c.strip() for c in cells if c.strip() not in PANDAS_NA]
    return bool(present) and all(_DIGITS.match(c) for c in present) and any(_CODE.match(c) for c in present)


def is_row_index(cells: Sequence[str]) -> bool:
    """0, 1, 2 ... or 1, 2, 3 ...: a row number column written by ``DataFrame.to_csv``."""
    if len(cells) < 2 or not all(_DIGITS.match(c.strip()) for c in cells):
        return False
    values = [int(c) for c in cells]
    return values[0] in (0, 1) and all(b - a == 1 for a, b in itertools.pairwise(values))


# -- dates ---------------------------------------------------------------------------

_ISO = re.compile(r"^\d{4}-\d{2}(-\d{2}([ T]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?)?)?"
                  r"(?P<tz>\s?(Z|[+-]\d{2}:?\d{2}))?$")
_DMY = re.compile(r"^(?P<a>\d{1,2})(?P<sep>[/.-])(?P<b>\d{1,2})(?P=sep)(?P<y>\d{4}|\d{2})"
                  r"(?P<time> \d{1,2}:\d{2}(?P<sec>:\d{2})?)?$")
_YMD = re.compile(r"^\d{4}(?P<sep>[/.])\d{1,2}(?P=sep)\d{1,2}(?P<time> \d{1,2}:\d{2}(?P<sec>:\d{2})?)?$")
_NAMED = ("%d %b %Y", "%d %B %Y", "%b %d, %Y", "%B %d, %Y", "%d-%b-%Y", "%d-%b-%y", "%b %d %Y",
          "%d %b %Y %H:%M", "%Y-%b-%d", "%b-%y", "%b %Y", "%B %Y")


@dataclass(frozen=True)
class DateGuess:
    """How a column of dates is written."""

    format: str
    """A strptime format, or ``ISO8601``."""
    utc: bool = False
    """ISO timestamps with differing UTC offsets: convert to UTC."""
    note: str = ""
    """Why, when it is a judgement call (day/month order)."""


def date_format(cells: Sequence[str]) -> DateGuess | None:
    """The date format every non-empty cell matches, or None if it is not a date column."""
    present = [c.strip() for c in cells if c.strip() not in PANDAS_NA]
    if not present or all(_DIGITS.match(c) for c in present):
        return None
    return _iso(present) or _numeric_date(present) or _named(present)


def _iso(cells: list[str]) -> DateGuess | None:
    matches = [_ISO.match(c) for c in cells]
    if not all(matches):
        return None
    zones = {(m["tz"] or "").strip() for m in matches if m}
    if len(zones) > 1 and "" in zones:
        return None  # some with an offset, some without: no safe reading
    if len(zones) > 1:
        return DateGuess("ISO8601", utc=True, note="mixed UTC offsets; converted to UTC")
    return DateGuess("ISO8601")


def _numeric_date(cells: list[str]) -> DateGuess | None:
    ymd = [_YMD.match(c) for c in cells]
    if all(ymd):
        first = ymd[0]
        assert first is not None
        fmt = f"%Y{first['sep']}%m{first['sep']}%d" + _time_format(first["time"], first["sec"])
        return DateGuess(fmt) if _all_parse(cells, fmt) else None
    dmy = [_DMY.match(c) for c in cells]
    if not all(dmy):
        return None
    found = [m for m in dmy if m is not None]
    firsts, seconds = max(int(m["a"]) for m in found), max(int(m["b"]) for m in found)
    sep = found[0]["sep"]
    if firsts > 12 and seconds > 12:
        return None
    note = ""
    if firsts > 12:
        day_first = True
    elif seconds > 12:
        day_first = False
    else:
        day_first = sep != "/"
        note = f"day/month order ambiguous in the sample; assumed {'day' if day_first else 'month'} first"
    year = "%Y" if len(found[0]["y"]) == 4 else "%y"
    order = f"%d{sep}%m" if day_first else f"%m{sep}%d"
    fmt = f"{order}{sep}{year}" + _time_format(found[0]["time"], found[0]["sec"])
    return DateGuess(fmt, note=note) if _all_parse(cells, fmt) else None


def _time_format(time: str | None, seconds: str | None) -> str:
    if not time:
        return ""
    return " %H:%M:%S" if seconds else " %H:%M"


def _named(cells: list[str]) -> DateGuess | None:
    for fmt in _NAMED:
        if _all_parse(cells, fmt):
            return DateGuess(fmt)
    return None


def _all_parse(cells: list[str], fmt: str) -> bool:
    try:
        for cell in cells:
            dt.datetime.strptime(cell, fmt)
    except ValueError:
        return False
    return True
