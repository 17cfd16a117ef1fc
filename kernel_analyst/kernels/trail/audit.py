"""The audit trail: one ``.ipynb`` per session, valid on disk after every cell.

Appending a cell costs the same at cell 10 and cell 1000. The file is laid out as
``{"metadata": ..., "nbformat": 4, "nbformat_minor": 5, "cells": [`` with one cell per
line, then the two-byte tail ``]}``; an append overwrites only the tail with
``,<cell>]}`` in one ``pwrite``. Anything that changes earlier bytes (new metadata after
an upload, a display update to an earlier cell) rewrites the whole file to a temporary
name and renames it over the old one.

One window remains, and :func:`repair_notebook` closes it: if this process is killed by
a signal in the middle of a ``pwrite`` that spans several pages, Linux may leave the
write short. Every completed cell and the metadata sit before the damaged bytes, so the
repair (run when a session directory is reused) cuts back to the last whole cell line.
Cells are plain dicts (``nbformat.v4.new_*`` validates each node and is ~15x slower);
the whole notebook is validated once, on :meth:`AuditTrail.export`.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
import uuid
from pathlib import Path
from typing import Any

from ..execution import Execution

NBFORMAT = 4
NBFORMAT_MINOR = 5
_TAIL = b"\n]}\n"


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def new_cell_id() -> str:
    """A fresh nbformat 4.5 cell id."""
    return uuid.uuid4().hex[:12]


def cell_meta(cell: dict[str, Any]) -> dict[str, Any]:
    """A cell's ``metadata.kernel_analyst`` as the trail records it, to read ({} when missing)."""
    metadata = cell.get("metadata")
    meta = metadata.get("kernel_analyst") if isinstance(metadata, dict) else None
    return meta if isinstance(meta, dict) else {}


def stands(cell: dict[str, Any]) -> bool:
    """Whether ``cell`` is a code cell the conversation's state comes from: one no undo took
    back (an undo, a rolled-back streak and an abandoned attempt mark theirs ``undone``; they
    stay in the trail, and ``verify`` does not re-run them)."""
    return cell.get("cell_type") == "code" and not cell_meta(cell).get("undone")


def markdown_cell(text: str, **meta: Any) -> dict[str, Any]:
    """A markdown cell dict; ``meta`` goes under ``metadata.kernel_analyst``."""
    return {"cell_type": "markdown", "id": new_cell_id(),
            "metadata": {"kernel_analyst": meta} if meta else {}, "source": text}


def code_cell(ex: Execution) -> dict[str, Any]:
    """The code cell that records ``ex``, with its outcome under ``metadata.kernel_analyst``."""
    meta: dict[str, Any] = {
        "status": ex.status,
        "state": ex.state,
        "started_at": ex.started_at,
        "duration_s": round(ex.duration_s, 4),
    }
    if ex.truncated_bytes:
        meta["truncated_bytes"] = ex.truncated_bytes
    if ex.events:
        meta["events"] = list(ex.events)
    if ex.variables:
        meta["variables"] = ex.variables.to_dict()
    if ex.peak_memory_bytes is not None:
        meta["peak_memory_bytes"] = ex.peak_memory_bytes
    if ex.cpu_time_s is not None:
        meta["cpu_time_s"] = round(ex.cpu_time_s, 4)
    if ex.ending is not None:
        meta["ending"] = ex.ending.to_dict()
    for key, value in ex.annotations.items():
        meta.setdefault(key, value)  # the outcome's own fields win over a caller's
    return {
        "cell_type": "code",
        "id": new_cell_id(),
        "metadata": {"kernel_analyst": meta},
        "source": ex.code,
        "outputs": ex.outputs,
        "execution_count": ex.execution_count,
    }


