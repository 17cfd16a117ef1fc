"""Executions, agent steps and EDA progress as terminal text.

The rules are the web page's: a failed cell says so with the error's one-line summary
first, then the trimmed traceback (``/traceback`` in the console prints it whole); an
interrupted cell says it was interrupted; figures are named, not drawn.
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, Any, TextIO

from ..kernels import Execution
from ..kernels.execution import strip_ansi
from .events import AgentEventHandler
from .tracebacks import ErrorView

if TYPE_CHECKING:
    from ..agent.events import AgentNote, ModelDelta, ModelReplied, ModelText, StepCode, StepFinished
    from ..agent.results import Answer
    from ..eda import Progress


def output_text(output: dict[str, Any], figures: list[int]) -> str:
    """One nbformat output as text ("" for errors, which :func:`status_line` reports).
    ``figures`` counts the figures seen so far (one element, updated in place)."""
    kind = output.get("output_type")
    if kind == "stream":
        return strip_ansi(_join(output.get("text", "")))
    if kind not in ("execute_result", "display_data"):
        return ""
    data = output.get("data")
    if not isinstance(data, dict):
        return ""
    if "image/png" in data:
        figures[0] += 1
        return f"[figure {figures[0]}: {_png_size(data['image/png'])} PNG]\n"
    for mime in ("text/plain", "text/markdown"):
        if mime in data:
            return strip_ansi(_join(data[mime])).rstrip("\n") + "\n"
    return f"[{next(iter(data), 'empty')} output]\n"


def _join(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _png_size(value: Any) -> str:
    from ..agent.tools.observation import png_size

    try:
        size = png_size(base64.b64decode(_join(value)))
    except (binascii.Error, ValueError):
        size = None
    return f"{size[0]}x{size[1]}" if size else "a"


def status_line(ex: Execution) -> str:
    """One line: how the cell ended, with its prompt number and duration."""
    prompt = f"[{ex.execution_count}]" if ex.execution_count is not None else "[ ]"
    took = f"{ex.duration_s:.2f} s"
    if ex.status == "timeout":
        return f"{prompt} timed out after {took}" + ("; the kernel was restarted and variables lost"
                                                     if ex.state == "lost" else "")
    if ex.status == "died":
        why = f": {ex.ending.detail}" if ex.ending is not None else ""
        return (f"{prompt} the kernel died ({took}){why}; variables were lost and the next cell gets a "
                "fresh kernel")
    if ex.error is not None:
        view = ErrorView.from_error(ex.error)
        return f"{prompt} {'stopped' if view.interrupted else 'failed'}: {view.summary} ({took})"
    return f"{prompt} ok ({took})"


def error_block(ex: Execution, *, indent: str = "  ") -> str:
    """The trimmed traceback under the status line ("" when the cell did not raise)."""
    if ex.error is None or ex.status != "error":
        return ""
    view = ErrorView.from_error(ex.error)
    if view.interrupted or not view.trimmed_text:
        return ""
    folded = view.folded_note()
    header = f"Traceback ({folded}; /traceback shows it whole):" if folded else "Traceback:"
    return "\n".join(indent + line for line in [header, *view.trimmed_text.splitlines()])


def format_execution(ex: Execution, *, max_lines: int | None = None) -> str:
    """The whole cell as text: its output (at most ``max_lines`` lines), the status line,
    and the trimmed traceback if it failed."""
    figures = [0]
    text = "".join(output_text(out, figures) for out in ex.outputs)
    lines = text.rstrip("\n").splitlines()
    if max_lines is not None and len(lines) > max_lines:
        lines = [*lines[:max_lines], f"... ({len(lines) - max_lines} more lines)"]
    parts = ["\n".join(lines)] if lines else []
    parts.append(status_line(ex))
    block = error_block(ex)
    if block:
        parts.append(block)
    return "\n".join(parts)


class StepPrinter(AgentEventHandler):
    """Prints the agent's steps as they happen: the model's reply as it is written (its text,
    and a tool call's code as ``>>>`` lines), each step's short output, the notes."""

    def __init__(self, out: TextIO, *, max_lines: int = 12) -> None:
        self.out = out
        self.max_lines = max_lines
        self.streamed = False
        """The last reply was shown as it was written (its text and code need no second print)."""
        self.last_text = ""
        """The text of the last reply shown (the answer, when the model answered in it)."""
        self._call = 0
        self._kind = ""
        self._line_start = True

    def model_delta(self, event: ModelDelta) -> None:
        if event.call != self._call:  # a new reply begins
            self._call, self._kind, self.streamed, self.last_text = event.call, "", True, ""
            print(file=self.out)
        if event.kind != self._kind:
            if self._kind:
                print(file=self.out)
            self._kind, self._line_start = event.kind, True
        if event.kind == "text":
            self.last_text += event.text
            print(event.text, end="", file=self.out, flush=True)
            return
        for piece in event.text.splitlines(keepends=True):
            print((">>> " if self._line_start else "") + piece, end="", file=self.out)
            self._line_start = piece.endswith("\n")
        self.out.flush()

    def model_replied(self, event: ModelReplied) -> None:
        if self.streamed and event.call == self._call:
            print(file=self.out, flush=True)
        self.streamed = self.streamed and event.call == self._call

    def step_code(self, event: StepCode) -> None:
        print(f"\n--- step {event.step} ---", file=self.out)
        if self.streamed:  # shown as it was written
            return
        code = "\n".join(">>> " + line for line in event.code.rstrip().splitlines())
        print(code, file=self.out, flush=True)

    def step_finished(self, event: StepFinished) -> None:
        print(format_execution(event.execution, max_lines=self.max_lines), file=self.out, flush=True)

    def model_text(self, event: ModelText) -> None:
        if event.text.strip() and not self.streamed:
            print(f"\n{event.text.strip()}", file=self.out, flush=True)

    def agent_note(self, event: AgentNote) -> None:
        print(f"\n[{event.text.strip()}]", file=self.out, flush=True)


def answer_text(answer: Answer, *, shown: str = "") -> str:
    """The answer as the terminal shows it: its text (unless it is ``shown``, the reply just
    streamed), then the line that says where its numbers came from (``[numbers: 3 numbers: 2
    from cell 1; 1 unsupported: 891]``), and how the attempts agreed when the question was
    tried again (``[attempts: 2 of 3 attempts agree]``)."""
    text = answer.text.strip() or "(no answer)"
    if shown.strip() and text == shown.strip():
        text = "(the answer is above)"
    if answer.claims is not None and answer.claims.claims:
        text += f"\n[numbers: {answer.claims.summary()}]"
    if answer.agreement is not None:
        text += f"\n[attempts: {answer.agreement.summary()}]"
    return text


def progress_line(progress: Progress) -> str | None:
    """One line per finished EDA step ("[ 3/12] Missing values ok 0.05 s"); None at a start."""
    result = progress.result
    if result is None:
        return None
    status = "ok" if result.ok else f"FAILED ({result.error})"
    return f"[{progress.index:>2}/{progress.total}] {progress.title:<20} {status} {result.duration_s:6.2f} s"


__all__ = [
    "StepPrinter",
    "answer_text",
    "error_block",
    "format_execution",
    "output_text",
    "progress_line",
    "status_line",
]
