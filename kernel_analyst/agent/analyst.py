"""The agent's face: :class:`Analyst`, a question in, an :class:`Answer` out.

One answer runs like this (the rooms of ``agent/``, in the order a question meets them).
The question's files are uploaded into the conversation's session, its tables read by the
EDA loader and, by default, loaded into DataFrames by recorded cells
(:mod:`.briefing`); the model is sent the system prompt, the conversation so far and the
question with a note on the files, tables and variables (:mod:`.loop`). Each reply is read
by the conversation's action protocol (:mod:`.protocols`: native tool calls, or code
written as text) and judged (:mod:`.feedback`): code runs as steps in the kernel and the
model is shown each observation with the judge's lines (:mod:`.tools`); a reply that is
no step is told why; an answer is accepted or sent back once with every reason found.
This repeats until an answer is accepted, the judge stops (the step limit; replies that
ran nothing) with a partial answer, or the model or the kernel fails. The audit notebook
receives the question, the model's text between steps and the answer as markdown cells,
in order with the code cells.

Cancellation: cancelling :meth:`Analyst.ask` (or closing :meth:`Analyst.stream` early)
cancels the model call in flight, or interrupts the running cell. The conversation's chat
history keeps only completed answers; the kernel keeps whatever ran, and the next question's
note on existing variables tells the model about it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Sequence
from typing import Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

from ..kernels import SessionManager
from .briefing.uploads import new_uploads
from .events import AgentEvent, FinalAnswer
from .feedback.judge import MAX_IDLE_REPLIES
from .loop.answer import AnswerLoop
from .loop.figures import ImagesMode, images_enabled
from .loop.settings import QUESTION_TIMEOUT_S, TIME_SHARE, AnalystSettings
from .loop.state import Conversation, EventCallback
from .protocols import ProtocolName
from .results import Answer
from .tools.observation import DEFAULT_BUDGET
from .tools.undo import DEFAULT_CHECKPOINTS

Uploaded = Sequence[str] | Literal["new"]
"""Files already in a conversation's working directory that a question reads: their names,
or ``"new"`` for those a person uploaded since the conversation's last question."""


