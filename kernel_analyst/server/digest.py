"""The conversation at a glance: every cell of an audit notebook in one line, and its answers.

One call instead of one per cell (an agent re-reading a notebook cell by cell makes
dozens of calls). Pure: it reads the notebook's cells and their ``metadata.kernel_analyst``
and nothing else, so a dormant conversation is not woken for it; a 200-cell notebook
takes about a millisecond (``benchmarks/mcp.py``).

Who ran a cell (``author``): ``agent`` (the analysis agent's steps, its answers and
notes), ``person`` (a cell run by hand from JupyterLab or VS Code), ``client`` (code sent
through ``execute``, the EDA playbook, a question asked), ``restore`` (what recovery
wrote: a resume, a snapshot, a reopened or reattached conversation) and ``system``
(other markers: a death, an undo, a branch made or kept). A cell an undo took back says
``undone``; one a kept branch replaced says ``abandoned`` (its own record is read).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Author = Literal["agent", "person", "client", "restore", "system"]
RESTORE_MARKERS = frozenset({"resumed", "snapshot", "reopened", "reattached"})
"""Markers that recovery writes."""
LINE_CHARS = 120
"""The longest one-line output or source."""


@dataclass
class CellDigest:
    """One cell in one line."""

    index: int
    """Its position in the notebook (0-based, markdown cells included)."""
    kind: Literal["code", "markdown", "raw"]
    """The nbformat cell type."""
    author: Author
    """Who made it (see the module)."""
    source: str
    """The first line of its source (code) or text (markdown), cut to 120 characters."""
    execution_count: int | None = None
    """Its prompt number (code cells)."""
    status: str | None = None
    """``ok``, ``error``, ``timeout`` or ``died`` (code cells)."""
    seconds: float | None = None
    """How long it ran (code cells)."""
    output: str = ""
    """One line of what it showed: the error, else the last line printed or shown, and
    how many figures."""
    created: list[str] = field(default_factory=list)
    """Variables it created."""
    changed: list[str] = field(default_factory=list)
    """Variables it changed."""
    deleted: list[str] = field(default_factory=list)
    """Variables it deleted."""
    role: str | None = None
    """A markdown cell's role (``question``, ``answer``, ``model``), if any."""
    marker: str | None = None
    """A marker's kind (``resumed``, ``undo``, ``kept`` ...), if it is one."""
    undone: bool = False
    """An undo (or a kept branch) took the variables back to before it."""
    abandoned: bool = False
    """It belongs to a line a kept branch replaced (or to a discarded branch)."""


@dataclass
class AnswerDigest:
    """One answer of the agent, with the cells its numbers came from."""

    index: int
    """The answer cell's position in the notebook."""
    text: str
    """Its first line of prose, cut to 120 characters."""
    stop_reason: str | None
    """Why the agent stopped (``answered``, ``max_steps`` ...)."""
    cited_cells: list[int]
    """Positions of the cells its grounded numbers came from."""
    cited_counts: list[int]
    """Their prompt numbers."""
    claims: int = 0
    """Numbers in the answer that were checked."""
    unsupported: int = 0
    """Of those, numbers no cell produced."""
    abandoned: bool = False
    """It belongs to a line a kept branch replaced."""


@dataclass
class Digest:
    """A notebook in one call: every cell in one line, and the answers."""

    session_id: str
    """The conversation."""
    cells: list[CellDigest]
    """Every cell, in order."""
    answers: list[AnswerDigest]
    """Every answer cell, in order."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return asdict(self)

    def text(self, *, limit: int = 400) -> str:
        """The digest as compact text for a model: one line per cell (the last ``limit``)."""
        code = [c for c in self.cells if c.kind == "code"]
        failed = sum(c.status not in ("ok", None) for c in code)
        lines = [f"{len(self.cells)} cells ({len(code)} code, {failed} not ok), {len(self.answers)} answers."]
        shown = self.cells[-limit:]
        if len(shown) < len(self.cells):
            lines.append(f"(the first {len(self.cells) - len(shown)} cells left out)")
        lines.extend(_cell_line(c) for c in shown)
        for answer in self.answers:
            cites = ", ".join(f"[{n}]" for n in answer.cited_counts) or "no cell"
            gone = " (abandoned)" if answer.abandoned else ""
            lines.append(f"answer #{answer.index}{gone} cites {cites}: {answer.text}")
        return "\n".join(lines)


def _cell_line(c: CellDigest) -> str:
    count = f"[{c.execution_count}]" if c.execution_count is not None else "[ ]"
    flags = "".join(f" {flag}" for flag, on in (("undone", c.undone and not c.abandoned),
                                                 ("abandoned", c.abandoned)) if on)
    if c.kind != "code":
        what = c.marker or c.role or c.kind
        return f"#{c.index} {what} by {c.author}{flags}: {c.source}"
    seconds = f" {c.seconds:.2f}s" if c.seconds is not None else ""
    made = "; ".join(f"{verb} {', '.join(names)}" for verb, names in
                     (("created", c.created), ("changed", c.changed), ("deleted", c.deleted)) if names)
    tail = f" -> {c.output}" if c.output else ""
    return f"#{c.index} {count} {c.author} {c.status}{seconds}{flags}: {c.source}{tail}" \
           + (f" | {made}" if made else "")


def digest(session_id: str, notebook: dict[str, Any]) -> Digest:
    """The digest of an audit notebook (a plain nbformat dict)."""
    cells = notebook.get("cells")
    found = [c for c in cells if isinstance(c, dict)] if isinstance(cells, list) else []
    counts = {i: c.get("execution_count") for i, c in enumerate(found)}
    rows = [_cell(i, c) for i, c in enumerate(found)]
    answers = [_answer(i, c, counts) for i, c in enumerate(found)
               if c.get("cell_type") == "markdown" and _record(c)[0].get("role") == "answer"]
    return Digest(session_id, rows, answers)


def _record(cell: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the cell's own record, its metadata as it stands): an abandoned cell's record is
    kept under ``abandoned.record``."""
    meta = cell.get("metadata", {}).get("kernel_analyst", {})
    meta = meta if isinstance(meta, dict) else {}
    abandoned = meta.get("abandoned")
    record = abandoned.get("record") if isinstance(abandoned, dict) else None
    return (record if isinstance(record, dict) else meta), meta


