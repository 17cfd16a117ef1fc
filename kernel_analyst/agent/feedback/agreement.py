"""Attempts that must agree: what each attempt's answer computed, and which answer most reach.

When an answer is in doubt (it still failed a check when it was accepted, or the steps ran
out), the question is tried again in forked branches, each to its own answer
(:mod:`kernel_analyst.agent.loop.attempts`). An answer's *values* are what it computed: the
value of each ``@name[value]`` the question asks for, or else its numbers (grounded in a
cell: the ones the question restates are left out) and its names. Two answers agree when
their values are the same: numbers within a relative 0.5% (or to the decimals the question
asks for), names alike in case and spacing. The answer given is one of the largest group
that agree; on a tie, the group of the earliest attempt that passed every check.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ...claims import ClaimStatus, Grounding
from .form import AnswerForm

_REL = 0.005
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?(?:e-?\d+)?$", re.I)


@dataclass(frozen=True)
class Attempt:
    """One attempt's answer, as the vote reads it."""

    number: int
    """1 for the conversation's own attempt, 2... for the branches."""
    text: str
    """The answer's text ("" when the attempt ended with none)."""
    grounding: Grounding | None = None
    """Its numbers against its branch's cells."""
    doubtful: bool = False
    """It failed a check (or is partial)."""


@dataclass(frozen=True)
class Vote:
    """The outcome of the attempts."""

    chosen: int
    """The number of the attempt whose answer is given."""
    agree: tuple[int, ...]
    """The attempts whose values agree with the chosen one (it included)."""
    values: dict[int, tuple[str, ...]] = field(default_factory=dict)
    """Each attempt's values, as compared."""

    @property
    def total(self) -> int:
        """Attempts that gave an answer with values."""
        return len([v for v in self.values.values() if v])


def values_of(attempt: Attempt, question: str) -> tuple[str, ...]:
    """What the answer computed, normalized for comparison (empty: nothing to compare)."""
    form = AnswerForm.of(question)
    given = AnswerForm.given(attempt.text)
    if form.names and any(name in given for name in form.names):
        return tuple(f"{name}={_norm(given.get(name, ''), form.decimals_of(name))}" for name in form.names)
    numbers = []
    if attempt.grounding is not None:
        numbers = [_norm_number(c.value, None) for c in attempt.grounding.claims
                   if c.status is not ClaimStatus.UNSUPPORTED]
    if numbers:
        return tuple(numbers)
    text = attempt.text.strip().strip("*_`.").strip()
    return (_norm(text, None),) if text and len(text.split()) <= 6 else ()


def vote(attempts: Sequence[Attempt], question: str) -> Vote:
    """The answer most attempts reach (see the module docstring)."""
    values = {a.number: values_of(a, question) for a in attempts}
    groups: list[list[Attempt]] = []
    for attempt in attempts:
        if not values[attempt.number]:
            continue
        home = next((g for g in groups if _same(values[g[0].number], values[attempt.number])), None)
        if home is None:
            groups.append([attempt])
        else:
            home.append(attempt)
    if not groups:
        first = attempts[0].number
        return Vote(first, (first,), values)
    best = max(len(g) for g in groups)
    group = min((g for g in groups if len(g) == best), key=_rank)
    chosen = min(group, key=lambda a: (a.doubtful, a.number))
    return Vote(chosen.number, tuple(sorted(a.number for a in group)), values)


def _rank(group: list[Attempt]) -> tuple[int, int]:
    """Among groups as large: the one with the earliest attempt that passed every check."""
    clean = [a.number for a in group if not a.doubtful]
    return (0, min(clean)) if clean else (1, min(a.number for a in group))


def _same(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))


def _close(a: str, b: str) -> bool:
    name_a, _, value_a = a.rpartition("=")
    name_b, _, value_b = b.rpartition("=")
    if name_a != name_b:
        return False
    if _NUMBER.match(value_a) and _NUMBER.match(value_b):
        x, y = float(value_a), float(value_b)
        return math.isclose(x, y, rel_tol=_REL, abs_tol=1e-9)
    return value_a == value_b


def _norm(value: str, decimals: int | None) -> str:
    text = " ".join(value.replace(",", "").strip().strip("'\"`*").split()).casefold()
    text = text.rstrip("%").strip() if text.endswith("%") else text
    try:
        return _norm_number(float(text), decimals)
    except ValueError:
        return text


def _norm_number(value: float, decimals: int | None) -> str:
    if decimals is not None:
        return f"{round(value, decimals):.{decimals}f}"
    return f"{value:.6g}"


__all__ = ["Attempt", "Vote", "values_of", "vote"]
