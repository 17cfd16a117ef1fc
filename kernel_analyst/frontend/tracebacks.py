"""A failed cell as people read it: the one-line summary first, then the trimmed
traceback, with the full text kept one step away.

Trimming is the agent's (:func:`kernel_analyst.agent.tools.observation.trim_traceback`): of a
chain only the last exception, the user's frames and the frame that raised, library
frames folded, no host path outside the session. The web page and the terminal both
show an :class:`ErrorView`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..kernels.execution import ExecutionError, strip_ansi

_INTERRUPT = "KeyboardInterrupt"


@dataclass(frozen=True)
class ErrorView:
    """One error, ready to show."""

    ename: str
    """The exception's class name."""
    evalue: str
    """Its message."""
    trimmed: list[str]
    """The traceback's frames worth showing (user frames, the raising frame)."""
    omitted: int
    """Library frames folded out of :attr:`trimmed`."""
    full: str
    """The whole traceback as text (colour codes removed)."""

    @property
    def interrupted(self) -> bool:
        """True when the cell was stopped by an interrupt (Stop, Ctrl-C, a timeout)."""
        return self.ename == _INTERRUPT

    @property
    def summary(self) -> str:
        """One line: ``ename: evalue`` (or that the cell was interrupted)."""
        if self.interrupted:
            return "interrupted (KeyboardInterrupt)"
        first = " ".join(self.evalue.split())
        return f"{self.ename}: {first}" if first else self.ename

    @property
    def trimmed_text(self) -> str:
        """The trimmed frames as text, without the final ``ename: evalue`` line (the
        summary says it, first)."""
        frames = list(self.trimmed)
        if frames and frames[-1].startswith(f"{self.ename}:"):
            frames.pop()
        return "\n".join(frames)

    @classmethod
    def from_error(cls, error: ExecutionError, *, workdir: str | None = None) -> ErrorView:
        """The view of an :class:`~kernel_analyst.kernels.ExecutionError`."""
        return cls.build(error.ename, error.evalue, list(error.traceback), workdir=workdir)

    @classmethod
    def from_output(cls, output: dict[str, Any], *, workdir: str | None = None) -> ErrorView:
        """The view of an nbformat ``error`` output."""
        lines = output.get("traceback")
        traceback = [str(x) for x in lines] if isinstance(lines, list) else []
        return cls.build(str(output.get("ename", "Error")), str(output.get("evalue", "")), traceback,
                         workdir=workdir)

    @classmethod
    def build(cls, ename: str, evalue: str, traceback: list[str], *, workdir: str | None = None) -> ErrorView:
        """The view of an error given by its parts."""
        from ..agent.tools.observation import trim_traceback

        frames, omitted = trim_traceback(traceback, workdir=workdir) if traceback else ([], 0)
        full = "\n".join(strip_ansi(line).rstrip("\n") for line in traceback) or f"{ename}: {evalue}"
        return cls(ename=ename, evalue=evalue, trimmed=frames, omitted=omitted, full=full)

    def folded_note(self) -> str:
        """What was left out, e.g. ``3 library frames folded``; "" when nothing was."""
        if not self.omitted:
            return ""
        return f"{self.omitted} library frame{'s' if self.omitted != 1 else ''} folded"


__all__ = ["ErrorView"]
