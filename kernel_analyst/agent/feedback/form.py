"""The form a question asks its answer in, and whether an answer follows it.

Questions often say how the answer must be written: a template (``@mean_fare[value]``,
as DABench writes them), a number of decimals. A small model computes the right numbers
and then restates them as prose, which a reader (or a scorer) that expects the template
cannot use. :meth:`AnswerForm.problems` names what an answer misses, for the review's
one feedback message:

- every ``@name[...]`` of the question must appear in the answer as ``@name[value]``;
- where the question gives a number of decimals, a value inside a template has no more
  than that many.

Units and list shapes are not checked: the ways to write them are too many to judge
without a model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TEMPLATE_RE = re.compile(r"@(\w+)\[")
_ANSWER_RE = re.compile(r"@(\w+)\[(.*?)\]")
_CODE_RE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.DOTALL)
"""Code in an answer (fenced, or inline): a template inside it is code that prints the
form, not the answer written in it."""
_NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_DECIMALS_RE = re.compile(r"\b(?:to|with|at)\s+(\d|one|two|three|four|five|six)\s+decimal(?:\s+places?|s)?\b",
                          re.IGNORECASE)
_DECIMAL_NUMBER_RE = re.compile(r"-?\d+\.(\d+)")
_GENERIC = frozenset({"name"})
"""Template names that describe the form rather than ask for an answer ("write each
@name[value] as shown", as DABench's prompt says)."""


@dataclass(frozen=True)
class AnswerForm:
    """What a question says about how its answer is written."""

    names: tuple[str, ...] = ()
    """The ``@name[...]`` templates it gives, in order."""
    decimals: int | None = None
    """The decimals it asks values to be rounded to, when it says (the smallest it names)."""

    @classmethod
    def of(cls, question: str) -> AnswerForm:
        """Read the form from the question's text."""
        names = tuple(dict.fromkeys(n for n in _TEMPLATE_RE.findall(question) if n not in _GENERIC))
        found = [int(m) if m.isdigit() else _NUMBER_WORDS[m.lower()] for m in _DECIMALS_RE.findall(question)]
        return cls(names, min(found) if found else None)

    @property
    def template(self) -> str:
        """The templates as the answer should write them (``@a[value], @b[value]``)."""
        return ", ".join(f"@{name}[value]" for name in self.names)

    def problems(self, answer: str) -> list[str]:
        """What the answer misses of the form: the templates it lacks, the values with
        more decimals than asked (empty when it follows the form, or none is given)."""
        if not self.names:
            return []
        given = dict(_ANSWER_RE.findall(_CODE_RE.sub(" ", answer)))
        missing = [name for name in self.names if name not in given]
        if missing:
            return [f"missing: {', '.join(f'@{n}[...]' for n in missing)}"]
        if self.decimals is None:
            return []
        long = [f"@{name}[{value}]" for name, value in given.items() if name in self.names
                and any(len(m.group(1)) > self.decimals for m in _DECIMAL_NUMBER_RE.finditer(value))]
        return [f"more than {self.decimals} decimals: {', '.join(long)}"] if long else []


__all__ = ["AnswerForm"]
