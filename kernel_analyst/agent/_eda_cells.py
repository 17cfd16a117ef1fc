"""The code of each EDA playbook cell.

Every cell is plain pandas / matplotlib a reader can rerun; only the loading cell depends
on the file. Each step stores a few plain numbers in ``findings`` (a dict in the kernel),
which the playbook reads at the end to write the summary. Caps come from
:class:`PlaybookOptions` and each capped cell says what it left out.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PlaybookOptions:
    """Caps that keep wide (hundreds of columns) and long (millions of rows) tables fast
    and readable. Each cell that applies a cap says so in its output."""

    sample_rows: int = 200_000
    """Plots and correlations use a fixed random sample of at most this many rows."""
    max_hist_columns: int = 16
    """Histograms drawn (the first numeric columns that vary)."""
    max_bar_columns: int = 8
    """Top-value bar charts drawn (the first categorical columns)."""
    max_categories: int = 50
    """Text columns with more distinct values are treated as identifiers (no bar chart)."""
    max_corr_columns: int = 20
    """Columns in the correlation heatmap."""
    max_table_rows: int = 30
    """Rows shown in per-column tables (missing values, summary, outliers)."""
    steps: tuple[str, ...] | None = None
    """Run only these steps (names from ``STEPS``); None: all. Setup and loading always
    run, and ``shape`` too when a chosen step plots its sample."""
    cell_timeout_s: float | None = None
    """Per-cell timeout; None uses the session's ``Limits.timeout_s``."""


SETUP = """\
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

plt.rcParams.update({"figure.dpi": 72, "figure.max_open_warning": 0})
# Labels in scripts the default font lacks are drawn as boxes; that needs no warning.
warnings.filterwarnings("ignore", message="Glyph .* missing from font")


def short_label(value, width=25):
    \"\"\"A one-line, shortened label for plots.\"\"\"
    return " ".join(str(value).split())[:width]


findings = {}  # each step records a few numbers here; the summary at the end reads them"""


def shape(o: PlaybookOptions) -> str:
    return f"""\
rows, cols = df.shape
memory_mib = df.memory_usage(deep=True).sum() / 2**20
print(f"{{rows:,}} rows x {{cols:,}} columns, {{memory_mib:,.1f}} MiB in memory")
# Long tables: plots and correlations below use a fixed random sample of {o.sample_rows:,} rows.
sample = df.sample({o.sample_rows}, random_state=0) if rows > {o.sample_rows} else df
if sample is not df:
    print(f"Plots and correlations use a random sample of {{len(sample):,}} rows.")
findings["shape"] = [rows, cols]
findings["memory_mib"] = round(float(memory_mib), 2)
df.head()"""


def dtypes(o: PlaybookOptions) -> str:
    return """\
kinds = df.dtypes.astype(str)
print("Columns per dtype:", kinds.value_counts().to_dict())
shown = df.columns[:60]
if len(df.columns) > 60:
    print(f"Table below: the first 60 of {len(df.columns):,} columns.")
findings["dtypes"] = {str(k): int(v) for k, v in kinds.value_counts().items()}
pd.DataFrame({"dtype": kinds[shown], "non-null": df[shown].notna().sum(),
              "distinct": df[shown].nunique()})"""


def missing(o: PlaybookOptions) -> str:
    n = o.max_table_rows
    return f"""\
missing = df.isna().sum()
missing = missing[missing > 0].sort_values(ascending=False)
findings["missing_cells"] = int(missing.sum())
findings["missing"] = {{str(k): int(v) for k, v in missing.head(3).items()}}
findings["missing_columns"] = len(missing)
if missing.empty:
    print("No missing values.")
else:
    print(f"{{int(missing.sum()):,}} missing cells in {{len(missing)}} of {{df.shape[1]}} columns.")
    if len(missing) > {n}:
        print(f"Table below: the {n} columns with most missing values.")
    display(pd.DataFrame({{"missing": missing, "percent": (100 * missing / len(df)).round(1)}}).head({n}))"""


