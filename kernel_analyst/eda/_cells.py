"""The code of the playbook's first cells: setup, overview, alerts, missing values,
duplicates, numeric summary.

Every cell is plain pandas / numpy / matplotlib a reader can rerun; only the loading cell
depends on the file. Each step stores a few plain numbers in ``findings`` (a dict in the
kernel), which the playbook reads at the end to write the summary at the top of the
report. Thresholds are named constants in the setup cell, so every alert states the rule
it applied. Templates use ``$name`` for the values filled in here, so the code keeps its
ordinary braces.
"""

from __future__ import annotations

from string import Template

from .options import PlaybookOptions


def fill(template: str, **values: object) -> str:
    """``template`` with each ``$name`` replaced by ``values[name]``."""
    return Template(template).substitute({k: str(v) for k, v in values.items()})


SETUP = '''\
import io
import json
import warnings

import matplotlib.dates
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Image, display

plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 100, "font.size": 9, "axes.titlesize": 10,
                     "axes.spines.top": False, "axes.spines.right": False, "figure.max_open_warning": 0})
# Labels in scripts the default font lacks are drawn as boxes; that needs no warning.
warnings.filterwarnings("ignore", message="Glyph .* missing from font")

# The rules the alerts and plots below apply.
SKEWED = 2.0            # |skewness| at least this: heavily skewed (log or clipped axis, IQR caveat)
MOSTLY_ZEROS = 0.5      # share of zeros among the present values
MOSTLY_MISSING = 0.5    # share of missing values
HIGH_CARDINALITY = $max_categories  # text columns with more distinct values are not categories
ID_MIN_ROWS = 20        # "every value differs" means an identifier only from this many rows
SMALL_N = 30            # associations from fewer rows get a caveat


def short_label(value, width=24):
    """A one-line, shortened label for plots."""
    text = " ".join(str(value).split())
    return text if len(text) <= width else text[:width - 1] + "…"


def show(fig):
    """Render a figure once, as PNG, and close it (tight_layout makes the labels fit)."""
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    display(Image(buffer.getvalue()))


def panels(count, width=4, size=(3.6, 2.7)):
    """One figure with `count` panels (one figure is much faster than one per column)."""
    columns = max(1, min(width, count))
    rows = -(-count // columns)
    scale = 1.4 if count == 1 else 1.0  # a lone chart gets more room
    fig, axes = plt.subplots(rows, columns, figsize=(size[0] * columns * scale, size[1] * rows * scale),
                             squeeze=False)
    for ax in axes.flat[count:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:count])


def cramers_v(a, b):
    """Cramér's V of two categorical columns over the rows where both are present: (V, n)."""
    both = a.notna() & b.notna()
    x, _ = pd.factorize(a[both])
    y, _ = pd.factorize(b[both])
    n = len(x)
    if n == 0 or x.max() < 1 or y.max() < 1:
        return np.nan, n
    table = np.bincount(x * (y.max() + 1) + y, minlength=(x.max() + 1) * (y.max() + 1))
    table = table.reshape(x.max() + 1, y.max() + 1)
    expected = np.outer(table.sum(1), table.sum(0)) / n
    chi2 = ((table - expected) ** 2 / expected).sum()
    return float(np.sqrt(chi2 / n / (min(table.shape) - 1))), n


def correlation_ratios(categories, numbers):
    """η of each numeric column against one categorical column, over the rows where both are
    present: how much of the column's spread the categories explain (0 to 1). One grouping
    for all columns; values are centred first, so large numbers lose no precision."""
    if numbers.shape[1] == 0:
        return pd.DataFrame({"eta": [], "n": []}, dtype=float)
    numbers = numbers[categories.notna()]
    codes = categories[categories.notna()]
    centred = numbers - numbers.mean()  # mean over rows with both present (NaN values skip)
    groups = centred.groupby(codes, observed=True).agg(["sum", "count"])
    sums, counts = groups.xs("sum", axis=1, level=1), groups.xs("count", axis=1, level=1)
    between = (sums**2 / counts.where(counts > 0)).sum() - sums.sum() ** 2 / counts.sum()
    total = (centred**2).sum()
    eta = np.sqrt((between / total.where(total > 0)).clip(0, 1))
    return pd.DataFrame({"eta": eta, "n": numbers.notna().sum()})


def correlation_ratio(categories, values):
    """η of one numeric column against one categorical column: (η, n)."""
    row = correlation_ratios(categories, values.to_frame("v")).loc["v"]
    return float(row["eta"]), int(row["n"])


findings = {}  # each step records a few numbers here; the report's summary reads them'''


