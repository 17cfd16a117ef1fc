"""The compact profile of a DataFrame, as text for a model (pandas and numpy only).

This module's source is also sent to kernels as it is (see ``profile.py``), so it imports
nothing from kernel_analyst and defines only what the profile needs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


def profile_frame(df: Any, name: str = "df", budget: int = 2000, stats: bool = True) -> str:
    """Size, missing values, duplicates, and one line per column, within ``budget`` characters
    (``stats``: numeric columns' min, median and max too; without them, the names, dtypes,
    missing values and common values of every column fit a smaller budget)."""
    rows, cols = df.shape
    missing = int(df.isna().sum().sum())
    try:
        duplicates = int(df.duplicated().sum())
    except TypeError:  # unhashable cells (lists from JSON)
        duplicates = -1
    head = (f"{name}: {rows:,} rows x {cols:,} columns, {df.memory_usage(deep=True).sum() / 2**20:,.1f} MiB; "
            f"{missing:,} missing cells ({missing / max(rows * cols, 1):.1%})"
            + (f"; {duplicates:,} duplicate rows" if duplicates > 0 else ""))
    for detail in (2, 1, 0):
        lines = [_column_line(df, col, detail, stats) for col in df.columns]
        text = "\n".join([head, "columns (name: dtype, missing, distinct; values):", *lines])
        if len(text) <= budget:
            return text
    return _cut(head, lines, budget, name)


def _cut(head: str, lines: list[str], budget: int, name: str) -> str:
    kept: list[str] = []
    used = len(head) + 60
    for line in lines:
        if used + len(line) + 1 > budget - 60:
            break
        kept.append(line)
        used += len(line) + 1
    rest = len(lines) - len(kept)
    return "\n".join([head, "columns (name: dtype, missing, distinct; values):", *kept,
                      f"... and {rest} more column(s); list them with {name}.columns"])[:budget]


def _column_line(df: Any, col: Any, detail: int, stats: bool = True) -> str:
    values = df[col]
    present = int(values.notna().sum())
    lost = len(values) - present
    try:
        distinct = int(values.nunique())
    except TypeError:
        distinct = -1
    missing = f"{lost:,} missing ({lost / max(len(values), 1):.0%})" if lost else "no missing"
    line = f"- {_short(col, 40)}: {values.dtype}, {missing}, {distinct:,} distinct"
    if detail == 0 or present == 0:
        return line
    shown = _values(values, distinct, present, detail, stats)
    return line + "; " + shown if shown else line


def _values(values: Any, distinct: int, present: int, detail: int, stats: bool = True) -> str:
    if pd.api.types.is_bool_dtype(values) or (0 < distinct <= 12 and detail >= 1
                                              and not pd.api.types.is_float_dtype(values)):
        counts = values.value_counts().head(6 if detail == 2 else 3)
        return ", ".join(f"{_short(v, 20)} ({n / present:.0%})" for v, n in counts.items())
    if pd.api.types.is_numeric_dtype(values):
        if not stats:
            return ""
        finite = values.astype("float64")
        finite = finite[np.isfinite(finite)]
        if finite.empty:
            return "no finite values"
        text = f"min {finite.min():.4g}, median {finite.median():.4g}, max {finite.max():.4g}"
        return text + (f", mean {finite.mean():.4g}" if detail == 2 else "")
    if pd.api.types.is_datetime64_any_dtype(values):
        return f"from {values.min()} to {values.max()}"
    if distinct == present and present >= 20:
        return f"all unique (an identifier?), e.g. {_short(values.dropna().iloc[0], 30)!r}"
    counts = values.value_counts().head(4 if detail == 2 else 2)
    return "top " + ", ".join(f"{_short(v, 24)!r} ({n / present:.0%})" for v, n in counts.items())


def _short(value: Any, width: int) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= width else text[:width - 1] + "…"
