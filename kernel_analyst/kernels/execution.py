"""Execution results and the conversion of IOPub messages into nbformat v4 outputs.

An :class:`Execution` is what one call to ``KernelSession.execute`` returns. Its
``outputs`` are nbformat v4 output dicts from the start, so the audit trail needs no
conversion. :class:`OutputCollector` turns the kernel's IOPub messages for one cell
into those outputs, applying ``clear_output`` and ``update_display_data`` the way
nbclient does, merging consecutive stream chunks and capping what is stored.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from .endings import KernelEnding
from .recovery import RecoveryReport

Status = Literal["ok", "error", "timeout", "died"]
State = Literal["kept", "lost"]

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")

OUTPUT_TYPES = ("stream", "display_data", "execute_result", "error")


def strip_ansi(text: str) -> str:
    """Remove ANSI escape sequences (colours, cursor moves) from ``text``."""
    return _ANSI_RE.sub("", text)


@dataclass(frozen=True)
class ExecutionError:
    """The exception a cell raised, as the kernel reported it."""

    ename: str
    """Exception class name, e.g. ``"KeyError"``."""
    evalue: str
    """The exception's message."""
    traceback: list[str]
    """Traceback lines with ANSI colour codes removed."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExecutionError:
        """Rebuild from :meth:`to_dict` output."""
        return cls(str(data["ename"]), str(data["evalue"]), [str(x) for x in data["traceback"]])

    def __str__(self) -> str:
        return f"{self.ename}: {self.evalue}"


@dataclass(frozen=True)
class VariableInfo:
    """A summary of one variable in the kernel's namespace (never its full value)."""

    name: str
    """The variable's name."""
    type: str
    """Its type, qualified by module for non-builtins (``pandas.DataFrame``)."""
    shape: list[int] | None = None
    """Shape of arrays / DataFrames / Series, ``[len]`` for sized containers."""
    columns: list[str] | None = None
    """DataFrame column names (capped)."""
    dtypes: dict[str, str] | None = None
    """DataFrame column dtypes, or the dtype of an array/Series under key ``""``."""
    summary: str = ""
    """A short repr for scalars and strings (capped)."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict without empty fields."""
        return {k: v for k, v in asdict(self).items() if v not in (None, "")}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VariableInfo:
        """Rebuild from :meth:`to_dict` output."""
        return cls(
            name=str(data["name"]),
            type=str(data.get("type", "")),
            shape=data.get("shape"),
            columns=data.get("columns"),
            dtypes=data.get("dtypes"),
            summary=str(data.get("summary", "")),
        )

    def describe(self) -> str:
        """One human-readable line: ``df: pandas.DataFrame (891, 12)``."""
        extra = f" {tuple(self.shape)}" if self.shape is not None else ""
        if not extra and self.summary:
            extra = f" = {self.summary}"
        return f"{self.name}: {self.type}{extra}"


@dataclass(frozen=True)
class ColumnValues:
    """What a kernel holds in one column of a DataFrame (:meth:`KernelSession.column_values`)."""

    values: tuple[Any, ...]
    """Its most common values, most common first (capped)."""
    distinct: int
    """How many distinct values it holds (missing values not counted)."""
    dtype: str
    """Its dtype."""
    matched: bool
    """True when a value asked about equals at least one of its values (as ``==`` compares)."""

    @classmethod
    def from_dict(cls, data: Any) -> ColumnValues | None:
        """From the kernel's answer; None when it is missing or an error."""
        if not isinstance(data, dict) or "error" in data:
            return None
        return cls(tuple(data.get("values", [])), int(data.get("distinct", 0)), str(data.get("dtype", "")),
                   bool(data.get("matched")))