def duplicates(o: PlaybookOptions) -> str:
    return """\
duplicated = df.duplicated()
findings["duplicates"] = int(duplicated.sum())
print(f"{int(duplicated.sum()):,} duplicate rows ({duplicated.mean() if len(df) else 0:.1%} of all rows).")
if duplicated.any():
    display(df[df.duplicated(keep=False)].head(10))"""


def numeric(o: PlaybookOptions) -> str:
    n = o.max_table_rows
    return f"""\
numeric = df.select_dtypes("number")
findings["numeric_columns"] = numeric.shape[1]
if numeric.empty:
    print("No numeric columns.")
else:
    if numeric.shape[1] > {n}:
        print(f"Table below: the first {n} of {{numeric.shape[1]}} numeric columns.")
    display(numeric.iloc[:, :{n}].describe().T)"""


def histograms(o: PlaybookOptions) -> str:
    n = o.max_hist_columns
    return f"""\
numeric = df.select_dtypes("number")
varying = [c for c in numeric.columns if sample[c].nunique() > 1]
plotted = varying[:{n}]
if len(varying) > {n}:
    print(f"Histograms of the first {n} of {{len(varying)}} numeric columns that vary.")
if not plotted:
    print("No numeric column with more than one value.")
else:
    width = min(4, len(plotted))
    height = -(-len(plotted) // width)
    fig, axes = plt.subplots(height, width, figsize=(3.2 * width, 2.4 * height), squeeze=False)
    for ax, col in zip(axes.flat, plotted):
        values = sample[col].astype("float64")
        ax.hist(values[np.isfinite(values)], bins=30, histtype="stepfilled", color="tab:blue")
        ax.set_title(short_label(col, 40), fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in axes.flat[len(plotted):]:
        ax.set_visible(False)
    fig.tight_layout()
    plt.show()"""


def categories(o: PlaybookOptions) -> str:
    n, k = o.max_bar_columns, o.max_categories
    return f"""\
text_like = [c for c in df.columns
             if df[c].dtype == bool or not (pd.api.types.is_numeric_dtype(df[c])
                                            or pd.api.types.is_datetime64_any_dtype(df[c]))]
distinct = df[text_like].nunique()
categorical = [c for c in text_like if 1 < distinct[c] <= {k}]
identifiers = [c for c in text_like if distinct[c] > {k}]
if identifiers:
    print(f"No bar chart for {{len(identifiers)}} column(s) with more than {k} distinct values "
          f"(names, ids, free text): {{', '.join(map(str, identifiers[:10]))}}")
plotted = categorical[:{n}]
if len(categorical) > {n}:
    print(f"Bar charts of the first {n} of {{len(categorical)}} categorical columns.")
findings["top_values"] = {{}}
if not plotted:
    print("No categorical column with 2 to {k} distinct values.")
else:
    width = min(4, len(plotted))
    height = -(-len(plotted) // width)
    fig, axes = plt.subplots(height, width, figsize=(3.6 * width, 2.6 * height), squeeze=False)
    for ax, col in zip(axes.flat, plotted):
        counts = df[col].value_counts().head(10)
        findings["top_values"][str(col)] = [str(counts.index[0]), round(float(counts.iloc[0] / len(df)), 3)]
        ax.barh([short_label(v) for v in counts.index[::-1]], counts.values[::-1], color="tab:orange")
        ax.set_title(short_label(col, 40), fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in axes.flat[len(plotted):]:
        ax.set_visible(False)
    fig.tight_layout()
    plt.show()"""


