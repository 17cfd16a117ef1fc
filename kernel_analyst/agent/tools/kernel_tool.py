"""The kernel as a LangChain tool: one persistent kernel per conversation of any agent.

:class:`KernelTool` runs code in the kernel of the conversation named by the run's
``config["configurable"]["thread_id"]`` (LangGraph sets it for every thread), or in one
default session when there is none. It answers in LangChain's ``content_and_artifact``
form: the content is the observation the model reads (text, plus image blocks when
``send_images=True``); the artifact is ``Execution.to_dict()`` for the application. While
the cell runs, each output goes to the run's callbacks as a custom event
(:data:`OUTPUT_EVENT`), so ``astream_events`` of an agent that calls the tool shows it live.
Errors in the code are content, so the model can fix them; infrastructure failures
(a kernel that cannot start) raise.

The tool is natively async. Its sync ``invoke`` runs the same coroutine on the event
loop that owns the kernels: submitted thread-safely when that loop runs in another
thread, or run to completion when it is idle. From inside that loop, use ``ainvoke``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.callbacks.manager import adispatch_custom_event
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import ArgsSchema, BaseTool
from pydantic import BaseModel, Field, PrivateAttr

from ...kernels import SessionManager
from ..exceptions import KernelToolError
from ..prompting import tool_description
from .observation import DEFAULT_BUDGET, ObservationSettings, observe_step, store_saved_output

TOOL_NAME = "python"
"""The name the model calls the tool by."""
OUTPUT_EVENT = "kernel_output"
"""The custom callback event each output of a running cell is sent as (its data: the
nbformat output), so an outer agent's ``astream_events`` shows the cell as it runs."""

ToolResult = tuple[str | list[str | dict[str, Any]], dict[str, Any]]
T = TypeVar("T")


class KernelToolInput(BaseModel):
    """Arguments of the Python tool."""

    code: str = Field(description="Python code to run in the persistent kernel.")


class KernelTool(BaseTool):
    """Run Python in a persistent, per-conversation Jupyter kernel.

    ``KernelTool(manager)`` with a started :class:`SessionManager`. Options (keywords):
    ``default_session`` (the session used without a thread id), ``timeout`` (seconds per
    call; the manager's limit by default), ``observation_budget`` (characters the model
    sees per call), ``send_images`` (attach figures as image blocks).
    """

    name: str = TOOL_NAME
    description: str = Field(default_factory=tool_description)
    args_schema: ArgsSchema | None = KernelToolInput
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"
    manager: SessionManager = Field(exclude=True)
    """The manager whose sessions run the code."""
    default_session: str = "default"
    """Conversation id used when the run has no ``thread_id``."""
    timeout: float | None = None
    """Seconds per call; ``None`` uses the manager's ``Limits.timeout_s``."""
    observation_budget: int = DEFAULT_BUDGET
    """Characters of output the model is shown per call."""
    send_images: bool = False
    """Attach figures to the content as image blocks (for models that take images)."""

    _loop: asyncio.AbstractEventLoop | None = PrivateAttr(default=None)
    _sync_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def __init__(self, manager: SessionManager, **kwargs: Any) -> None:
        super().__init__(manager=manager, **kwargs)
        with contextlib.suppress(RuntimeError):
            self._loop = asyncio.get_running_loop()

    # -- LangChain entry points ----------------------------------------------------------

    async def _arun(self, code: str, config: RunnableConfig,
                    run_manager: AsyncCallbackManagerForToolRun | None = None) -> ToolResult:
        self._loop = asyncio.get_running_loop()
        on_output = None
        if run_manager is not None:  # each output to the run's callbacks as it arrives
            child = RunnableConfig(callbacks=run_manager.get_child())

            async def on_output(output: dict[str, Any]) -> None:
                await adispatch_custom_event(OUTPUT_EVENT, output, config=child)

        return await self.run_code(code, session_id=self.session_id(config), on_output=on_output)

    def _run(self, code: str, config: RunnableConfig,
             run_manager: CallbackManagerForToolRun | None = None) -> ToolResult:
        session_id = self.session_id(config)
        return self._on_kernel_loop(lambda: self.run_code(code, session_id=session_id))

    # -- the work ------------------------------------------------------------------------

    def session_id(self, config: RunnableConfig | None) -> str:
        """The conversation id for a run: its ``thread_id``, else ``default_session``."""
        thread_id = ((config or {}).get("configurable") or {}).get("thread_id")
        return str(thread_id) if thread_id not in (None, "") else self.default_session

    async def run_code(self, code: str, *, session_id: str,
                       on_output: Callable[[dict[str, Any]], Any] | None = None) -> ToolResult:
        """Run ``code`` in the session ``session_id``; return (content, artifact). ``on_output``
        receives each nbformat output as the kernel produces it (sync or async)."""
        session = await self.manager.session(session_id)
        ex = await session.execute(code, timeout=self.timeout, on_output=on_output)
        name = f"outputs/cell-{ex.execution_count or 0}-{uuid.uuid4().hex[:6]}.txt"
        settings = ObservationSettings(budget=self.observation_budget, send_images=self.send_images)
        obs = await observe_step(session, ex, settings=settings, save_as=name)
        return obs.content(), ex.to_dict()

    # -- sync bridge ---------------------------------------------------------------------

    def _kernel_loop(self) -> asyncio.AbstractEventLoop | None:
        # A manager that knows its loop is authoritative; otherwise the loop this tool was
        # created in or last awaited in.
        loop = getattr(self.manager, "loop", None)
        return loop if isinstance(loop, asyncio.AbstractEventLoop) else self._loop

    def _on_kernel_loop(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run the coroutine ``make()`` on the loop that owns the kernels, from sync code."""
        loop = self._kernel_loop()
        if loop is None or loop.is_closed():
            raise KernelToolError(
                "KernelTool does not know the event loop its kernels run on: create the tool "
                "inside that loop (after `async with SessionManager(...)`) or call `ainvoke`.")
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            raise KernelToolError("KernelTool.invoke was called inside the event loop that runs "
                                  "its kernels, which would block it; use `await tool.ainvoke(...)`.")
        with self._sync_lock:
            if loop.is_running():
                return asyncio.run_coroutine_threadsafe(make(), loop).result()
            if running is not None:
                raise KernelToolError("KernelTool.invoke was called inside another running event "
                                      "loop while the kernels' loop is idle; use `ainvoke` there.")
            return loop.run_until_complete(make())


__all__ = ["OUTPUT_EVENT", "TOOL_NAME", "KernelTool", "KernelToolInput", "store_saved_output"]
