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
conversation with data). A request the model's context cannot hold has its oldest
observations trimmed (:mod:`.context_window`). The audit notebook receives the question,
the model's text between steps and the answer as markdown cells, in order with the code
cells, and each code cell records how its code arrived.

Cancellation: cancelling :meth:`Analyst.ask` (or closing :meth:`Analyst.stream` early)
cancels the model call in flight, or interrupts the running cell. The conversation's chat
history keeps only completed answers; the kernel keeps whatever ran, and the next question's
note on existing variables tells the model about it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from ..claims import cite_markdown
from ..kernels import KernelSession, SessionManager
from ..kernels.exceptions import KernelAnalystError
from ..kernels.execution import Execution, VariableInfo
from .background import BackgroundSteps, context_note
from .briefing import (
    describe_files,
    describe_variables,
    profiles,
    question_markdown,
    refresh_variables,
    table_columns,
    track_variables,
)
from .context_window import is_context_overflow, observation_id, trim_oldest_observation
from .events import (
    AgentEvent,
    AgentNote,
    FinalAnswer,
    ModelText,
    StepCode,
    StepFinished,
    StepOutput,
    StepStarted,
)
from .exceptions import ToolCallingUnsupportedError
from .figures import ImagesMode, figures_message, images_enabled, without_images
from .observation import DEFAULT_BUDGET, Observation, ObservationSettings, observe_step
from .prompting import kernel_context, message, system_prompt
from .protocols import PROTOCOLS, Action, ProtocolName, ProtocolState, Reading, Via
from .results import Answer, Step, StopReason, Usage
from .review import AnswerReview, ReviewSettings
from .tool import TOOL_NAME, KernelTool
from .undo import DEFAULT_CHECKPOINTS, UNDO_TOOL_NAME, UndoTool, enable_checkpoints, find_undo, undo_step

log = logging.getLogger(__name__)

EventCallback = Callable[[AgentEvent], None]
"""Receives each event of an answer, in order (called synchronously)."""

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
    profile_files: bool = False
    """Load each table uploaded with a question as a DataFrame and show the model its
    compact profile (:mod:`kernel_analyst.eda.profile`) before its first step."""
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


@dataclass
class _Conversation:
    """What the analyst remembers of one conversation between answers."""

    protocol: ProtocolState
    history: list[BaseMessage] = field(default_factory=list)
    variables: dict[str, VariableInfo] = field(default_factory=dict)
    turns: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass
class _Turn:
    """The state of one answer while it is being built."""

    conversation_id: str
    question: str
    session: KernelSession
    conversation: _Conversation
    messages: list[BaseMessage]
    emit: EventCallback
    files: list[str]
    review: AnswerReview
    has_files: bool = False
    cells_before: int = 0
    evidence: str = ""
    """What the model was shown from the data before its first step (the profiles)."""
    steps: list[Step] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    attempts: int = 0
    error: str | None = None
    last_text: str = ""
    notes: list[str] = field(default_factory=list)
    trimmed: int = 0
    trim_note: str = ""
    reminder: tuple[str, str] | None = None
    """The message id and text of the question restated after the latest output (code)."""
    undone_at: int = -1
    """The number of steps when the model last undid a cell (code may run again after it)."""
    started: float = field(default_factory=time.monotonic)