def dates(o: PlaybookOptions, expected: tuple[str, ...]) -> str:
    check = ""
    if expected:
        check = f"""
not_parsed = [c for c in {list(expected)!r} if c in df and not pd.api.types.is_datetime64_any_dtype(df[c])]
if not_parsed:
    print(f"Detected as dates in a sample, but not every value matched, so left as text: {{not_parsed}}")"""
    return f"""\
date_cols = [c for c in df.columns if pd.api.types.is_datetime64_any_dtype(df[c])]{check}
findings["dates"] = {{}}
if not date_cols:
    print("No date columns.")
else:
    ranges = []
    for col in date_cols:
        first, last = df[col].min(), df[col].max()
        findings["dates"][str(col)] = [str(first), str(last)]
        ranges.append({{"column": col, "first": first, "last": last, "span": last - first,
                       "missing": int(df[col].isna().sum())}})
    display(pd.DataFrame(ranges).set_index("column"))"""


def correlations(o: PlaybookOptions) -> str:
    n = o.max_corr_columns
    return f"""\
numeric = df.select_dtypes("number")
varying = [c for c in numeric.columns if sample[c].nunique() > 1]
used = varying[:{n}]
findings["correlations"] = []
if len(used) < 2:
    print("Fewer than two numeric columns vary: no correlations.")
else:
    if len(varying) > {n}:
        print(f"Heatmap of the first {n} of {{len(varying)}} numeric columns.")
    corr = sample[used].astype("float64").corr()
    size = min(12, max(4.5, 1 + 0.5 * len(used)))
    fig, ax = plt.subplots(figsize=(size + 1.5, size))
    image = ax.imshow(corr.values, cmap="coolwarm", vmin=-1, vmax=1)
    labels = [short_label(c, 24) for c in used]
    ax.set_xticks(range(len(used)), labels=labels, rotation=90, fontsize=8)
    ax.set_yticks(range(len(used)), labels=labels, fontsize=8)
    if len(used) <= 12:
        for i in range(len(used)):
            for j in range(len(used)):
                if np.isfinite(corr.values[i, j]):
                    ax.text(j, i, f"{{corr.values[i, j]:.2f}}", ha="center", va="center", fontsize=7)
    fig.colorbar(image, ax=ax, shrink=0.8)
    ax.set_title("Pearson correlation")
    fig.tight_layout()
    plt.show()
    upper = corr.where(np.triu(np.ones(corr.shape, dtype=bool), k=1)).stack().dropna()
    strongest = upper.reindex(upper.abs().sort_values(ascending=False).index).head(5)
    findings["correlations"] = [[str(a), str(b), round(float(r), 4)] for (a, b), r in strongest.items()]
    print("Strongest pairs:")
    for (a, b), r in strongest.items():
        print(f"  {{a}} ~ {{b}}: r = {{r:+.2f}}")"""


def outliers(o: PlaybookOptions) -> str:
    n = o.max_table_rows
    return f"""\
# IQR rule: a value is an outlier below Q1 - 1.5*IQR or above Q3 + 1.5*IQR.
outlier_rows = []
for col in df.select_dtypes("number").columns:
    values = df[col].astype("float64")
    values = values[np.isfinite(values)]
    if values.empty:
        continue
    q1, q3 = values.quantile(0.25), values.quantile(0.75)
    low, high = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
    count = int(((values < low) | (values > high)).sum())
    outlier_rows.append({{"column": col, "Q1": q1, "Q3": q3, "low fence": low, "high fence": high,
                 "outliers": count, "percent": round(100 * count / len(values), 2)}})
findings["outliers"] = []
if not outlier_rows:
    print("No numeric columns.")
else:
    table = pd.DataFrame(outlier_rows).set_index("column").sort_values("outliers", ascending=False)
    flagged = table[table["outliers"] > 0]
    findings["outliers"] = [[str(c), int(r["outliers"]), float(r["percent"])]
                            for c, r in flagged.head(3).iterrows()]
    print(f"{{len(flagged)}} of {{len(table)}} numeric columns have values outside the IQR fences.")
    if len(table) > {n}:
        print(f"Table below: the {n} columns with most outliers.")
    display(table.head({n}))"""
