"""The agent loop: a question, a model calling the Python tool, a kernel, an answer.

One answer runs like this. The question's files are uploaded into the conversation's
session; the model is sent the system prompt, the conversation so far and the question
with a note on the files and variables that already exist. Each tool call the model makes
is one step: its code runs in the kernel, and the model is shown the observation (errors
included, so it can correct itself). This repeats until the model replies without a tool
call (``answered``), the step limit is used up (``max_steps``), or the model or the kernel
fails (``error``). The audit notebook receives the question, the model's text between
steps and the answer as markdown cells, in order with the code cells.

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

from ..kernels.exceptions import KernelAnalystError
from ..kernels.execution import Execution, VariableInfo
from ..kernels.files import FileInfo
from ..kernels.manager import SessionManager
from ..kernels.session import KernelSession
from .events import AgentEvent, FinalAnswer, ModelText, StepCode, StepFinished, StepOutput, StepStarted
from .exceptions import ToolCallingUnsupportedError
from .observation import DEFAULT_BUDGET, Observation, ObservationSettings, observe_step
from .prompting import kernel_context, message, system_prompt
from .results import Answer, Step, StopReason, Usage
from .tool import TOOL_NAME, KernelTool

log = logging.getLogger(__name__)

EventCallback = Callable[[AgentEvent], None]
"""Receives each event of an answer, in order (called synchronously)."""

ImagesMode = Literal["auto", "on", "off"]
"""Whether figures go to the model as images: ``auto`` when the model's LangChain profile
says it takes image input, ``on`` unless the profile says it does not, ``off`` never."""

_MAX_LISTED_FILES = 30
_MAX_LISTED_COLUMNS = 25
_MAX_CONTEXT_VARIABLES = 40
_KERNEL_LISTING_CAP = 200  # the kernel lists at most this many variables (kernels/_kernel_startup.py)


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

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be at least 1; got {self.max_steps}")
        if self.observation_budget < 500:
            raise ValueError("observation_budget must be at least 500 characters; "
                             f"got {self.observation_budget}")

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return asdict(self)


@dataclass
class _Conversation:
    """What the analyst remembers of one conversation between answers."""

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
    steps: list[Step] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    attempts: int = 0
    error: str | None = None
    last_text: str = ""
    started: float = field(default_factory=time.monotonic)


class Analyst:
    """A data-analysis agent on any LangChain chat model that supports tool calling.

    ``Analyst(model, manager)`` with a started :class:`SessionManager`; each conversation
    id gets its own kernel and chat history. Keywords: ``max_steps``,
    ``observation_budget`` (characters), ``send_images`` (``"auto"``: figures go to the
    model as images when its LangChain profile says it takes them; ``True``/``"on"``,
    ``False``/``"off"``), ``max_images`` (per step), ``step_timeout`` (seconds),
    ``profile_files`` (load and profile uploaded tables first). Nothing starts before the
    first question.
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
    ) -> None:
        self.model = model
        self.manager = manager
        self.settings = AnalystSettings(max_steps=max_steps, observation_budget=observation_budget,
                                        send_images=send_images, max_images=max_images,
                                        step_timeout_s=step_timeout, profile_files=profile_files)
        self.sends_images = images_enabled(send_images, model)
        """True when figures go to the model as images (see ``send_images``)."""
        self._bound = _bind_tool(model, KernelTool(manager))
        self._system = SystemMessage(system_prompt(tool_name=TOOL_NAME, max_steps=max_steps,
                                                   budget=observation_budget, send_images=self.sends_images))
        self._conversations: dict[str, _Conversation] = {}

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

    def forget(self, conversation_id: str) -> None:
        """Drop a conversation's chat history (its kernel is left as it is)."""
        self._conversations.pop(conversation_id, None)

    # -- one answer ------------------------------------------------------------------------

    async def _answer(self, conversation_id: str, question: str,
                      files: Sequence[str | os.PathLike[str]], emit: EventCallback) -> Answer:
        conversation = self._conversations.setdefault(conversation_id, _Conversation())
        async with conversation.lock:
            turn = await self._start(conversation_id, question, files, conversation, emit)
            try:
                answer = await self._run(turn)
            except asyncio.CancelledError:
                with contextlib.suppress(Exception):
                    await asyncio.shield(turn.session.interrupt())
                raise
            conversation.history = _without_images(turn.messages[1:])
            conversation.turns += 1
            await self._record_answer(turn, answer)
        emit(FinalAnswer(answer))
        return answer

    async def _start(self, conversation_id: str, question: str, files: Sequence[str | os.PathLike[str]],
                     conversation: _Conversation, emit: EventCallback) -> _Turn:
        if isinstance(files, (str, os.PathLike)):
            files = [files]  # one path given where a list was meant
        session = await self.manager.session(conversation_id)
        uploaded = [(await session.upload(Path(path))).name for path in files]
        profiles = await _profiles(session, files, uploaded) if self.settings.profile_files else ""
        gone = await _refresh_variables(session, conversation)
        note = kernel_context(files=describe_files(await session.files(), new=uploaded),
                              variables=describe_variables(list(conversation.variables.values())))
        if gone:
            note += "\n" + message("variables_gone", names=", ".join(gone))
        note += profiles
        await session.add_markdown(_question_markdown(question, uploaded), role="question",
                                   turn=conversation.turns + 1, at=_now())
        messages = [self._system, *conversation.history, HumanMessage(f"{question}\n{note}")]
        return _Turn(conversation_id, question, session, conversation, messages, emit, uploaded)

    async def _run(self, turn: _Turn) -> Answer:
        while True:
            reply = await self._call_model(turn)
            if reply is None:
                return self._finish(turn, "error")
            text = str(reply.text)
            if not reply.tool_calls and not reply.invalid_tool_calls:
                return self._finish(turn, "answered", text)
            if text.strip():
                turn.last_text = text
                turn.emit(ModelText(text))
                await turn.session.add_markdown(text, role="model", at=_now())
            limit_was_reached = turn.attempts >= self.settings.max_steps
            await self._run_tool_calls(turn, reply)
            if turn.error is not None:
                return self._finish(turn, "error")
            if limit_was_reached:
                return self._finish(turn, "max_steps", turn.last_text)

    async def _call_model(self, turn: _Turn) -> AIMessage | None:
        try:
            reply = await self._bound.ainvoke(turn.messages)
        except Exception as exc:  # any provider failure ends this answer, not the program
            log.warning("model call failed in %s", turn.conversation_id, exc_info=True)
            turn.error = f"the model call failed: {type(exc).__name__}: {exc}"
            return None
        turn.usage.add(dict(reply.usage_metadata) if reply.usage_metadata else None)
        turn.messages.append(reply)
        return reply

    # -- steps -------------------------------------------------------------------------------

    async def _run_tool_calls(self, turn: _Turn, reply: AIMessage) -> None:
        figures: list[tuple[int, Observation]] = []
        for call in reply.tool_calls:
            call_id = str(call.get("id") or "")
            content, observation = await self._tool_call(turn, call["name"], call.get("args"), call_id)
            turn.messages.append(ToolMessage(content=content, tool_call_id=call_id, name=TOOL_NAME))
            if observation is not None and observation.images:
                figures.append((len(turn.steps), observation))
        for bad in reply.invalid_tool_calls:
            if bad.get("id"):
                turn.attempts += 1
                detail = f" ({bad.get('error')})" if bad.get("error") else ""
                content = message("bad_arguments", tool_name=TOOL_NAME, detail=detail)
                turn.messages.append(ToolMessage(content=content, tool_call_id=str(bad["id"]),
                                                 name=TOOL_NAME))
        if figures:
            turn.messages.append(_figures_message(figures))

    async def _tool_call(self, turn: _Turn, name: str, args: Any,
                         call_id: str) -> tuple[str, Observation | None]:
        """Run one tool call; return the tool message text and the observation, if any."""
        if turn.error is not None:
            return message("not_run_after_failure"), None
        if turn.attempts >= self.settings.max_steps:
            return message("step_limit", max_steps=self.settings.max_steps), None
        turn.attempts += 1
        if name != TOOL_NAME:
            return message("unknown_tool", name=name, tool_name=TOOL_NAME), None
        code = args.get("code") if isinstance(args, dict) else None
        if not isinstance(code, str) or not code.strip():
            return message("bad_arguments", tool_name=TOOL_NAME, detail=""), None
        try:
            observation = await self._step(turn, code, call_id)
        except KernelAnalystError as exc:
            turn.error = f"the kernel failed: {exc}"
            return message("kernel_failed", error=str(exc)), None
        return turn.steps[-1].observation, observation

    async def _step(self, turn: _Turn, code: str, call_id: str) -> Observation:
        index = len(turn.steps) + 1
        turn.emit(StepStarted(index, call_id))
        turn.emit(StepCode(index, code))
        ex = await turn.session.execute(code, timeout=self.settings.step_timeout_s,
                                        on_output=lambda out: turn.emit(StepOutput(index, out)))
        lost = _track_variables(turn.conversation, ex)
        observation = await self._observe(turn, ex, lost, index)
        text = observation.text
        if turn.attempts >= self.settings.max_steps:
            text += "\n\n" + message("last_step", max_steps=self.settings.max_steps)
        turn.steps.append(Step(index, code, ex, text, call_id))
        turn.emit(StepFinished(index, ex, text))
        return observation

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
        )

    async def _record_answer(self, turn: _Turn, answer: Answer) -> None:
        if answer.stop_reason == "answered":
            text = f"### Answer\n\n{answer.text}"
        elif answer.stop_reason == "max_steps":
            text = (f"### Stopped\n\nThe limit of {self.settings.max_steps} steps was reached "
                    "before an answer.")
        else:
            text = f"### Stopped\n\nThe answer failed: {answer.error}"
        with contextlib.suppress(KernelAnalystError):  # a session closed meanwhile keeps its notebook
            await turn.session.add_markdown(text, role="answer", stop_reason=answer.stop_reason, at=_now())


