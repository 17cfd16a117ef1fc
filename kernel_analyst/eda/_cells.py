"""The code of the playbook's first cells: setup, overview, alerts, missing values,
duplicates, numeric summary; each one :class:`~._template.Cell` for both engines.

Every cell is plain pandas / numpy / matplotlib a reader can rerun; only the loading cell
depends on the file. Each step stores a few plain numbers in ``findings`` (a dict in the
kernel), which the playbook reads at the end to write the summary at the top of the
report. Thresholds are named constants in the setup cell, so every alert states the rule
it applied. The pandas holes compute over the loaded table ``df``; the DuckDB holes read
what the out-of-core passes (:mod:`._cells_large`) computed over the file.
"""

from __future__ import annotations

from . import _cells_large as large
from ._template import Cell
from .options import PlaybookOptions

SETUP = Cell('''\
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


def period_for(first, last):
    """The shortest of hour/day/week/month/quarter/year that gives at most 120 bars."""
    span = (pd.Timestamp(last) - pd.Timestamp(first)) / pd.Timedelta(days=1)
    for unit, days in (("hour", 1 / 24), ("day", 1), ("week", 7), ("month", 30.4), ("quarter", 91.3)):
        if span / days <= 120:
            return unit
    return "year"


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


findings = {}  # each step records a few numbers here; the report's summary reads them
$engine''',
    pandas={"engine": ""},
    duckdb={"engine": large.DUCK_SETUP + large.DUCK_EXACT_PASS + large.DUCK_MISSING_PASS},
)


def setup(o: PlaybookOptions, engine: str) -> str:
    """The setup cell: imports, the rules every alert applies, small helpers."""
    return SETUP.code(engine, max_categories=o.max_categories, sample_rows=o.sample_rows,
                      max_num=o.max_corr_columns, exact_distinct=f"{large.EXACT_DISTINCT:_}")


