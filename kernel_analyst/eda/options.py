"""What a playbook run does: caps for wide and long tables, the target, the steps."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

__all__ = ["PlaybookOptions"]


@dataclass(frozen=True)
class PlaybookOptions:
    """Caps that keep wide (hundreds of columns) and long (millions of rows) tables fast
    and readable, and what to focus on. Each cell that applies a cap says so in its output."""

    sample_rows: int = 100_000
    """Associations use a fixed random sample of at most this many rows (counts,
    missing values, summaries and histograms always use every row)."""
    plot_points: int = 5_000
    """Scatter plots draw a fixed random sample of at most this many points."""
    max_hist_columns: int = 16
    """Histograms drawn (the first numeric columns that vary)."""
    max_bar_columns: int = 12
    """Top-value bar charts drawn (the first categorical columns)."""
    max_categories: int = 50
    """Text columns with more distinct values are treated as identifiers or free text."""
    max_corr_columns: int = 20
    """Numeric columns in the association matrices."""
    max_cat_columns: int = 15
    """Categorical columns in the association matrices."""
    max_table_rows: int = 30
    """Rows shown in per-column tables (missing values, summary, outliers)."""
    max_profiles: int = 6
    """Columns given a full profile (those with alerts or strong associations first)."""
    target: str | None = None
    """A column to explain: its distribution, every feature against it, ranked."""
    sheet: str | None = None
    """The Excel sheet to profile (name or 0-based position; default: the first with data)."""
    steps: tuple[str, ...] | None = None
    """Run only these steps (names from ``STEPS``); None: all. Setup, loading and the
    overview always run, and the steps a chosen one builds on."""
    cell_timeout_s: float | None = None
    """Per-cell timeout; None uses the session's ``Limits.timeout_s``."""
    engine: str = "auto"
    """``pandas`` loads the table; ``duckdb`` profiles it out of core (DuckDB queries over
    the file, in bounded memory); ``auto`` chooses DuckDB for files over
    ``out_of_core_bytes``."""
    out_of_core_bytes: int | None = None
    """Files with more bytes of table than this are profiled out of core (``engine="auto"``);
    None: an eighth of the kernel's memory limit (``_outofcore.LARGE_SHARE``)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PlaybookOptions:
        """The options in ``data`` (unknown keys are an error)."""
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown playbook options {sorted(unknown)}")
        values = dict(data)
        if values.get("steps") is not None:
            values["steps"] = tuple(values["steps"])
        return cls(**values)
