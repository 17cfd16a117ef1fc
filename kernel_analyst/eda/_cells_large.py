"""The out-of-core playbook's setup: DuckDB helpers that compute the report's numbers in
four passes over the file, in bounded memory.

- pass 1 (the loading cell): counts, approximate distinct counts, min / max / mean /
  standard deviation / zeros / infinities of numeric columns, approximate quantiles and
  Pearson r of every numeric pair; a malformed file fails here, before anything else;
- pass 2 (overview): exact value counts of columns with few distinct values, exact
  distinct counts up to :data:`EXACT_DISTINCT`, central moments (skewness), exact
  quantiles (counts below and around the approximate ones, so no column is held whole),
  histogram bins and rows per period;
- pass 3 (overview): duplicate rows (64-bit hashes of whole rows), outliers against the
  exact IQR fences, and a fixed sample for the measures that need rows;
- pass 4 (missing values): the missing-value matrix, streamed in file order.

Every helper is defined in the setup cell, so the notebook re-runs alone. The sections'
cells are the pandas path's (one :class:`~._template.Cell` each, in :mod:`._cells`,
:mod:`._cells_plots`, :mod:`._cells_relations`): their DuckDB holes read what these
passes computed, and say which of the numbers are exact, approximate or from the sample.
"""

from __future__ import annotations

EXACT_DISTINCT = 200_000_000
"""Columns whose estimated distinct count is at most this get an exact ``count(DISTINCT)``
(a hash table DuckDB may spill); above it the HyperLogLog estimate is shown, marked ≈."""

DUCK_SETUP = '''

import os
import re

import duckdb

QUANTILES = [0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99]
BRACKET = 0.002         # exact quantiles: values within this rank share of the approximate ones
EXACT_DISTINCT = $exact_distinct  # distinct values counted exactly up to this many (HyperLogLog above)
VALUE_COUNTS = 10_000   # columns with at most this many distinct values get every value counted
SAMPLE_ROWS = $sample_rows
NUMERIC_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                 "UBIGINT", "FLOAT", "DOUBLE", "REAL")


def qi(name):
    """A column name as a SQL identifier."""
    return '"' + str(name).replace('"', '""') + '"'


def one_line(exc):
    """DuckDB's message, first lines only, on one line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return " ".join(lines[:3])[:600]


def conversion_column(exc):
    found = re.search(r'column "([^"]+)"', str(exc)) or re.search(r"column (\\\\S+)", str(exc))
    return found.group(1) if found else None


def type_kind(sql_type):
    if sql_type == "BOOLEAN":
        return "boolean"
    if sql_type in NUMERIC_TYPES or sql_type.startswith("DECIMAL"):
        return "numeric"
    if sql_type.startswith(("TIMESTAMP", "DATE")):
        return "date"
    return "text"


def num(value):
    """A number as a SQL literal."""
    return repr(float(value))


def finite(col):
    """The column as DOUBLE, infinities as NULL (pandas' summary drops them the same way)."""
    return f"CASE WHEN isfinite(CAST({qi(col)} AS DOUBLE)) THEN CAST({qi(col)} AS DOUBLE) END"


def first_pass(types):
    """Pass 1: one aggregate query over every row."""
    numeric = [c for c, t in types.items() if type_kind(t) == "numeric"]
    dates = [c for c, t in types.items() if type_kind(t) == "date"]
    brackets = sorted({min(1.0, max(0.0, round(q + d, 6))) for q in QUANTILES for d in (-BRACKET, 0, BRACKET)})
    exprs = {"rows": "count(*)"}
    for i, c in enumerate(types):
        exprs[f"present {i}"] = f"count({qi(c)})"
        exprs[f"approx distinct {i}"] = f"approx_count_distinct({qi(c)})"
    for i, c in enumerate(types):
        if c in numeric:
            f = finite(c)
            exprs.update({f"min {i}": f"min({f})", f"max {i}": f"max({f})", f"mean {i}": f"avg({f})",
                          f"std {i}": f"stddev_samp({f})", f"finite {i}": f"count({f})",
                          f"zeros {i}": f"count(*) FILTER ({qi(c)} = 0)",
                          f"infinite {i}": f"count(*) FILTER (NOT isfinite(CAST({qi(c)} AS DOUBLE)))",
                          f"rough skew {i}": f"skewness({f})",
                          f"fractions {i}": f"count(*) FILTER ({f} <> floor({f}))",
                          f"approx q {i}": f"approx_quantile({f}, {brackets})"})
        if c in dates:
            exprs.update({f"min {i}": f"min({qi(c)})", f"max {i}": f"max({qi(c)})"})
    corr_cols = numeric[:$max_num]
    for i, a in enumerate(corr_cols):
        for b in corr_cols[i + 1:]:
            exprs[f"r {a}\\x00{b}"] = f"corr({finite(a)}, {finite(b)})"
            exprs[f"n {a}\\x00{b}"] = f"regr_count({finite(a)}, {finite(b)})"
    names = list(exprs)
    values = con.execute("SELECT " + ", ".join(exprs.values()) + " FROM data").fetchone()
    found = dict(zip(names, values))
    stats = pd.DataFrame(index=pd.Index(list(types), dtype=object))
    stats["type"] = list(types.values())
    for key in ("present", "approx distinct", "min", "max", "mean", "std", "finite", "zeros", "infinite",
                "rough skew", "fractions", "approx q"):
        stats[key] = [found.get(f"{key} {i}") for i in range(len(types))]
    pearson_r = {tuple(k[2:].split("\\x00")): (v, found["n " + k[2:]]) for k, v in found.items()
                 if k.startswith("r ")}
    return int(found["rows"]), stats, brackets, pearson_r'''