def overview(o: PlaybookOptions) -> str:
    """Size, a sample for the costly steps, and one row per column: type, kind, counts."""
    return fill('''\
# Cells holding lists or objects (JSON) cannot be counted or compared: profile them as JSON text.
nested = [c for c in df.columns if df[c].dtype == object
          and df[c].map(lambda v: isinstance(v, (list, dict))).any()]
if nested:
    df[nested] = df[nested].map(lambda v: json.dumps(v, default=str) if isinstance(v, (list, dict)) else v)
    print(f"Kept as JSON text (they hold lists or objects): {', '.join(map(str, nested))}")
rows, cols = df.shape
memory_mib = df.memory_usage(deep=True).sum() / 2**20
size = f"{memory_mib:,.1f} MiB" if memory_mib >= 1 else f"{max(memory_mib * 1024, 1):,.0f} KiB"
print(f"{rows:,} rows x {cols:,} columns, {size} in memory")
# Long tables: associations use a fixed random sample of $sample_rows rows.
sample = df.sample($sample_rows, random_state=0) if rows > $sample_rows else df
if sample is not df:
    print(f"Associations below use a random sample of {len(sample):,} rows; everything else uses all rows.")

present = df.notna().sum()
distinct = df.nunique()
duplicated = df.duplicated()  # rows equal to an earlier row in every column (alerts, duplicates)


def kind_of(col):
    values = df[col]
    if pd.api.types.is_bool_dtype(values):
        return "boolean"
    if pd.api.types.is_numeric_dtype(values):
        return "numeric"
    if pd.api.types.is_datetime64_any_dtype(values):
        return "date"
    return "categorical" if distinct[col] <= HIGH_CARDINALITY else "text"


kinds = pd.Series({col: kind_of(col) for col in df.columns}, dtype=object)
overview = pd.DataFrame({"type": df.dtypes.astype(str), "kind": kinds, "present": present,
                         "missing": rows - present,
                         "missing %": (100 * (rows - present) / max(rows, 1)).round(1), "distinct": distinct})
findings["shape"] = [rows, cols]
findings["memory_mib"] = round(float(memory_mib), 2)
findings["columns"] = [str(c) for c in df.columns]
findings["kinds"] = {str(k): int(v) for k, v in kinds.value_counts().items()}
findings["sample_rows"] = len(sample)
if cols > 60:
    print(f"Table below: the first 60 of {cols:,} columns.")
overview.head(60)''', sample_rows=o.sample_rows)


ALERT_HELPER = '''\
found = []


def alert(severity, column, name, detail):
    found.append({"severity": severity, "column": str(column), "alert": name, "detail": detail})
'''
"""The alerts cell's opening: the list of alerts and the helper that adds one (the pandas
and the out-of-core playbooks share it)."""

ALERTS_RANKED = '''\
if duplicate_rows:
    share = duplicate_rows / rows
    alert(2 if share >= 0.01 else 1, "(all columns)", "duplicate rows",
          f"{duplicate_rows:,} rows ({share:.1%}) repeat an earlier row exactly")

alerts = pd.DataFrame(found, columns=["severity", "column", "alert", "detail"])
alerts = alerts.sort_values("severity", ascending=False, kind="stable").reset_index(drop=True)
findings["alerts"] = alerts.values.tolist()
findings["duplicates"] = duplicate_rows
if alerts.empty:
    print("No alerts: no constant, ID-like, mostly missing, mostly zero, skewed or mixed-type column, "
          "and no duplicate rows.")
else:
    print(f"{len(alerts)} alert(s), most severe first.")
    display(alerts.set_index(pd.RangeIndex(1, len(alerts) + 1, name="rank")))'''