class Analyst:
    """A data-analysis agent on any LangChain chat model.

    ``Analyst(model, manager)`` with a started :class:`SessionManager`; each conversation
    id gets its own kernel and chat history. Keywords: ``max_steps``,
    ``observation_budget`` (characters), ``send_images`` (``"auto"``: figures go to the
    model as images when its LangChain profile says it takes them; ``True``/``"on"``,
    ``False``/``"off"``), ``max_images`` (per step), ``step_timeout`` (seconds),
    ``profile_files`` (load and profile uploaded tables first), ``protocol`` (``auto``,
    ``tools`` or ``code``: how the model runs code), ``require_work`` (send back an answer
    given before any code ran), ``check_numbers`` (send back an answer with numbers no cell
    produced). Nothing starts before the first question.
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
        profile_files: bool = False,
        protocol: ProtocolName = "auto",
        require_work: bool = True,
        check_numbers: bool = True,
        checkpoints: int = DEFAULT_CHECKPOINTS,
    ) -> None:
        self.model = model
        self.manager = manager
        self.settings = AnalystSettings(max_steps=max_steps, observation_budget=observation_budget,
                                        send_images=send_images, max_images=max_images,
                                        step_timeout_s=step_timeout, profile_files=profile_files,
                                        protocol=protocol, require_work=require_work,
                                        check_numbers=check_numbers, checkpoints=checkpoints)
        self.sends_images = images_enabled(send_images, model)
        """True when figures go to the model as images (see ``send_images``)."""
        tools: list[BaseTool] = [KernelTool(manager)] + ([UndoTool(manager)] if checkpoints else [])
        self._bound = _bind_tool(model, tools, protocol)
        self._systems = {p: SystemMessage(system_prompt(tool_name=TOOL_NAME, max_steps=max_steps,
                                                        budget=observation_budget,
                                                        send_images=self.sends_images, protocol=p,
                                                        undo=checkpoints > 0))
                         for p in ("tools", "code", "auto")}
        self._conversations: dict[str, _Conversation] = {}
        self._background = BackgroundSteps()

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

    def _conversation(self, conversation_id: str) -> _Conversation:
        found = self._conversations.get(conversation_id)
        if found is None:
            state = ProtocolState(self.settings.protocol)
            if self._bound is None:
                state.fall_back_to_code()
            found = self._conversations[conversation_id] = _Conversation(state)
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
            await self._record_answer(turn, answer)
        emit(FinalAnswer(answer))
        return answer

    async def _start(self, conversation_id: str, question: str, files: Sequence[str | os.PathLike[str]],
                     conversation: _Conversation, emit: EventCallback) -> _Turn:
        if isinstance(files, (str, os.PathLike)):
            files = [files]  # one path given where a list was meant
        session = await self.manager.session(conversation_id)
        enable_checkpoints(session, self.settings.checkpoints)
        uploaded = [(await session.upload(Path(path))).name for path in files]
        profile_text = await profiles(session, files, uploaded) if self.settings.profile_files else ""
        gone = await refresh_variables(session, conversation.variables)
        listing = await session.files()
        note = kernel_context(files=describe_files(listing, new=uploaded, memory_mb=session.limits.memory_mb),
                              variables=describe_variables(list(conversation.variables.values())))
        columns = [table_columns(path, name) for path, name in zip(files, uploaded, strict=True)]
        note += "".join(f"\n- {line}" for line in columns if line)
        if gone:
            note += "\n" + message("variables_gone", names=", ".join(gone))
        note += profile_text
        if running := context_note(session):
            note += "\n" + running
        await session.add_markdown(question_markdown(question, uploaded), role="question",
                                   turn=conversation.turns + 1, at=_now())
        system = self._systems[conversation.protocol.system_prompt]
        messages = [system, *conversation.history, HumanMessage(f"{question}\n{note}")]
        review = AnswerReview(ReviewSettings(require_work=self.settings.require_work,
                                             check_numbers=self.settings.check_numbers))
        return _Turn(conversation_id, question, session, conversation, messages, emit, uploaded, review,
                     has_files=any(not f.name.startswith("outputs/") for f in listing),
                     cells_before=_work_cells(session.audit.cells), evidence=profile_text)

    async def _run(self, turn: _Turn) -> Answer:
        protocol = turn.conversation.protocol
        while True:
            reply = await self._call_model(turn)
            if reply is None:
                return self._finish(turn, "error")
            text = str(reply.text)
            reading = protocol.read(text, reply.tool_calls, reply.invalid_tool_calls, tool_name=TOOL_NAME)
            if reading.switched_to == "code":
                self._switched_to_code(turn, reading)
            if reading.is_answer or _repeats_work(turn, reading, text):
                answer_text = reading.text if reading.is_answer else text
                cells_run = turn.cells_before + len(turn.steps)
                if (self.settings.require_work and turn.has_files and cells_run == 0
                        and protocol.prefer_code()):
                    self._switched_to_code(turn, None)
                feedback = turn.review.feedback(
                    protocol=protocol.prompt_protocol, tool_name=TOOL_NAME, has_files=turn.has_files,
                    cells_run=cells_run, answer=answer_text, evidence=turn.evidence,
                    cells=turn.session.audit.cells, question=turn.question, files=turn.files)
                if feedback is None:
                    return self._finish(turn, "answered", answer_text)
                await self._send_back(turn, answer_text, feedback)
                continue
            if reading.kept_text is not None and reading.kept_text != text:
                turn.messages[-1] = reply.model_copy(update={"content": reading.kept_text})
            if reading.text.strip():
                turn.last_text = turn.last_text if reading.unreadable else reading.text
                turn.emit(ModelText(reading.text))
                await turn.session.add_markdown(reading.text, role="model", at=_now())
            limit_was_reached = turn.attempts >= self.settings.max_steps
            await self._run_reading(turn, reading)
            if turn.error is not None:
                return self._finish(turn, "error")
            if limit_was_reached:
                return self._finish(turn, "max_steps", turn.last_text)

    async def _call_model(self, turn: _Turn) -> AIMessage | None:
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
        return reply

    def _note(self, turn: _Turn, kind: Literal["protocol_switched", "answer_returned", "context_trimmed"],
              text: str) -> None:
        """Tell the user something the loop did (an event, and the answer's notes; a new
        count of trimmed outputs replaces the previous one)."""
        if kind == "context_trimmed":
            turn.notes = [n for n in turn.notes if n != turn.trim_note]
            turn.trim_note = text
        turn.notes.append(text)
        turn.emit(AgentNote(kind, text))

    def _switched_to_code(self, turn: _Turn, reading: Reading | None) -> None:
        """An ``auto`` conversation's model writes code as text (``reading``), or answered
        without calling the tool (None): the prompt says so from now on."""
        turn.messages[0] = self._systems["code"]
        if reading is None:
            self._note(turn, "protocol_switched", message("protocol_switched_no_call"))
            return
        via = reading.actions[0].via.value if reading.actions else "text"
        self._note(turn, "protocol_switched", message("protocol_switched", via=via))

    async def _send_back(self, turn: _Turn, text: str, feedback: str) -> None:
        """Return an answer to the model with the reasons it was not accepted."""
        self._note(turn, "answer_returned", feedback)
        if text.strip():
            await turn.session.add_markdown(text, role="model", returned=True, at=_now())
        if isinstance(turn.messages[-1], AIMessage) and not turn.messages[-1].tool_calls:
            turn.messages.pop()  # not read back: numbers it made up there anchor a small model's next try
        turn.messages.append(HumanMessage(feedback))

    # -- steps -------------------------------------------------------------------------------

    async def _run_reading(self, turn: _Turn, reading: Reading) -> None:
        if reading.calls or reading.invalid:
            await self._run_tool_calls(turn, reading)
        elif reading.actions:
            await self._run_text_code(turn, reading.actions[0])
        else:  # a call written as text that could not be read: say so, as a step's result
            if turn.attempts < self.settings.max_steps:
                turn.attempts += 1
            turn.messages.append(HumanMessage(message("unreadable_call"), id=observation_id()))

    async def _run_tool_calls(self, turn: _Turn, reading: Reading) -> None:
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
                content = message("bad_arguments", tool_name=TOOL_NAME, detail=detail)
                turn.messages.append(ToolMessage(content=content, tool_call_id=bad.call_id, name=TOOL_NAME,
                                                 id=observation_id()))
        if figures:
            turn.messages.append(figures_message(figures))

    async def _tool_call(self, turn: _Turn, name: str, args: Any,
                         call_id: str) -> tuple[str, Observation | None]:
        """Run one native tool call; return the tool message text and the observation, if any."""
        if name == UNDO_TOOL_NAME and self.settings.checkpoints:
            to = args.get("to") if isinstance(args, dict) else None
            directive = "# kernel-analyst: undo" + (f" {to}" if isinstance(to, int) else "")
            return await self._act(turn, Action(directive, Via.TOOL_CALL, call_id))
        if name != TOOL_NAME:
            if turn.error is None and turn.attempts < self.settings.max_steps:
                turn.attempts += 1
            key = "unknown_tool_undo" if self.settings.checkpoints else "unknown_tool"
            return message(key, name=name, tool_name=TOOL_NAME), None
        code = args.get("code") if isinstance(args, dict) else None
        if not isinstance(code, str) or not code.strip():
            if turn.error is None and turn.attempts < self.settings.max_steps:
                turn.attempts += 1
            return message("bad_arguments", tool_name=TOOL_NAME, detail=""), None
        return await self._act(turn, Action(code, Via.TOOL_CALL, call_id))

    async def _run_text_code(self, turn: _Turn, action: Action) -> None:
        """Run code the model wrote as text; its output is the next user message."""
        content, observation = await self._act(turn, action)
        header = f"{message('code_output', step=len(turn.steps))}\n" if observation is not None else ""
        text, reminder = header + content, ""
        if turn.attempts < self.settings.max_steps and turn.error is None:
            reminder = _question_reminder(turn.question)
            text = f"{text}\n\n{message('code_continue')}{reminder}"
        parts: list[str | dict[str, Any]] = [text]
        if observation is not None and observation.images:
            parts.extend(observation.image_blocks())
        body: str | list[str | dict[str, Any]] = parts if len(parts) > 1 else str(parts[0])
        _drop_reminder(turn)
        turn.messages.append(HumanMessage(content=body, id=observation_id()))
        turn.reminder = (str(turn.messages[-1].id), reminder) if reminder else None

    async def _act(self, turn: _Turn, action: Action) -> tuple[str, Observation | None]:
        """Run one action within the step limit; return the model's text and the observation."""
        if turn.error is not None:
            return message("not_run_after_failure"), None
        if turn.attempts >= self.settings.max_steps:
            return message("step_limit", max_steps=self.settings.max_steps), None
        turn.attempts += 1
        undo, to = find_undo(action.code) if self.settings.checkpoints else (False, None)
        if undo:
            return await self._undo(turn, to), None
        earlier = _ran_before(turn.steps, action.code) if turn.undone_at != len(turn.steps) else None
        if earlier is not None and earlier.execution.error is not None:  # it would fail the same way
            return message("repeated_failure", step=earlier.index, error=str(earlier.execution.error)), None
        if earlier is not None and earlier.execution.status == "ok":
            return message("repeated_success", step=earlier.index), None
        try:
            observation = await self._step(turn, action)
        except KernelAnalystError as exc:
            turn.error = f"the kernel failed: {exc}"
            return message("kernel_failed", error=str(exc)), None
        return turn.steps[-1].observation, observation

    async def _step(self, turn: _Turn, action: Action) -> Observation:
        index = len(turn.steps) + 1
        turn.emit(StepStarted(index, action.call_id, action.via.value))
        turn.emit(StepCode(index, action.code))
        agent_meta = {"via": action.via.value, "protocol": turn.conversation.protocol.prompt_protocol,
                      "turn": turn.conversation.turns + 1, "step": index}
        run = await self._background.run_step(turn.session, action.code, timeout=self.settings.step_timeout_s,
                                              on_output=lambda out: turn.emit(StepOutput(index, out)),
                                              annotations={"agent": agent_meta})
        ex = run.execution
        lost = track_variables(turn.conversation.variables, ex)
        observation = await self._observe(turn, ex, lost, index) if run.observe else Observation(text="")
        text = "\n".join(part for part in (run.note, observation.text) if part)
        text += _key_error_hint(ex, turn.conversation.variables)
        if turn.attempts >= self.settings.max_steps:
            text += "\n\n" + message("last_step", max_steps=self.settings.max_steps)
        turn.steps.append(Step(index, action.code, ex, text, action.call_id, action.via.value))
        turn.emit(StepFinished(index, ex, text))
        return observation

    async def _undo(self, turn: _Turn, to: int | None) -> str:
        """The model asked to undo (agent/undo.py): its report is the observation."""
        text = await undo_step(turn.session, to)
        turn.undone_at = len(turn.steps)
        turn.emit(AgentNote("undo", text))
        return text

    async def _observe(self, turn: _Turn, ex: Execution, lost: list[str] | None, index: int) -> Observation:
        settings = ObservationSettings(budget=self.settings.observation_budget, send_images=self.sends_images,
                                       max_images=self.settings.max_images)
        name = f"outputs/turn{turn.conversation.turns + 1}-step{index}-{uuid.uuid4().hex[:6]}.txt"
        return await observe_step(turn.session, ex, settings=settings, lost_variables=lost, save_as=name)

    # -- the end -----------------------------------------------------------------------------

    def _finish(self, turn: _Turn, reason: StopReason, text: str = "") -> Answer:
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
            claims=turn.review.grounding if reason == "answered" else None,
        )

    async def _record_answer(self, turn: _Turn, answer: Answer) -> None:
        if answer.stop_reason == "answered":
            text = f"### Answer\n\n{cite_markdown(answer.claims) if answer.claims else answer.text}"
        elif answer.stop_reason == "max_steps":
            text = (f"### Stopped\n\nThe limit of {self.settings.max_steps} steps was reached "
                    "before an answer.")
        else:
            text = f"### Stopped\n\nThe answer failed: {answer.error}"
        if answer.notes:
            text += "\n\n" + "\n>\n".join("\n".join(f"> {line}" for line in note.splitlines())
                                            for note in answer.notes)
        with contextlib.suppress(KernelAnalystError):  # a session closed meanwhile keeps its notebook
            claims = {"claims": answer.claims.to_dict()} if answer.claims else {}
            await turn.session.add_markdown(text, role="answer", stop_reason=answer.stop_reason,
                                            protocol=answer.protocol, at=_now(), **claims)