@dataclass(frozen=True)
class VariableChanges:
    """What one execution did to the namespace."""

    created: list[VariableInfo] = field(default_factory=list)
    """Names that did not exist before the step."""
    changed: list[VariableInfo] = field(default_factory=list)
    """Names rebound, or visibly mutated (type, shape, length or id changed)."""
    deleted: list[str] = field(default_factory=list)
    """Names that existed before the step and are gone."""
    truncated: bool = False
    """True when the lists were capped (too many variables to report)."""

    def __bool__(self) -> bool:
        return bool(self.created or self.changed or self.deleted)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return {
            "created": [v.to_dict() for v in self.created],
            "changed": [v.to_dict() for v in self.changed],
            "deleted": list(self.deleted),
            "truncated": self.truncated,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> VariableChanges:
        """Rebuild from :meth:`to_dict` output (``None`` gives no changes)."""
        if not data:
            return cls()
        return cls(
            created=[VariableInfo.from_dict(v) for v in data.get("created", [])],
            changed=[VariableInfo.from_dict(v) for v in data.get("changed", [])],
            deleted=[str(v) for v in data.get("deleted", [])],
            truncated=bool(data.get("truncated", False)),
        )

    def describe(self) -> str:
        """One line such as ``created df (891, 12); changed x; deleted tmp``."""
        parts = []
        if self.created:
            parts.append("created " + ", ".join(v.describe() for v in self.created))
        if self.changed:
            parts.append("changed " + ", ".join(v.describe() for v in self.changed))
        if self.deleted:
            parts.append("deleted " + ", ".join(self.deleted))
        return "; ".join(parts)


@dataclass
class Execution:
    """The result of running one cell: what happened, what it printed, what it changed."""

    code: str
    """The source that was run."""
    status: Status = "ok"
    """``ok``; ``error`` (the code raised); ``timeout`` (stopped at the deadline);
    ``died`` (the kernel process ended during the cell or before it)."""
    state: State = "kept"
    """``kept`` when the namespace survived this step; ``lost`` when the kernel was
    restarted or died, so every variable is gone."""
    outputs: list[dict[str, Any]] = field(default_factory=list)
    """nbformat v4 output dicts in display order."""
    execution_count: int | None = None
    """The kernel's prompt number for this cell."""
    started_at: str = ""
    """ISO-8601 UTC time the request was sent."""
    duration_s: float = 0.0
    """Wall-clock seconds from request to completion."""
    error: ExecutionError | None = None
    """The exception the code raised (``status == "error"``), else ``None``."""
    variables: VariableChanges = field(default_factory=VariableChanges)
    """What the step created, changed or deleted."""
    truncated_bytes: int = 0
    """Output bytes dropped because of the per-execution output cap."""
    events: list[str] = field(default_factory=list)
    """Infrastructure events during this step, in order (``interrupted``,
    ``restarted``, ``kernel died`` ...), also shown as markers in the audit trail."""
    recovery: RecoveryReport | None = None
    """When the namespace had been lost and was brought back before this step (replay or
    snapshot): what was restored, how, and what was not."""
    annotations: dict[str, Any] = field(default_factory=dict)
    """What the caller said about this cell (JSON-able), kept in the notebook cell's
    metadata beside the outcome: e.g. the agent records how the model sent the code."""
    ending: KernelEnding | None = None
    """Why the kernel ended during this step (``status == "died"``), or just before it
    (it died while idle): the cause as data and one line to read
    (:mod:`~kernel_analyst.kernels.endings`). None when no kernel ended."""
    peak_memory_bytes: int | None = None
    """The most resident memory the kernel's processes held during the cell (the
    kernel's own peak, and the host's samples of its whole process tree); None if unknown."""
    cpu_time_s: float | None = None
    """CPU seconds the kernel (and the child processes it waited for) used in the cell;
    None if unknown (the kernel died before it could say)."""
    cell_id: str = ""
    """The audit notebook cell's id once the cell is recorded: the anchor (``#cell-id=<id>``)
    an answer's citations link to; "" before it is recorded."""

    @property
    def text(self) -> str:
        """Plain-text view: streams, ``text/plain`` of results and displays, the error."""
        parts: list[str] = []
        for out in self.outputs:
            kind = out.get("output_type")
            if kind == "stream":
                parts.append(str(out.get("text", "")))
            elif kind in ("execute_result", "display_data"):
                plain = out.get("data", {}).get("text/plain")
                if plain is not None:
                    parts.append(_join(plain) + "\n")
            elif kind == "error":
                tb = [strip_ansi(line) for line in out.get("traceback", [])]
                parts.append("\n".join(tb) + "\n" if tb else f"{out.get('ename')}: {out.get('evalue')}\n")
        return "".join(parts)

    @property
    def images(self) -> list[bytes]:
        """PNG bytes of every image output, in order."""
        found: list[bytes] = []
        for out in self.outputs:
            png = out.get("data", {}).get("image/png") if "data" in out else None
            if png:
                found.append(base64.b64decode(_join(png)))
        return found

    @property
    def ok(self) -> bool:
        """True when the cell ran to completion without raising."""
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict (the inverse of :meth:`from_dict`)."""
        return {
            "code": self.code,
            "status": self.status,
            "state": self.state,
            "outputs": self.outputs,
            "execution_count": self.execution_count,
            "started_at": self.started_at,
            "duration_s": self.duration_s,
            "error": self.error.to_dict() if self.error else None,
            "variables": self.variables.to_dict(),
            "truncated_bytes": self.truncated_bytes,
            "events": list(self.events),
            "recovery": self.recovery.to_dict() if self.recovery is not None else None,
            "annotations": dict(self.annotations),
            "ending": self.ending.to_dict() if self.ending is not None else None,
            "peak_memory_bytes": self.peak_memory_bytes,
            "cpu_time_s": self.cpu_time_s,
            "cell_id": self.cell_id,
            "text": self.text,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Execution:
        """Rebuild an :class:`Execution` from :meth:`to_dict` output."""
        err = data.get("error")
        recovery = data.get("recovery")
        return cls(
            code=str(data.get("code", "")),
            status=data.get("status", "ok"),
            state=data.get("state", "kept"),
            outputs=list(data.get("outputs", [])),
            execution_count=data.get("execution_count"),
            started_at=str(data.get("started_at", "")),
            duration_s=float(data.get("duration_s", 0.0)),
            error=ExecutionError.from_dict(err) if err else None,
            variables=VariableChanges.from_dict(data.get("variables")),
            truncated_bytes=int(data.get("truncated_bytes", 0)),
            events=list(data.get("events", [])),
            recovery=RecoveryReport.from_dict(recovery) if recovery else None,
            annotations=dict(data.get("annotations") or {}),
            ending=KernelEnding.from_dict(data["ending"]) if data.get("ending") else None,
            peak_memory_bytes=data.get("peak_memory_bytes"),
            cpu_time_s=data.get("cpu_time_s"),
            cell_id=str(data.get("cell_id") or ""),
        )


def _join(value: Any) -> str:
    """nbformat allows multiline strings as lists of lines."""
    return "".join(value) if isinstance(value, list) else str(value)


def _data_size(data: dict[str, Any]) -> int:
    return sum(len(_join(v)) if isinstance(v, (str, list)) else 64 for v in data.values())


def output_from_msg(msg_type: str, content: dict[str, Any]) -> dict[str, Any]:
    """Build an nbformat v4 output dict from an IOPub message (plain dicts, no validation)."""
    if msg_type == "stream":
        return {"output_type": "stream", "name": content["name"], "text": content["text"]}
    if msg_type in ("display_data", "update_display_data"):
        return {"output_type": "display_data", "data": dict(content.get("data", {})),
                "metadata": dict(content.get("metadata", {}))}
    if msg_type == "execute_result":
        return {"output_type": "execute_result", "data": dict(content.get("data", {})),
                "metadata": dict(content.get("metadata", {})),
                "execution_count": content.get("execution_count")}
    if msg_type == "error":
        return {"output_type": "error", "ename": content.get("ename", ""),
                "evalue": content.get("evalue", ""), "traceback": list(content.get("traceback", []))}
    raise ValueError(f"not an output message: {msg_type!r}")


DisplayUpdate = Callable[[str, dict[str, Any]], None]
"""Called with (display_id, new display_data output) for updates this cell cannot apply."""


class OutputCollector:
    """Applies one cell's IOPub messages to a list of nbformat outputs.

    Semantics follow nbclient: ``clear_output(wait=True)`` clears before the next
    output; ``update_display_data`` replaces data and metadata of every output that
    carries the display id (in this cell here; earlier cells through ``on_foreign_update``).
    Consecutive chunks of the same stream are merged. Text beyond ``max_text_bytes`` and
    rich data beyond ``max_rich_bytes`` is dropped and counted in ``dropped_bytes``.
    """

    def __init__(
        self,
        *,
        max_text_bytes: int = 1_000_000,
        max_rich_bytes: int = 20_000_000,
        on_foreign_update: DisplayUpdate | None = None,
        on_output: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.outputs: list[dict[str, Any]] = []
        self.execution_count: int | None = None
        self.dropped_bytes = 0
        self.received_text = 0
        """Stream characters received (before the host cap), to check nothing was lost."""
        self.error: ExecutionError | None = None
        self.display_ids: dict[str, list[int]] = {}
        self._clear_pending = False
        self._text_left = max_text_bytes
        self._rich_left = max_rich_bytes
        self._on_foreign_update = on_foreign_update
        self._on_output = on_output

    def handle(self, msg_type: str, content: dict[str, Any]) -> None:
        """Apply one IOPub message (``status`` and ``execute_input`` are ignored here)."""
        transient = content.get("transient")
        display_id = transient.get("display_id") if transient else None
        if display_id and msg_type in ("execute_result", "display_data", "update_display_data"):
            self._update_display(display_id, content)
        if msg_type == "execute_input":
            self.execution_count = content.get("execution_count", self.execution_count)
        elif msg_type == "clear_output":
            self._clear(bool(content.get("wait")))
        elif msg_type in ("stream", "display_data", "execute_result", "error"):
            self._add(msg_type, content, display_id)

    def _clear(self, wait: bool) -> None:
        if wait:
            self._clear_pending = True
        else:
            self._clear_now()

    def _clear_now(self) -> None:
        self.outputs.clear()
        self.display_ids.clear()
        self._clear_pending = False

    def _add(self, msg_type: str, content: dict[str, Any], display_id: str | None) -> None:
        if msg_type == "execute_result":
            self.execution_count = content.get("execution_count", self.execution_count)
        if msg_type == "error":
            self.error = ExecutionError(
                str(content.get("ename", "")),
                str(content.get("evalue", "")),
                [strip_ansi(t) for t in content.get("traceback", [])],
            )
        if self._clear_pending:
            self._clear_now()
        if msg_type == "stream":
            self._add_stream(content)
            return
        out = output_from_msg(msg_type, content)
        if "data" in out:
            size = _data_size(out["data"])
            if size > self._rich_left:
                self.dropped_bytes += size
                return
            self._rich_left -= size
        if display_id:
            self.display_ids.setdefault(display_id, []).append(len(self.outputs))
        self._append(out)

    def _add_stream(self, content: dict[str, Any]) -> None:
        text = str(content.get("text", ""))
        self.received_text += len(text)
        if len(text) > self._text_left:
            self.dropped_bytes += len(text) - self._text_left
            text = text[: self._text_left]
        if not text:
            return
        self._text_left -= len(text)
        last = self.outputs[-1] if self.outputs else None
        if last and last["output_type"] == "stream" and last["name"] == content["name"]:
            last["text"] += text
            if self._on_output:
                self._on_output({"output_type": "stream", "name": content["name"], "text": text})
            return
        self._append({"output_type": "stream", "name": content["name"], "text": text})

    def _append(self, out: dict[str, Any]) -> None:
        self.outputs.append(out)
        if self._on_output:
            self._on_output(out)

    def _update_display(self, display_id: str, content: dict[str, Any]) -> None:
        new = output_from_msg("display_data", content)
        for idx in self.display_ids.get(display_id, []):
            self.outputs[idx]["data"] = new["data"]
            self.outputs[idx]["metadata"] = new["metadata"]
        if self._on_foreign_update:
            self._on_foreign_update(display_id, new)

    def add_marker(self, text: str) -> None:
        """Append a visible stderr note (truncation, interrupt, death) that is not user output."""
        self.outputs.append({"output_type": "stream", "name": "stderr", "text": text})