"""The alerts cell's end: duplicate rows, then every alert ranked by severity."""


def alerts(o: PlaybookOptions) -> str:
    """The checks profiling tools make, each with its threshold, ranked by severity."""
    return '''\
# Severity: 3 = fix or drop before analysis, 2 = check, 1 = keep in mind.
''' + ALERT_HELPER + '''

def looks_mixed(col):
    """Values of several Python types, or text where most (not all) values are numbers."""
    values = pd.Series(sample[col].dropna().unique()[:2000])
    types = values.map(lambda v: type(v).__name__).value_counts()
    if len(types) > 1:
        return ", ".join(f"{n} distinct {t}" for t, n in types.items())
    numbers = pd.to_numeric(values, errors="coerce").notna()
    if len(values) >= 5 and 0.5 <= numbers.mean() < 1:
        example = values[~numbers].iloc[0]
        return f"{numbers.mean():.0%} of distinct values are numbers, others text such as {example!r}"
    return None


for col in df.columns:
    n, kind = int(present[col]), kinds[col]
    if n == 0:
        alert(3, col, "empty", "every value is missing")
        continue
    missing_share = 1 - n / rows
    if missing_share >= MOSTLY_MISSING:
        alert(3 if missing_share >= 0.9 else 2, col, "mostly missing",
              f"{missing_share:.1%} missing (rule: at least {MOSTLY_MISSING:.0%})")
    if distinct[col] == 1:
        value = short_label(df[col].dropna().iloc[0])
        alert(3, col, "constant", f"one value, {value!r}, in every present row")
        continue
    integers = kind == "numeric" and pd.api.types.is_integer_dtype(df[col])
    if (kind in ("categorical", "text") or integers) and distinct[col] == n and n >= ID_MIN_ROWS:
        alert(2, col, "unique (ID-like)", f"all {n:,} values differ: an identifier, not a feature")
    elif kind == "text":
        alert(1, col, "high cardinality",
              f"{distinct[col]:,} distinct values (rule: more than {HIGH_CARDINALITY})")
    if kind == "numeric":
        values = df[col].dropna()
        zeros = float((values == 0).mean())
        if zeros >= MOSTLY_ZEROS:
            alert(1, col, "mostly zeros",
                  f"{zeros:.1%} of present values are 0 (rule: at least {MOSTLY_ZEROS:.0%})")
        infinite = int(np.isinf(values.astype("float64")).sum())
        if infinite:
            alert(2, col, "infinite values", f"{infinite:,} values are ±inf")
        skew = float(values[np.isfinite(values.astype("float64"))].skew())
        if abs(skew) >= SKEWED:
            alert(1, col, "skewed", f"skewness {skew:+.1f} (rule: |skewness| at least {SKEWED:g})")
    elif kind in ("categorical", "text") and (mixed := looks_mixed(col)):
        alert(2, col, "mixed types", mixed)

duplicate_rows = int(duplicated.sum())
''' + ALERTS_RANKED


