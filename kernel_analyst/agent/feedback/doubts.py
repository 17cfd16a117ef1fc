"""Answers that are grounded but doubtful: results that cannot be what the question asked.

A small model that filters the wrong way still prints a number, and the number is in a
cell: grounding cannot see the slip. Four shapes of result give it away often enough to
check each answer for them (one reason, ``doubtful``, naming what was seen):

- **the whole or nothing of a subset**: a question asks for a share (percent, proportion,
  rate) and the answer is 0% or 100% (``len(late) / len(late) * 100``);
- **the table's own row count** given as the count of some of its rows (the filter never
  applied);
- **a list shorter than asked**: "the 2 worst scores" answered with one value;
- **one value for every group**: three or more ``@name[value]`` items with the same
  non-zero number (``@class1_outliers[20], @class2_outliers[20], @class3_outliers[20]``:
  DABench medium 180, where the 1.5B model ran the same selection of the whole table for
  each class).

Each is a pure function of the answer, the question and the uploaded tables' row counts;
a doubtful answer that is right says so and is accepted (each reason goes back once), and
one still doubtful at the end is what the analyst's extra attempts are for.
"""

from __future__ import annotations

import re

from ...claims import ClaimStatus
from ..prompting import message
from .answers import AnswerCase
from .decisions import Reason
from .form import AnswerForm

_SHARE_RE = re.compile(r"\b(?:percent(?:age)?s?|proportions?|shares?|fractions?|rates?|ratios?)\b|%", re.I)
_FILTER_RE = re.compile(r"\b(?:more|less|fewer|greater|higher|lower|at least|at most|above|below|over|"
                        r"under|without|with|where|whose|only|remaining|late|missing|between|except|"
                        r"excluding)\b", re.I)
_NUMBER_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
                 "ten": 10}
_RANKED = (r"(?:worst|best|largest|smallest|highest|lowest|biggest|most|least|top|bottom|first|last|"
           r"cheapest|longest|shortest|oldest|youngest)")
_COUNT = r"(\d{1,2}|two|three|four|five|six|seven|eight|nine|ten)"
_LIST_RES = (re.compile(rf"\b{_RANKED}\s+{_COUNT}\b", re.I), re.compile(rf"\b{_COUNT}\s+{_RANKED}\b", re.I))
_ITEM_SPLIT = re.compile(r",|;|\n|\band\b|\s[-*]\s")
_NUMBER_RE = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?")
_SAME_FOR_EACH = 3
"""Items with one non-zero value that make an answer doubtful (two are often equal by right:
a mean with and without outliers when there were none)."""


def whole_or_nothing(case: AnswerCase) -> str | None:
    """A share asked, and 0% or 100% answered."""
    if not _SHARE_RE.search(case.question.question):
        return None
    for claim in case.grounding.claims:
        if claim.kind == "percent" and claim.value in (0.0, 100.0):
            return message("doubt_whole_share", value=claim.text)
    return None


def whole_table(case: AnswerCase) -> str | None:
    """The table's own row count, for a question that counts some of its rows."""
    rows = set(case.question.table_rows)
    if not rows or not _FILTER_RE.search(case.question.question):
        return None
    for claim in case.grounding.claims:
        if claim.status is not ClaimStatus.UNSUPPORTED and claim.value in rows:
            return message("doubt_whole_table", value=claim.text)
    return None


def short_list(case: AnswerCase) -> str | None:
    """Fewer items than the question asks for ("the 3 largest")."""
    wanted = _items_asked(case.question.question)
    if wanted is None:
        return None
    given = _items_given(case.answer)
    return message("doubt_short_list", wanted=wanted, given=given) if given < wanted else None


def same_for_each(case: AnswerCase) -> str | None:
    """Three or more ``@name[value]`` items with one non-zero number: each group computed
    on the whole table, not on its own."""
    names: dict[float, list[str]] = {}
    shown: dict[float, str] = {}
    for name, given in AnswerForm.given(case.answer).items():
        value = given.strip()
        if not _NUMBER_RE.fullmatch(value):
            continue
        number = float(value.replace(",", ""))
        if number != 0 and name not in names.setdefault(number, []):
            names[number].append(name)
            shown.setdefault(number, value)
    for number, same in names.items():
        if len(same) >= _SAME_FOR_EACH:
            return message("doubt_same_value", value=shown[number], names=", ".join(f"@{n}" for n in same))
    return None


def doubtful(case: AnswerCase) -> Reason | None:
    """The first doubt found, as a reason (or None)."""
    for check in (whole_or_nothing, whole_table, short_list, same_for_each):
        if (text := check(case)) is not None:
            return Reason("doubtful", text)
    return None


def _items_asked(question: str) -> int | None:
    for pattern in _LIST_RES:
        found = pattern.search(question)
        if found is not None:
            word = found.group(1).lower()
            n = int(word) if word.isdigit() else _NUMBER_WORDS[word]
            return n if 2 <= n <= 20 else None
    return None


def _items_given(answer: str) -> int:
    """How many items the answer lists: an ``@name[...]`` value's items, else the answer's."""
    values = re.findall(r"@\w+\[(.*?)\]", answer, flags=re.S)
    text = max(values, key=len) if values else answer.strip()[:400]
    return len([part for part in _ITEM_SPLIT.split(text) if part.strip(" .[]'\"`*")])


__all__ = ["doubtful", "same_for_each", "short_list", "whole_or_nothing", "whole_table"]
