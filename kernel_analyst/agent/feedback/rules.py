"""Decision rules a question states on a test's p-value and a correlation's coefficient.

Questions that ask for a verdict often give the rule that decides it, in words: "Consider
the relationship to be linear if the p-value is less than 0.05 and the absolute value of r
is greater than or equal to 0.5", "If p-value >= 0.05, define it as no significant
relationship" (12 of DABench's 257 questions). A small model prints the p-value and the
coefficient and then writes a verdict that its own numbers contradict (DABench medium 34:
``@p_value[0.4058] @relationship_type[nonlinear]``). This module reads such rules from the
question, so the doubt in :mod:`.doubts` can hold the answer's verdict against them.

Only rules on two quantities are read: the p-value (``p``) and the coefficient (``r``, or
its absolute value ``|r|``); each condition is a comparison with a number, conditions are
joined by "and". Anything else in a sentence makes it no rule (nothing is guessed).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

_OPS: tuple[tuple[str, str], ...] = (
    (r"(?:is\s+)?(?:less than or equal to|at most|no (?:more|greater) than|<=|≤)", "<="),
    (r"(?:is\s+)?(?:greater than or equal to|at least|no less than|>=|≥)", ">="),
    (r"(?:is\s+)?(?:less than|below|smaller than|under|<)", "<"),
    (r"(?:is\s+)?(?:greater than|above|larger than|more than|exceeds|over|>)", ">"),
)
_COMPARE: Mapping[str, Callable[[float, float], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_OPPOSITE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}
_QUANTITIES: tuple[tuple[str, str], ...] = (
    (r"(?:the\s+)?(?:absolute value of (?:the\s+)?(?:correlation\s+coefficient|r)(?:\s+value)?"
     r"|absolute r|\|r\|)", "|r|"),
    (r"(?:the\s+)?p[\s-]?values?", "p"),
    (r"(?:the\s+)?(?:correlation\s+coefficient|r)(?:\s+value)?", "r"),
)
_NUMBER = r"(-?\d*\.?\d+)"
_CONDITION_RES = tuple(
    (re.compile(rf"{quantity}\s+{op}\s*{_NUMBER}$", re.I), name, symbol)
    for quantity, name in _QUANTITIES for op, symbol in _OPS)
_OUTCOME_FIRST = re.compile(r"\b(?:to be|as)\s+(?P<outcome>[\w\s-]{1,60}?)\s+if\s+(?P<conditions>.+)$", re.I)
_CONDITIONS_FIRST = re.compile(
    r"^if\s+(?P<conditions>.+?),\s*(?:\w+\s+){0,4}?(?:to be|as|that there is|that it is)"
    r"\s+(?P<outcome>[\w\s-]{1,60})$", re.I)
_OTHERWISE = re.compile(r"^otherwise,?\s+(?:\w+\s+){0,4}?(?:to be|as)\s+(?P<outcome>[\w\s-]{1,60})$", re.I)
_SENTENCE_SPLIT = re.compile(r"(?<=[.;])\s+|\n+")


@dataclass(frozen=True)
class Condition:
    """One comparison of a rule: ``p < 0.05``."""

    quantity: str
    """``p``, ``r`` or ``|r|``."""
    op: str
    """``<``, ``<=``, ``>`` or ``>=``."""
    threshold: float

    def holds(self, value: float, slack: float = 0.0) -> bool | None:
        """Whether it holds for ``value`` known to within ``slack`` (None: it depends on
        where in that range the value is)."""
        compare = _COMPARE[self.op]
        ends = {compare(value - slack, self.threshold), compare(value + slack, self.threshold)}
        return ends.pop() if len(ends) == 1 else None

    def opposite(self) -> Condition:
        """The condition that holds where this one does not."""
        return Condition(self.quantity, _OPPOSITE[self.op], self.threshold)

    def __str__(self) -> str:
        return f"{self.quantity} {self.op} {self.threshold:g}"


@dataclass(frozen=True)
class Rule:
    """A verdict and the conditions the question gives it under."""

    outcome: str
    """The verdict as the question words it ("linear", "no significant correlation")."""
    conditions: tuple[Condition, ...]

    def names(self, verdict: str) -> bool:
        """Whether an answer's verdict names this rule's outcome: its words are in the
        outcome ("linear" in "significant linear relationship"; "non-linear" is
        "nonlinear"), or it is "none" or "no" and the outcome says there is none. A verdict
        and an outcome of which one denies and the other does not never name each other
        ("significant" is not "no significant correlation")."""
        outcome, said = _words(self.outcome), _words(verdict)
        if not said:
            return False
        if (outcome[0] in _DENIALS) != (said[0] in _DENIALS or said[0] == "none"):
            return False
        if said in (["none"], ["no"]):
            return True
        return all(w in outcome for w in said if w not in _FILLERS)

    def holds(self, values: Mapping[str, tuple[float, float]]) -> bool | None:
        """Whether the rule's conditions hold for ``values`` (quantity -> value, slack); None
        when one of them cannot be told or a quantity is missing."""
        results = []
        for condition in self.conditions:
            if condition.quantity not in values:
                return None
            value, slack = values[condition.quantity]
            results.append(condition.holds(value, slack))
        if False in results:
            return False
        return None if None in results else True


_DENIALS = frozenset({"no", "not", "none"})
_FILLERS = frozenset({"a", "an", "the", "is", "relationship", "correlation"})


def _words(text: str) -> list[str]:
    """The words of a verdict, hyphens closed ("non-linear" is "nonlinear") and an adverb's
    "-ly" dropped ("normally distributed" names "normal")."""
    words = re.findall(r"[a-z]+", re.sub(r"(?<=[a-z])-(?=[a-z])", "", text.lower()))
    return [w[:-2] if w.endswith("ly") and len(w) > 5 else w for w in words]


def stated_rules(question: str) -> list[Rule]:
    """The rules the question states on a p-value and a coefficient, in its order. "Otherwise,
    consider it to be X" after a rule of one condition is the rule of the opposite condition."""
    rules: list[Rule] = []
    for sentence in _SENTENCE_SPLIT.split(question):
        sentence = sentence.strip().rstrip(".;}").strip()
        otherwise = _OTHERWISE.search(sentence)
        if otherwise is not None:
            if rules and len(rules[-1].conditions) == 1:
                rules.append(Rule(_outcome(otherwise), (rules[-1].conditions[0].opposite(),)))
            continue
        found = _OUTCOME_FIRST.search(sentence) or _CONDITIONS_FIRST.search(sentence)
        if found is None:
            continue
        conditions = _conditions(found.group("conditions"))
        if conditions:
            rules.append(Rule(_outcome(found), conditions))
    return rules


def _outcome(found: re.Match[str]) -> str:
    return re.sub(r"^(?:a|an|the)\s+", "", found.group("outcome").strip(), flags=re.I)


def _conditions(text: str) -> tuple[Condition, ...]:
    found = []
    for part in re.split(r"\s+and\s+", text.strip(), flags=re.I):
        part = part.strip()
        for pattern, quantity, op in _CONDITION_RES:
            if (match := pattern.fullmatch(part)) is not None:
                found.append(Condition(quantity, op, float(match.group(1))))
                break
        else:
            return ()
    return tuple(found)


__all__ = ["Condition", "Rule", "stated_rules"]