DUCK_EXACT_PASS = '''

def exact_pass(stats, brackets, plans):
    """Pass 2: exact value counts, distinct counts, skewness, quantiles, histogram bins, periods."""
    exprs = {}
    for c, s in stats.iterrows():
        x = qi(c)
        if s["approx distinct"] <= VALUE_COUNTS:
            exprs[("counts", c)] = f"histogram({x})"
        elif s["approx distinct"] <= EXACT_DISTINCT:
            exprs[("distinct", c)] = f"count(DISTINCT {x})"
        if s["kind"] == "numeric" and s["finite"]:
            f, mean = finite(c), float(s["mean"])
            exprs[("m2", c)] = f"sum(power({f} - {num(mean)}, 2))"
            exprs[("m3", c)] = f"sum(power({f} - {num(mean)}, 3))"
            if s["approx distinct"] > VALUE_COUNTS:  # few distinct values: quantiles from the value counts
                approx = dict(zip(brackets, s["approx q"]))
                for q in QUANTILES:
                    low = approx[min(brackets, key=lambda b: abs(b - max(0.0, q - BRACKET)))]
                    high = approx[min(brackets, key=lambda b: abs(b - min(1.0, q + BRACKET)))]
                    exprs[("below", c, q)] = f"count(*) FILTER ({f} < {num(low)})"
                    exprs[("near", c, q)] = f"list({f}) FILTER ({f} BETWEEN {num(low)} AND {num(high)})"
            if c in plans:
                exprs[("bins", c)] = f"histogram({plans[c]['sql']}) FILTER ({plans[c]['where']})"
        if s["kind"] == "date" and s["present"]:
            exprs[("periods", c)] = f"histogram(date_trunc('{period_for(s['min'], s['max'])}', {x}))"
    if not exprs:
        return {}
    keys = list(exprs)
    return dict(zip(keys, con.execute("SELECT " + ", ".join(exprs.values()) + " FROM data").fetchone()))


def kth(k, below, near):
    """The k-th smallest value (0-based), from the count of values below a bracket and the
    bracket's values (a sorted array); None when the bracket does not hold it."""
    if k < below or k - below >= len(near):
        return None
    return float(near[k - below])


def exact_quantile(q, n, below, near):
    """pandas' linear interpolation between the two order statistics around q (None when the
    bracket around the approximate quantile missed them)."""
    position = (n - 1) * q
    k = int(np.floor(position))
    low, high = kth(k, below, near), kth(min(k + 1, n - 1), below, near)
    if low is None or high is None:
        return None
    return low + (high - low) * (position - k)


def quantile_from_counts(q, counts):
    """The same interpolation over a column's exact value counts (columns with few values)."""
    values = np.sort(np.asarray([v for v in counts.index if v is not None and np.isfinite(v)], dtype=float))
    cumulative = np.cumsum([counts[v] for v in values])
    n = int(cumulative[-1])
    position = (n - 1) * q
    k = int(np.floor(position))
    low, high = (values[np.searchsorted(cumulative, i, side="right")] for i in (k, min(k + 1, n - 1)))
    return float(low + (high - low) * (position - k))


def bin_plan(col, s):
    """How the column's histogram is binned: whole numbers one bar each, skewed positive columns
    on log bins, other skewed columns on their 1-99% range (approximate quantiles), else 30 bins."""
    low, high, skew = float(s["min"]), float(s["max"]), s["rough skew"]
    approx = dict(zip(brackets, s["approx q"]))
    f = finite(col)
    if s["approx distinct"] <= 30 and s["whole"] and high - low <= 60:
        return {"sql": f"CAST({f} AS BIGINT)", "where": f"{f} IS NOT NULL", "edges": np.arange(low, high + 2) - 0.5,
                "offset": low}
    if skew is not None and abs(skew) >= SKEWED and low > 0:
        edges = np.geomspace(low, high, 31)
        step = float(np.log(high / low) / 30) if high > low else 1.0
        return {"sql": f"least(29, CAST(floor(ln({f} / {num(low)}) / {num(step)}) AS INTEGER))",
                "where": f"{f} IS NOT NULL", "edges": edges, "log": True}
    clip = skew is not None and abs(skew) >= SKEWED
    if clip:
        low, high = float(approx[0.01]), float(approx[0.99])
    width = float((high - low) / 30) if high > low else 1.0
    return {"sql": f"least(29, CAST(floor(({f} - {num(low)}) / {num(width)}) AS INTEGER))",
            "where": f"{f} BETWEEN {num(low)} AND {num(high)}", "edges": low + width * np.arange(31),
            "clip": clip}


def sample_pass(stats, fences, hash_of):
    """Pass 3: duplicate rows, outliers against the exact fences, and a fixed sample of about
    SAMPLE_ROWS rows (those whose row hash falls in a fixed range: the same rows every run)."""
    keep = max(1, int(1_000_003 * min(1.0, SAMPLE_ROWS / max(rows, 1))))
    exprs = {"distinct rows": f"count(DISTINCT {hash_of})",
             "sample": f"list(struct_pack(h := {hash_of}, {', '.join(f'{qi(c)} := {qi(c)}' for c in stats.index)})) "
                       f"FILTER ({hash_of} % 1000003 < {keep})"}
    for c, (low, high) in fences.items():
        f = finite(c)
        exprs[c] = f"count(*) FILTER ({f} < {num(low)} OR {f} > {num(high)})"
    keys = list(exprs)
    found = dict(zip(keys, con.execute("SELECT " + ", ".join(exprs.values()) + " FROM data").fetchone()))
    picked = pd.DataFrame(found.pop("sample") or [], columns=["h", *stats.index])
    picked = picked.sort_values("h", kind="stable").drop(columns="h").reset_index(drop=True)
    return found, picked'''


