"""One reply's actions, run as steps: the code, its observation, and what the model is told.

For each action a reply asks for (:mod:`.protocols`), within the step limit: an undo
(:mod:`.undo`), a background directive (:mod:`.background`) or code, run in the kernel and
observed (:mod:`.observation`). What the model reads after a step is the observation, then
one line for anything that cannot be right (:mod:`.checks`) and a hint for an error
(:mod:`.hints`). A reply that runs nothing (the same code again, an unreadable call, code cut
at the length limit) is told why, is recorded in the audit notebook and the events, and
counts toward :attr:`Turn.idle`, so a loop of such replies ends the answer early.
"""

from __future__ import annotations

import uuid
from typing import Any

from langchain_core.messages import HumanMessage, ToolMessage

from ..kernels import Execution, KernelAnalystError
from .background import BackgroundSteps
from .briefing import track_variables
from .checks import comparison_notes, result_notes, shrunk_tables
from .context_window import observation_id
from .ending import now
from .events import AgentNote, StepCode, StepFinished, StepOutput, StepStarted
from .figures import figures_message
from .observation import Observation, ObservationSettings, observe_step
from .prompting import message
from .protocols import Action, Reading, Via
from .results import Step
from .tool import TOOL_NAME
from .turn import Turn
from .undo import UNDO_TOOL_NAME, find_undo, only_read, undo_step

_REMINDER_MAX = 1200
"""A question up to this long is restated after each output under ``code``."""


