"""One answer, in the order it happens: brief, call the model, read the reply, ask the judge,
act, end.

:meth:`AnswerLoop.answer` briefs the question (:mod:`kernel_analyst.agent.briefing`), then
repeats: a model call (:mod:`.calling`), the reply read by the conversation's protocol
(:mod:`kernel_analyst.agent.protocols`), the judge's decision
(:mod:`kernel_analyst.agent.feedback`), and what it says done (:mod:`.acting`), until the judge
accepts an answer or stops (:mod:`.ending`), or the model or the kernel fails. The loop
holds no policy: every "is this an answer, does it run, what is the model told" is the
judge's, returned as a value.

The prompt a model server caches stays the same from call to call: the system prompt and
the tools offered never change within a conversation, and earlier messages are not
rewritten (only the latest reply may be shortened to its code), so each call costs only its
new tokens.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool

from ...kernels import KernelSession, SessionManager
from ..briefing.brief import brief
from ..briefing.uploads import NoteBudget, file_columns
from ..feedback.decisions import Accept, QuestionFacts, SendBack, Tell
from ..feedback.intent import asks_to_change
from ..feedback.judge import Judge, JudgeSettings
from ..models.chat import context_tokens
from ..prompting import message, system_prompt
from ..protocols import ProtocolState
from ..results import Answer
from ..tools.kernel_tool import TOOL_NAME, KernelTool
from ..tools.observation import ObservationSettings
from ..tools.undo import UndoTool, enable_checkpoints
from .acting import Actor, note, note_completed
from .attempts import Attempts
from .calling import CUT_KEY, CallLimits, ModelCaller, serves_locally
from .ending import Outcome, failed, finish, partial, record_answer
from .figures import without_images
from .settings import AnalystSettings
from .state import Conversation, EventCallback, Turn

WARM_WAIT_S = 60.0
"""The first question waits this long at most for the warm-up of the shared prefix (a busy
server may take longer; the question then goes on without it)."""


class AnswerLoop:
    """Answers questions with one chat model, for an :class:`~kernel_analyst.agent.Analyst`."""

    def __init__(self, model: BaseChatModel, manager: SessionManager, settings: AnalystSettings, *,
                 sends_images: bool) -> None:
        self.settings = settings
        undo = settings.checkpoints > 0
        offered = undo and settings.offer_undo
        python = KernelTool(manager, description=message("tool_short"))  # the system prompt says the rest
        tools: list[BaseTool] = [python] + ([UndoTool(manager)] if offered else [])
        self.caller = ModelCaller(model, tools, settings.protocol,
                                  CallLimits(settings.max_reply_tokens, settings.model_timeout_s))
        self.systems = {p: SystemMessage(system_prompt(
            tool_name=TOOL_NAME, max_steps=settings.max_steps, budget=settings.observation_budget,
            send_images=sends_images, protocol=p, undo=offered)) for p in ("tools", "code", "auto")}
        observation = ObservationSettings(budget=settings.observation_budget, send_images=sends_images,
                                          max_images=settings.max_images)
        self.actor = Actor(step_timeout_s=settings.step_timeout_s, observation=observation)
        self.judging = self._judging(settings, offered)
        self.note_budget = NoteBudget.for_context(settings.context_tokens or context_tokens(model))
        self._warming: asyncio.Future[None] | None = None
        self.attempts = Attempts(every=settings.attempts, on_doubt=settings.attempts_on_doubt,
                                 parallel=settings.parallel_attempts, judging=self.judging,
                                 share=settings.attempts_time_share)

    def warm_up(self) -> asyncio.Future[None] | None:
        """Warm the model's prompt cache with the prefix every conversation shares, once (see
        ``AnalystSettings.warm_prefix``): the task doing it, or None when it is not wanted."""
        wanted = self.settings.warm_prefix
        if wanted is False or (wanted == "auto" and not serves_locally(self.caller.model)):
            return None
        if self._warming is None:
            protocol = ProtocolState(self.settings.protocol)
            if self.caller.bound is None:
                protocol.fall_back_to_code()
            self._warming = asyncio.ensure_future(self.caller.warm(self.systems[protocol.system_prompt],
                                                                   binds_tools=protocol.binds_tools))
        return self._warming

    @staticmethod
    def _judging(settings: AnalystSettings, undo: bool) -> JudgeSettings:
        return JudgeSettings(max_steps=settings.max_steps, undo=undo, require_work=settings.require_work,
                             check_numbers=settings.check_numbers, check_results=settings.check_results,
                             keep_data=settings.keep_data, max_seconds=settings.question_timeout_s,
                             tool_name=TOOL_NAME)

    def new_conversation(self) -> Conversation:
        """A conversation's state before its first question."""
        state = ProtocolState(self.settings.protocol)
        if self.caller.bound is None:
            state.fall_back_to_code()
        return Conversation(state)

    async def answer(self, conversation_id: str, conversation: Conversation, session: KernelSession,
                     question: str, files: Sequence[str | os.PathLike[str]], emit: EventCallback, *,
                     present: Sequence[str] = ()) -> Answer:
        """Answer ``question`` in ``session`` (``present``: files of its working directory to read
        like ``files``); the conversation keeps the exchange if it completes."""
        enable_checkpoints(session, self.settings.checkpoints)
        warming = self.warm_up() if conversation.turns == 0 else None
        turn, judge = await self._start(conversation_id, conversation, session, question, files, emit,
                                        present)
        if warming is not None:  # the shared prefix cached before the first request, within reason
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(warming), WARM_WAIT_S)
        try:
            outcome = await self._run(turn, judge)
            self.attempts.observe(outcome)
            if (total := self.attempts.wanted(outcome)) > 1:
                outcome = await self.attempts.run(outcome, judge, total, self._run)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await asyncio.shield(session.interrupt())
            raise
        conversation.history = without_images(turn.messages[1:])
        conversation.turns += 1
        conversation.asked.append(question)
        conversation.answered.append(outcome.answer.text)
        await record_answer(turn, outcome.answer, self.settings.max_steps)
        return outcome.answer

    async def _start(self, conversation_id: str, conversation: Conversation, session: KernelSession,
                     question: str, files: Sequence[str | os.PathLike[str]],
                     emit: EventCallback, present: Sequence[str]) -> tuple[Turn, Judge]:
        changed = [c.describe(conversation.origins.get(c.name)) for c in conversation.changes.values()]
        briefing = await brief(session, conversation.variables, question, files, turn=conversation.turns + 1,
                               preload_tables=self.settings.profile_files, changes=changed,
                               budget=self.note_budget, present=present)
        conversation.teacher.tables.update({t.file: t for t in briefing.tables})
        system = self.systems[conversation.protocol.system_prompt]
        messages = [system, *conversation.history, HumanMessage(f"{question}\n{briefing.note}")]
        turn = Turn(conversation_id, question, session, conversation, messages, emit, files=briefing.uploaded,
                    question_at=len(messages) - 1, first_cell=briefing.first_cell)
        tables = {t.variable for t in conversation.teacher.tables.values() if t.variable}
        rows = tuple(info.shape[0] for name, info in conversation.variables.items()
                     if name in tables and info.shape)
        frames = {name: info for name, info in conversation.variables.items()
                  if info.type.endswith("DataFrame")}
        facts = QuestionFacts(question, tuple(briefing.uploaded), briefing.has_files, briefing.cells_before,
                              briefing.first_cell, rows, frames, asks_to_change(question),
                              tuple(conversation.asked), tuple(conversation.answered),
                              file_columns(conversation.teacher.tables.values()))
        return turn, Judge(self.judging, facts, teacher=conversation.teacher)

    async def _run(self, turn: Turn, judge: Judge) -> Outcome:
        while True:
            reply = await self.caller.call(turn)
            if reply is None:
                return Outcome(failed(turn), turn)
            cut = str(reply.response_metadata.get(CUT_KEY, ""))
            reading = turn.protocol.read(str(reply.text), reply.tool_calls, reply.invalid_tool_calls,
                                         tool_name=TOOL_NAME, cut=cut == "limit")
            if reading.switched_to == "code":
                via = reading.actions[0].via.value if reading.actions else "text"
                note(turn, "protocol_switched", message("protocol_switched", via=via))
            decision = judge.on_reply(reading, str(reply.text), turn.facts(), cut=cut)
            if isinstance(decision, (Accept, SendBack)) and decision.switch_to_code \
                    and turn.protocol.prefer_code():  # the system prompt stays: it describes both forms
                note(turn, "protocol_switched", message("protocol_switched_no_call"))
            if isinstance(decision, Accept):
                if reply.tool_calls:  # calls that repeated work beside the answer: kept as its prose
                    turn.messages[-1] = AIMessage(str(reply.text), id=reply.id)
                note_completed(turn, decision.completed_from)
                return Outcome(finish(turn, "answered", decision.answer, claims=decision.grounding), turn,
                               decision.doubts)
            if isinstance(decision, SendBack):
                await self.actor.send_back(turn, decision)
                continue
            if isinstance(decision, Tell):
                await self.actor.tell(turn, decision)
            else:
                await self.actor.act(turn, judge, reply, reading)
                if turn.error is not None:
                    return Outcome(failed(turn), turn)
            if (stop := judge.after_reply(decision, turn.facts())) is not None:
                ended = await partial(turn, judge, self.caller, self.actor, stop)
                return Outcome(ended, turn, (stop.reason,))


__all__ = ["AnswerLoop"]
