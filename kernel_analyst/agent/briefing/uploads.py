"""The tables a user uploads: how each is read, and what the model is told about it.

One reader owns "how to read this file": :func:`kernel_analyst.eda.detect`, the loader the
EDA playbook uses (encoding, delimiter, decimal comma, title rows, notes under the table,
Excel, Parquet, JSON, compressed or zipped). For each uploaded table the model's note
gives that loader's own call and what it found: the dialect's choices, the row count where
it is cheap, and the columns with their dtypes. By default (``preload``) the table is
also loaded into a DataFrame before the model's first step, by a cell recorded in the
audit notebook (the loader's code and a compact profile, :mod:`kernel_analyst.eda.profile`),
and the note gives that DataFrame's profile instead of the columns alone: a small model
then starts from data that is already read right instead of from ``pd.read_csv('file')``.

Small models read the file again all the same (70 of 102 DABench notebooks did), and a
plain ``pd.read_csv('file')`` misreads what the loader read right: ``-`` for missing
numbers left as text (``could not convert string to float: '-'`` until the steps ran
out), a Latin-1 file, title rows, notes under the table. So the preload's last cell
(:func:`rereading_code`, recorded like the loading cells and re-run by ``verify``) makes
``pd.read_csv`` of an uploaded delimited file add the loader's reading choices the call
does not make itself (never its index, dates or dtypes of convenience: the table's
columns stay what the profile shows), and say so on stderr.
"""

from __future__ import annotations

import asyncio
import keyword
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ...eda import over_pandas_share, text_bytes
from ...eda.exceptions import UnreadableFileError
from ...eda.loader import LoadPlan, Plan, detect
from ...eda.profile import profile_file, variable_name
from ...kernels import KernelSession
from ...kernels.trail import cell_meta
from ..prompting import message

TABLE_SUFFIXES = frozenset({".csv", ".tsv", ".tab", ".txt", ".dat", ".psv", ".xlsx", ".xlsm", ".xls", ".ods",
                            ".parquet", ".pq", ".json", ".jsonl", ".ndjson"})
"""File endings of the tables the loader reads (before a compression ending)."""
_MAYBE_PROSE = frozenset({".txt", ".dat"})
"""Endings of files that are tables only when the loader finds more than one column."""
_COMPRESSED = frozenset({".gz", ".bz2", ".xz", ".zip"})
_NOTE_COLUMNS = 40
DEFAULT_CONTEXT_TOKENS = 8192
"""The context a model is taken to have when neither the settings nor its profile say."""


@dataclass(frozen=True)
class NoteBudget:
    """How much of a table's profile the question's note holds, for a model's context."""

    chars: int
    """Characters of profile per table."""
    stats: bool
    """Numeric columns' min, median and max too (names, dtypes, missing and common values
    are always there)."""

    @classmethod
    def for_context(cls, context_tokens: int | None) -> NoteBudget:
        """About 5% of the context per table (900 to 4,000 characters); the statistics only
        from about 14k tokens on: an 8k context holds the first request and six full steps."""
        tokens = context_tokens or DEFAULT_CONTEXT_TOKENS
        chars = int(min(4000, max(900, tokens * 0.18)))
        return cls(chars, chars >= 2500)


@dataclass(frozen=True)
class UploadedTable:
    """One uploaded file that is a table, as the loader reads it."""

    file: str
    """Its name in the session's working directory."""
    plan: Plan | None
    """How the loader reads it; None when it could not be read as a table."""
    problem: str = ""
    """Why it could not be read (the loader's message), when ``plan`` is None."""
    variable: str | None = None
    """The DataFrame it was loaded into before the question, if it was."""
    profile: str = ""
    """That DataFrame's compact profile (empty when it was not loaded)."""
    source: Path | None = None
    """The file it was uploaded from, on this host (its first lines make a hint)."""
    too_large: bool = False
    """Too large for pandas in this kernel: the note points to DuckDB instead of the call."""

    def call(self, var: str | None = None) -> str:
        """The loader's code for this table, without comments (``var``: the variable), with
        the import it needs (it must run in a kernel where nothing was imported yet)."""
        if self.plan is None:
            return ""
        code = self.plan.code(var=var or self.variable or "df", compact=True)
        needs = "pd." in code and "import pandas" not in code
        return f"import pandas as pd\n{code}" if needs else code

    @property
    def columns(self) -> tuple[str, ...]:
        """The names of its columns as the loader reads them (empty when not known)."""
        shape = self.plan.shape if self.plan is not None else None
        return tuple(str(name) for name, _ in shape.columns) if shape is not None else ()

    def first_lines(self, *, lines: int = 5, width: int = 160) -> str:
        """The file's first lines, decoded as the loader decodes it ("" when unknown)."""
        encoding = getattr(self.plan, "encoding", "utf-8")
        if self.source is None or getattr(self.plan, "compression", None):
            return ""
        try:
            with self.source.open("rb") as f:
                head = f.read(8192).decode(encoding, errors="replace")
        except OSError:
            return ""
        shown = [line[:width] + ("..." if len(line) > width else "") for line in head.splitlines()[:lines]]
        return "\n".join(shown)