OVERVIEW = Cell('''\
$size
size = f"{$mib:,.1f} MiB" if $mib >= 1 else f"{max($mib * 1024, 1):,.0f} KiB"
print(f"{rows:,} rows x {cols:,} columns, {size} $where")
$count
kinds = pd.Series({c: "categorical" if kind == "text" and distinct[c] <= HIGH_CARDINALITY else kind
                   for c, kind in type_kinds.items()}, dtype=object)
overview = pd.DataFrame({"type": $types, "kind": kinds, "present": present, "missing": rows - present,
                         "missing %": (100 * (rows - present) / max(rows, 1)).round(1), "distinct": distinct})
findings["shape"] = [rows, cols]
findings["memory_mib"] = round(float($mib), 2)
findings["columns"] = [str(c) for c in columns]
findings["kinds"] = {str(k): int(v) for k, v in kinds.value_counts().items()}
findings["sample_rows"] = len(sample)
$out_of_core
if cols > 60:
    print(f"Table below: the first 60 of {cols:,} columns.")
overview.head(60)''',
    pandas={
        "size": '''\
# Cells holding lists or objects (JSON) cannot be counted or compared: profile them as JSON text.
nested = [c for c in df.columns if df[c].dtype == object
          and df[c].map(lambda v: isinstance(v, (list, dict))).any()]
if nested:
    df[nested] = df[nested].map(lambda v: json.dumps(v, default=str) if isinstance(v, (list, dict)) else v)
    print(f"Kept as JSON text (they hold lists or objects): {', '.join(map(str, nested))}")
columns = list(df.columns)
rows, cols = df.shape
memory_mib = df.memory_usage(deep=True).sum() / 2**20''',
        "mib": "memory_mib",
        "where": "in memory",
        "count": '''\
# Long tables: associations use a fixed random sample of $sample_rows rows.
sample = df.sample($sample_rows, random_state=0) if rows > $sample_rows else df
if sample is not df:
    print(f"Associations below use a random sample of {len(sample):,} rows; everything else uses all rows.")

present = df.notna().sum()
distinct = df.nunique()
duplicate_rows = int(df.duplicated().sum())  # rows equal to an earlier row in every column


def type_kind(values):
    if pd.api.types.is_bool_dtype(values):
        return "boolean"
    if pd.api.types.is_numeric_dtype(values):
        return "numeric"
    if pd.api.types.is_datetime64_any_dtype(values):
        return "date"
    return "text"


type_kinds = {c: type_kind(df[c]) for c in columns}''',
        "types": "df.dtypes.astype(str)",
        "out_of_core": "",
    },
    duckdb={
        "size": '''\
cols = len(columns)
file_mib = source_bytes / 2**20''',
        "mib": "file_mib",
        "where": "on disk, never loaded whole",
        "count": '''\
# Pass 2: exact counts of every value (columns with few), exact distinct counts, skewness, exact
# quantiles, histogram bins and rows per period. Pass 3: duplicate rows, outliers, the sample.
stats["kind"] = [type_kind(t) for t in stats["type"]]
stats["whole"] = [bool(k == "numeric" and not f) for k, f in zip(stats["kind"], stats["fractions"])]
plans = {c: bin_plan(c, s) for c, s in stats.iterrows()
         if s["kind"] == "numeric" and s["finite"] and s["approx distinct"] > 1}
exact = exact_pass(stats, brackets, plans)
value_counts = {c: pd.Series(v, dtype="int64").sort_values(ascending=False, kind="stable")
                for (what, c, *_), v in exact.items() if what == "counts" and v}
distinct = pd.Series({c: len(value_counts[c]) if c in value_counts else exact.get(("distinct", c),
                      s["approx distinct"]) for c, s in stats.iterrows()}, dtype="int64")
distinct_exact = pd.Series({c: c in value_counts or ("distinct", c) in exact or not s["present"]
                            for c, s in stats.iterrows()})
present = stats["present"].astype("int64")
type_kinds = stats["kind"]
quantile_rows, skews, fallbacks = {}, {}, []
for c in [c for c in columns if type_kinds[c] == "numeric" and stats.loc[c, "finite"]]:
    n = int(stats.loc[c, "finite"])
    if c in value_counts:
        found = [quantile_from_counts(q, value_counts[c]) for q in QUANTILES]
    else:
        found = [exact_quantile(q, n, exact[("below", c, q)] or 0,
                                np.sort(np.asarray(exact[("near", c, q)] or [], dtype=float)))
                 for q in QUANTILES]
    if any(v is None for v in found):  # the bracket missed: DuckDB's exact quantile (holds the column)
        found = con.execute(f"SELECT quantile_cont({finite(c)}, {QUANTILES}) FROM data").fetchone()[0]
        fallbacks.append(c)
    quantile_rows[c] = found
    m2, m3 = exact[("m2", c)] / n, exact[("m3", c)] / n
    skews[c] = np.sqrt(n * (n - 1)) / (n - 2) * m3 / m2**1.5 if n > 2 and m2 > 0 else np.nan
quantiles = pd.DataFrame(quantile_rows, index=QUANTILES).T
fences = {c: (q[0.25] - 1.5 * (q[0.75] - q[0.25]), q[0.75] + 1.5 * (q[0.75] - q[0.25])) for c, q in
          quantiles.iterrows()}
hash_of = "hash(" + ", ".join(qi(c) for c in columns) + ")"
counted, sample = sample_pass(stats, fences, hash_of)
duplicate_rows = rows - int(counted["distinct rows"])
print(f"Exact over all rows: counts, missing values, distinct values (≈ marks a HyperLogLog estimate above "
      f"{EXACT_DISTINCT:,}), means, quantiles, skewness, value counts, histograms. Associations that need "
      f"rows use a fixed sample of {len(sample):,} rows (those whose row hash falls in a fixed range).")''',
        "types": 'stats["type"]',
        "out_of_core": '''\
overview["distinct is"] = np.where(distinct_exact, "exact", "≈ approx")
findings["out_of_core"] = {
    "engine": f"DuckDB {duckdb.__version__}", "file_mib": round(float(file_mib), 1),
    "memory_limit": con.execute("SELECT current_setting('memory_limit')").fetchone()[0],
    "sample_rows": len(sample),
    "approximate": [f"distinct values of {c}" for c in columns if not distinct_exact[c]],
    "quantiles_held_whole": fallbacks}''',
    },
)


def overview(o: PlaybookOptions, engine: str) -> str:
    """Size, a sample for the costly steps, and one row per column: type, kind, counts."""
    return OVERVIEW.code(engine, sample_rows=o.sample_rows)


