"""Finding numbers in text: an answer's numbers with the words around them, and the
numbers of cell outputs with what they need for matching.

Both sides share one pattern (signs, currency, thousands separators, decimals, scientific
notation in ``e`` and ``× 10^`` forms, a percent sign) and the same idea of what is not a
number: digits glued to letters, underscores or dots (``Q3``, ``int64``, ``col_2``,
``v1.2``, ``COVID-19``), ordinals (``3rd``), times and fractions (``10:30``, ``3/4``),
versions (``1.2.3``) and ISO dates, which are dates. An answer's numbers also skip code
(fences and inline code that is more than a number), URLs and list markers, and read
number words (``twelve``, ``twenty-three``, ``two million``).
"""

from __future__ import annotations

import bisect
import html
import math
import re
from dataclasses import dataclass

_NUMBER = re.compile(
    r"""
    (?P<sign>[-−+])?
    (?P<cur>[$€£¥])?
    (?P<mant>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)
    (?:
        [eE](?P<exp>[-+−]?\d+)
      | [ ]?[×x*·][ ]?10(?:\^|\*\*)?(?P<exp2>[-+−]?\d+|[⁻⁺]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+)
    )?
""",
    re.VERBOSE,
)
_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺−", "0123456789-+-")
_PERCENT_AFTER = re.compile(r"[ \u00a0]?(?:%|percent\b|per cent\b|pct\b)", re.IGNORECASE)
_POINTS_AFTER = re.compile(r"[ \u00a0]?(?:percentage[ -]points?\b|points?\b|pp\b|pts?\b)", re.IGNORECASE)
_SCALE_AFTER = re.compile(
    r"(?:[ \u00a0](?P<word>thousand|million|billion|trillion|bn)\b"
    r"|(?P<short>[kKMB]|bn)(?![\w]))"
)
_SCALES = {
    "thousand": 1e3,
    "k": 1e3,
    "million": 1e6,
    "m": 1e6,
    "billion": 1e9,
    "b": 1e9,
    "bn": 1e9,
    "trillion": 1e12,
}
_ORDINAL = re.compile(r"(?:st|nd|rd|th)\b", re.IGNORECASE)
_GLUED_BEFORE = re.compile(r"[\w.#/\\@]")

MONTHS = {
    m: i
    for i, names in enumerate(
        (
            ("jan", "january"),
            ("feb", "february"),
            ("mar", "march"),
            ("apr", "april"),
            ("may",),
            ("jun", "june"),
            ("jul", "july"),
            ("aug", "august"),
            ("sep", "sept", "september"),
            ("oct", "october"),
            ("nov", "november"),
            ("dec", "december"),
        ),
        start=1,
    )
    for m in names
}
_MONTH = r"(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_ISO_DATE = re.compile(
    r"(?<![\w.-])(?P<y>\d{4})-(?P<m>\d{2})(?:-(?P<d>\d{2}))?(?![\d-])"
    r"(?:[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?"
)
_WORD_DATES = (
    re.compile(_MONTH + r"[ \u00a0]+(?P<d>\d{1,2})(?:st|nd|rd|th)?,?[ \u00a0]+(?P<y>\d{4})\b", re.IGNORECASE),
    re.compile(
        r"\b(?P<d>\d{1,2})(?:st|nd|rd|th)?[ \u00a0]+" + _MONTH + r",?[ \u00a0]+(?P<y>\d{4})\b", re.IGNORECASE
    ),
    re.compile(r"\b" + _MONTH + r",?[ \u00a0]+(?P<y>\d{4})\b", re.IGNORECASE),
)

_ONES = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
_TEENS = [
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_WORD_VALUES = {
    **{w: i + 1 for i, w in enumerate(_ONES)},
    **{w: i + 10 for i, w in enumerate(_TEENS)},
    **{w: (i + 2) * 10 for i, w in enumerate(_TENS)},
}
_WORD_NUMBER = re.compile(
    r"\b(?:(?P<tens>" + "|".join(_TENS) + r")(?:[- ](?P<unit>" + "|".join(_ONES) + r"))?"
    r"|(?P<single>" + "|".join(_TEENS + _ONES) + r"))"
    r"(?:[ \u00a0]+(?P<scale>hundred|thousand|million|billion))?\b",
    re.IGNORECASE,
)

_CODE_FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[ \t]*$", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]+`")
_URL = re.compile(r"https?://\S+|!?\[[^\]\n]*\]\([^)\n]*\)|<[^>\n]*>")
_LIST_MARKER = re.compile(r"^[ \t]*(?:[-*+][ \t]+)?\d{1,3}[.)](?=[ \t])", re.MULTILINE)
_PURE_NUMBER = re.compile(r"`[-−+]?[$€£]?[\d.,]+%?`")
_HTML_TAG = re.compile(r"<[^>]*>")


