"""Doing what the judge decided: steps run, the model told, the notebook and events kept.

:class:`Actor` holds no policy: each reply's actions go to the judge one by one
(:meth:`~kernel_analyst.agent.feedback.judge.Judge.on_call`, ``on_action``), and what comes
back is done here: a step runs in the kernel (:mod:`kernel_analyst.agent.tools`) and is
observed, the judge's lines follow its output; an undo is done; a skipped action's reason
is what the model reads in place of an output. Native calls are answered with tool
messages; code written as text with the next user message (its output, then what to do
next, as the judge says). A reply that ran nothing is
recorded in the notebook and the events (:meth:`Actor.not_run`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ...kernels import KernelAnalystError
from ..briefing.note import describe_variables, refresh_variables, track_variables
from ..events import AgentNote, ModelText, StepCode, StepFinished, StepOutput, StepStarted
from ..feedback.decisions import Rollback, Run, SendBack, Skip, StepFacts, Tell, Undo
from ..feedback.judge import Judge
from ..prompting import message
from ..protocols import Action, Reading
from ..results import Step
from ..tools.kernel_tool import TOOL_NAME
from ..tools.observation import Observation, ObservationSettings, observe_step
from ..tools.undo import undo_step
from .context_window import observation_id
from .figures import figures_message
from .state import Turn

NoteKind = Literal["protocol_switched", "answer_returned", "context_trimmed", "partial", "undo",
                   "reply_not_run", "answer_completed", "rollback", "attempts"]

RETRY_TEMPERATURE = 0.7
"""The temperature of the first model call after a rollback, after a reply that repeated
itself, or after an answer sent back a second time for having no work of its own, where the
model takes one: a greedy model shown its earlier context again would likely write the same
code, or the same reply."""


class Actor:
    """Runs the actions the judge allows and tells the model what the judge says."""

    def __init__(self, *, step_timeout_s: float | None, observation: ObservationSettings) -> None:
        self.step_timeout_s = step_timeout_s
        self.observation = observation

    # -- replies that run nothing ----------------------------------------------------------------

    async def tell(self, turn: Turn, decision: Tell) -> None:
        """A reply that ran nothing: recorded, and the model reads the reason next (sampled
        at a higher temperature when the judge says a greedy model would repeat itself;
        without the reply itself when the judge says it is not read back)."""
        if decision.forget and isinstance(turn.messages[-1], AIMessage):
            turn.messages.pop()
        await self.not_run(turn, decision.reason.key, decision.reason.text, as_user=True)
        if decision.resample:
            turn.temperature = RETRY_TEMPERATURE

    async def send_back(self, turn: Turn, decision: SendBack) -> None:
        """Return an answer to the model with the reasons it was not accepted."""
        note(turn, "answer_returned", decision.text)
        if decision.answer.strip():
            await turn.session.add_markdown(decision.answer, role="model", returned=True)
        if isinstance(turn.messages[-1], AIMessage):  # its calls, if any, only repeated work that ran
            turn.messages.pop()  # not read back: numbers it made up there anchor a small model's next try
        turn.messages.append(HumanMessage(decision.text))
        if decision.resample:
            turn.temperature = RETRY_TEMPERATURE

    async def not_run(self, turn: Turn, kind: str, text: str, *, as_user: bool = False) -> str:
        """Record a reply that ran nothing (notebook and events); with ``as_user`` the
        model is told ``text`` as the next message. Returns ``text``."""
        why = message("reply_not_run", reply=turn.replies, why=text.splitlines()[0])
        turn.emit(AgentNote("reply_not_run", why))
        try:
            await turn.session.add_markdown(f"> {why}", role="model", ran=False, reason=kind)
        except KernelAnalystError:
            pass  # a session closed meanwhile keeps its notebook as it was
        if as_user:
            turn.messages.append(HumanMessage(text, id=observation_id()))
        return text

    # -- a reply's actions -----------------------------------------------------------------------

    async def act(self, turn: Turn, judge: Judge, reply: AIMessage, reading: Reading) -> None:
        """Record the reply's prose and do what each of its actions is judged to be."""
        text = str(reply.text)
        turn.current_reply, turn.rolled_back = len(turn.messages) - 1, False
        if reading.kept_text is not None and reading.kept_text != text:
            turn.messages[-1] = reply.model_copy(update={"content": reading.kept_text})
        if reading.text.strip() and not reading.cut:
            turn.emit(ModelText(reading.text))
            await turn.session.add_markdown(reading.text, role="model")
        if reading.calls or reading.invalid:
            await self._tool_calls(turn, judge, reading)
        elif reading.actions:
            await self._text_code(turn, judge, reading.actions[0])
        else:
            await self.tell(turn, judge.on_nothing_to_run(reading))

    async def _tool_calls(self, turn: Turn, judge: Judge, reading: Reading) -> None:
        figures: list[tuple[int, Observation]] = []
        for name, args, call_id in reading.calls:
            decision = judge.on_call(name, args, call_id, turn.facts())
            content, observation = await self._do(turn, judge, decision)
            if turn.rolled_back:
                return  # the reply is no longer in the messages: nothing to answer
            turn.messages.append(ToolMessage(content=content, tool_call_id=call_id, name=TOOL_NAME,
                                             id=observation_id()))
            if observation is not None and observation.images:
                figures.append((len(turn.steps), observation))
        for bad in reading.invalid:
            skip = judge.on_invalid_call(bad)
            if skip is not None:
                content = await self.not_run(turn, skip.reason.key, skip.reason.text)
                turn.messages.append(ToolMessage(content=content, tool_call_id=bad.call_id, name=TOOL_NAME,
                                                 id=observation_id()))
        if figures:
            turn.messages.append(figures_message(figures))

    async def _text_code(self, turn: Turn, judge: Judge, action: Action) -> None:
        """Run code the model wrote as text; its output is the next user message."""
        content, observation = await self._do(turn, judge, judge.on_action(action, turn.facts()))
        if turn.rolled_back:
            return
        header = f"{message('code_output', step=len(turn.steps))}\n" if observation is not None else ""
        text = header + content
        if (after := judge.after_output(turn.facts())):
            text = f"{text}\n\n{after}"
        parts: list[str | dict[str, Any]] = [text]
        if observation is not None and observation.images:
            parts.extend(observation.image_blocks())
        body: str | list[str | dict[str, Any]] = parts if len(parts) > 1 else str(parts[0])
        turn.messages.append(HumanMessage(content=body, id=observation_id()))

    async def _do(self, turn: Turn, judge: Judge,
                  decision: Run | Undo | Skip | Rollback) -> tuple[str, Observation | None]:
        """Do one judged action; return the model's text and the observation, if any."""
        if isinstance(decision, Rollback):
            await self._rollback(turn, decision)
            return "", None
        if isinstance(decision, Skip):
            if decision.resample:
                turn.temperature = RETRY_TEMPERATURE
            return await self.not_run(turn, decision.reason.key, decision.reason.text), None
        if isinstance(decision, Undo):
            text = await undo_step(turn.session, decision.to)
            turn.emit(AgentNote("undo", text))
            return text, None
        try:
            observation = await self._step(turn, judge, decision.action)
        except KernelAnalystError as exc:
            turn.error = f"the kernel failed: {exc}"
            return message("kernel_failed", error=str(exc)), None
        return turn.steps[-1].observation, observation

    async def _step(self, turn: Turn, judge: Judge, action: Action) -> Observation:
        """Run one action as a step: the kernel, the observation, the judge's lines."""
        index = len(turn.steps) + 1
        conversation = turn.conversation
        turn.reply_at[index] = turn.current_reply
        turn.emit(StepStarted(index, action.call_id, action.via.value))
        turn.emit(StepCode(index, action.code))
        agent_meta = {"via": action.via.value, "protocol": conversation.protocol.prompt_protocol,
                      "turn": conversation.turns + 1, "step": index}
        run = await conversation.background.run_step(
            turn.session, action.code, timeout=self.step_timeout_s,
            on_output=lambda out: turn.emit(StepOutput(index, out)), annotations={"agent": agent_meta})
        ex = run.execution
        lost = track_variables(conversation.variables, ex)
        observation = Observation(text="")
        if run.observe:
            name = f"outputs/turn{conversation.turns + 1}-step{index}-{uuid.uuid4().hex[:6]}.txt"
            observation = await observe_step(turn.session, ex, settings=self.observation, lost_variables=lost,
                                             save_as=name)
        said = await judge.after_step(StepFacts(action.code, ex, run.observe), turn.facts())
        text = "\n".join(part for part in (run.note, observation.text, *said.notes) if part)
        if said.revert is not None:
            text += "\n" + said.revert.text + "\n" + await self._revert(turn)
        for change in said.kept:
            conversation.origins.setdefault(change.name, change.rows_before)
            conversation.changes[change.name] = change
        if said.closing is not None:
            text += "\n\n" + said.closing.text
        turn.steps.append(Step(index, action.code, ex, text, action.call_id, action.via.value))
        turn.emit(StepFinished(index, ex, text))
        if said.rollback is not None:
            await self._rollback(turn, said.rollback)
        return observation


    async def _rollback(self, turn: Turn, decision: Rollback) -> None:
        """Go back, not on: the kernel to before the failing streak, its turns out of the
        messages (the notebook keeps them, undone), the reason as the next message, and the
        next call at a higher temperature where the model takes one."""
        first = turn.steps[decision.first_step - 1]
        count = first.execution.execution_count
        report = await undo_step(turn.session, count) if count is not None else ""
        await refresh_variables(turn.session, turn.conversation.variables)
        del turn.messages[turn.reply_at.get(decision.first_step, turn.current_reply):]
        text = decision.reason.text
        if report.startswith(message("undo_unavailable", error="").strip()):
            text += "\n" + report
        else:
            text += "\n" + message("rollback_variables", variables=describe_variables(
                list(turn.conversation.variables.values())))
        turn.messages.append(HumanMessage(text, id=observation_id()))
        turn.rolled_back = True
        turn.temperature = RETRY_TEMPERATURE
        steps = f"{decision.first_step} to {len(turn.steps)}" if decision.first_step < len(turn.steps) \
            else str(decision.first_step)
        note(turn, "rollback", message("rollback_note", steps=steps))
        try:
            await turn.session.add_markdown(f"> {message('rollback_note', steps=steps)}", role="model",
                                            ran=False, reason="rollback")
        except KernelAnalystError:
            pass  # a session closed meanwhile keeps its notebook as it was

    async def _revert(self, turn: Turn) -> str:
        """Undo the last step (the judge's revert): the report, and the variables read again."""
        report = await undo_step(turn.session, None)
        turn.emit(AgentNote("undo", report))
        await refresh_variables(turn.session, turn.conversation.variables)
        return report


def note(turn: Turn, kind: NoteKind, text: str, *, replaces: str | None = None) -> None:
    """Tell the user something the loop did: an event, and a line of the answer's notes
    (``replaces``: an earlier note this one supersedes)."""
    if replaces is not None:
        turn.notes = [n for n in turn.notes if n != replaces]
    turn.notes.append(text)
    turn.emit(AgentNote(kind, text))


def note_completed(turn: Turn, cells: Sequence[int | None]) -> None:
    """Say which cells' printed ``@name[value]`` items completed the answer (if any)."""
    if cells:
        shown = ", ".join(f"[{c}]" if c is not None else "?" for c in cells)
        note(turn, "answer_completed", message("answer_completed", cells=shown))


__all__ = ["Actor", "NoteKind", "note", "note_completed"]
