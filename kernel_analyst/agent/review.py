"""Before an answer is returned: the checks that can send it back to the model, once.

An answer is sent back in ONE short message that lists every reason found, and each
reason at most once per question, so a model that insists still gets its answer through
(and ``max_steps`` bounds the loop either way). Today's reason:

- ``no_work``: the conversation has data files and no code has run in it yet, so the
  answer cannot come from the data (the failure a small local model showed: code written
  but never run, then invented numbers). An answer whose every number is in what the
  model was shown before its first step (the profiles of the uploaded tables) is not sent
  back: it came from the data.

Checks of the answer's numbers against the cells (grounding) add their reasons here, so
the model still gets a single message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .prompting import message


@dataclass(frozen=True)
class ReviewSettings:
    """Which checks run before an answer is accepted."""

    require_work: bool = True
    """Send back an answer given before any code ran in a conversation with data files."""


@dataclass
class AnswerReview:
    """The checks of one question's answers (remembers which reasons were already sent)."""

    settings: ReviewSettings = field(default_factory=ReviewSettings)
    """What to check."""
    sent: set[str] = field(default_factory=set)
    """Reasons already sent back for this question."""

    def feedback(self, *, protocol: str, tool_name: str, has_files: bool, cells_run: int,
                 answer: str = "", evidence: str = "") -> str | None:
        """The message that sends the answer back, or None to accept it. ``evidence`` is
        the data-derived text the model was shown without running code (the profiles)."""
        reasons: list[tuple[str, str]] = []
        if (self.settings.require_work and has_files and cells_run == 0
                and not _numbers_shown(answer, evidence)):
            key = "feedback_no_work_code" if protocol == "code" else "feedback_no_work_tools"
            reasons.append(("no_work", message(key, tool_name=tool_name)))
        fresh = [(key, text) for key, text in reasons if key not in self.sent]
        if not fresh:
            return None
        self.sent.update(key for key, _ in fresh)
        return message("feedback", reasons="".join(f"\n{text}" for _, text in fresh))


_NUMBER_RE = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?")


def _numbers(text: str) -> set[str]:
    return {m.group().replace(",", "").lstrip("-") for m in _NUMBER_RE.finditer(text)}


def _numbers_shown(answer: str, evidence: str) -> bool:
    """True when the answer states numbers and every one of them is in the evidence."""
    stated = _numbers(answer)
    return bool(stated) and bool(evidence) and stated <= _numbers(evidence)


__all__ = ["AnswerReview", "ReviewSettings"]
