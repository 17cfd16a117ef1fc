"""The agent loop: a question, a model that writes code, a kernel, an answer.

One answer runs like this. The question's files are uploaded into the conversation's
session; the model is sent the system prompt, the conversation so far and the question
with a note on the files and variables that already exist. Each reply is read by the
conversation's action protocol (:mod:`.protocols`): native tool calls, or code written as
text in a ```python block (or the other text forms small local models use). Each piece of
code is one step: it runs in the kernel, and the model is shown the observation (errors
included, so it can correct itself), as a tool message or as the next user message. This
repeats until a reply asks to run nothing (``answered``), the step limit is used up
(``max_steps``), or the model or the kernel fails (``error``). Before an answer is
accepted, :mod:`.review` may send it back once (an answer with no code run in a
conversation with data, numbers no cell produced, an empty ``nan`` answer, an answer not
in the form the question asks). A request the model's context cannot hold has its oldest
observations trimmed (:mod:`.context_window`). The audit notebook receives the question,
the model's text between steps and the answer as markdown cells, in order with the code
cells, and each code cell records how its code arrived.

Uploaded tables are read by the EDA loader (:mod:`.uploads`): by default each is loaded
into a DataFrame by a recorded cell before the model's first call, and the note tells the
model its name, the loader's code and its profile. The steps themselves, with the checks
on results that cannot be right and the hints after errors, are :mod:`.steps`; how an
answer ends (a partial answer when the steps run out) is :mod:`.ending`.

The prompt a model server caches stays the same from call to call: the system prompt and
the tools offered never change within a conversation, and earlier messages are not
rewritten (only the latest reply may be shortened to its code), so each call costs only its
new tokens.

Cancellation: cancelling :meth:`Analyst.ask` (or closing :meth:`Analyst.stream` early)
cancels the model call in flight, or interrupts the running cell. The conversation's chat
history keeps only completed answers; the kernel keeps whatever ran, and the next question's
note on existing variables tells the model about it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from ..kernels import KernelSession, SessionManager
from .background import context_note
from .briefing import describe_files, describe_variables, question_markdown, refresh_variables
from .context_window import is_context_overflow, trim_oldest_observation
from .ending import finish, ground_partial, now, partial_text, record_answer
from .events import AgentEvent, AgentNote, FinalAnswer, ModelText
from .exceptions import ToolCallingUnsupportedError
from .figures import ImagesMode, images_enabled, without_images
from .handoff import handoff_note
from .observation import DEFAULT_BUDGET, ObservationSettings
from .prompting import kernel_context, message, system_prompt
from .protocols import PROTOCOLS, ProtocolName, ProtocolState, Reading
from .results import Answer
from .review import AnswerReview, ReviewSettings
from .steps import StepRunner
from .tool import TOOL_NAME, KernelTool
from .turn import Conversation, EventCallback, Turn
from .undo import DEFAULT_CHECKPOINTS, UndoTool, enable_checkpoints
from .uploads import UploadedTable, preload, read_uploads, tables_note

log = logging.getLogger(__name__)

MAX_IDLE_REPLIES = 3
"""Replies in a row that run nothing (the same code again, unreadable or cut code) before
the answer ends with what the cells show: the user should not wait for a loop."""


@dataclass(frozen=True)
class AnalystSettings:
    """How an :class:`Analyst` runs; set through its constructor's keywords."""

    max_steps: int = 15
    """Code runs allowed for one question."""
    observation_budget: int = DEFAULT_BUDGET
    """Characters of each step's result the model is shown."""
    send_images: bool | ImagesMode = "auto"
    """Show figures to the model as images: ``True``/``"on"`` unless its profile says it
    cannot take them, ``"auto"`` when its profile says it can, ``False``/``"off"`` never."""
    max_images: int = 4
    """Figures attached per step at most."""
    step_timeout_s: float | None = None
    """Seconds each step may run; ``None`` uses the manager's ``Limits.timeout_s``."""
    profile_files: bool = True
    """Load each table uploaded with a question into a DataFrame before the model's first
    step (a recorded cell: the EDA loader's code and a compact profile) and show the model
    its name and profile; ``False`` shows the loader's code and the columns instead, for
    the model to run (:mod:`kernel_analyst.agent.uploads`)."""
    protocol: ProtocolName = "auto"
    """How the model runs code (:mod:`kernel_analyst.agent.protocols`): ``tools`` (native
    tool calls), ``code`` (```python blocks written as text), ``auto`` (tool calls when the
    model makes them, else the text form it uses)."""
    require_work: bool = True
    """Send an answer back once when it comes before any code ran in a conversation with
    data files (see :mod:`kernel_analyst.agent.review`)."""
    check_numbers: bool = True
    """Send an answer back once when it states numbers no cell produced, naming them (see
    :mod:`kernel_analyst.agent.review`); the answer's grounding is in ``Answer.claims`` either way."""
    check_results: bool = True
    """Tell the model, after a step, of results that cannot be right (a filter on a value
    its column never holds, an empty selection, a NaN result: :mod:`kernel_analyst.agent.checks`),
    and send back once an answer that is only ``nan`` or not in the form the question asks."""
    checkpoints: int = DEFAULT_CHECKPOINTS
    """Cells the model can undo (:mod:`kernel_analyst.agent.undo`): the agent's sessions take
    a checkpoint before every cell and keep this many, where the kernel can be checkpointed
    and the manager's ``Limits.checkpoints`` sets none; 0 offers no undo."""

    def __post_init__(self) -> None:
        if self.checkpoints < 0:
            raise ValueError(f"checkpoints must be 0 or more; got {self.checkpoints}")
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be at least 1; got {self.max_steps}")
        if self.observation_budget < 500:
            raise ValueError("observation_budget must be at least 500 characters; "
                             f"got {self.observation_budget}")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}; got {self.protocol!r}")

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return asdict(self)


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
    with numbers no cell produced), ``check_results`` (flag results that cannot be right).
    Nothing starts before the first question.
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
    ) -> None:
        self.model = model
        self.manager = manager
        self.settings = AnalystSettings(max_steps=max_steps, observation_budget=observation_budget,
                                        send_images=send_images, max_images=max_images,
                                        step_timeout_s=step_timeout, profile_files=profile_files,
                                        protocol=protocol, require_work=require_work,
                                        check_numbers=check_numbers, check_results=check_results,
                                        checkpoints=checkpoints)
        self.sends_images = images_enabled(send_images, model)
        """True when figures go to the model as images (see ``send_images``)."""
        tools: list[BaseTool] = [KernelTool(manager)] + ([UndoTool(manager)] if checkpoints else [])
        self._bound = _bind_tool(model, tools, protocol)
        self._systems = {p: SystemMessage(system_prompt(tool_name=TOOL_NAME, max_steps=max_steps,
                                                        budget=observation_budget,
                                                        send_images=self.sends_images, protocol=p,
                                                        undo=checkpoints > 0))
                         for p in ("tools", "code", "auto")}
        self._conversations: dict[str, Conversation] = {}
        observation = ObservationSettings(budget=observation_budget, send_images=self.sends_images,
                                          max_images=max_images)
        self._steps = StepRunner(max_steps=max_steps, step_timeout_s=step_timeout, observation=observation,
                                 undo=checkpoints > 0, check_results=check_results)

    # -- public API ----------------------------------------------------------------------

    async def ask(self, conversation_id: str, question: str, *,
                  files: Sequence[str | os.PathLike[str]] = (),
                  on_event: EventCallback | None = None) -> Answer:
        """Answer ``question`` in the conversation's kernel, after uploading ``files``.

        ``on_event`` receives every event as it happens (see :meth:`stream`). Raises for
        setup failures (a missing file, a kernel that cannot start); a failing model call
        ends the answer with ``stop_reason="error"``.
        """
        return await self._answer(conversation_id, question, files, on_event or _ignore)

    async def stream(self, conversation_id: str, question: str, *,
                     files: Sequence[str | os.PathLike[str]] = ()) -> AsyncIterator[AgentEvent]:
        """Like :meth:`ask`, as an async iterator of events ending with :class:`FinalAnswer`.

        Closing the iterator early (``contextlib.aclosing``) cancels the answer.
        """
        queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()
        task = asyncio.create_task(self._answer(conversation_id, question, files, queue.put_nowait))
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

    # -- one answer ------------------------------------------------------------------------

    def _conversation(self, conversation_id: str) -> Conversation:
        found = self._conversations.get(conversation_id)
        if found is None:
            state = ProtocolState(self.settings.protocol)
            if self._bound is None:
                state.fall_back_to_code()
            found = self._conversations[conversation_id] = Conversation(state)
        return found

    async def _answer(self, conversation_id: str, question: str,
                      files: Sequence[str | os.PathLike[str]], emit: EventCallback) -> Answer:
        conversation = self._conversation(conversation_id)
        async with conversation.lock:
            turn = await self._start(conversation_id, question, files, conversation, emit)
            try:
                answer = await self._run(turn)
            except asyncio.CancelledError:
                with contextlib.suppress(Exception):
                    await asyncio.shield(turn.session.interrupt())
                raise
            conversation.history = without_images(turn.messages[1:])
            conversation.turns += 1
            await record_answer(turn, answer, self.settings.max_steps)
        emit(FinalAnswer(answer))
        return answer

    async def _start(self, conversation_id: str, question: str, files: Sequence[str | os.PathLike[str]],
                     conversation: Conversation, emit: EventCallback) -> Turn:
        if isinstance(files, (str, os.PathLike)):
            files = [files]  # one path given where a list was meant
        session = await self.manager.session(conversation_id)
        enable_checkpoints(session, self.settings.checkpoints)
        uploaded = [(await session.upload(Path(path))).name for path in files]
        tables = await read_uploads([Path(path) for path in files], uploaded,
                                    memory_mb=session.limits.memory_mb)
        gone = await refresh_variables(session, conversation.variables)
        first_cell = len(session.audit.cells)
        await session.add_markdown(question_markdown(question, uploaded), role="question",
                                   turn=conversation.turns + 1, at=now())
        if self.settings.profile_files and tables:
            tables = await preload(session, tables, set(conversation.variables), turn=conversation.turns + 1)
            if any(t.variable for t in tables):
                await refresh_variables(session, conversation.variables)
        conversation.teacher.tables.update({t.file: t for t in tables})
        note = await self._briefing(session, conversation, uploaded, tables, gone)
        system = self._systems[conversation.protocol.system_prompt]
        messages = [system, *conversation.history, HumanMessage(f"{question}\n{note}")]
        review = AnswerReview(ReviewSettings(require_work=self.settings.require_work,
                                             check_numbers=self.settings.check_numbers,
                                             check_form=self.settings.check_results))
        listing = await session.files()
        return Turn(conversation_id, question, session, conversation, messages, emit, uploaded, review,
                    has_files=any(not f.name.startswith("outputs/") for f in listing),
                    cells_before=_work_cells(session.audit.cells),
                    evidence="\n".join(t.profile for t in tables if t.profile), first_cell=first_cell)

    async def _briefing(self, session: KernelSession, conversation: Conversation, uploaded: list[str],
                    tables: list[UploadedTable], gone: list[str]) -> str:
        """The note on files, tables and variables attached to the question."""
        loaded = {t.variable for t in tables if t.variable}
        listing = await session.files()
        others = [v for name, v in conversation.variables.items() if name not in loaded]
        note = kernel_context(files=describe_files(listing, new=uploaded, memory_mb=session.limits.memory_mb),
                              variables=describe_variables(others))
        if tables:
            note += "\n" + tables_note(tables)
        if gone:
            note += "\n" + message("variables_gone", names=", ".join(gone))
        if running := context_note(session):
            note += "\n" + running
        return note + handoff_note(session.audit.cells)

    async def _run(self, turn: Turn) -> Answer:
        protocol = turn.conversation.protocol
        while True:
            reply = await self._call_model(turn)
            if reply is None:
                return finish(turn, "error")
            text = str(reply.text)
            reading = protocol.read(text, reply.tool_calls, reply.invalid_tool_calls, tool_name=TOOL_NAME)
            if reading.switched_to == "code":
                self._switched_to_code(turn, reading)
            if reading.is_answer and not reading.text.strip():  # an empty reply is no answer
                await self._idle_reply(turn, "empty_reply", message("empty_reply"))
            elif reading.is_answer or (repeats := _repeats_work(turn, reading, text)) or (
                    reading.text.strip() and self._steps.idle_only(turn, reading)):
                # An answer; work shown again beside one (the whole reply); or prose beside
                # blocks that are no step: a wait for a background run that does not exist,
                # an undo of a step that only printed (the prose).
                answer_text = text if not reading.is_answer and repeats else reading.text
                feedback = self._review(turn, answer_text)
                if feedback is None:
                    return finish(turn, "answered", answer_text)
                await self._send_back(turn, answer_text, feedback)
                continue
            elif reading.code_only:  # code written as text under ``tools``: never run, never an answer
                await self._idle_reply(turn, "code_in_answer", message("code_in_answer", tool_name=TOOL_NAME))
            else:
                limit_was_reached = turn.attempts >= self.settings.max_steps
                await self._take_steps(turn, reply, reading, text)
                if turn.error is not None:
                    return finish(turn, "error")
                if limit_was_reached:
                    return await self._partial(turn, message("step_limit", max_steps=self.settings.max_steps))
            if turn.idle >= MAX_IDLE_REPLIES:
                return await self._partial(turn, message("stalled", count=turn.idle))

    async def _idle_reply(self, turn: Turn, kind: str, text: str) -> None:
        """A reply that ran nothing and is no answer: the model is told ``text``."""
        turn.idle += 1
        await self._steps.not_run(turn, kind, text, as_user=True)

    def _review(self, turn: Turn, answer_text: str) -> str | None:
        """The feedback that sends an answer back, or None to accept it."""
        protocol = turn.conversation.protocol
        cells_run = turn.cells_before + len(turn.steps)
        if (self.settings.require_work and turn.has_files and cells_run == 0
                and protocol.prefer_code()):
            self._switched_to_code(turn, None)
        return turn.review.feedback(
            protocol=protocol.prompt_protocol, tool_name=TOOL_NAME, has_files=turn.has_files,
            cells_run=cells_run, answer=answer_text, evidence=turn.evidence,
            cells=turn.session.audit.cells, question=turn.question, files=turn.files,
            since=turn.first_cell, steps=len(turn.steps), failed=_last_failure(turn))

    async def _take_steps(self, turn: Turn, reply: AIMessage, reading: Reading, text: str) -> None:
        """Record the reply's prose and run what it asks for."""
        if reading.kept_text is not None and reading.kept_text != text:
            turn.messages[-1] = reply.model_copy(update={"content": reading.kept_text})
        if reading.text.strip() and not reading.cut:
            turn.last_text = turn.last_text if reading.unreadable else reading.text
            turn.emit(ModelText(reading.text))
            await turn.session.add_markdown(reading.text, role="model", at=now())
        await self._steps.run(turn, reading)

    async def _partial(self, turn: Turn, why: str) -> Answer:
        """End with the best partial answer the cells support (:mod:`.ending`)."""
        self._note(turn, "partial", why)
        asked = len(turn.messages)
        turn.messages.append(HumanMessage(message("step_limit_answer", max_steps=self.settings.max_steps)))
        reply = await self._call_model(turn)
        said = ""
        if reply is not None:
            reading = ProtocolState("tools").read(str(reply.text), tool_name=TOOL_NAME)
            said = "" if reading.code_only or reading.cut or reply.tool_calls else reading.text
        if not said:  # code or nothing: not kept, so the history stays a valid exchange
            del turn.messages[asked:]
            if reply is not None:
                await self._steps.not_run(turn, "no_answer", message("no_partial_answer"))
        turn.error = None  # a failed last call still leaves the cells' partial answer
        text = partial_text(turn, said)
        if text:
            ground_partial(turn, text)
        return finish(turn, "max_steps", text, partial=bool(text))

    async def _call_model(self, turn: Turn) -> AIMessage | None:
        bound, binds = self._bound, turn.conversation.protocol.binds_tools
        model = bound if bound is not None and binds else self.model
        trimmed = 0
        while True:
            try:
                reply = await model.ainvoke(turn.messages)
                break
            except Exception as exc:  # any provider failure ends this answer, not the program
                if is_context_overflow(exc) and trim_oldest_observation(turn.messages):
                    trimmed += 1
                    continue
                log.warning("model call failed in %s", turn.conversation_id, exc_info=True)
                turn.error = f"the model call failed: {type(exc).__name__}: {exc}"
                return None
        if trimmed:
            turn.trimmed += trimmed
            self._note(turn, "context_trimmed", message("context_trimmed", count=turn.trimmed))
        turn.usage.add(dict(reply.usage_metadata) if reply.usage_metadata else None)
        turn.messages.append(reply)
        turn.replies += 1
        return reply

    def _note(self, turn: Turn, kind: Literal["protocol_switched", "answer_returned", "context_trimmed",
                                              "partial"], text: str) -> None:
        """Tell the user something the loop did (an event, and the answer's notes; a new
        count of trimmed outputs replaces the previous one)."""
        if kind == "context_trimmed":
            turn.notes = [n for n in turn.notes if n != turn.trim_note]
            turn.trim_note = text
        turn.notes.append(text)
        turn.emit(AgentNote(kind, text))

    def _switched_to_code(self, turn: Turn, reading: Reading | None) -> None:
        """An ``auto`` conversation's model writes code as text (``reading``), or answered
        without calling the tool (None): its python blocks run from now on. The system
        prompt stays (it describes both forms), so the server's cached prompt holds."""
        if reading is None:
            self._note(turn, "protocol_switched", message("protocol_switched_no_call"))
            return
        via = reading.actions[0].via.value if reading.actions else "text"
        self._note(turn, "protocol_switched", message("protocol_switched", via=via))

    async def _send_back(self, turn: Turn, text: str, feedback: str) -> None:
        """Return an answer to the model with the reasons it was not accepted."""
        self._note(turn, "answer_returned", feedback)
        if text.strip():
            await turn.session.add_markdown(text, role="model", returned=True, at=now())
        if isinstance(turn.messages[-1], AIMessage) and not turn.messages[-1].tool_calls:
            turn.messages.pop()  # not read back: numbers it made up there anchor a small model's next try
        turn.messages.append(HumanMessage(feedback))


