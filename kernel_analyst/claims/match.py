"""Matching an answer's numbers against the numbers its conversation's cells produced.

The rules, in the order they apply (each documented with the case that needs it):

1. **What is a claim.** Every number, percentage, date and number word of the answer
   (:mod:`._scan`), except numbers that restate the question or appear in a file name,
   and *small* numbers: a whole number from 0 to 10 with no unit, percent, currency or
   sign. Small numbers appear in every output (row labels, counts of classes, the 3 of
   ``pclass``), so matching them would ground anything; "fell by 3" is still a claim,
   matched only by a printed ``-3``.
2. **Rounding to the digits shown.** A claim matches a source when the source, rounded to
   the claim's last digit, gives the claim (``0.3838`` is ``38.4%`` and ``38%``; it is not
   ``38.3%``: one decimal wrong; nor ``38.5%``). A claim may not be more precise than its
   source (``38.38%`` is not grounded by a printed ``0.38``), and a printed whole number
   is exact (``890`` is not ``891``). With "about", "around", "roughly", "nearly" a round
   claim is read at its last non-zero digit (``about 900`` for ``891``).
3. **Bounds.** "more than 500" matches a source in [500, 600); "less than 0.001" one in
   (0, 0.001]. "p < 0.05" matches any p-value below 0.05, but only a number printed as a
   p-value (``pvalue=``, ``p-value:``, ``p =``).
4. **Restatements.** A percentage matches a ratio (``38.4%`` for ``0.3838``) or a number
   printed as a percentage; a plain number matches a printed percentage as a ratio;
   thousands separators and scientific notation are read as numbers (``1.2e-05`` is
   ``0.000012``); a scale word multiplies (``1.2 million``).
5. **Signs.** An unsigned claim matches a positive source, a signed one its sign; a
   decreasing word before or just after the number ("fell by", "lower", "negative
   correlation of") lets it match the negative value.
6. **Years and counts.** A four-digit number read as a year ("in 2023", "since 1958")
   matches a printed date of that year or the integer written without separators; it is
   never the count ``2,023``, and a count is never a date's year.
7. **Code.** A number in a cell's code grounds a claim only when written exactly alike.
8. **Derived.** A number no cell produced is *derived* when it is the difference, sum,
   ratio or relative change of two grounded numbers of the same answer, rounded to its
   own digits: computed from the numbers as the answer states them, or as their sources
   show them (so "55.3 percentage points" from ``74.2%`` and ``18.9%``, not 55.4). Only
   the answer's own grounded numbers are operands: pairs of any printed numbers would
   make almost every number derivable.

When several sources fit, the natural reading wins (a percentage from a ratio or a
printed percentage rather than from a plain number), then an exact value over a rounded
one, an output over a variable over code, the source sharing more words with the claim's
sentence (its cell's code and its row label: "survival rate" and ``df['survived']``), the
closer value, and the later cell.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ._scan import Found, answer_numbers
from .grounding import Claim, ClaimStatus, Derivation, Grounding, Ignored, Source
from .sources import Hit, Part, SourceIndex

_NEGATIVE = re.compile(
    r"\b(?:fell|falls?|fallen|falling|decreas\w*|dropp?\w*|declin\w*|lower\w*|down|less|"
    r"negative(?:ly)?|reduc\w*|shr[aiu]nk\w*|lost|loss|minus|fewer|smaller|cut)\b",
    re.IGNORECASE,
)
_POSITIVE = re.compile(
    r"\b(?:rose|rise[sn]?|rising|increas\w*|grew|grow\w*|gain\w*|up|higher|more|"
    r"positive(?:ly)?|plus|larger|greater)\b",
    re.IGNORECASE,
)
_APPROX = re.compile(
    r"(?:\b(?:about|around|roughly|approximately|approx\.?|nearly|almost|some|circa|ca\.)"
    r"|\bclose to|[~≈])\s*$",
    re.IGNORECASE,
)
_MORE = re.compile(
    r"(?:\b(?:more than|over|above|at least|exceed(?:s|ing)?|greater than|upwards of)"
    r"|>=?|≥)\s*$",
    re.IGNORECASE,
)
_LESS = re.compile(
    r"(?:\b(?:less than|under|below|fewer than|at most|up to|lower than)|<=?|≤)\s*$", re.IGNORECASE
)
_P_VALUE = re.compile(
    r"(?:^|[\s(,;])p(?:[- ]?values?)?\s*(?:[<>=≤≥]=?|of|is|was|:|equals?)?\s*$", re.IGNORECASE
)
_P_LABEL = re.compile(r"^(?:p|p[-_ ]?val(?:ue)?s?|pr?\(?>.*)$", re.IGNORECASE)
_YEAR_CUE = re.compile(
    r"\b(?:in|since|year|from|until|till|by|during|before|after|between|of|and|to|"
    r"through|early|late|mid|fiscal|FY)\s*$",
    re.IGNORECASE,
)
_WORD = re.compile(r"[a-z]{3,}")
_STOPWORDS = frozenset(
    [
        "the",
        "and",
        "was",
        "were",
        "are",
        "for",
        "with",
        "that",
        "this",
        "from",
        "has",
        "had",
        "have",
        "its",
        "their",
        "there",
        "than",
        "what",
        "which",
        "who",
        "how",
        "all",
        "any",
        "not",
        "but",
        "you",
        "print",
    ]
)
_WORDS_BEFORE = 6
_WORDS_AFTER = 3
_EPS = 1e-9
_RANK = {"output": 0, "variable": 1, "code": 2}


@dataclass(frozen=True)
class Mention:
    """A number of an answer read in its context: what a source must be to match it."""

    found: Found
    """The number as scanned."""
    kind: str
    """``number``, ``percent``, ``year`` or ``date``."""
    sign: str
    """``same`` (the source's sign must be the claim's), ``either`` (a decreasing word is
    beside it), or ``negative`` (a small number with a decreasing word: only ``-n``)."""
    qualifier: str
    """"" (equal after rounding), ``about``, ``more than`` or ``less than``."""
    p_value: bool
    """The answer calls it a p-value."""
    context: str = ""
    """The sentence it is in (up to the number and a little after)."""

    @property
    def unit(self) -> float:
        """The place of its last digit, coarser for "about 900" and for bounds."""
        unit = self.found.unit
        if self.qualifier and self.found.integer and self.found.value:
            digits = str(int(abs(self.found.value)))
            zeros = len(digits) - len(digits.rstrip("0"))
            unit = max(unit, 10.0**zeros)
        return unit


def read_mentions(text: str) -> list[Mention]:
    """Every number of ``text`` with the words around it (see the module docstring)."""
    mentions = []
    for found in answer_numbers(text):
        sentence_start = max(text.rfind(c, 0, found.start) for c in ".!?;\n") + 1
        before = text[sentence_start : found.start]
        after = " ".join(text[found.end : found.end + 60].split()[:_WORDS_AFTER])
        near = " ".join(before.split()[-_WORDS_BEFORE:])
        mentions.append(
            Mention(
                found,
                _kind(found, before),
                _sign(found, near, after),
                _qualifier(before),
                bool(_P_VALUE.search(before[-24:])),
                f"{before} {after}",
            )
        )
    return mentions


def _kind(found: Found, before: str) -> str:
    if found.date is not None:
        return "year" if found.date[1] == 0 and found.date[2] == 0 else "date"
    if found.percent:
        return "percent"
    if (
        found.integer
        and not found.separated
        and not found.signed
        and not found.words
        and 1800 <= found.value <= 2100
        and _YEAR_CUE.search(before[-16:])
    ):
        return "year"
    return "number"


def _sign(found: Found, near: str, after: str) -> str:
    if found.signed:
        return "same"
    cues = [(m.start(), "negative") for m in _NEGATIVE.finditer(near)]
    cues += [(m.start(), "positive") for m in _POSITIVE.finditer(near)]
    nearest = max(cues)[1] if cues else None
    if nearest is None:
        nearest = "negative" if _NEGATIVE.search(after) else None
    if nearest != "negative":
        return "same"
    return "negative" if _is_small(found) else "either"


def _qualifier(before: str) -> str:
    tail = before[-24:]
    if _MORE.search(tail):
        return "more than"
    if _LESS.search(tail):
        return "less than"
    if _APPROX.search(tail):
        return "about"
    return ""


def _is_small(found: Found) -> bool:
    return (
        found.integer
        and abs(found.value) <= 10
        and not found.percent
        and not found.currency
        and not found.scaled
        and found.date is None
    )


# -- one claim ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Fit:
    hit: Hit
    factor: float
    distance: float
    form: str


def factors(mention: Mention) -> tuple[float, ...]:
    if mention.kind == "percent":
        return (1.0, 100.0)
    return (1.0, 0.01)


def _window(mention: Mention, factor: float) -> tuple[float, float]:
    value, unit = abs(mention.found.value), mention.unit
    if mention.qualifier == "more than":
        low, high = value, value + unit
    elif mention.qualifier == "less than":
        low, high = (0.0, value) if mention.p_value else (value - unit, value)
    else:
        low, high = value - unit, value + unit
    return max(0.0, low) / factor * (1 - _EPS), high / factor * (1 + _EPS)


def fits(
    mention: Mention, number: Found, factor: float, *, where: str = "output", label: str = ""
) -> float | None:
    """How far ``number`` (times ``factor``) is from ``mention``, in units of the allowed
    tolerance (0 is exact), or None when it does not match by the rules."""
    if (
        number.date is not None
        or (number.percent and factor == 100.0)
        or (not number.percent and factor == 0.01)
    ):
        return None
    if mention.kind == "number" and number.percent and factor == 1.0:
        return None
    claim, source = mention.found.value, number.value * factor
    if where == "code":
        same = claim == source and (
            mention.found.unit == number.unit or (mention.found.integer and number.integer)
        )
        return 0.0 if same and factor == 1.0 and not mention.qualifier else None
    if not _signs_agree(mention, claim, source):
        return None
    if mention.kind == "year":
        ok = factor == 1.0 and number.integer and not number.separated and source == abs(claim)
        return 0.0 if ok else None
    return _distance(mention, abs(claim), abs(source), number.unit * factor, label)


def _signs_agree(mention: Mention, claim: float, source: float) -> bool:
    if mention.sign == "negative":
        return source < 0
    if mention.sign == "either" or claim == 0 or source == 0:
        return True
    return (claim < 0) == (source < 0)


def _distance(mention: Mention, claim: float, source: float, source_unit: float, label: str) -> float | None:
    unit = mention.unit
    if mention.qualifier == "more than":
        return 0.0 if claim * (1 - _EPS) <= source <= (claim + unit) * (1 + _EPS) else None
    if mention.qualifier == "less than":
        if mention.p_value:
            return 0.0 if 0 <= source <= claim * (1 + _EPS) and bool(_P_LABEL.match(label)) else None
        return 0.0 if (claim - unit) * (1 - _EPS) <= source <= claim * (1 + _EPS) else None
    if source_unit > unit * (1 + _EPS):
        return None  # the source shows fewer digits than the claim
    tolerance = unit / 2 * (1 + 1e-6) + _EPS * max(1.0, claim)  # half-up and half-even both pass
    gap = abs(claim - source)
    return gap / tolerance if gap <= tolerance else None


def best_source(mention: Mention, index: SourceIndex, *, prefer_from: int | None = None) -> Source | None:
    """The source that grounds ``mention`` best, or None (``prefer_from``: see :func:`ground`)."""
    fit = _best_fit(mention, index, prefer_from)
    return _source(fit) if fit is not None else None


def _tier(part: Part, prefer_from: int | None) -> int:
    """0 for a cell of the question being answered (at or after ``prefer_from``), 1 for an
    earlier question's cell, 2 for a table's profile: the computing cell is cited first."""
    if part.cell.role == "profile":
        return 2
    if prefer_from is None:
        return 1
    return 0 if part.cell.index is not None and part.cell.index >= prefer_from else 1


def _best_fit(mention: Mention, index: SourceIndex, prefer_from: int | None = None) -> _Fit | None:
    fits_found: list[_Fit] = []
    if mention.kind in ("year", "date"):
        fits_found += _date_fits(mention, index)
    if mention.kind != "date":
        for factor in factors(mention):
            low, high = _window(mention, factor)
            for hit in index.between(low, high):
                label = hit.part.label(hit.number) if mention.p_value else ""
                distance = fits(mention, hit.number, factor, where=hit.part.where, label=label)
                if distance is not None:
                    fits_found.append(_Fit(hit, factor, distance, _form(mention, hit.number, factor)))
    if (
        not fits_found
        and mention.kind == "date"
        and mention.found.date is not None
        and not mention.found.date[2]
    ):
        year = Found(
            mention.found.start,
            mention.found.end,
            mention.found.text,
            float(mention.found.date[0]),
            1.0,
            integer=True,
        )
        fallback = _best_fit(Mention(year, "year", "same", "", False), index, prefer_from)
        return _Fit(fallback.hit, 1.0, fallback.distance, "the year only") if fallback else None
    if not fits_found:
        return None
    words = _words(mention.context)
    return min(
        fits_found,
        key=lambda f: (
            _tier(f.hit.part, prefer_from),
            not _natural(mention, f.hit.number, f.factor),
            f.distance > 0,
            _RANK[f.hit.part.where],
            -_overlap(words, f.hit),
            round(f.distance, 1),
            -(f.hit.part.cell.index or 0),
        ),
    )


def _words(text: str) -> set[str]:
    return {w[:5] for w in _WORD.findall(text.lower()) if w not in _STOPWORDS}


def _overlap(words: set[str], hit: Hit) -> int:
    """Words the claim's sentence shares with the source's cell code and label."""
    return len(words & (hit.part.words() | _words(hit.part.label(hit.number)))) if words else 0


def _natural(mention: Mention, number: Found, factor: float) -> bool:
    """A percentage from a ratio or a printed percentage; a plain number from a plain one."""
    if mention.kind == "percent":
        return number.percent or factor == 100.0
    return not number.percent


def _source(fit: _Fit) -> Source:
    hit = fit.hit
    return Source(
        hit.part.cell.count,
        hit.part.cell.id,
        hit.part.cell.index,
        hit.part.where,
        hit.part.name,
        hit.number.text,
        hit.position,
        hit.part.label(hit.number),
        fit.form,
    )


def _date_fits(mention: Mention, index: SourceIndex) -> list[_Fit]:
    want = mention.found.date or (int(mention.found.value), 0, 0)
    return [
        _Fit(
            hit,
            1.0,
            0.0,
            "exact" if want == hit.number.date else "the date's year" if want[1] == 0 else "part of the date",
        )
        for hit in index.dates_in(want[0])
        if date_fits_number(mention, hit.number)
    ]


def date_fits_number(mention: Mention, number: Found) -> bool:
    """True when ``number`` is a date that ``mention`` (a year or a date) names."""
    want = mention.found.date or (int(mention.found.value), 0, 0)
    date = number.date
    if date is None or mention.kind not in ("year", "date"):
        return False
    return date[0] == want[0] and all(w == 0 or w == d for w, d in zip(want[1:], date[1:], strict=True))


def _form(mention: Mention, number: Found, factor: float) -> str:
    if mention.qualifier == "about":
        return "approximately"
    if mention.qualifier:
        return f"a bound ({mention.qualifier})"
    if factor == 100.0:
        return "as a percentage"
    if factor == 0.01:
        return "as a ratio"
    if mention.sign == "either" and number.value < 0 and mention.found.value > 0:
        return "sign in words"
    exact = abs(mention.found.value) == abs(number.value) and (
        mention.found.unit == number.unit or (mention.found.integer and number.integer)
    )
    return "exact" if exact else "rounded"


# -- the whole answer --------------------------------------------------------------------------


def ground(
    answer: str,
    index: SourceIndex,
    *,
    question: str = "",
    files: Iterable[str] = (),
    variables_read: bool = False,
    prefer_from: int | None = None,
) -> Grounding:
    """Every number of ``answer``, grounded in ``index``, derived, or unsupported.

    Where several cells show a number, the one cited is a cell of the question being
    answered (at or after the notebook position ``prefer_from``), the latest first; then an
    earlier question's; a table's profile last (it describes the data, cells compute)."""
    given = _given(question)
    in_names = {int(n) for name in files for n in re.findall(r"\d+", str(name)) if len(n) < 16}
    claims: list[Claim] = []
    operands: list[_Operand] = []
    ignored: list[Ignored] = []
    mentions = []
    for mention in read_mentions(answer):
        found = mention.found
        why = (
            "question"
            if _restates(found, given)
            else "file name"
            if found.integer and not found.scaled and found.value in in_names
            else "small"
            if _is_small(found) and mention.sign != "negative"
            else ""
        )
        if why:
            ignored.append(Ignored(found.text, found.start, why))
            continue
        fit = _best_fit(mention, index, prefer_from)
        status = ClaimStatus.GROUNDED if fit else ClaimStatus.UNSUPPORTED
        kind = "percent" if mention.kind == "percent" else mention.kind
        claims.append(
            Claim(
                found.text, found.value, found.start, found.end, status, kind, _source(fit) if fit else None
            )
        )
        mentions.append(mention)
        if fit is not None and (operand := _operand(len(claims) - 1, mention, fit)) is not None:
            operands.append(operand)
    return Grounding(answer, _derive(claims, mentions, operands), ignored, variables_read)


def _given(question: str) -> set[tuple[float, bool]]:
    return {(f.value, f.percent) for f in answer_numbers(question)} if question else set()


def _restates(found: Found, given: set[tuple[float, bool]]) -> bool:
    return (found.value, found.percent) in given or (abs(found.value), found.percent) in given


# -- derived numbers -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Operand:
    index: int
    text: str
    stated: float
    stated_error: float
    exact: float
    exact_error: float


def _operand(i: int, mention: Mention, fit: _Fit) -> _Operand | None:
    """A grounded claim as an operand, in ratio space (a percentage divided by 100): as
    the answer states it, and as its source has it."""
    if mention.kind in ("year", "date") or mention.qualifier or fit.hit.part.where == "code":
        return None
    scale = 0.01 if mention.kind == "percent" else 1.0
    stated = mention.found.value * scale
    exact = fit.hit.number.value * fit.factor * scale
    return _Operand(i, mention.found.text, stated, 0.0, exact, fit.hit.number.unit * fit.factor * scale / 2)


def _derive(claims: list[Claim], mentions: Sequence[Mention], operands: list[_Operand]) -> list[Claim]:
    if len(operands) < 2:
        return claims
    result = list(claims)
    for i, (claim, mention) in enumerate(zip(claims, mentions, strict=True)):
        if (
            claim.status is not ClaimStatus.UNSUPPORTED
            or mention.kind in ("year", "date")
            or mention.qualifier
        ):
            continue
        derivation = _find_derivation(mention, operands)
        if derivation is not None:
            result[i] = Claim(
                claim.text,
                claim.value,
                claim.start,
                claim.end,
                ClaimStatus.DERIVED,
                claim.kind,
                None,
                derivation,
            )
    return result


_OPS = ("difference", "sum", "ratio", "change")


def _find_derivation(mention: Mention, operands: list[_Operand]) -> Derivation | None:
    scale = 0.01 if mention.kind == "percent" else 1.0
    target = abs(mention.found.value) * scale
    tolerance = mention.unit * scale / 2
    for a in operands:
        for b in operands:
            if a.index == b.index:
                continue
            for op in _OPS:
                if op == "sum" and a.index > b.index:
                    continue
                for value_a, error_a, value_b, error_b in (
                    (a.exact, a.exact_error, b.exact, b.exact_error),
                    (a.stated, a.stated_error, b.stated, b.stated_error),
                ):
                    computed = _apply(op, value_a, error_a, value_b, error_b)
                    if computed is None:
                        continue
                    value, error = computed
                    if abs(abs(value) - target) <= tolerance + error + _EPS * max(1.0, target):
                        return Derivation(op, (a.index, b.index), _expression(op, a.text, b.text))
    return None


def _apply(op: str, a: float, ea: float, b: float, eb: float) -> tuple[float, float] | None:
    if op == "difference":
        return a - b, ea + eb
    if op == "sum":
        return a + b, ea + eb
    if b == 0 or a == 0:
        return None
    ratio = a / b
    error = abs(ratio) * (ea / abs(a) + eb / abs(b))
    return (ratio, error) if op == "ratio" else (ratio - 1, error)


def _expression(op: str, a: str, b: str) -> str:
    return {
        "difference": f"{a} − {b}",
        "sum": f"{a} + {b}",
        "ratio": f"{a} / {b}",
        "change": f"({a} − {b}) / {b}",
    }[op]


__all__ = ["Mention", "best_source", "date_fits_number", "factors", "fits", "ground", "read_mentions"]
