"""``kernel-analyst chat``: a console on one kernel session.

Without a model it is a code console: each input is a cell (continuation lines are read
the way Python's own prompt reads them, until the code is complete), its output prints
as it arrives, and a failed cell ends with its one-line summary and trimmed traceback.
With a model, each input is a question for the agent. Both understand the commands in
:data:`HELP`. Errors in a command (a file that is not there, a notebook that cannot be
written) print one line and the console goes on.
"""

from __future__ import annotations

import asyncio
import codeop
import contextlib
import sys
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..kernels import Execution, KernelSession
from ..kernels.conversation import enable_checkpoints
from .errors import classify
from .sessions import need_file
from .terminal import StepPrinter, answer_text, error_block, output_text, progress_line, status_line
from .tracebacks import ErrorView

if TYPE_CHECKING:
    from ..agent.analyst import Analyst

HELP = """commands: /files  list files            /vars  list variables
          /save [PATH]  write the notebook   /eda FILE  run the EDA playbook on a file
          /traceback  the last error whole   /reset  restart the kernel (variables are lost)
          /undo [N]  variables back to before the last cell (or cell N)
          /help  this text                   /quit  leave (or Ctrl-D)"""

ReadLine = Callable[[str], Awaitable[str | None]]
"""Reads one line after showing a prompt; None at the end of input."""


async def read_stdin(prompt: str) -> str | None:
    """A line from standard input (the prompt is shown only on a terminal)."""
    if sys.stdin.isatty():
        print(prompt, end="", flush=True)
    line = await asyncio.to_thread(sys.stdin.readline)
    return line if line else None


def code_is_complete(source: str) -> bool:
    """True when ``source`` is a whole cell, read as Python's own prompt reads it: a simple
    statement at once, a compound one at the blank line after it (the console stops there).
    Something only the kernel understands (magics, shell escapes) and a syntax error the
    kernel should report count as complete."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return codeop.compile_command(source.rstrip("\n"), "<cell>", "single") is not None
    except (SyntaxError, ValueError, OverflowError):
        return True


@dataclass
class Console:
    """One chat: a session, an optional analyst, where to print."""

    session: KernelSession
    """The kernel session every input runs in."""
    conversation_id: str
    """The session's conversation id (the analyst's key)."""
    out: TextIO
    """Where results go."""
    analyst: Analyst | None = None
    """The agent; None makes this a code console."""
    read: ReadLine = read_stdin
    """The input source."""
    last_error: ErrorView | None = field(default=None, init=False)
    """The last failed cell's error (for ``/traceback``)."""

    async def run(self) -> int:
        """Read and run inputs until ``/quit`` or the end of input; return the exit code."""
        mode = "questions go to the agent" if self.analyst else "each input runs as a cell"
        enable_checkpoints(self.session)  # for /undo, where the kernel can be checkpointed
        self._say(f"kernel ready: {mode}. {HELP}")
        # while the person types, a local model server caches the prompt every question starts with
        warming = asyncio.ensure_future(self.analyst.warm_up()) if self.analyst is not None else None
        try:
            while (text := await self._next_input()) is not None:
                if text.startswith("/") and "\n" not in text.strip():
                    if not await self._command(text.strip()):
                        break
                elif self.analyst is not None:
                    await self._ask(text.strip())
                else:
                    await self.run_cell(text)
        finally:
            if warming is not None and not warming.done():
                warming.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await warming
        return 0

    async def _next_input(self) -> str | None:
        prompt = "you> " if self.analyst else "In: "
        while True:
            first = await self.read(prompt)
            if first is None:
                return None
            if first.strip():
                break
        if self.analyst is not None or first.lstrip().startswith("/"):
            return first
        lines = [first]
        while not code_is_complete("".join(lines)):
            more = await self.read("...: ")
            if more is None or not more.strip():
                break
            lines.append(more)
        return "".join(lines)

    async def run_cell(self, code: str) -> Execution:
        """Run one cell, printing its output as it arrives and how it ended."""
        figures = [0]

        def show(output: dict[str, Any]) -> None:
            text = output_text(output, figures)
            if text:
                self.out.write(text)
                self.out.flush()

        ex = await self.session.execute(code, on_output=show)
        self._say(status_line(ex))
        block = error_block(ex)
        if block:
            self._say(block)
        if ex.error is not None:
            self.last_error = ErrorView.from_error(ex.error)
        return ex

    async def _ask(self, question: str) -> None:
        assert self.analyst is not None
        printer = StepPrinter(self.out)
        answer = await self.analyst.ask(self.conversation_id, question, on_event=printer.dispatch)
        self._say(f"\n{answer_text(answer, shown=printer.last_text)}")
        if answer.stop_reason != "answered":
            self._say(f"[stopped: {answer.stop_reason}{': ' + answer.error if answer.error else ''}]")

    async def _command(self, line: str) -> bool:
        """Run one /command; False to leave."""
        name, _, rest = line.partition(" ")
        if name in ("/quit", "/exit"):
            return False
        handler = self._commands().get(name)
        if handler is None:
            self._say(HELP)
            return True
        try:
            await handler(rest.strip())
        except Exception as exc:  # a failed command is reported, and the console goes on
            self._say(f"error: {classify(exc).message}")
        return True

    def _commands(self) -> dict[str, Callable[[str], Awaitable[None]]]:
        return {"/files": self._files, "/vars": self._vars, "/save": self._save, "/eda": self._eda,
                "/reset": self._reset, "/undo": self._undo, "/traceback": self._traceback,
                "/tb": self._traceback, "/help": self._help}

    async def _files(self, _: str) -> None:
        listing = await self.session.files()
        self._say("\n".join(f"  {f.name} ({f.size:,} bytes)" for f in listing) or "  (no files)")

    async def _vars(self, _: str) -> None:
        found = await self.session.variables()
        self._say("\n".join(f"  {v.describe()}" for v in found) or "  (no variables)")

    async def _save(self, rest: str) -> None:
        target = Path(rest or "chat.ipynb")
        self._say(f"  notebook: {await self.session.export(target)}")

    async def _eda(self, rest: str) -> None:
        from ..eda import run_playbook

        if not rest:
            self._say("  usage: /eda FILE")
            return
        path = need_file(Path(rest).expanduser())

        def progress(event: Any) -> None:
            line = progress_line(event)
            if line:
                self._say(line)

        report = await run_playbook(self.session, path, on_progress=progress)
        if report.ok:
            self._say(f"EDA of {report.file}: {len(report.steps)} cells ran without error.")
        else:
            self._say(f"EDA of {report.file} failed: {report.error or 'a step failed'}")

    async def _reset(self, _: str) -> None:
        await self.session.restart()
        if self.analyst is not None:
            self.analyst.forget(self.conversation_id)
        self._say("  kernel restarted: variables and chat history are gone (files stay).")

    async def _undo(self, rest: str) -> None:
        number = rest.strip("[] ")
        if number and not number.isdigit():
            self._say("  usage: /undo [N]  (N: a cell's number, as in [N])")
            return
        report = await self.session.undo(int(number) if number else None)
        self._say(f"  {report.describe()}")

    async def _traceback(self, _: str) -> None:
        self._say(self.last_error.full if self.last_error else "  (no error yet)")

    async def _help(self, _: str) -> None:
        self._say(HELP)

    def _say(self, text: str) -> None:
        print(text, file=self.out, flush=True)


__all__ = ["HELP", "Console", "ReadLine", "code_is_complete", "read_stdin"]
