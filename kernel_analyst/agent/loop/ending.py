"""How an answer ends: the :class:`Answer` built from a turn, a partial answer when the steps
ran out, and the answer's cell in the audit notebook.

An answer never ends with nothing. When the judge stops the answer (the step limit, the
question's time, or replies that ran nothing several times in a row), the model is asked
once more for an answer without code; what it says (its prose, never code) is the partial
answer, grounded in the cells like any answer. If it says nothing usable, the partial answer
is the last result a cell printed, quoted. Either way the answer is marked partial, in its text, its
``partial`` field and the notebook.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import HumanMessage

from ...claims import Grounding, SourceIndex, cite_markdown, ground
from ...kernels import KernelAnalystError
from ..feedback.decisions import Reason, Stop
from ..feedback.judge import Judge
from ..prompting import message
from ..results import Answer, StopReason, Timing
from .acting import Actor, note, note_completed
from .calling import ModelCaller
from .state import Turn

_QUOTED_OUTPUT = 600
"""Characters of the last cell's output a partial answer quotes, at most."""


@dataclass(frozen=True)
class Outcome:
    """How one attempt at a question ended."""

    answer: Answer
    """The answer."""
    turn: Turn
    """The turn that made it (its messages, its session)."""
    doubts: tuple[Reason, ...] = ()
    """Checks the answer still fails, or why it is partial: the question may be tried again."""


def finish(turn: Turn, reason: StopReason, text: str = "", *, claims: Grounding | None = None,
           partial: bool = False) -> Answer:
    """The answer as the turn stands."""
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
        protocol=turn.protocol.prompt_protocol,
        notes=list(turn.notes),
        claims=claims,
        partial=partial,
        timing=timing_of(turn),
    )


def timing_of(turn: Turn) -> Timing:
    """Where the turn's seconds and tokens went so far."""
    calls = turn.calls
    first = calls[0].first_token_s if calls else None
    before = (turn.first_call_at - turn.started) if turn.first_call_at is not None else 0.0
    return Timing(seconds=round(time.monotonic() - turn.started, 3), briefing_s=round(before, 3),
                  model_s=round(sum(c.seconds for c in calls), 3),
                  kernel_s=round(sum(s.execution.duration_s for s in turn.steps), 3),
                  first_token_s=round(before + first, 3) if first is not None else None,
                  calls=len(calls), prompt_tokens=sum(c.input_tokens - c.cached_tokens for c in calls),
                  cached_tokens=sum(c.cached_tokens for c in calls),
                  output_tokens=sum(c.output_tokens for c in calls))


async def partial(turn: Turn, judge: Judge, caller: ModelCaller, actor: Actor, stop: Stop) -> Answer:
    """End with the best partial answer the cells support."""
    note(turn, "partial", stop.reason.text)
    asked = len(turn.messages)
    turn.messages.append(HumanMessage(judge.partial_request(stop)))
    reply = await caller.call(turn)
    said = judge.partial_answer(str(reply.text), calls=bool(reply.tool_calls)) if reply is not None else ""
    if not said:  # code or nothing: not kept, so the history stays a valid exchange
        del turn.messages[asked:]
        if reply is not None:
            await actor.not_run(turn, "no_answer", message("no_partial_answer"))
    turn.error = None  # a failed last call still leaves the cells' partial answer
    if said:
        said, cells = judge.completed(said, turn.facts())
        note_completed(turn, cells)
    timed = stop.reason.key == "time_limit"
    text = partial_text(turn, said, key="partial_from_cell_time" if timed else "partial_from_cell",
                        said_key="partial_answer_time" if timed else "partial_answer")
    first_cell = judge.question.first_cell
    claims = ground(text, SourceIndex.from_cells(turn.cells), question=turn.question, files=turn.files,
                    prefer_from=first_cell) if text else None
    return finish(turn, "max_steps", text, claims=claims, partial=bool(text))


def failed(turn: Turn) -> Answer:
    """The answer when the model call or the kernel failed: the error, and (when a cell
    printed something) the last result as a partial answer, grounded; nothing is lost."""
    text = partial_text(turn, "", key="partial_after_failure")
    claims = ground(text, SourceIndex.from_cells(turn.cells), question=turn.question, files=turn.files,
                    prefer_from=turn.first_cell) if text else None
    return finish(turn, "error", text, claims=claims, partial=bool(text))


def partial_text(turn: Turn, reply: str, *, key: str = "partial_from_cell",
                 said_key: str = "partial_answer") -> str:
    """The partial answer: the model's last prose (said by the message ``said_key``), or else
    the last result a cell printed (said by the message ``key``)."""
    if reply.strip():
        return message(said_key, text=reply.strip())
    for step in reversed(turn.steps):
        output = step.execution.text.strip()
        if step.execution.status == "ok" and output:
            shown = output if len(output) <= _QUOTED_OUTPUT else output[:_QUOTED_OUTPUT] + " ..."
            return message(key, step=step.index, output=shown)
    return ""


async def record_answer(turn: Turn, answer: Answer, max_steps: int) -> None:
    """The answer's markdown cell in the audit notebook (with its grounding, if any)."""
    cited = cite_markdown(answer.claims) if answer.claims else answer.text
    if answer.stop_reason == "answered":
        text = f"### Answer\n\n{cited}"
    elif answer.stop_reason == "max_steps" and answer.text:
        text = (f"### Partial answer\n\n{cited}\n\n_The limit of {max_steps} steps was reached (or the "
                "question's time ran out, or the model's replies stopped running code) before a full "
                "answer._")
    elif answer.stop_reason == "max_steps":
        text = f"### Stopped\n\nThe limit of {max_steps} steps was reached before an answer."
    elif answer.text:
        text = f"### Partial answer\n\n{cited}\n\n_The answer failed: {answer.error}_"
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
                                        protocol=answer.protocol, **meta)


__all__ = ["Outcome", "failed", "finish", "partial", "partial_text", "record_answer", "timing_of"]