# -- helpers ---------------------------------------------------------------------------------


def _ignore(event: AgentEvent) -> None:
    """The default event callback."""


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


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


def _ran_before(steps: list[Step], code: str) -> Step | None:
    """The previous step, when it ran exactly ``code`` (nothing ran since, so running it
    again would only repeat its outcome; a repeat after other steps may differ and runs)."""
    last = steps[-1] if steps else None
    return last if last is not None and last.code.strip() == code.strip() else None


def _key_error_hint(ex: Execution, variables: dict[str, VariableInfo]) -> str:
    """After a KeyError, the columns of the DataFrames the model has (the usual cause is a
    column name guessed wrong: "Survived" for "survived")."""
    if ex.error is None or ex.error.ename != "KeyError":
        return ""
    frames = [v for v in variables.values() if v.columns][:3]
    if not frames:
        return ""
    listed = "; ".join(f"{v.name}: {', '.join(v.columns[:40])}" for v in frames if v.columns)
    return "\n" + message("key_error_columns", frames=listed)


_REMINDER_MAX = 1200
"""A question up to this long is restated after each output under ``code``."""


def _question_reminder(question: str) -> str:
    """The question restated after an output, so that a small model reads what it asks
    (and the form it asks for) right before it answers, not only at the start of a long
    context; empty for a question too long to repeat."""
    question = question.strip()
    return "\n" + message("code_question", question=question) if 0 < len(question) <= _REMINDER_MAX else ""