@dataclass(frozen=True)
class Found:
    """One number found in text (either side)."""

    start: int
    """Where it starts in the text (its sign or currency included)."""
    end: int
    """Where it ends (a percent sign or scale word included)."""
    text: str
    """The text from ``start`` to ``end``."""
    value: float
    """The value as written: ``38.4`` for ``38.4%``, ``1200000.0`` for ``1.2 million``."""
    unit: float
    """The place of the last digit shown, in the value's scale (``0.1`` for ``38.4%``,
    ``1e5`` for ``1.2 million``); 0 for integers written in full, which are exact."""
    percent: bool = False
    """Written with ``%``, ``percent`` or percentage points."""
    separated: bool = False
    """Written with thousands separators (``2,023``)."""
    integer: bool = False
    """Written without a decimal point or exponent."""
    signed: bool = False
    """Written with an explicit sign."""
    currency: bool = False
    """Written with a currency symbol."""
    scaled: bool = False
    """Written with a scale word (thousand, million, ``k``)."""
    words: bool = False
    """Written in words (``twelve``)."""
    date: tuple[int, int, int] | None = None
    """(year, month, day) of a date; month and day 0 when not given."""


def parse_mantissa(mant: str, exp: str | None) -> tuple[float, float, bool]:
    """(value, unit of the last digit, integer?) of a mantissa and an optional exponent."""
    digits = mant.replace(",", "")
    decimals = len(digits) - digits.index(".") - 1 if "." in digits else 0
    power = int(exp.translate(_SUPERSCRIPTS)) if exp else 0
    # Written as decimal strings, an exponent past float's range gives inf (or 0.0), never
    # OverflowError: a hex id such as ``14e326`` in a path is text too.
    value = float(f"{digits}e{power}")
    unit = float(f"1e{power - decimals}")
    return value, unit, "." not in digits and not exp


def _glued_before(text: str, start: int) -> bool:
    return start > 0 and bool(_GLUED_BEFORE.match(text[start - 1]))


def _read(text: str, m: re.Match[str], *, answer: bool) -> Found | None:
    """The number of one pattern match, or None when it is part of a word, a version, a time."""
    start, end = m.start(), m.end()
    sign = m.group("sign")
    if sign and start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_."):
        if text[start - 1].isalpha() or text[start - 1] == "_":
            return None  # COVID-19, x-3: part of a name
        sign, start = None, start + 1  # 20-30: a range, not a negative number
    if not sign and _glued_before(text, start):
        return None
    after = text[end : end + 2]
    if (after[:1] == "." and after[1:2].isdigit()) or (after[:1] in ":/" and after[1:2].isdigit()):
        return None  # 1.2.3, 10:30, 3/4
    if _ORDINAL.match(text, end):
        return None
    if start > 0 and text[start - 1] in ":/" and start > 1 and text[start - 2].isdigit():
        return None
    exp = m.group("exp") or m.group("exp2")
    value, unit, integer = parse_mantissa(m.group("mant"), exp)
    if not math.isfinite(value) or unit == 0.0:
        return None  # 14e326: beyond what a float holds, so no value to match
    if sign in ("-", "−"):
        value = -value
    percent = False
    scaled = False
    if (p := _PERCENT_AFTER.match(text, end)) or (p := _POINTS_AFTER.match(text, end)):
        percent, end = True, p.end()
    elif answer and (s := _SCALE_AFTER.match(text, end)):
        word = (s.group("word") or s.group("short")).lower()
        factor = _SCALES[word]
        value, unit, end, scaled = value * factor, unit * factor, s.end(), True
    elif end < len(text) and (text[end].isalpha() or text[end] == "_") and not answer:
        return None  # 64bit, 2nd: glued to a word (answers keep units such as 5kg)
    if integer and not scaled and not answer:
        unit = 0.0  # a printed integer is exact; an answer's integer is rounded to the ones
    return Found(
        start,
        end,
        text[start:end],
        value,
        unit,
        percent=percent,
        separated="," in m.group("mant"),
        integer=integer and not scaled,
        signed=bool(sign),
        currency=bool(m.group("cur")),
        scaled=scaled,
    )


