"""Background runs for the agent: start, check, wait and cancel, written as a comment.

A step whose code starts with ``# kernel-analyst: background`` runs as a background run
(``session.submit``, ``kernels/runs.py``): the step answers after a few seconds with the
output so far, and the cell goes on, past the step time limit, until it ends (it lands in
the notebook then). While it runs the kernel is busy; a step whose code is only
``# kernel-analyst: wait 120`` waits up to that many seconds and shows the new output (or
the result, once it ended), ``# kernel-analyst: check`` shows it without waiting and
``# kernel-analyst: cancel`` stops it. Other code sent meanwhile is not run: the model is
told the kernel is busy, at once, instead of its step waiting in the queue until it times out.

Why a comment line, and not helper functions in the kernel or a second tool: the same
text works under both action protocols (:mod:`.protocols`) without touching them, since a
native tool call's ``code`` argument and a ```` ```python ```` block carry it alike; small
models that write code as text need no second tool name, schema or JSON shape to get
right; the form is the one the prompt already uses (``# kernel-analyst: no-replay``); and
helper functions would run inside the kernel, which is exactly what is busy while a run
goes on, so waiting for a run can only happen outside it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ...kernels import Execution, KernelSession, Run
from ..prompting import message

DirectiveKind = Literal["background", "wait", "check", "cancel"]
_DIRECTIVE = re.compile(r"^#\s*kernel-analyst:\s*(background|wait|check|cancel)\b[ \t]*(\d+(?:\.\d+)?)?\s*$")

START_WAIT_S = 3.0
"""How long starting a run waits before answering (a typo fails at once, short work ends)."""
DEFAULT_WAIT_S = 60.0
"""How long ``# kernel-analyst: wait`` waits without a number."""
MAX_WAIT_S = 600.0
"""The longest one ``wait`` step waits."""


@dataclass(frozen=True)
class Directive:
    """A background directive found at the top of a step's code."""

    kind: DirectiveKind
    """``background`` (run this code in the background), ``wait``, ``check`` or ``cancel``."""
    seconds: float | None = None
    """The number after ``wait``, if any."""


def find_directive(code: str) -> Directive | None:
    """The directive among the code's leading comment lines, if there is one."""
    for line in code.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            return None
        found = _DIRECTIVE.match(stripped)
        if found is not None:
            kind: DirectiveKind = found.group(1)  # type: ignore[assignment]
            return Directive(kind, float(found.group(2)) if found.group(2) else None)
    return None


@dataclass(frozen=True)
class StepResult:
    """What one step produced: the execution to observe, and a note said before it."""

    execution: Execution
    """The cell's result, or a view of a run (its new output) while it goes on."""
    note: str = ""
    """What the model is told first (a run started, still running, ended; a busy kernel)."""
    observe: bool = True
    """False when there is nothing to observe beyond the note (code not run)."""


OutputCallback = Callable[[dict[str, Any]], None]


class BackgroundSteps:
    """Runs each step of the agent: plain code through ``session.execute``, directives
    (and code sent while a run goes on) as described in the module docstring."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}  # run id -> outputs the model has been shown
        self._reported: set[str] = set()  # runs whose end the model has been shown

    async def run_step(self, session: KernelSession, code: str, *, timeout: float | None,
                       on_output: OutputCallback, annotations: dict[str, Any]) -> StepResult:
        """Run one step's ``code`` in ``session``."""
        directive = find_directive(code)
        active = session.runs.active
        if directive is None and active is None:
            ex = await session.execute(code, timeout=timeout, on_output=on_output, annotations=annotations)
            return StepResult(ex)
        if directive is None or directive.kind == "background":
            if active is not None:
                return self._busy(code, active)
            run = await session.submit(code, annotations=annotations)
            self._seen[run.id] = 0
            await run.wait(START_WAIT_S)
            return self._view(code, run, on_output, started=True)
        target = active or self._unreported(session)
        if target is None:
            return StepResult(Execution(code=code), message("background_none", action=directive.kind), False)
        run = target
        if directive.kind == "cancel":
            await run.cancel()
        elif directive.kind == "wait":
            seconds = min(directive.seconds if directive.seconds is not None else DEFAULT_WAIT_S, MAX_WAIT_S)
            await run.wait(seconds)
        return self._view(code, run, on_output, started=False)

    def pending(self, session: KernelSession) -> bool:
        """True while a run goes on, or one ended whose end the model was not shown: a
        wait, check or cancel has something to act on."""
        return session.runs.active is not None or self._unreported(session) is not None

    def _unreported(self, session: KernelSession) -> Run | None:
        ended = [r for r in session.runs.all()
                 if r.done and r.id in self._seen and r.id not in self._reported]
        return ended[-1] if ended else None

    def _busy(self, code: str, run: Run) -> StepResult:
        seconds = f"{run.status().duration_s:.0f}"
        note = message("background_busy", run=run.id, seconds=seconds)
        return StepResult(Execution(code=code), note, observe=False)

    def _view(self, code: str, run: Run, on_output: OutputCallback, *, started: bool) -> StepResult:
        """The run as the model sees it now: the output it has not seen, and where it is."""
        status = run.status()
        seen = self._seen.get(run.id, 0)
        new = run.outputs(seen)
        self._seen[run.id] = seen + len(new)
        for output in new:
            on_output(output)
        seconds = f"{status.duration_s:.0f}"
        if status.done and status.execution is not None:
            self._reported.add(run.id)
            ex = dataclasses.replace(status.execution, outputs=new)
            note = message("background_ended", run=run.id, state=status.state, seconds=seconds)
            return StepResult(ex, note)
        if status.done:  # cancelled before it began, or failed
            self._reported.add(run.id)
            why = status.error or "it was cancelled before it began"
            return StepResult(Execution(code=code), message("background_not_run", run=run.id, why=why), False)
        key = "background_started" if started else "background_running"
        view = Execution(code=code, outputs=new, started_at=status.started_at or status.submitted_at,
                         duration_s=status.duration_s, events=[f"background run {run.id} {status.state}"])
        return StepResult(view, message(key, run=run.id, seconds=seconds))


def context_note(session: KernelSession) -> str:
    """A line for the question's note when a background run is still going on ("" if not)."""
    run = session.runs.active
    if run is None:
        return ""
    return message("background_context", run=run.id, seconds=f"{run.status().duration_s:.0f}")


__all__ = ["DEFAULT_WAIT_S", "MAX_WAIT_S", "START_WAIT_S", "BackgroundSteps", "Directive", "StepResult",
           "context_note", "find_directive"]