def is_table(name: str) -> bool:
    """True for a file name the loader reads as a table (by its ending)."""
    return _table_suffix(name) in TABLE_SUFFIXES


def _table_suffix(name: str) -> str:
    """The file's ending before any compression ending (``.csv`` of ``a.csv.gz``)."""
    suffixes = [s.lower() for s in Path(name).suffixes]
    while suffixes and suffixes[-1] in _COMPRESSED:
        suffixes.pop()
    return suffixes[-1] if suffixes else ""


def new_uploads(session: KernelSession) -> list[str]:
    """The files a person uploaded to the working directory since the conversation's last
    question (every upload, before its first): the ones the next question reads like its
    own (a front end whose person uploads first, then asks, as the service's page does).
    Read from the audit trail: uploads carry ``uploaded_at``, question cells ``at``."""
    audit = session.audit
    asked = [str(cell_meta(c).get("at", "")) for c in audit.cells if cell_meta(c).get("role") == "question"]
    since = max(asked, default="")
    uploads = audit.metadata.get("kernel_analyst", {}).get("files", [])
    return [str(f["name"]) for f in uploads if str(f.get("uploaded_at", "")) > since
            and not str(f["name"]).startswith("outputs/")]


async def read_uploads(paths: Sequence[Path], names: Sequence[str], *,
                       memory_mb: int | None = None) -> list[UploadedTable]:
    """The loader's plan for each uploaded table (other files are left out); ``memory_mb``
    (the kernel's limit) marks the tables too large for pandas."""
    found = []
    for path, name in zip(paths, names, strict=True):
        if not is_table(name):
            continue
        try:
            plan = await asyncio.to_thread(detect, path, name=name)
        except UnreadableFileError as exc:
            found.append(UploadedTable(name, None, problem=str(exc), source=path))
            continue
        if _prose(name, plan):
            continue
        too_large = over_pandas_share(text_bytes(path, plan), memory_mb)
        found.append(UploadedTable(name, plan, source=path, too_large=too_large))
    return found


def _prose(name: str, plan: Plan) -> bool:
    """A ``.txt`` file the loader reads as one column: text, not a table."""
    columns = plan.shape.columns if plan.shape is not None else ()
    return _table_suffix(name) in _MAYBE_PROSE and len(columns) < 2


def frame_names(tables: Sequence[UploadedTable], taken: set[str]) -> list[str]:
    """A DataFrame name for each table: ``df`` for a lone table when the name is free (the
    name a model reaches for), else one made from the file's name, never one in ``taken``."""
    names: list[str] = []
    used = set(taken)
    for table in tables:
        base = "df" if len(tables) == 1 and "df" not in used else variable_name(table.file)
        name, n = base, 2
        while name in used or keyword.iskeyword(name):
            name, n = f"{base}_{n}", n + 1
        used.add(name)
        names.append(name)
    return names


async def preload(session: KernelSession, tables: Sequence[UploadedTable], taken: set[str], *,
                  turn: int, budget: NoteBudget | None = None) -> list[UploadedTable]:
    """Load each readable table into a DataFrame (one recorded cell each, the loader's
    code and a compact profile) and return the tables with their variable and profile."""
    readable = [t for t in tables if t.plan is not None and t.source is not None and not t.too_large]
    loaded: dict[str, UploadedTable] = {}
    for table, var in zip(readable, frame_names(readable, taken), strict=True):
        assert table.source is not None
        meta = {"agent": {"turn": turn, "preload": True}}
        done = await profile_file(session, table.source, name=table.file, variable=var, plan=table.plan,
                                  budget=(budget or NoteBudget.for_context(None)).chars,
                                  stats=(budget or NoteBudget.for_context(None)).stats, annotations=meta)
        if done.ok:
            loaded[table.file] = replace(table, variable=var, profile=done.text)
    if code := rereading_code(list(loaded.values())):
        await session.execute(code, annotations={"agent": {"turn": turn, "preload": True}, "role": "profile"})
    return [loaded.get(t.file, t) for t in tables]


REREAD_OPTIONS = ("encoding", "sep", "skiprows", "header", "names", "decimal", "thousands",
                  "skipinitialspace", "comment", "na_values", "dtype", "nrows")
