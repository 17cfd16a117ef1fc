"""Before a question's first model call: its files uploaded, its tables read (and loaded),
its question cell recorded, and the note the model reads under the question.

:func:`brief` does it in that order and returns a :class:`Briefing`, a value the loop
builds the first message and the judge's facts from.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...kernels import KernelSession, VariableInfo
from ...kernels.files import resolve_inside
from ..prompting import kernel_context, message
from ..tools.background import context_note
from .handoff import handoff_note
from .note import describe_files, describe_variables, question_markdown, refresh_variables
from .uploads import NoteBudget, UploadedTable, preload, read_uploads, tables_note


@dataclass(frozen=True)
class Briefing:
    """What a question starts from."""

    note: str
    """What the model reads under the question: files, tables, variables, a person's cells."""
    uploaded: list[str] = field(default_factory=list)
    """The names the question's files got in the working directory."""
    tables: list[UploadedTable] = field(default_factory=list)
    """The uploaded tables as the loader reads them (with their DataFrames, when preloaded)."""
    has_files: bool = False
    """The conversation has data files (not only outputs the agent saved)."""
    cells_before: int = 0
    """Code cells that computed something before this question (not the loading of files)."""
    first_cell: int = 0
    """The index of the question's cell in the notebook."""


async def brief(session: KernelSession, variables: dict[str, VariableInfo], question: str,
                files: Sequence[str | os.PathLike[str]], *, turn: int, preload_tables: bool,
                changes: Sequence[str] = (), budget: NoteBudget | None = None,
                present: Sequence[str] = ()) -> Briefing:
    """Upload ``files``, read their tables, record the question (the ``turn``-th) and, with
    ``preload_tables``, load each table; ``variables`` (the model's view of the namespace)
    is brought up to date in place. ``present``: names of files already in the working
    directory (a person uploaded them) that are read like the question's own. ``changes``:
    what earlier questions asked to change in the person's tables, one line each, for the
    note; ``budget``: how much of each table's profile the note holds."""
    uploaded = [(await session.upload(Path(path))).name for path in files]
    present = [name for name in dict.fromkeys(present) if name not in uploaded]
    with tempfile.TemporaryDirectory(prefix="ka-read-") as scratch:
        here = [await _readable(session, name, Path(scratch)) for name in present]
        paths = [Path(path) for path in files] + here
        uploaded += present
        tables = await read_uploads(paths, uploaded, memory_mb=session.limits.memory_mb)
        return await _brief(session, variables, question, uploaded, tables, turn=turn,
                            preload_tables=preload_tables, changes=changes, budget=budget)


async def _readable(session: KernelSession, name: str, scratch: Path) -> Path:
    """A file of the working directory where this process can read it: in place, or (a
    remote kernel's) a copy in ``scratch``."""
    local = resolve_inside(session.workdir, name)
    if local.is_file():
        return local
    copy = scratch / f"{len(list(scratch.iterdir()))}-{Path(name).name}"
    copy.write_bytes(await session.download(name))
    return copy


async def _brief(session: KernelSession, variables: dict[str, VariableInfo], question: str,
                 uploaded: list[str], tables: list[UploadedTable], *, turn: int, preload_tables: bool,
                 changes: Sequence[str], budget: NoteBudget | None) -> Briefing:
    gone = await refresh_variables(session, variables)
    first_cell = len(session.audit.cells)
    await session.add_markdown(question_markdown(question, uploaded), role="question", turn=turn)
    if preload_tables and tables:
        tables = await preload(session, tables, set(variables), turn=turn, budget=budget)
        if any(t.variable for t in tables):
            await refresh_variables(session, variables)
    note = await _note(session, variables, uploaded, tables, gone)
    if changes:
        note += "\n" + message("data_changed_note", changes="; ".join(changes))
    listing = await session.files()
    return Briefing(note, uploaded, tables, has_files=any(not f.name.startswith("outputs/") for f in listing),
                    cells_before=_work_cells(session.audit.cells), first_cell=first_cell)


async def _note(session: KernelSession, variables: dict[str, VariableInfo], uploaded: list[str],
                tables: list[UploadedTable], gone: list[str]) -> str:
    """The note on files, tables and variables attached to the question."""
    loaded = {t.variable for t in tables if t.variable}
    listing = await session.files()
    others = [v for name, v in variables.items() if name not in loaded]
    note = kernel_context(files=describe_files(listing, new=uploaded, memory_mb=session.limits.memory_mb),
                          variables=describe_variables(others))
    if tables:
        note += "\n" + tables_note(tables)
    if gone:
        note += "\n" + message("variables_gone", names=", ".join(gone))
    if running := context_note(session):
        note += "\n" + running
    return note + handoff_note(session.audit.cells)


def _work_cells(cells: list[dict[str, Any]]) -> int:
    """Code cells that computed something (not the briefing's own loading of the files)."""
    roles = [(c.get("metadata") or {}).get("kernel_analyst", {}).get("role") for c in cells
             if c.get("cell_type") == "code"]
    return sum(role != "profile" for role in roles)


__all__ = ["Briefing", "brief"]
