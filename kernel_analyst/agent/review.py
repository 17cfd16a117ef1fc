"""Before an answer is returned: the checks that can send it back to the model, once.

An answer is sent back in ONE short message that lists every reason found, and each
reason at most once per question, so a model that insists still gets its answer through
(and ``max_steps`` bounds the loop either way). The reasons:

- ``no_work``: the conversation has data files and no code has run in it yet, so the
  answer cannot come from the data (the failure a small local model showed: code written
  but never run, then invented numbers). An answer whose every number is in what the
  model was shown before its first step (the profiles of the uploaded tables) is not sent
  back: it came from the data.

- ``unsupported``: once code has run in the conversation, every number of the answer is
  grounded in its cells (:mod:`kernel_analyst.claims`: outputs, results, recorded
  variables, code), derived from two of them, or unsupported; unsupported ones are named,
  and the model gets one more turn to compute them in a cell or leave them out.

- ``empty``: the answer is only ``nan``, ``None`` or an empty value (alone or in every
  ``@name[value]``): no finding, usually a filter that matched no row
  (:func:`kernel_analyst.agent.checks.empty_answer`).

- ``form``: the question says how the answer must be written (``@name[value]``
  templates, decimals: :class:`kernel_analyst.agent.form.AnswerForm`) and the answer does
  not follow it; the feedback names the form.

- ``failed``: the question's last step failed (an error, a timeout) and the model answered
  at once: nothing computed what that step was for, and a small model fills the gap with
  a guess (a name it saw in the profile). Sent once: an answer that says what could not
  be computed is accepted.

- ``stale``: every number of the answer comes from the cells of an earlier question (a
  follow-up answered with the previous answer's total), whether this question ran cells or
  (in a conversation with data files) none: the answer is grounded, but not in what this
  question computed. Sent once: a follow-up that only restates an earlier result says so
  and is accepted.

The grounding of the last answer reviewed is kept (:attr:`AnswerReview.grounding`): it
goes with the answer that is finally returned, sent back or not.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..claims import Claim, ClaimStatus, Grounding, SourceIndex, ground
from .checks import empty_answer
from .form import AnswerForm
from .prompting import message

_MAX_NAMED = 8
"""Unsupported numbers named in the feedback, at most."""


@dataclass(frozen=True)
class ReviewSettings:
    """Which checks run before an answer is accepted."""

    require_work: bool = True
    """Send back an answer given before any code ran in a conversation with data files."""
    check_numbers: bool = True
    """Send back an answer with numbers no cell produced, naming them (once code ran)."""
    check_form: bool = True
    """Send back an empty (``nan``) answer, and one not in the form the question asks for."""


@dataclass
class AnswerReview:
    """The checks of one question's answers (remembers which reasons were already sent)."""

    settings: ReviewSettings = field(default_factory=ReviewSettings)
    """What to check."""
    sent: set[str] = field(default_factory=set)
    """Reasons already sent back for this question."""
    grounding: Grounding | None = None
    """The numbers of the last answer reviewed, each grounded, derived or unsupported."""

    def feedback(self, *, protocol: str, tool_name: str, has_files: bool, cells_run: int,
                 answer: str = "", evidence: str = "", cells: Sequence[dict[str, Any]] = (),
                 question: str = "", files: Sequence[str] = (), since: int | None = None,
                 steps: int = 0, failed: str | None = None) -> str | None:
        """The message that sends the answer back, or None to accept it. ``evidence`` is
        the data-derived text the model was shown without running code (the profiles);
        ``cells`` the conversation's notebook cells, ``question`` and ``files`` what the
        answer may restate without it being a claim; ``since`` the index of this
        question's first cell and ``steps`` the steps it ran (for ``stale``); ``failed`` the
        error of this question's last step, if it failed (for ``failed``)."""
        reasons: list[tuple[str, str]] = []
        if failed is not None and self.settings.check_form:
            reasons.append(("failed", message("feedback_failed_last", error=failed)))
        if (self.settings.require_work and has_files and cells_run == 0
                and not _numbers_shown(answer, evidence)):
            key = "feedback_no_work_code" if protocol == "code" else "feedback_no_work_tools"
            reasons.append(("no_work", message(key, tool_name=tool_name)))
        self.grounding = ground(answer, SourceIndex.from_cells(cells), question=question, files=files)
        unsupported = self.grounding.unsupported
        if self.settings.check_numbers and cells_run > 0 and unsupported:
            more = ", ..." if len(unsupported) > _MAX_NAMED else ""
            named = ", ".join(c.text for c in unsupported[:_MAX_NAMED]) + more
            key = "feedback_unsupported_code" if protocol == "code" else "feedback_unsupported_tools"
            reasons.append(("unsupported", message(key, numbers=named, tool_name=tool_name)))
        if self.settings.check_form:
            reasons += _form_reasons(answer, question)
            if since is not None and (steps or has_files) \
                    and (stale := self._stale(answer, cells, since, question, files)):
                key = "feedback_stale" if steps else "feedback_stale_no_code"
                reasons.append(("stale", message(key, numbers=stale)))
        fresh = [(key, text) for key, text in reasons if key not in self.sent]
        if not fresh:
            return None
        self.sent.update(key for key, _ in fresh)
        return message("feedback", reasons="".join(f"\n{text}" for _, text in fresh))


    def _stale(self, answer: str, cells: Sequence[dict[str, Any]], since: int, question: str,
               files: Sequence[str]) -> str:
        """The answer's numbers, named, when every one of them comes from an earlier
        question's cells and none from this question's own ("" otherwise)."""
        assert self.grounding is not None
        found = [c for c in self.grounding.claims if c.status is not ClaimStatus.UNSUPPORTED]
        if not found:
            return ""
        here = ground(answer, SourceIndex.from_cells(cells[since:]), question=question, files=files)
        if any(c.status is not ClaimStatus.UNSUPPORTED for c in here.claims):
            return ""
        return ", ".join(_with_origin(c, cells) for c in found[:_MAX_NAMED])


def _with_origin(claim: Claim, cells: Sequence[dict[str, Any]]) -> str:
    """``800074 (cell [2]: df['TOTAL'].sum())``: a number and the code that printed it."""
    source = claim.source
    if source is None or source.cell_index is None or not 0 <= source.cell_index < len(cells):
        return claim.text
    code = "".join(cells[source.cell_index].get("source", ""))
    lines = [ln.strip() for ln in code.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    line = lines[-1] if lines else ""
    line = line if len(line) <= 60 else line[:57] + "..."
    where = f"cell [{source.cell}]" if source.cell is not None else "an earlier cell"
    return f"{claim.text} ({where}: {line})" if line else f"{claim.text} ({where})"


def _form_reasons(answer: str, question: str) -> list[tuple[str, str]]:
    reasons = []
    empty = empty_answer(answer)
    if empty is not None:
        reasons.append(("empty", message("feedback_empty", value=empty)))
    form = AnswerForm.of(question)
    problems = form.problems(answer)
    if problems:
        reasons.append(("form", message("feedback_form", form=form.template, problems="; ".join(problems))))
    return reasons


_NUMBER_RE = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?")


def _numbers(text: str) -> set[str]:
    return {m.group().replace(",", "").lstrip("-") for m in _NUMBER_RE.finditer(text)}


def _numbers_shown(answer: str, evidence: str) -> bool:
    """True when the answer states numbers and every one of them is in the evidence."""
    stated = _numbers(answer)
    return bool(stated) and bool(evidence) and stated <= _numbers(evidence)


__all__ = ["AnswerReview", "ReviewSettings"]