@functools.lru_cache(maxsize=1)
def _umask() -> int:
    """The process umask (read once, when first needed: reading it means setting it)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file and rename (never half-written)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a notebook is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


class AuditTrail:
    """The live ``.ipynb`` of one session.

    :meth:`create` starts a new notebook, :meth:`open` continues one already on disk
    (a conversation resumed by a new manager or after a restart); the constructor only
    holds state.
    """

    def __init__(self, path: Path, metadata: dict[str, Any],
                 cells: list[dict[str, Any]] | None = None) -> None:
        self.path = path
        self.metadata = metadata
        self.cells: list[dict[str, Any]] = list(cells or [])
        self._encoded: list[bytes] = [_dumps(c) for c in self.cells]
        # display_id -> (cell index, output index) of every output that carries it, so an
        # update_display_data sent by a later cell changes the earlier cell too.
        self._displays: dict[str, list[tuple[int, int]]] = {}
        self._cells_end = 0  # byte offset where the tail starts; set by _rewrite

    @classmethod
    def create(cls, path: Path, metadata: dict[str, Any]) -> AuditTrail:
        """Start a new, empty notebook at ``path`` (replacing any file there)."""
        trail = cls(path, metadata)
        trail._rewrite()
        return trail

    @classmethod
    def open(cls, path: Path) -> AuditTrail:
        """Continue the notebook at ``path``: repaired if its last append was cut short,
        then laid out again so appends stay one write each. Raises ValueError for a file
        that is not a notebook."""
        repair_notebook(path)
        nb = json.loads(path.read_bytes())
        if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
            raise ValueError(f"{path} is not a notebook")
        trail = cls(path, dict(nb.get("metadata", {})), nb["cells"])
        trail._rewrite()
        return trail

    def _head(self) -> bytes:
        return (b'{\n"metadata":' + _dumps(self.metadata)
                + b',\n"nbformat":%d,\n"nbformat_minor":%d,\n"cells":[\n' % (NBFORMAT, NBFORMAT_MINOR))

    @staticmethod
    def _tail() -> bytes:
        return _TAIL

    def _rewrite(self) -> None:
        body = self._head() + b",\n".join(self._encoded)
        atomic_write(self.path, body + self._tail())
        self._cells_end = len(body)

    def append(self, cell: dict[str, Any]) -> int:
        """Append ``cell``; return its index. The file is valid before and after."""
        encoded = _dumps(cell)
        sep = b",\n" if self._encoded else b""
        chunk = sep + encoded
        data = chunk + self._tail()
        fd = os.open(self.path, os.O_WRONLY)
        try:
            written = os.pwrite(fd, data, self._cells_end)
            if written != len(data):
                raise OSError(f"short write to {self.path}")
            os.ftruncate(fd, self._cells_end + len(data))
        except OSError:
            os.close(fd)
            self._rewrite()  # put the last good version back before reporting
            raise
        os.close(fd)
        self.cells.append(cell)
        self._encoded.append(encoded)
        self._cells_end += len(chunk)
        return len(self.cells) - 1

    def append_execution(self, ex: Execution, display_ids: dict[str, list[int]] | None = None) -> int:
        """Append the code cell for ``ex``; return its index. ``display_ids`` maps each
        display id to the positions of ``ex.outputs`` that carry it."""
        index = self.append(code_cell(ex))
        ex.cell_id = self.cells[index]["id"]
        for display_id, positions in (display_ids or {}).items():
            self._displays.setdefault(display_id, []).extend((index, p) for p in positions)
        return index

    def update_displays(self, updates: list[tuple[str, dict[str, Any]]], *, skip: int) -> None:
        """Apply ``update_display_data`` outputs (display id, new output) to earlier cells
        that showed those ids (cell ``skip`` already has them)."""
        touched: set[int] = set()
        for display_id, out in updates:
            for cell_index, out_index in self._displays.get(display_id, []):
                if cell_index == skip:
                    continue
                target = self.cells[cell_index]["outputs"][out_index]
                target["data"], target["metadata"] = out["data"], out["metadata"]
                touched.add(cell_index)
        if touched:
            self.refresh(sorted(touched))

    def forget_displays(self) -> None:
        """A new kernel cannot update the old kernel's displays."""
        self._displays.clear()

    def append_markdown(self, text: str, **meta: Any) -> int:
        """Append a markdown cell; return its index."""
        return self.append(markdown_cell(text, **meta))

    def refresh(self, indices: list[int]) -> None:
        """Re-encode cells changed in place (display updates); rewrites the file atomically."""
        for index in indices:
            self._encoded[index] = _dumps(self.cells[index])
        self._rewrite()

    def mark_undone(self, from_count: int, *, at: str) -> list[int]:
        """Mark the code cells numbered ``from_count`` or later ``undone`` (an undo took
        the namespace back to before them); return their numbers."""
        marked: list[int] = []
        indices: list[int] = []
        for index, cell in enumerate(self.cells):
            count = cell.get("execution_count")
            meta = cell.setdefault("metadata", {}).setdefault("kernel_analyst", {})
            if cell.get("cell_type") == "code" and isinstance(count, int) and count >= from_count \
                    and not meta.get("undone"):
                meta["undone"] = True
                meta["undone_at"] = at
                marked.append(count)
                indices.append(index)
        if indices:
            self.refresh(indices)
        return marked

    def update_metadata(self, **changes: Any) -> None:
        """Merge ``changes`` into the notebook metadata under ``kernel_analyst``."""
        self.metadata.setdefault("kernel_analyst", {}).update(changes)
        self._rewrite()

    def notebook(self) -> dict[str, Any]:
        """The notebook as a plain dict (shares cell dicts; copy before mutating)."""
        return {"cells": list(self.cells), "metadata": self.metadata,
                "nbformat": NBFORMAT, "nbformat_minor": NBFORMAT_MINOR}

    def export(self, path: str | os.PathLike[str]) -> Path:
        """Validate the notebook and write it to ``path`` atomically; return the path."""
        import nbformat

        nb = self.notebook()
        nbformat.validate(nb, version=NBFORMAT)
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, json.dumps(nb, ensure_ascii=False, indent=1).encode() + b"\n")
        return target


def repair_notebook(path: Path) -> int:
    """Make an audit notebook whose last append was cut short valid again.

    Keeps the metadata and every complete cell line, drops the partial one. Returns the
    number of cells kept; a notebook that already parses is left untouched.
    """
    data = path.read_bytes()
    try:
        json.loads(data)
        return len(json.loads(data).get("cells", []))
    except ValueError:
        pass
    marker = b'"cells":[\n'
    start = data.find(marker)
    if start < 0:
        raise ValueError(f"{path} is not a kernel-analyst audit notebook; cannot repair it")
    head = data[: start + len(marker)]
    good: list[bytes] = []
    for line in data[start + len(marker):].split(b"\n"):
        candidate = line[:-1] if line.endswith(b",") else line
        try:
            if not isinstance(json.loads(candidate), dict):
                break
        except ValueError:
            break
        good.append(candidate)
    atomic_write(path, head + b",\n".join(good) + _TAIL)
    return len(good)