def _cell(index: int, cell: dict[str, Any]) -> CellDigest:
    record, meta = _record(cell)
    found = cell.get("cell_type")
    kind: Literal["code", "markdown", "raw"] = "code" if found == "code" else \
        "markdown" if found == "markdown" else "raw"
    row = CellDigest(index, kind, _author(kind, record), _first_line(_text(cell.get("source", ""))),
                     undone=bool(meta.get("undone")), abandoned="abandoned" in meta)
    if kind == "code":
        count = cell.get("execution_count")
        seconds = record.get("duration_s")
        row.execution_count = count if isinstance(count, int) else None
        row.status = str(record.get("status")) if record.get("status") else None
        row.seconds = round(float(seconds), 3) if isinstance(seconds, (int, float)) else None
        row.output = _output_line(cell.get("outputs"))
        variables = _dict(record.get("variables"))
        row.created = _names(variables.get("created"))
        row.changed = _names(variables.get("changed"))
        row.deleted = [str(n) for n in variables.get("deleted") or []]
    else:
        row.role = record.get("role") if isinstance(record.get("role"), str) else None
        row.marker = record.get("marker") if isinstance(record.get("marker"), str) else None
        row.source = _first_line(_prose(_text(cell.get("source", ""))))
    return row


def _author(kind: str, record: dict[str, Any]) -> Author:
    if kind == "code":
        return "person" if record.get("by") == "person" else "agent" if "agent" in record else "client"
    marker = record.get("marker")
    if marker:
        return "restore" if marker in RESTORE_MARKERS else "system"
    return "agent" if record.get("role") in ("answer", "model") else "client"


def _answer(index: int, cell: dict[str, Any], counts: dict[int, Any]) -> AnswerDigest:
    record, meta = _record(cell)
    claims = _dict(record.get("claims"))
    cited: dict[int, None] = {}
    checked = unsupported = 0
    for claim in claims.get("claims", []):
        if not isinstance(claim, dict):
            continue
        checked += 1
        unsupported += claim.get("status") == "unsupported"
        source = claim.get("source")
        position = source.get("cell_index") if isinstance(source, dict) else None
        if isinstance(position, int):
            cited[position] = None
    text = _prose(_text(cell.get("source", "")))
    return AnswerDigest(index, _first_line(text), record.get("stop_reason"), sorted(cited),
                        sorted({n for i in cited if isinstance(n := counts.get(i), int)}),
                        claims=checked, unsupported=unsupported, abandoned="abandoned" in meta)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _names(infos: Any) -> list[str]:
    return [str(i.get("name")) for i in infos or [] if isinstance(i, dict)]


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


def _prose(text: str) -> str:
    """Markdown without headings and quote marks, for its first line of prose."""
    lines = [line.lstrip("> ").strip() for line in text.splitlines()]
    return "\n".join(line for line in lines if line and not line.startswith("#"))


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            line = line.strip()
            return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…"
    return ""


def _output_line(outputs: Any) -> str:
    """One line for a code cell's outputs: its error, else its last text, and its figures."""
    texts: list[str] = []
    figures = 0
    for out in outputs if isinstance(outputs, list) else []:
        if not isinstance(out, dict):
            continue
        kind = out.get("output_type")
        if kind == "error":
            return _first_line(f"{out.get('ename', '')}: {out.get('evalue', '')}")
        if kind == "stream":
            texts.append(_text(out.get("text")))
            continue
        data = _dict(out.get("data"))
        if "image/png" in data or "image/jpeg" in data or "image/svg+xml" in data:
            figures += 1
        elif "text/plain" in data:
            texts.append(_text(data["text/plain"]))
    last = next((line.strip() for text in reversed(texts) for line in reversed(text.splitlines())
                 if line.strip()), "")
    shown = _first_line(last)
    if figures:
        shown = f"{shown} ({figures} figure{'s' if figures > 1 else ''})".strip()
    return shown


__all__ = ["LINE_CHARS", "RESTORE_MARKERS", "AnswerDigest", "Author", "CellDigest", "Digest", "digest"]