class StepRunner:
    """Runs the actions of replies as steps, for an :class:`~kernel_analyst.agent.Analyst`."""

    def __init__(self, *, max_steps: int, step_timeout_s: float | None, observation: ObservationSettings,
                 undo: bool, check_results: bool) -> None:
        self.max_steps = max_steps
        self.step_timeout_s = step_timeout_s
        self.observation = observation
        self.undo = undo
        self.check_results = check_results
        self.background = BackgroundSteps()

    # -- a reply -------------------------------------------------------------------------------

    async def run(self, turn: Turn, reading: Reading) -> None:
        """Run what ``reading`` asks for and append what the model is told."""
        done = len(turn.steps) + turn.undos
        if reading.calls or reading.invalid:
            await self._tool_calls(turn, reading)
        elif reading.actions:
            await self._text_code(turn, reading.actions[0])
        elif reading.cut:
            self._count_attempt(turn)
            await self.not_run(turn, "cut_code", message("cut_code"), as_user=True)
        else:  # a call written as text that could not be read: say so, as a step's result
            self._count_attempt(turn)
            await self.not_run(turn, "unreadable_call", message("unreadable_call"), as_user=True)
        turn.idle = 0 if len(turn.steps) + turn.undos > done else turn.idle + 1

    def idle_only(self, turn: Turn, reading: Reading) -> bool:
        """True when every block of the reply (code written as text) is no step (see
        :meth:`_idle`): its prose, if any, is the reply's substance."""
        return bool(reading.actions) and not reading.calls and not reading.invalid and all(
            self._idle(turn, a.code) is not None for a in reading.actions)

    def _idle(self, turn: Turn, code: str) -> tuple[str, str] | None:
        """Why ``code`` is no step, as (kind, what the model is told): a wait, check or
        cancel with no background run, or an undo of a step that only read (it printed,
        it changed no variable). None for code to run."""
        if (text := self.background.idle_directive(turn.session, code)) is not None:
            return "no_background_run", text
        undo, to = find_undo(code) if self.undo else (False, None)
        last = turn.steps[-1] if turn.steps and turn.undone_at != len(turn.steps) else None
        if undo and to is None and last is not None and only_read(last.code, last.execution):
            return "nothing_to_undo", message("undo_nothing", step=last.index)
        return None

    def _count_attempt(self, turn: Turn) -> None:
        if turn.attempts < self.max_steps:
            turn.attempts += 1

    async def not_run(self, turn: Turn, kind: str, text: str, *, as_user: bool = False) -> str:
        """Record a reply that ran nothing (notebook and events); with ``as_user`` the
        model is told ``text`` as the next message. Returns ``text``."""
        why = message("reply_not_run", reply=turn.replies, why=text.splitlines()[0])
        turn.emit(AgentNote("reply_not_run", why))
        try:
            await turn.session.add_markdown(f"> {why}", role="model", ran=False, reason=kind, at=now())
        except KernelAnalystError:
            pass  # a session closed meanwhile keeps its notebook as it was
        if as_user:
            turn.messages.append(HumanMessage(text, id=observation_id()))
        return text

    async def _tool_calls(self, turn: Turn, reading: Reading) -> None:
        figures: list[tuple[int, Observation]] = []
        for name, args, call_id in reading.calls:
            content, observation = await self._tool_call(turn, name, args, call_id)
            turn.messages.append(ToolMessage(content=content, tool_call_id=call_id, name=TOOL_NAME,
                                             id=observation_id()))
            if observation is not None and observation.images:
                figures.append((len(turn.steps), observation))
        for bad in reading.invalid:
            if bad.call_id:
                turn.attempts += 1
                detail = f" ({bad.error})" if bad.error else ""
                content = await self.not_run(turn, "bad_arguments",
                                             message("bad_arguments", tool_name=TOOL_NAME, detail=detail))
                turn.messages.append(ToolMessage(content=content, tool_call_id=bad.call_id, name=TOOL_NAME,
                                                 id=observation_id()))
        if figures:
            turn.messages.append(figures_message(figures))

    async def _tool_call(self, turn: Turn, name: str, args: Any,
                         call_id: str) -> tuple[str, Observation | None]:
        """Run one native tool call; return the tool message text and the observation, if any."""
        if name == UNDO_TOOL_NAME and self.undo:
            to = args.get("to") if isinstance(args, dict) else None
            directive = "# kernel-analyst: undo" + (f" {to}" if isinstance(to, int) else "")
            return await self._act(turn, Action(directive, Via.TOOL_CALL, call_id))
        if name != TOOL_NAME:
            if turn.error is None:
                self._count_attempt(turn)
            key = "unknown_tool_undo" if self.undo else "unknown_tool"
            text = message(key, name=name, tool_name=TOOL_NAME)
            return await self.not_run(turn, "unknown_tool", text), None
        code = args.get("code") if isinstance(args, dict) else None
        if not isinstance(code, str) or not code.strip():
            if turn.error is None:
                self._count_attempt(turn)
            return await self.not_run(turn, "bad_arguments",
                                      message("bad_arguments", tool_name=TOOL_NAME, detail="")), None
        return await self._act(turn, Action(code, Via.TOOL_CALL, call_id))

    async def _text_code(self, turn: Turn, action: Action) -> None:
        """Run code the model wrote as text; its output is the next user message."""
        content, observation = await self._act(turn, action)
        header = f"{message('code_output', step=len(turn.steps))}\n" if observation is not None else ""
        text = header + content
        if turn.attempts < self.max_steps and turn.error is None:
            text = f"{text}\n\n{message('code_continue')}{_question_reminder(turn.question)}"
        parts: list[str | dict[str, Any]] = [text]
        if observation is not None and observation.images:
            parts.extend(observation.image_blocks())
        body: str | list[str | dict[str, Any]] = parts if len(parts) > 1 else str(parts[0])
        turn.messages.append(HumanMessage(content=body, id=observation_id()))

    # -- one action --------------------------------------------------------------------------

    async def _act(self, turn: Turn, action: Action) -> tuple[str, Observation | None]:
        """Run one action within the step limit; return the model's text and the observation."""
        if turn.error is not None:
            return await self.not_run(turn, "after_failure", message("not_run_after_failure")), None
        if (idle := self._idle(turn, action.code)) is not None:
            return await self.not_run(turn, *idle), None
        if turn.attempts >= self.max_steps:
            text = message("step_limit", max_steps=self.max_steps)
            return await self.not_run(turn, "step_limit", text), None
        turn.attempts += 1
        undo, to = find_undo(action.code) if self.undo else (False, None)
        if undo:
            return await self._undo(turn, to), None
        earlier = _ran_before(turn.steps, action.code) if turn.undone_at != len(turn.steps) else None
        if earlier is not None and earlier.execution.error is not None:  # it would fail the same way
            # Told once to fix the cause; sent again, a different way out (small models
            # repeat one long cell that fails: an f-string answer template, a chained call).
            key = "repeated_failure_again" if turn.idle else "repeated_failure"
            text = message(key, step=earlier.index, error=str(earlier.execution.error))
            return await self.not_run(turn, "repeated_failure", text), None
        if earlier is not None and earlier.execution.status == "ok":
            text = message("repeated_success", step=earlier.index)
            return await self.not_run(turn, "repeated_success", text), None
        try:
            observation = await self._step(turn, action)
        except KernelAnalystError as exc:
            turn.error = f"the kernel failed: {exc}"
            return message("kernel_failed", error=str(exc)), None
        return turn.steps[-1].observation, observation

    async def _step(self, turn: Turn, action: Action) -> Observation:
        index = len(turn.steps) + 1
        turn.emit(StepStarted(index, action.call_id, action.via.value))
        turn.emit(StepCode(index, action.code))
        agent_meta = {"via": action.via.value, "protocol": turn.conversation.protocol.prompt_protocol,
                      "turn": turn.conversation.turns + 1, "step": index}
        run = await self.background.run_step(turn.session, action.code, timeout=self.step_timeout_s,
                                             on_output=lambda out: turn.emit(StepOutput(index, out)),
                                             annotations={"agent": agent_meta})
        ex = run.execution
        variables = turn.conversation.variables
        rows_before = {name: info.shape[0] for name, info in variables.items() if info.shape}
        lost = track_variables(variables, ex)
        observation = await self._observe(turn, ex, lost, index) if run.observe else Observation(text="")
        lines = [part for part in (run.note, observation.text) if part]
        if run.observe:
            lines += await self._checks(turn, ex, action.code)
            if self.check_results:
                tables = {t.variable for t in turn.conversation.teacher.tables.values() if t.variable}
                lines += shrunk_tables(ex, rows_before, tables)
            hint = turn.conversation.teacher.hint(ex, action.code, variables)
            lines += [hint] if hint else []
        text = "\n".join(lines)
        if turn.attempts >= self.max_steps:
            text += "\n\n" + message("last_step", max_steps=self.max_steps)
        turn.steps.append(Step(index, action.code, ex, text, action.call_id, action.via.value))
        turn.emit(StepFinished(index, ex, text))
        return observation

    async def _checks(self, turn: Turn, ex: Execution, code: str) -> list[str]:
        """The lines on results that cannot be right (:mod:`.checks`)."""
        if not self.check_results or ex.status != "ok":
            return []
        notes = await comparison_notes(code, turn.conversation.variables, turn.session.column_values)
        return notes + result_notes(ex)

    async def _undo(self, turn: Turn, to: int | None) -> str:
        """The model asked to undo (agent/undo.py): its report is the observation."""
        text = await undo_step(turn.session, to)
        turn.undone_at = len(turn.steps)
        turn.undos += 1
        turn.emit(AgentNote("undo", text))
        return text

    async def _observe(self, turn: Turn, ex: Execution, lost: list[str] | None, index: int) -> Observation:
        name = f"outputs/turn{turn.conversation.turns + 1}-step{index}-{uuid.uuid4().hex[:6]}.txt"
        return await observe_step(turn.session, ex, settings=self.observation, lost_variables=lost,
                                  save_as=name)


def _ran_before(steps: list[Step], code: str) -> Step | None:
    """The previous step, when it ran exactly ``code`` (nothing ran since, so running it
    again would only repeat its outcome; a repeat after other steps may differ and runs)."""
    last = steps[-1] if steps else None
    return last if last is not None and last.code.strip() == code.strip() else None


def _question_reminder(question: str) -> str:
    """The question restated after an output, so that a small model reads what it asks
    (and the form it asks for) right before it answers, not only at the start of a long
    context; empty for a question too long to repeat. Earlier outputs keep theirs: taking
    it out would change messages the model server has cached, and cost their whole
    prompt again."""
    question = question.strip()
    return "\n" + message("code_question", question=question) if 0 < len(question) <= _REMINDER_MAX else ""


__all__ = ["StepRunner"]