ALERTS = Cell('''\
# Severity: 3 = fix or drop before analysis, 2 = check, 1 = keep in mind.
$how
found = []


def alert(severity, column, name, detail):
    found.append({"severity": severity, "column": str(column), "alert": name, "detail": detail})


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


for col in columns:
    n, kind = int(present[col]), kinds[col]
    if n == 0:
        alert(3, col, "empty", "every value is missing")
        continue
    missing_share = 1 - n / rows
    if missing_share >= MOSTLY_MISSING:
        alert(3 if missing_share >= 0.9 else 2, col, "mostly missing",
              f"{missing_share:.1%} missing (rule: at least {MOSTLY_MISSING:.0%})")
    if distinct[col] == 1$surely:
        value = $only_value
        alert(3, col, "constant", f"one value, {value!r}, in every present row")
        continue
    integers = kind == "numeric" and $integers
    unique = $unique
    if (kind in ("categorical", "text") or integers) and unique and n >= ID_MIN_ROWS:
        alert(2, col, "unique (ID-like)",
              f"all {n:,} values differ$estimated: an identifier, not a feature")
    elif kind == "text":
        alert(1, col, "high cardinality",
              f"{distinct[col]:,} distinct values (rule: more than {HIGH_CARDINALITY})")
    if kind == "numeric":
        $numbers
        if zeros >= MOSTLY_ZEROS:
            alert(1, col, "mostly zeros",
                  f"{zeros:.1%} of present values are 0 (rule: at least {MOSTLY_ZEROS:.0%})")
        if infinite:
            alert(2, col, "infinite values", f"{infinite:,} values are ±inf")
        if abs(skew) >= SKEWED:
            alert(1, col, "skewed", f"skewness {skew:+.1f} (rule: |skewness| at least {SKEWED:g})")
    elif kind in ("categorical", "text") and (mixed := looks_mixed(col)):
        alert(2, col, "mixed types", mixed)

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
    display(alerts.set_index(pd.RangeIndex(1, len(alerts) + 1, name="rank")))''',
    pandas={
        "how": "",
        "surely": "",
        "only_value": "short_label(df[col].dropna().iloc[0])",
        "integers": "pd.api.types.is_integer_dtype(df[col])",
        "unique": "distinct[col] == n",
        "estimated": "",
        "numbers": '''\
values = df[col].dropna()
zeros = float((values == 0).mean())
infinite = int(np.isinf(values.astype("float64")).sum())
skew = float(values[np.isfinite(values.astype("float64"))].skew())''',
    },
    duckdb={
        "how": '# Counts are exact (all rows); "mixed types" looks at up to 2,000 distinct values of the '
               'sample.',
        "surely": " and distinct_exact[col]",
        "only_value": 'short_label(value_counts[col].index[0]) if col in value_counts else "?"',
        "integers": 'stats.loc[col, "whole"]',
        "unique": "distinct[col] == n if distinct_exact[col] else distinct[col] >= 0.98 * n",
        "estimated": "{'' if distinct_exact[col] else ' (≈: estimated count)'}",
        "numbers": '''\
s = stats.loc[col]
zeros, infinite, skew = s["zeros"] / n, int(s["infinite"]), skews.get(col, np.nan)''',
    },
)


def alerts(o: PlaybookOptions, engine: str) -> str:
    """The checks profiling tools make, each with its threshold, ranked by severity."""
    return ALERTS.code(engine)


MISSING = Cell('''\
missing = (rows - present)[lambda s: s > 0].sort_values(ascending=False)
findings["missing_cells"] = int(missing.sum())
findings["missing_share"] = float(missing.sum() / max(rows * cols, 1))
findings["missing"] = {str(k): int(v) for k, v in missing.head(3).items()}
findings["missing_columns"] = len(missing)
if missing.empty:
    print("No missing values.")
else:
    print(f"{int(missing.sum()):,} missing cells ({missing.sum() / (rows * cols):.1%} of all cells) "
          f"in {len(missing)} of {cols} columns$exact.")
    if len(missing) > $n:
        print(f"Table and matrix below: the $n columns with most missing values.")
    display(pd.DataFrame({"missing": missing, "percent": (100 * missing / rows).round(1)}).head($n))
    shown = list(missing.index[:$n])
    # Matrix: rows in file order, in blocks of `block` rows; a block is dark when any of its rows
    # misses the value (sampling rows instead would hide rare missing values).
    block = max(1, -(-rows // 500))
    $matrix
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
        $co_missingness
        ax = axes[0, 1]
        image = ax.imshow(co.values, cmap="coolwarm", vmin=-1, vmax=1)
        ax.set_xticks(range(len(shown)), labels=[short_label(c, 18) for c in shown], rotation=90)
        ax.set_yticks(range(len(shown)), labels=[short_label(c, 18) for c in shown])
        ax.set_title("Co-missingness (correlation of missing)")
        fig.colorbar(image, ax=ax, shrink=0.8)
    show(fig)
    if together:
        pairs = [(a, b, $both_missing)
                 for i, a in enumerate(shown) for j, b in enumerate(shown) if j > i]
        co_missing = pd.DataFrame(pairs, columns=["a", "b", "both missing"])
        share = co_missing["both missing"] / missing[co_missing["a"]].values
        co_missing["% of a's missing"] = (100 * share).round(1)
        co_missing = co_missing[co_missing["both missing"] > 0].sort_values("both missing", ascending=False)
        if not co_missing.empty:
            print("Columns missing in the same rows:")
            display(co_missing.head(10).reset_index(drop=True))''',
    pandas={
        "exact": "",
        "matrix": '''\
nullity = df[shown].isna()
blocks = np.maximum.reduceat(nullity.to_numpy(dtype=np.uint8), np.arange(0, rows, block), axis=0)''',
        "co_missingness": "co = nullity.astype(float).corr()",
        "both_missing": "int((nullity[a] & nullity[b]).sum())",
    },
    duckdb={
        "exact": " (exact)",
        "matrix": '''\
# Pass 4: exact, streamed from DuckDB a chunk at a time.
blocks, sums, products = missing_pass(shown, block)''',
        "co_missingness": '''\
mean = sums / rows
cov = products / rows - np.outer(mean, mean)
sd = np.sqrt(np.diag(cov))
with np.errstate(invalid="ignore", divide="ignore"):
    co = pd.DataFrame(cov / np.outer(sd, sd), index=shown, columns=shown)''',
        "both_missing": "int(products[i, j])",
    },
)


