"""How an answer ends: the :class:`Answer` built from a turn, a partial answer when the steps
ran out, and the answer's cell in the audit notebook.

An answer never ends with nothing. When the step limit is reached, or the model's replies
ran nothing several times in a row, the model is asked once more for an answer without
code; what it says (its prose, never code) is the partial answer, grounded in the cells
like any answer. If it says nothing usable, the partial answer is the last result a cell
printed, quoted. Either way the answer is marked partial, in its text, its ``partial``
field and the notebook.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from typing import Any

from ..claims import SourceIndex, cite_markdown, ground
from ..kernels import KernelAnalystError
from .prompting import message
from .results import Answer, StopReason
from .turn import Turn

_QUOTED_OUTPUT = 600
"""Characters of the last cell's output a partial answer quotes, at most."""


def finish(turn: Turn, reason: StopReason, text: str = "", *, partial: bool = False) -> Answer:
    """The answer as the turn stands."""
    grounded = reason == "answered" or (partial and bool(text))
    return Answer(
        text=text,
        steps=list(turn.steps),
        notebook_path=turn.session.notebook_path,
        stop_reason=reason,
        conversation_id=turn.conversation_id,
        question=turn.question,
        usage=turn.usage if turn.usage.model_calls else None,
        error=turn.error if reason == "error" else None,
        duration_s=time.monotonic() - turn.started,
        files=list(turn.files),
        protocol=turn.conversation.protocol.prompt_protocol,
        notes=list(turn.notes),
        claims=turn.review.grounding if grounded else None,
        partial=partial,
    )


def partial_text(turn: Turn, reply: str) -> str:
    """The partial answer: the model's last prose, or else the last result a cell printed."""
    if reply.strip():
        return message("partial_answer", text=reply.strip())
    for step in reversed(turn.steps):
        output = step.execution.text.strip()
        if step.execution.status == "ok" and output:
            shown = output if len(output) <= _QUOTED_OUTPUT else output[:_QUOTED_OUTPUT] + " ..."
            return message("partial_from_cell", step=step.index, output=shown)
    return ""


def ground_partial(turn: Turn, text: str) -> None:
    """Ground a partial answer's numbers in the conversation's cells (kept on the review)."""
    cells = turn.session.audit.cells
    turn.review.grounding = ground(text, SourceIndex.from_cells(cells), question=turn.question,
                                   files=turn.files)


async def record_answer(turn: Turn, answer: Answer, max_steps: int) -> None:
    """The answer's markdown cell in the audit notebook (with its grounding, if any)."""
    cited = cite_markdown(answer.claims) if answer.claims else answer.text
    if answer.stop_reason == "answered":
        text = f"### Answer\n\n{cited}"
    elif answer.stop_reason == "max_steps" and answer.text:
        text = (f"### Partial answer\n\n{cited}\n\n_The limit of {max_steps} steps was reached (or the "
                "model's replies stopped running code) before a full answer._")
    elif answer.stop_reason == "max_steps":
        text = f"### Stopped\n\nThe limit of {max_steps} steps was reached before an answer."
    else:
        text = f"### Stopped\n\nThe answer failed: {answer.error}"
    if answer.notes:
        text += "\n\n" + "\n>\n".join("\n".join(f"> {line}" for line in note.splitlines())
                                        for note in answer.notes)
    meta: dict[str, Any] = {"claims": answer.claims.to_dict()} if answer.claims else {}
    if answer.partial:
        meta["partial"] = True
    with contextlib.suppress(KernelAnalystError):  # a session closed meanwhile keeps its notebook
        await turn.session.add_markdown(text, role="answer", stop_reason=answer.stop_reason,
                                        protocol=answer.protocol, at=now(), **meta)


def now() -> str:
    """The time for a notebook cell's metadata (UTC, ISO 8601, milliseconds)."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


__all__ = ["finish", "ground_partial", "now", "partial_text", "record_answer"]
