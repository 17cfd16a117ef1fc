"""Before an answer is accepted: the checks that can send it back to the model, once each.

An answer is sent back in ONE short message that lists every reason found, and each
reason at most once per question, so a model that insists still gets its answer through
(and the step limit bounds the loop either way). The reasons, in the order the model
reads them:

- ``failed``: the question's last step failed (an error, a timeout) and the model answered
  at once: nothing computed what that step was for, and a small model fills the gap with
  a guess (a name it saw in the profile). An answer that says what could not be computed
  is then accepted.

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
  (:func:`~kernel_analyst.agent.feedback.checks.empty_answer`).

- ``form``: the question says how the answer must be written (``@name[value]``
  templates, decimals: :class:`~kernel_analyst.agent.feedback.form.AnswerForm`) and the
  answer does not follow it; the feedback names the form.

- ``stale``: every number of the answer comes from the cells of an earlier question (a
  follow-up answered with the previous answer's total), whether this question ran cells or
  (in a conversation with data files) none: the answer is grounded, but not in what this
  question computed. A follow-up that only restates an earlier result says so and is
  accepted.

Each check is a function of an :class:`AnswerCase`, registered with the judge
(:data:`ANSWER_CHECKS`) under the setting that turns it off.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...claims import Claim, ClaimStatus, Grounding, SourceIndex, ground
from ..prompting import message
from .checks import empty_answer
from .decisions import QuestionFacts, Reason
from .form import AnswerForm

_MAX_NAMED = 8
"""Numbers named in one reason, at most."""


@dataclass(frozen=True)
class AnswerCase:
    """An answer, with what the checks read."""

    answer: str
    """The answer's text."""
    grounding: Grounding
    """Its numbers against every cell of the conversation."""
    question: QuestionFacts
    """The question it answers."""
    cells: Sequence[dict[str, Any]] = ()
    """The conversation's notebook cells."""
    steps: int = 0
    """Steps this question ran."""
    protocol: str = "tools"
    """How the model runs code (``tools`` or ``code``): the feedback's wording."""
    tool_name: str = "python"
    """The Python tool's name, for the feedback."""
    failed: str | None = None
    """The error of this question's last step, if it did not end ``ok`` (one line)."""

    @property
    def cells_run(self) -> int:
        """Code cells that computed something in the conversation, this question's included."""
        return self.question.cells_before + self.steps


AnswerCheck = Callable[[AnswerCase], Reason | None]
"""A reason to send an answer back, or None."""


def failed_last_step(case: AnswerCase) -> Reason | None:
    """The question's last step failed, and the model answered at once."""
    if case.failed is None:
        return None
    return Reason("failed", message("feedback_failed_last", error=case.failed))


def no_work(case: AnswerCase) -> Reason | None:
    """Data files, no code run yet, and numbers not all from what the model was shown."""
    q = case.question
    if not q.has_files or case.cells_run != 0 or _numbers_shown(case.answer, q.evidence):
        return None
    key = "feedback_no_work_code" if case.protocol == "code" else "feedback_no_work_tools"
    return Reason("no_work", message(key, tool_name=case.tool_name))


def unsupported(case: AnswerCase) -> Reason | None:
    """Numbers no cell produced (once code ran), named."""
    found = case.grounding.unsupported
    if case.cells_run == 0 or not found:
        return None
    more = ", ..." if len(found) > _MAX_NAMED else ""
    named = ", ".join(c.text for c in found[:_MAX_NAMED]) + more
    key = "feedback_unsupported_code" if case.protocol == "code" else "feedback_unsupported_tools"
    return Reason("unsupported", message(key, numbers=named, tool_name=case.tool_name))


def empty(case: AnswerCase) -> Reason | None:
    """An answer that is only ``nan``, ``None`` or an empty value."""
    value = empty_answer(case.answer)
    return Reason("empty", message("feedback_empty", value=value)) if value is not None else None


def wrong_form(case: AnswerCase) -> Reason | None:
    """Not in the form the question asks for (its templates, its decimals)."""
    form = AnswerForm.of(case.question.question)
    problems = form.problems(case.answer)
    if not problems:
        return None
    return Reason("form", message("feedback_form", form=form.template, problems="; ".join(problems)))


def stale(case: AnswerCase) -> Reason | None:
    """Every number from an earlier question's cells, none from this question's own."""
    q = case.question
    if not (case.steps or q.has_files):
        return None
    found = [c for c in case.grounding.claims if c.status is not ClaimStatus.UNSUPPORTED]
    if not found:
        return None
    here = ground(case.answer, SourceIndex.from_cells(case.cells[q.first_cell:]), question=q.question,
                  files=q.files)
    if any(c.status is not ClaimStatus.UNSUPPORTED for c in here.claims):
        return None
    named = ", ".join(_with_origin(c, case.cells) for c in found[:_MAX_NAMED])
    key = "feedback_stale" if case.steps else "feedback_stale_no_code"
    return Reason("stale", message(key, numbers=named))


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


_NUMBER_RE = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?")


def _numbers(text: str) -> set[str]:
    return {m.group().replace(",", "").lstrip("-") for m in _NUMBER_RE.finditer(text)}


def _numbers_shown(answer: str, evidence: str) -> bool:
    """True when the answer states numbers and every one of them is in the evidence."""
    stated = _numbers(answer)
    return bool(stated) and bool(evidence) and stated <= _numbers(evidence)


@dataclass(frozen=True)
class Registered:
    """An answer check and the setting that turns it off."""

    check: AnswerCheck
    """The check."""
    setting: str
    """The :class:`~kernel_analyst.agent.feedback.judge.JudgeSettings` field that must be
    true for it to run (``require_work``, ``check_numbers``, ``check_results``)."""


ANSWER_CHECKS: tuple[Registered, ...] = (
    Registered(failed_last_step, "check_results"),
    Registered(no_work, "require_work"),
    Registered(unsupported, "check_numbers"),
    Registered(empty, "check_results"),
    Registered(wrong_form, "check_results"),
    Registered(stale, "check_results"),
)
"""The answer checks, in the order their reasons are read."""


def printed_since(cells: Sequence[dict[str, Any]], since: int) -> list[tuple[int | None, str]]:
    """What each code cell from position ``since`` on printed (streams and plain-text
    results), as (its execution count, the text), oldest first."""
    found: list[tuple[int | None, str]] = []
    for cell in cells[since:]:
        if cell.get("cell_type") != "code":
            continue
        parts = []
        for output in cell.get("outputs") or []:
            if output.get("output_type") == "stream":
                parts.append(_text(output.get("text", "")))
            elif output.get("output_type") in ("execute_result", "display_data"):
                parts.append(_text((output.get("data") or {}).get("text/plain", "")))
        count = cell.get("execution_count")
        found.append((count if isinstance(count, int) else None, "".join(parts)))
    return found


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def grounding_of(answer: str, cells: Sequence[dict[str, Any]], question: QuestionFacts) -> Grounding:
    """The answer's numbers against every cell of the conversation."""
    return ground(answer, SourceIndex.from_cells(cells), question=question.question, files=question.files,
                  prefer_from=question.first_cell)


__all__ = [
    "ANSWER_CHECKS",
    "AnswerCase",
    "AnswerCheck",
    "Registered",
    "empty",
    "failed_last_step",
    "grounding_of",
    "no_work",
    "printed_since",
    "stale",
    "unsupported",
    "wrong_form",
]
