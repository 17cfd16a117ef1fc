"""How a run ended, said the same way by every front end: ``ok``, ``failed`` or ``stopped``,
and one line that leads with what went wrong.

An EDA whose file could not be read is ``failed`` (never "0 cells, all ran without
error"); one with a failed step names the step and its error; an answer that ran out of
steps or whose model call failed is ``failed`` with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ..agent.results import Answer
    from ..eda import EdaReport

Status = Literal["ok", "failed", "stopped"]


@dataclass(frozen=True)
class Outcome:
    """The end of a run, for a status line."""

    status: Status
    """``ok``, ``failed`` or ``stopped`` (by the user)."""
    summary: str
    """One line; for a failure, the error comes first."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return {"status": self.status, "summary": self.summary}


def eda_outcome(report: EdaReport) -> Outcome:
    """The outcome of an EDA playbook run."""
    name = report.file
    if report.plan is None:
        reason = " ".join((report.error or "it could not be read as a table").split())
        return Outcome("failed", f"EDA of {name} failed: {reason}")
    failed = [s for s in report.steps if not s.ok]
    if failed:
        first = failed[0]
        detail = f"{first.title}: {first.error or first.status}"
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        return Outcome("failed", f"EDA of {name}: {len(failed)} of {len(report.steps)} cells failed. "
                                 f"{detail}{more}")
    if report.error:
        return Outcome("failed", f"EDA of {name} failed: {report.error}")
    return Outcome("ok", f"EDA of {name}: {len(report.steps)} cells, all ran without error.")


def stopped_eda(name: str, step: int, total: int, title: str) -> Outcome:
    """An EDA the user stopped."""
    where = f" at step {step} of {total} ({title})" if total else ""
    return Outcome("stopped", f"EDA of {name} stopped{where}.")


def answer_outcome(answer: Answer) -> Outcome:
    """The outcome of one agent answer."""
    steps = len(answer.steps)
    if answer.stop_reason == "answered":
        return Outcome("ok", f"Answered after {steps} step{'s' if steps != 1 else ''}.")
    if answer.stop_reason == "max_steps":
        return Outcome("failed", f"No answer: the limit of {steps} steps was reached.")
    return Outcome("failed", f"The answer failed: {answer.error or 'unknown error'}")


__all__ = ["Outcome", "Status", "answer_outcome", "eda_outcome", "stopped_eda"]
