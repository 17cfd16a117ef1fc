"""What the model is told about the kernel before a question: files and variables.

Pure text builders (and the one variables read that keeps the analyst's view of the
namespace current); the loop in :mod:`.analyst` attaches their result to each question.
Uploaded tables are described by :mod:`.uploads` (the EDA loader's reading of each).
"""

from __future__ import annotations

from collections.abc import Sequence

from ...kernels import KernelSession
from ...kernels.execution import Execution, VariableInfo
from ...kernels.files import FileInfo
from ..prompting import message

_MAX_LISTED_FILES = 30
_MAX_LISTED_COLUMNS = 25
_MAX_CONTEXT_VARIABLES = 40
_KERNEL_LISTING_CAP = 200  # the kernel lists at most this many variables (kernels/_kernel_startup.py)


async def refresh_variables(session: KernelSession, variables: dict[str, VariableInfo]) -> list[str]:
    """Re-read the kernel's variables into ``variables`` (in place); return the known ones
    that vanished since the last answer (a restart, a culled session, code run by someone else).
    While a background run holds the kernel, the known variables stay as they are."""
    if session.runs.active is not None:
        return []
    current = {v.name: v for v in await session.variables()}
    listing_complete = len(current) < _KERNEL_LISTING_CAP
    gone = sorted(set(variables) - set(current)) if listing_complete else []
    variables.clear()
    variables.update(current)
    return gone


def track_variables(variables: dict[str, VariableInfo], ex: Execution) -> list[str] | None:
    """Apply a step's variable changes (in place); when the state was lost, return the names lost."""
    lost = None
    if ex.state == "lost":
        lost = sorted(variables)
        variables.clear()
    for info in [*ex.variables.created, *ex.variables.changed]:
        variables[info.name] = info
    for name in ex.variables.deleted:
        variables.pop(name, None)
    return lost


def describe_files(files: list[FileInfo], *, new: Sequence[str] = (), memory_mb: int | None = None) -> str:
    """A one-line listing of the working directory for the model; with the kernel's
    ``memory_mb``, a hint to query with DuckDB for each file too large for pandas."""
    if not files:
        return message("no_files")
    shown = [f"{f.name} ({_size(f.size)}{', ' + message('new_file') if f.name in new else ''})"
             for f in files[:_MAX_LISTED_FILES]]
    more = len(files) - len(shown)
    listing = ", ".join(shown) + (f", ... and {more} more" if more > 0 else "")
    return listing + "".join("\n" + message("large_file", name=f.name, size=_size(f.size),
                                             limit=_size((memory_mb or 0) * 2**20))
                             for f in _too_large(files[:_MAX_LISTED_FILES], memory_mb))


def _too_large(files: Sequence[FileInfo], memory_mb: int | None) -> list[FileInfo]:
    """Data files over the share of the kernel's memory the EDA playbook profiles out of core."""
    from ...eda import over_pandas_share

    return [f for f in files if over_pandas_share(f.size, memory_mb) and not f.name.startswith("outputs/")]


def written_column(column: str) -> str:
    """A column as the model should write it: plain, or quoted where it holds a newline, a
    tab or spaces at its ends (``'Density\\n(P/Km2)'``), which would not show in a list."""
    return repr(column) if column != " ".join(column.split()) else column


def describe_variables(variables: list[VariableInfo]) -> str:
    """One entry per variable (DataFrames with their columns) for the model."""
    if not variables:
        return message("no_variables")
    lines = []
    for info in variables[:_MAX_CONTEXT_VARIABLES]:
        line = info.describe()
        if info.columns:
            cols = info.columns[:_MAX_LISTED_COLUMNS]
            cut = ", ..." if len(info.columns) > len(cols) else ""
            line += " columns: " + ", ".join(map(written_column, cols)) + cut
        lines.append(line)
    more = len(variables) - len(lines)
    return "; ".join(lines) + (f"; ... and {more} more" if more > 0 else "")


def question_markdown(question: str, files: list[str]) -> str:
    """The question as the audit notebook records it."""
    listed = f"\n\nFiles: {', '.join(f'`{name}`' for name in files)}" if files else ""
    return f"### Question\n\n{question}{listed}"


def _size(size: int) -> str:
    if size < 1000:
        return f"{size} B"
    if size < 1_000_000:
        return f"{size / 1000:.1f} kB"
    return f"{size / 1_000_000:.1f} MB"


__all__ = ["describe_files", "describe_variables", "question_markdown", "refresh_variables",
           "track_variables", "written_column"]