"""The loader's ``pd.read_csv`` options a re-read of the file gets: the ones that decide
what is read (its text, its rows, its missing values, codes kept as text), not the index,
the dates parsed or the memory mode."""


def rereading_choices(tables: Sequence[UploadedTable]) -> dict[str, dict[str, Any]]:
    """Per loaded table that is a plain delimited file: the loader's choices a re-read keeps
    (only those past pandas' defaults)."""
    choices: dict[str, dict[str, Any]] = {}
    for table in tables:
        plan = table.plan
        if table.variable is None or not isinstance(plan, LoadPlan) or plan.compression or plan.member:
            continue
        kwargs = plan.read_csv_kwargs()
        if kwargs.get("encoding", "").lower().replace("_", "-") in ("utf-8", "utf8"):
            kwargs.pop("encoding")
        if kwargs.get("sep") == ",":
            kwargs.pop("sep")
        if kept := {k: v for k, v in kwargs.items() if k in REREAD_OPTIONS}:
            choices[table.file] = kept
    return choices


def rereading_code(tables: Sequence[UploadedTable]) -> str:
    """The cell that makes ``pd.read_csv`` of these tables' files read them as they were
    loaded ("" when a plain re-read reads them right already)."""
    choices = rereading_choices(tables)
    if not choices:
        return ""
    return _REREADING.format(choices=repr(choices))


_REREADING = '''\
# kernel-analyst: pd.read_csv of an uploaded file below reads it as it was loaded above,
# with the loader's choices the call does not make itself (and says so on stderr).
import pandas as pd


def _read_as_loaded(read_csv, choices):
    import functools

    @functools.wraps(read_csv)
    def read_csv_as_loaded(filepath_or_buffer, *args, **kwargs):
        import os
        import sys

        try:
            path = os.path.abspath(os.fspath(filepath_or_buffer))
        except TypeError:  # a buffer, not a path
            path = ""
        added = {{k: v for k, v in read_csv_as_loaded.choices.get(path, {{}}).items() if k not in kwargs}}
        if added and not args:
            print(f"kernel-analyst: read {{os.path.basename(path)}} as it was loaded "
                  f"({{', '.join(added)}}; the values are in its loading cell)", file=sys.stderr)
            kwargs.update(added)
        return read_csv(filepath_or_buffer, *args, **kwargs)

    read_csv_as_loaded.choices = choices
    return read_csv_as_loaded


_as_loaded = {{__import__("os").path.abspath(name): options for name, options in {choices}.items()}}
if hasattr(pd.read_csv, "choices"):
    pd.read_csv.choices.update(_as_loaded)
else:
    pd.read_csv = _read_as_loaded(pd.read_csv, _as_loaded)
del _read_as_loaded, _as_loaded
'''


def tables_note(tables: Sequence[UploadedTable]) -> str:
    """What the question's note says of the uploaded tables ("" when there are none)."""
    lines = [_table_note(t) for t in tables]
    return "\n".join(line for line in lines if line)


def _table_note(table: UploadedTable) -> str:
    if table.plan is None:
        return message("table_unreadable", file=table.file, problem=table.problem)
    how = table.plan.describe()
    if table.too_large:
        return message("table_too_large", file=table.file, how=how)
    if table.variable is not None:
        head = message("table_loaded", file=table.file, var=table.variable, how=how)
        return "\n".join([head, _indented(table.call()), table.profile])
    shape = table.plan.shape
    rows = f"{shape.rows:,} rows; " if shape is not None and shape.rows is not None else ""
    head = message("table_read", file=table.file, rows=rows, how=how)
    return "\n".join([head, _indented(table.call()), message("table_columns", columns=_columns(table))])


def file_columns(tables: Iterable[UploadedTable]) -> dict[str, str]:
    """Every uploaded table's column names -> the file it is a column of (the first)."""
    found: dict[str, str] = {}
    for table in tables:
        for name in table.columns:
            found.setdefault(name, table.file)
    return found


def _columns(table: UploadedTable) -> str:
    shape = table.plan.shape if table.plan is not None else None
    if shape is None or not shape.columns:
        return "(not known before reading)"
    listed = [f"{name} ({dtype})" for name, dtype in shape.columns[:_NOTE_COLUMNS]]
    more = len(shape.columns) - len(listed)
    return ", ".join(listed) + (f", ... and {more} more" if more > 0 else "")


def _indented(code: str) -> str:
    return "\n".join("    " + line for line in code.splitlines())


__all__ = [
    "DEFAULT_CONTEXT_TOKENS",
    "TABLE_SUFFIXES",
    "NoteBudget",
    "UploadedTable",
    "file_columns",
    "frame_names",
    "is_table",
    "preload",
    "read_uploads",
    "tables_note",
]