def _dates(text: str, *, words: bool) -> list[Found]:
    found = []
    for m in _ISO_DATE.finditer(text):
        month, day = int(m.group("m")), int(m.group("d") or 0)
        if 1 <= month <= 12 and day <= 31:
            found.append(
                Found(
                    m.start(),
                    m.end(),
                    m.group(0),
                    float(m.group("y")),
                    0.0,
                    integer=True,
                    date=(int(m.group("y")), month, day),
                )
            )
    if words:
        for pattern in _WORD_DATES:
            for m in pattern.finditer(text):
                if any(f.start <= m.start() < f.end for f in found):
                    continue
                day = int(m.groupdict().get("d") or 0)
                date = (int(m.group("y")), MONTHS[m.group("month").lower()], day)
                found.append(
                    Found(m.start(), m.end(), m.group(0), float(date[0]), 0.0, integer=True, date=date)
                )
    return found


def _inside(spans: list[tuple[int, int]], starts: list[int], at: int) -> bool:
    i = bisect.bisect_right(starts, at) - 1
    return i >= 0 and spans[i][0] <= at < spans[i][1]


def _spans(text: str, found: list[Found]) -> tuple[list[tuple[int, int]], list[int]]:
    spans = sorted((f.start, f.end) for f in found)
    return spans, [s for s, _ in spans]


def source_numbers(text: str) -> list[Found]:
    """Every number and ISO date of a cell's output, in order."""
    if not any(c.isdigit() for c in text):
        return []
    dates = _dates(text, words=False)
    spans, starts = _spans(text, dates)
    found = list(dates)
    for m in _NUMBER.finditer(text):
        if spans and _inside(spans, starts, m.start("mant")):
            continue
        number = _read(text, m, answer=False)
        if number is not None and math.isfinite(number.value):
            found.append(number)
    if dates:
        found.sort(key=lambda f: f.start)
    return found


def answer_numbers(text: str) -> list[Found]:
    """Every number, date and number word of an answer that could be a claim, in order."""
    skipped = [(m.start(), m.end()) for pattern in (_CODE_FENCE, _URL) for m in pattern.finditer(text)]
    skipped += [
        (m.start(), m.end()) for m in _INLINE_CODE.finditer(text) if not _PURE_NUMBER.fullmatch(m.group())
    ]
    skipped += [(m.start(), m.end()) for m in _LIST_MARKER.finditer(text)]
    dates = _dates(text, words=True)
    skipped.sort()
    starts = [s for s, _ in skipped]
    found = [d for d in dates if not (skipped and _inside(skipped, starts, d.start))]
    taken, taken_starts = _spans(text, found)
    for m in _NUMBER.finditer(text):
        at = m.start("mant")
        if (skipped and _inside(skipped, starts, at)) or (taken and _inside(taken, taken_starts, at)):
            continue
        number = _read(text, m, answer=True)
        if number is not None and math.isfinite(number.value):
            found.append(number)
    for m in _WORD_NUMBER.finditer(text):
        if (skipped and _inside(skipped, starts, m.start())) or (
            taken and _inside(taken, taken_starts, m.start())
        ):
            continue
        found.append(_word_number(text, m))
    found.sort(key=lambda f: f.start)
    return found


def _word_number(text: str, m: re.Match[str]) -> Found:
    value = float(_WORD_VALUES[(m.group("tens") or m.group("single")).lower()])
    if m.group("unit"):
        value += _WORD_VALUES[m.group("unit").lower()]
    scale = m.group("scale")
    factor = (
        {"hundred": 1e2, "thousand": 1e3, "million": 1e6, "billion": 1e9}[scale.lower()] if scale else 1.0
    )
    end = m.end()
    percent = False
    if p := _PERCENT_AFTER.match(text, end):
        percent, end = True, p.end()
    return Found(
        m.start(),
        end,
        text[m.start() : end],
        value * factor,
        factor,
        percent=percent,
        integer=not scale,
        scaled=bool(scale),
        words=True,
    )


def visible_text(fragment: str) -> str:
    """The text of an HTML fragment (tags dropped, entities decoded, cells spaced)."""
    return html.unescape(_HTML_TAG.sub(" ", fragment))


__all__ = ["MONTHS", "Found", "answer_numbers", "parse_mantissa", "source_numbers", "visible_text"]