def missing(o: PlaybookOptions, engine: str) -> str:
    """Missing cells per column, the missing-value matrix, and which columns go missing together."""
    return MISSING.code(engine, n=o.max_table_rows)


DUPLICATES = Cell('''\
$how
findings["duplicates"] = duplicate_rows
print(f"{duplicate_rows:,} duplicate rows ({duplicate_rows / max(rows, 1):.1%} of all rows)$collisions.")
if duplicate_rows:
    display($examples)''',
    pandas={"how": "", "collisions": "", "examples": "df[df.duplicated(keep=False)].head(10)"},
    duckdb={
        "how": '''\
# Rows are compared by a 64-bit hash of every column (pass 3): exact unless two different rows share a
# hash, which at this size is about as likely as rows**2 / 2**65.''',
        "collisions": ("; chance that a hash collision changed this count: about "
                       "{min(1.0, rows**2 / 2**65):.1g}"),
        "examples": '''\
con.execute(f"SELECT * FROM data WHERE {hash_of} IN "
            f"(SELECT {hash_of} AS h FROM data GROUP BY h HAVING count(*) > 1 LIMIT 5) LIMIT 10").df()''',
    },
)


def duplicates(o: PlaybookOptions, engine: str) -> str:
    """Rows identical in every column, with examples."""
    return DUPLICATES.code(engine)


NUMERIC = Cell('''\
$numeric_cols
findings["numeric_columns"] = len(numeric_cols)
if $nothing:
    print("No numeric columns.")
    numeric_summary = pd.DataFrame()
else:
    $summary
    if len(numeric_cols) > $n:
        print(f"Table below: the first $n of {len(numeric_cols)} numeric columns.")
    display(numeric_summary.head($n).astype(float).round(4))''',
    pandas={
        "numeric_cols": '''\
numeric = df.select_dtypes("number").select_dtypes(exclude="bool")
numeric_cols = list(numeric.columns)''',
        "nothing": "numeric.empty",  # no numeric column, or no row
        "summary": '''\
finite = numeric.astype("float64").replace([np.inf, -np.inf], np.nan)
numeric_summary = finite.describe(percentiles=[0.05, 0.25, 0.5, 0.75, 0.95]).T
numeric_summary["missing %"] = (100 * numeric.isna().mean()).round(1)
numeric_summary["zeros %"] = (100 * (numeric == 0).sum() / numeric.notna().sum().clip(lower=1)).round(1)
numeric_summary["skew"] = finite.skew()''',
    },
    duckdb={
        "numeric_cols": 'numeric_cols = [c for c in columns if kinds[c] == "numeric"]',
        "nothing": "not numeric_cols",
        "summary": '''\
s = stats.loc[numeric_cols]
q = quantiles.reindex(numeric_cols)
numeric_summary = pd.DataFrame({"count": s["finite"].astype(float), "mean": s["mean"], "std": s["std"],
                                "min": s["min"], "5%": q[0.05], "25%": q[0.25], "50%": q[0.5],
                                "75%": q[0.75], "95%": q[0.95], "max": s["max"]})
numeric_summary["missing %"] = (100 * (1 - s["present"] / max(rows, 1))).astype(float).round(1)
numeric_summary["zeros %"] = (100 * s["zeros"] / s["present"].clip(lower=1)).astype(float).round(1)
numeric_summary["skew"] = pd.Series(skews)
print("Exact over all rows (quantiles by linear interpolation, as pandas; infinities left out).")
if fallbacks:
    print(f"Quantiles of {', '.join(map(str, fallbacks))} were computed holding the column whole.")''',
    },
)


def numeric(o: PlaybookOptions, engine: str) -> str:
    """Counts, quantiles, skewness and zeros of every numeric column."""
    return NUMERIC.code(engine, n=o.max_table_rows)
