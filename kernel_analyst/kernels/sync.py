"""A synchronous facade for scripts and notebooks: thin wrappers over the async core.

The async objects live on a private event loop in a background thread (the kernel's
sockets belong to that loop), and every method submits its coroutine there. This works
from plain scripts and from inside Jupyter, where a loop is already running::

    with SyncSessionManager("runs") as manager:
        session = manager.session("c1")
        print(session.execute("1 + 1").text)
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, Literal, TypeVar

from .conversation import KernelSession, OutputCallback, SessionManager
from .execution import Execution, VariableInfo
from .files import FileInfo

T = TypeVar("T")


class _LoopThread:
    """An event loop running in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="kernel-analyst-loop",
                                        daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self._thread:
            raise RuntimeError("sync facade called from its own event loop; use the async API")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


class SyncKernelSession:
    """Blocking wrapper of a :class:`KernelSession` (same methods, no ``await``)."""

    def __init__(self, session: KernelSession, runner: _LoopThread) -> None:
        self.session = session
        self._run = runner.run

    @property
    def id(self) -> str:
        """The conversation id."""
        return self.session.id

    @property
    def notebook_path(self) -> Path:
        """The live audit notebook on disk."""
        return self.session.notebook_path

    @property
    def workdir(self) -> Path:
        """The session's working directory."""
        return self.session.workdir

    def execute(self, code: str, *, timeout: float | None = None,
                on_output: OutputCallback | None = None) -> Execution:
        """See :meth:`KernelSession.execute`."""
        return self._run(self.session.execute(code, timeout=timeout, on_output=on_output))

    def upload(self, source: str | Path | bytes, *, name: str | None = None) -> FileInfo:
        """See :meth:`KernelSession.upload`."""
        return self._run(self.session.upload(source, name=name))

    def download(self, name: str) -> bytes:
        """See :meth:`KernelSession.download`."""
        return self._run(self.session.download(name))

    def files(self) -> list[FileInfo]:
        """See :meth:`KernelSession.files`."""
        return self._run(self.session.files())

    def variables(self) -> list[VariableInfo]:
        """See :meth:`KernelSession.variables`."""
        return self._run(self.session.variables())

    def fetch(self, name: str, *, format: Literal["records", "csv"] = "records",
              max_bytes: int = 10_000_000) -> Any:
        """See :meth:`KernelSession.fetch`."""
        return self._run(self.session.fetch(name, format=format, max_bytes=max_bytes))

    def interrupt(self) -> None:
        """See :meth:`KernelSession.interrupt`."""
        self._run(self.session.interrupt())

    def restart(self) -> None:
        """See :meth:`KernelSession.restart`."""
        self._run(self.session.restart())

    def add_markdown(self, text: str, **meta: Any) -> None:
        """See :meth:`KernelSession.add_markdown`."""
        self._run(self.session.add_markdown(text, **meta))

    def export(self, path: str | Path) -> Path:
        """See :meth:`KernelSession.export`."""
        return self._run(self.session.export(path))


class SyncSessionManager:
    """Blocking wrapper of :class:`SessionManager`; use as a (plain) context manager."""

    def __init__(self, root_dir: str | os.PathLike[str], **kwargs: Any) -> None:
        self._runner = _LoopThread()
        self._kwargs = kwargs
        self._root_dir = root_dir
        self.manager: SessionManager | None = None

    def __enter__(self) -> SyncSessionManager:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close_all_and_stop()

    def start(self) -> SyncSessionManager:
        """Start the manager (pool, culler) on the background loop."""

        async def make() -> SessionManager:
            return await SessionManager(self._root_dir, **self._kwargs).start()

        self.manager = self._runner.run(make())
        return self

    def _manager(self) -> SessionManager:
        if self.manager is None:
            raise RuntimeError("call start() or use `with SyncSessionManager(...)` first")
        return self.manager

    def session(self, conversation_id: str) -> SyncKernelSession:
        """See :meth:`SessionManager.session`."""
        return SyncKernelSession(self._runner.run(self._manager().session(conversation_id)),
                                 self._runner)

    def list(self) -> list[str]:
        """See :meth:`SessionManager.list`."""
        return self._manager().list()

    def close(self, conversation_id: str) -> bool:
        """See :meth:`SessionManager.close`."""
        return self._runner.run(self._manager().close(conversation_id))

    def close_all_and_stop(self) -> None:
        """Close every session and stop the background loop."""
        if self.manager is not None:
            self._runner.run(self.manager.aclose())
            self.manager = None
        self._runner.stop()