def missing(o: PlaybookOptions) -> str:
    """Missing cells per column, the missing-value matrix, and which columns go missing together."""
    return fill('''\
missing = (rows - present)[lambda s: s > 0].sort_values(ascending=False)
findings["missing_cells"] = int(missing.sum())
findings["missing_share"] = float(missing.sum() / max(rows * cols, 1))
findings["missing"] = {str(k): int(v) for k, v in missing.head(3).items()}
findings["missing_columns"] = len(missing)
if missing.empty:
    print("No missing values.")
else:
    print(f"{int(missing.sum()):,} missing cells ({missing.sum() / (rows * cols):.1%} of all cells) "
          f"in {len(missing)} of {cols} columns.")
    if len(missing) > $n:
        print(f"Table and matrix below: the $n columns with most missing values.")
    display(pd.DataFrame({"missing": missing, "percent": (100 * missing / rows).round(1)}).head($n))
    shown = list(missing.index[:$n])
    nullity = df[shown].isna()
    # Matrix: rows in file order, in blocks of `block` rows; a block is dark when any of its rows
    # misses the value (sampling rows instead would hide rare missing values).
    block = max(1, -(-rows // 500))
    starts = np.arange(0, rows, block)
    blocks = np.maximum.reduceat(nullity.to_numpy(dtype=np.uint8), starts, axis=0)
    together = len(shown) >= 2
    fig, axes = plt.subplots(1, 2 if together else 1, squeeze=False,
                             figsize=(min(12, 2.5 + 0.45 * len(shown)) * (2 if together else 1), 4.2))
    ax = axes[0, 0]
    ax.imshow(blocks, aspect="auto", interpolation="nearest", cmap="Greys", vmin=0, vmax=1,
              extent=(-0.5, len(shown) - 0.5, rows, 0))
    ax.set_xticks(range(len(shown)), labels=[short_label(c, 18) for c in shown], rotation=90)
    ax.set_ylabel("row" + (f" (blocks of {block:,} rows)" if block > 1 else ""))
    ax.set_title("Missing values (dark = missing)")
    if together:
        co = nullity.astype(float).corr()
        ax = axes[0, 1]
        image = ax.imshow(co.values, cmap="coolwarm", vmin=-1, vmax=1)
        ax.set_xticks(range(len(shown)), labels=[short_label(c, 18) for c in shown], rotation=90)
        ax.set_yticks(range(len(shown)), labels=[short_label(c, 18) for c in shown])
        ax.set_title("Co-missingness (correlation of missing)")
        fig.colorbar(image, ax=ax, shrink=0.8)
    show(fig)
    if together:
        pairs = [(a, b, int((nullity[a] & nullity[b]).sum()))
                 for i, a in enumerate(shown) for b in shown[i + 1:]]
        co_missing = pd.DataFrame(pairs, columns=["a", "b", "both missing"])
        share = co_missing["both missing"] / missing[co_missing["a"]].values
        co_missing["% of a's missing"] = (100 * share).round(1)
        co_missing = co_missing[co_missing["both missing"] > 0].sort_values("both missing", ascending=False)
        if not co_missing.empty:
            print("Columns missing in the same rows:")
            display(co_missing.head(10).reset_index(drop=True))''', n=o.max_table_rows)


def duplicates(o: PlaybookOptions) -> str:
    """Rows identical in every column."""
    return '''\
findings["duplicates"] = int(duplicated.sum())
print(f"{int(duplicated.sum()):,} duplicate rows ({duplicated.mean() if len(df) else 0:.1%} of all rows).")
if duplicated.any():
    display(df[df.duplicated(keep=False)].head(10))'''


def numeric(o: PlaybookOptions) -> str:
    """Counts, quantiles, skewness and zeros of every numeric column."""
    return fill('''\
numeric = df.select_dtypes("number").select_dtypes(exclude="bool")
findings["numeric_columns"] = numeric.shape[1]
if numeric.empty:
    print("No numeric columns.")
    numeric_summary = pd.DataFrame()
else:
    finite = numeric.astype("float64").replace([np.inf, -np.inf], np.nan)
    numeric_summary = finite.describe(percentiles=[0.05, 0.25, 0.5, 0.75, 0.95]).T
    numeric_summary["missing %"] = (100 * numeric.isna().mean()).round(1)
    numeric_summary["zeros %"] = (100 * (numeric == 0).sum() / numeric.notna().sum().clip(lower=1)).round(1)
    numeric_summary["skew"] = finite.skew()
    if numeric.shape[1] > $n:
        print(f"Table below: the first $n of {numeric.shape[1]} numeric columns.")
    display(numeric_summary.head($n).round(4))''', n=o.max_table_rows)