def _drop_reminder(turn: _Turn) -> None:
    """Take the restated question out of the previous output's message: only the latest
    output carries it, so it costs the context once."""
    if turn.reminder is None:
        return
    mid, text = turn.reminder
    turn.reminder = None
    for i, m in enumerate(turn.messages):
        if m.id == mid:
            if isinstance(m.content, str):
                turn.messages[i] = m.model_copy(update={"content": m.content.replace(text, "", 1)})
            else:
                content = [p.replace(text, "", 1) if isinstance(p, str) else p for p in m.content]
                turn.messages[i] = m.model_copy(update={"content": content})
            return


def _work_cells(cells: list[dict[str, Any]]) -> int:
    """Code cells that computed something (not the briefing's own loading of the files)."""
    roles = [(c.get("metadata") or {}).get("kernel_analyst", {}).get("role") for c in cells
             if c.get("cell_type") == "code"]
    return sum(role != "profile" for role in roles)


def _repeats_work(turn: _Turn, reading: Reading, text: str) -> bool:
    """True when a reply written as text repeats code that already ran without error in
    this answer, beside prose: a model showing its work beside its answer, not a new step.
    (Code alone is answered with "already ran" instead, see ``_act``.)"""
    if not reading.actions or reading.calls or reading.invalid:
        return False
    if not (reading.text + reading.trailing).strip():
        return False
    done = {step.code.strip() for step in turn.steps if step.execution.status == "ok"}
    return all(action.code.strip() in done for action in reading.actions)