class Analyst:
    """A data-analysis agent on any LangChain chat model.

    ``Analyst(model, manager)`` with a started :class:`SessionManager`; each conversation
    id gets its own kernel and chat history. Keywords: ``max_steps``,
    ``observation_budget`` (characters), ``send_images`` (``"auto"``: figures go to the
    model as images when its LangChain profile says it takes them; ``True``/``"on"``,
    ``False``/``"off"``), ``max_images`` (per step), ``step_timeout`` (seconds),
    ``profile_files`` (load uploaded tables into DataFrames first; on by default),
    ``protocol`` (``auto``, ``tools`` or ``code``: how the model runs code), ``require_work``
    (send back an answer given before any code ran), ``check_numbers`` (send back an answer
    with numbers no cell produced), ``check_results`` (flag results that cannot be right),
    ``checkpoints`` (cells the model can undo), ``keep_data`` (the person's tables change only
    when a question asks), ``attempts`` (tries of every question, in forked branches that must
    agree), ``attempts_on_doubt`` (tries of a question whose first answer is in doubt),
    ``parallel_attempts``, ``attempts_time_share`` (the share of the latest questions' time
    that attempts on doubt may add; None: unbounded), ``max_reply_tokens`` (one reply's
    tokens), ``model_timeout`` (seconds a model call may wait for the reply's next piece),
    ``question_timeout`` (seconds one question's answer may take before it ends with what
    the cells show, attempts aside; None: no bound), ``offer_undo`` (offer the model the
    undo step), ``context_tokens`` (the model's context: how much of a table's profile its
    note holds), ``warm_prefix`` (have a local model server cache the shared prompt prefix
    beside the first question). Nothing starts before the first question.
    """

    def __init__(
        self,
        model: BaseChatModel,
        manager: SessionManager,
        *,
        max_steps: int = 15,
        observation_budget: int = DEFAULT_BUDGET,
        send_images: bool | ImagesMode = "auto",
        max_images: int = 4,
        step_timeout: float | None = None,
        profile_files: bool = True,
        protocol: ProtocolName = "auto",
        require_work: bool = True,
        check_numbers: bool = True,
        check_results: bool = True,
        checkpoints: int = DEFAULT_CHECKPOINTS,
        keep_data: bool = True,
        attempts: int = 1,
        attempts_on_doubt: int = 3,
        parallel_attempts: int = 2,
        attempts_time_share: float | None = TIME_SHARE,
        max_reply_tokens: int = 1024,
        model_timeout: float = 300.0,
        question_timeout: float | None = QUESTION_TIMEOUT_S,
        offer_undo: bool = False,
        context_tokens: int | None = None,
        warm_prefix: bool | Literal["auto"] = "auto",
    ) -> None:
        self.model = model
        self.manager = manager
        self.settings = AnalystSettings(max_steps=max_steps, observation_budget=observation_budget,
                                        send_images=send_images, max_images=max_images,
                                        step_timeout_s=step_timeout, profile_files=profile_files,
                                        protocol=protocol, require_work=require_work,
                                        check_numbers=check_numbers, check_results=check_results,
                                        checkpoints=checkpoints, keep_data=keep_data, attempts=attempts,
                                        attempts_on_doubt=attempts_on_doubt,
                                        parallel_attempts=parallel_attempts,
                                        attempts_time_share=attempts_time_share,
                                        max_reply_tokens=max_reply_tokens, model_timeout_s=model_timeout,
                                        question_timeout_s=question_timeout, offer_undo=offer_undo,
                                        context_tokens=context_tokens,
                                        warm_prefix=warm_prefix)
        self.sends_images = images_enabled(send_images, model)
        """True when figures go to the model as images (see ``send_images``)."""
        self._loop = AnswerLoop(model, manager, self.settings, sends_images=self.sends_images)
        self._conversations: dict[str, Conversation] = {}

    async def ask(self, conversation_id: str, question: str, *,
                  files: Sequence[str | os.PathLike[str]] = (),
                  on_event: EventCallback | None = None, uploaded: Uploaded = ()) -> Answer:
        """Answer ``question`` in the conversation's kernel, after uploading ``files``.

        ``uploaded``: names of files already in the working directory (uploaded earlier,
        e.g. through the service) that are read and loaded like ``files``; ``"new"``: those
        a person uploaded since the conversation's last question. ``on_event`` receives
        every event as it happens (see :meth:`stream`). Raises for setup failures (a missing
        file, a kernel that cannot start); a failing model call ends the answer with
        ``stop_reason="error"``.
        """
        return await self._answer(conversation_id, question, files, on_event or _ignore, uploaded)

    async def stream(self, conversation_id: str, question: str, *,
                     files: Sequence[str | os.PathLike[str]] = (),
                     uploaded: Uploaded = ()) -> AsyncIterator[AgentEvent]:
        """Like :meth:`ask`, as an async iterator of events ending with :class:`FinalAnswer`.

        Closing the iterator early (``contextlib.aclosing``) cancels the answer.
        """
        queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()
        task = asyncio.create_task(self._answer(conversation_id, question, files, queue.put_nowait, uploaded))
        task.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (event := await queue.get()) is not None:
                yield event
            await task
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def warm_up(self) -> None:
        """Have the model server cache the prompt prefix every conversation shares (system
        prompt and tools), so the first question pays only for its own note and question. A
        front end calls it at start; the first question does it too (``warm_prefix``)."""
        warming = self._loop.warm_up()
        if warming is not None:
            await asyncio.shield(warming)

    def remember_question(self, first_s: float, extra_s: float = 0.0) -> None:
        """Count a question answered before this analyst existed in the attempts' time account
        (its first attempt's seconds, and what further attempts took): a service or a
        benchmark that resumes after a restart keeps the share attempts on doubt may add over
        the latest questions, instead of starting with an empty account."""
        self._loop.attempts.remember(first_s, extra_s)

    def history(self, conversation_id: str) -> list[BaseMessage]:
        """The chat history of a conversation (completed answers only; a copy)."""
        found = self._conversations.get(conversation_id)
        return list(found.history) if found else []

    def protocol(self, conversation_id: str) -> str | None:
        """The protocol a conversation follows (``tools`` or ``code``), or None while an
        ``auto`` conversation has not run code yet (or is unknown)."""
        found = self._conversations.get(conversation_id)
        return found.protocol.active if found else None

    def forget(self, conversation_id: str) -> None:
        """Drop a conversation's chat history (its kernel is left as it is)."""
        self._conversations.pop(conversation_id, None)

    async def _answer(self, conversation_id: str, question: str,
                      files: Sequence[str | os.PathLike[str]], emit: EventCallback,
                      uploaded: Uploaded = ()) -> Answer:
        if isinstance(files, (str, os.PathLike)):
            files = [files]  # one path given where a list was meant
        conversation = self._conversations.get(conversation_id)
        if conversation is None:
            conversation = self._conversations[conversation_id] = self._loop.new_conversation()
        async with conversation.lock:
            session = await self.manager.session(conversation_id)
            present = new_uploads(session) if uploaded == "new" else list(uploaded)
            answer = await self._loop.answer(conversation_id, conversation, session, question, files, emit,
                                             present=present)
        emit(FinalAnswer(answer))
        return answer


def _ignore(event: AgentEvent) -> None:
    """The default event callback."""


__all__ = ["MAX_IDLE_REPLIES", "Analyst", "AnalystSettings", "EventCallback", "ImagesMode"]