# -- helpers ---------------------------------------------------------------------------------


def _ignore(event: AgentEvent) -> None:
    """The default event callback."""


def _bind_tool(model: BaseChatModel, tools: list[BaseTool],
               protocol: ProtocolName) -> Runnable[LanguageModelInput, AIMessage] | None:
    """The model with the Python tool (and the undo tool) bound; None under ``code``, or
    under ``auto`` for a model that cannot bind tools (it will write code as text)."""
    if protocol == "code":
        return None
    try:
        return model.bind_tools(tools)
    except NotImplementedError as exc:
        if protocol == "auto":
            log.info("%s cannot bind tools; its conversations write code as text", type(model).__name__)
            return None
        raise ToolCallingUnsupportedError(
            f"{type(model).__name__} does not support tool calling (bind_tools); use protocol "
            "'code' or 'auto' (the model writes ```python blocks), or a model that calls tools") from exc


def _last_failure(turn: Turn) -> str | None:
    """The error of this question's last step, if it did not end ``ok`` (one line)."""
    last = turn.steps[-1].execution if turn.steps else None
    if last is None or last.status == "ok":
        return None
    return str(last.error).splitlines()[0] if last.error is not None else last.status


def _work_cells(cells: list[dict[str, Any]]) -> int:
    """Code cells that computed something (not the briefing's own loading of the files)."""
    roles = [(c.get("metadata") or {}).get("kernel_analyst", {}).get("role") for c in cells
             if c.get("cell_type") == "code"]
    return sum(role != "profile" for role in roles)


def _repeats_work(turn: Turn, reading: Reading, text: str) -> bool:
    """True when a reply written as text repeats code that already ran without error in
    this answer, beside prose: a model showing its work beside its answer, not a new step.
    (Code alone is answered with "already ran" instead, see ``steps``.)"""
    if not reading.actions or reading.calls or reading.invalid:
        return False
    if not (reading.text + reading.trailing).strip():
        return False
    done = {step.code.strip() for step in turn.steps if step.execution.status == "ok"}
    return all(action.code.strip() in done for action in reading.actions)


__all__ = ["MAX_IDLE_REPLIES", "Analyst", "AnalystSettings", "EventCallback", "ImagesMode"]