# -- helpers ---------------------------------------------------------------------------------


def _ignore(event: AgentEvent) -> None:
    """The default event callback."""


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def accepts_images(model: BaseChatModel) -> bool:
    """False only when the model's profile says it takes no image input."""
    return takes_images(model) is not False


def takes_images(model: BaseChatModel) -> bool | None:
    """What the model's LangChain profile says about image input; None when it says nothing."""
    profile = getattr(model, "profile", None)
    value = profile.get("image_inputs") if isinstance(profile, dict) else None
    return value if isinstance(value, bool) else None


def images_enabled(mode: bool | ImagesMode, model: BaseChatModel) -> bool:
    """Whether figures go to ``model`` as images under ``mode`` (see :data:`ImagesMode`);
    never when the model's profile says it takes no images."""
    if mode is True or mode == "on":
        return accepts_images(model)
    if mode is False or mode == "off":
        return False
    if mode == "auto":
        return takes_images(model) is True
    raise ValueError(f"send_images must be True, False, 'auto', 'on' or 'off'; got {mode!r}")


def _bind_tool(model: BaseChatModel, tool: KernelTool) -> Runnable[LanguageModelInput, AIMessage]:
    try:
        return model.bind_tools([tool])
    except NotImplementedError as exc:
        raise ToolCallingUnsupportedError(
            f"{type(model).__name__} does not support tool calling (bind_tools); "
            "choose a model that does, e.g. openai:gpt-4o-mini or ollama:qwen2.5-coder") from exc