DUCK_MISSING_PASS = '''

def missing_pass(shown, block):
    """Pass 4: the missing-value matrix (blocks of rows, in file order) and the co-missingness
    of the shown columns, streamed in chunks: exact, and never more than a chunk in memory."""
    k = len(shown)
    blocks, sums, products = [], np.zeros(k), np.zeros((k, k))
    carry, start = None, 0
    result = con.execute("SELECT " + ", ".join(f"{qi(c)} IS NULL" for c in shown) + " FROM data")
    while True:
        chunk = result.fetch_df_chunk(64)
        if chunk is None or chunk.empty:
            break
        nulls = chunk.to_numpy(dtype=np.float64)
        sums += nulls.sum(axis=0)
        products += nulls.T @ nulls
        if carry is not None:
            nulls = np.vstack([carry, nulls])
        whole = len(nulls) // block * block
        if whole:
            blocks.append(nulls[:whole].reshape(-1, block, k).max(axis=1))
        carry = nulls[whole:] if whole < len(nulls) else None
        start += len(chunk)
    if carry is not None and len(carry):
        blocks.append(carry.max(axis=0, keepdims=True))
    return (np.vstack(blocks) if blocks else np.zeros((0, k))), sums, products'''


LOAD_PASS = '''\
types = {}
for attempt in range(6):  # a column typed from DuckDB's sample may hold text further down
    try:
        con.execute(f"CREATE OR REPLACE VIEW data AS SELECT {select} FROM {source}")
        types = {name: kind for name, kind, *_ in con.execute("DESCRIBE data").fetchall()}
        nested = [c for c, t in types.items() if t.startswith(("STRUCT", "MAP", "UNION")) or t.endswith("]")]
        if nested:  # lists and objects (JSON) are profiled as JSON text, as the pandas path does
            as_text = ", ".join(f"CAST(to_json({qi(c)}) AS VARCHAR) AS {qi(c)}" for c in nested)
            con.execute(f"CREATE OR REPLACE VIEW data AS SELECT * REPLACE ({as_text}) FROM {source}")
            types = {name: kind for name, kind, *_ in con.execute("DESCRIBE data").fetchall()}
        rows, stats, brackets, pearson_r = first_pass(types)  # reads every row: a malformed file fails here
        break
    except duckdb.ConversionException as exc:
        column = conversion_column(exc)
        if column is None or attempt == 5 or f"{column!r}: 'VARCHAR'" in source:
            raise ValueError(f"{file_name}: " + one_line(exc)) from None  # text already, or no end
        print(f"Column {column!r} holds text further down the file: read as text.")
        source = source.replace("types={", "types={" + repr(column) + ": 'VARCHAR', ", 1)
    except duckdb.Error as exc:  # a malformed file: say where, in one line
        raise ValueError(f"{file_name}: cannot be read as a table: " + one_line(exc)) from None
columns = list(types)
print(f"{rows:,} rows x {len(columns):,} columns, read by DuckDB {duckdb.__version__} without loading them "
      "(pass 1 of 4: counts, moments, approximate quantiles, Pearson r).")'''