async def _refresh_variables(session: KernelSession, conversation: _Conversation) -> list[str]:
    """Re-read the kernel's variables; return the known ones that vanished since the last
    answer (a restart, a culled session, code run by someone else)."""
    current = {v.name: v for v in await session.variables()}
    listing_complete = len(current) < _KERNEL_LISTING_CAP
    gone = sorted(set(conversation.variables) - set(current)) if listing_complete else []
    conversation.variables = current
    return gone


def _track_variables(conversation: _Conversation, ex: Execution) -> list[str] | None:
    """Apply a step's variable changes; when the state was lost, return the names lost."""
    lost = None
    if ex.state == "lost":
        lost = sorted(conversation.variables)
        conversation.variables = {}
    for info in [*ex.variables.created, *ex.variables.changed]:
        conversation.variables[info.name] = info
    for name in ex.variables.deleted:
        conversation.variables.pop(name, None)
    return lost


async def _profiles(session: KernelSession, files: Sequence[str | os.PathLike[str]], names: list[str]) -> str:
    """Load each uploaded table and return the compact profiles for the question's note."""
    from ..eda.profile import profile_file

    pairs = zip(files, names, strict=True)
    found = [await profile_file(session, Path(path), name=name) for path, name in pairs]
    texts = [p.text for p in found if p.ok]
    return "\n" + message("profiles") + "\n" + "\n\n".join(texts) if texts else ""


def describe_files(files: list[FileInfo], *, new: Sequence[str] = ()) -> str:
    """A one-line listing of the working directory for the model."""
    if not files:
        return message("no_files")
    shown = [f"{f.name} ({_size(f.size)}{', ' + message('new_file') if f.name in new else ''})"
             for f in files[:_MAX_LISTED_FILES]]
    more = len(files) - len(shown)
    return ", ".join(shown) + (f", ... and {more} more" if more > 0 else "")


def describe_variables(variables: list[VariableInfo]) -> str:
    """One entry per variable (DataFrames with their columns) for the model."""
    if not variables:
        return message("no_variables")
    lines = []
    for info in variables[:_MAX_CONTEXT_VARIABLES]:
        line = info.describe()
        if info.columns:
            cols = info.columns[:_MAX_LISTED_COLUMNS]
            line += " columns: " + ", ".join(cols) + (", ..." if len(info.columns) > len(cols) else "")
        lines.append(line)
    more = len(variables) - len(lines)
    return "; ".join(lines) + (f"; ... and {more} more" if more > 0 else "")


def _size(size: int) -> str:
    if size < 1000:
        return f"{size} B"
    if size < 1_000_000:
        return f"{size / 1000:.1f} kB"
    return f"{size / 1_000_000:.1f} MB"


def _question_markdown(question: str, files: list[str]) -> str:
    listed = f"\n\nFiles: {', '.join(f'`{name}`' for name in files)}" if files else ""
    return f"### Question\n\n{question}{listed}"


def _figures_message(figures: list[tuple[int, Observation]]) -> HumanMessage:
    content: list[str | dict[str, Any]] = []
    for step, observation in figures:
        content.append({"type": "text", "text": message("figures_message", step=step)})
        content.extend(observation.image_blocks())
    return HumanMessage(content=content)


def _without_images(messages: list[BaseMessage]) -> list[BaseMessage]:
    """The messages with image blocks replaced by a short note (figures are per answer)."""
    kept: list[BaseMessage] = []
    for msg in messages:
        if isinstance(msg.content, list) and any(_is_image(b) for b in msg.content):
            content = [{"type": "text", "text": message("earlier_figure")} if _is_image(b) else b
                       for b in msg.content]
            msg = msg.model_copy(update={"content": content})
        kept.append(msg)
    return kept


def _is_image(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") in ("image", "image_url")

