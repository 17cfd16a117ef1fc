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

Every helper is defined in the setup cell, so the notebook re-runs alone; each cell says
which of its numbers are exact, approximate or from the sample.
"""

from __future__ import annotations

from ._cells import ALERT_HELPER, ALERTS_RANKED

EXACT_DISTINCT = 200_000_000
"""Columns whose estimated distinct count is at most this get an exact ``count(DISTINCT)``
(a hash table DuckDB may spill); above it the HyperLogLog estimate is shown, marked ≈."""

DUCK_SETUP = '''

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


def period_for(first, last):
    """The shortest of hour/day/week/month/quarter/year that gives at most 120 bars."""
    span = (pd.Timestamp(last) - pd.Timestamp(first)) / pd.Timedelta(days=1)
    for unit, days in (("hour", 1 / 24), ("day", 1), ("week", 7), ("month", 30.4), ("quarter", 91.3)):
        if span / days <= 120:
            return unit
    return "year"


def bin_plan(col, s):
    """How the column's histogram is binned: whole numbers one bar each, skewed positive columns
    on log bins, other skewed columns on their 1-99% range (approximate quantiles), else 30 bins."""
    low, high, skew = float(s["min"]), float(s["max"]), s["rough skew"]
    approx = dict(zip(brackets, s["approx q"]))
    f = finite(col)
    if s["approx distinct"] <= 30 and s["whole"] and high - low <= 60:
        return {"sql": f"CAST({f} AS BIGINT)", "where": f"{f} IS NOT NULL", "edges": np.arange(low, high + 2) - 0.5,
                "title": "", "offset": low}
    if skew is not None and abs(skew) >= SKEWED and low > 0:
        edges = np.geomspace(low, high, 31)
        step = float(np.log(high / low) / 30) if high > low else 1.0
        return {"sql": f"least(29, CAST(floor(ln({f} / {num(low)}) / {num(step)}) AS INTEGER))",
                "where": f"{f} IS NOT NULL", "edges": edges, "title": " (log x)", "log": True}
    if skew is not None and abs(skew) >= SKEWED:
        low, high = float(approx[0.01]), float(approx[0.99])
        title = " (1-99%, approximate range)"
    else:
        title = ""
    width = float((high - low) / 30) if high > low else 1.0
    return {"sql": f"least(29, CAST(floor(({f} - {num(low)}) / {num(width)}) AS INTEGER))",
            "where": f"{f} BETWEEN {num(low)} AND {num(high)}", "edges": low + width * np.arange(31), "title": title,
            "clip": (low, high) if title else None}


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
        if column is None or attempt == 5:
            raise ValueError(f"{file_name}: " + one_line(exc)) from None
        print(f"Column {column!r} holds text further down the file: read as text.")
        source = source.replace("types={", "types={" + repr(column) + ": 'VARCHAR', ", 1)
    except duckdb.Error as exc:  # a malformed file: say where, in one line
        raise ValueError(f"{file_name}: cannot be read as a table: " + one_line(exc)) from None
columns = list(types)
print(f"{rows:,} rows x {len(columns):,} columns, read by DuckDB {duckdb.__version__} without loading them "
      "(pass 1 of 4: counts, moments, approximate quantiles, Pearson r).")'''


def overview(sample_rows: int) -> str:
    """Pass 2 and 3, and the overview table."""
    return '''\
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
cols = len(columns)
kinds = pd.Series({c: stats.loc[c, "kind"] if stats.loc[c, "kind"] != "text" else
                   ("categorical" if distinct[c] <= HIGH_CARDINALITY else "text") for c in columns}, dtype=object)
quantile_rows, skews, fallbacks = {}, {}, []
for c in [c for c in columns if kinds[c] == "numeric" and stats.loc[c, "finite"]]:
    n = int(stats.loc[c, "finite"])
    if c in value_counts:
        found = [quantile_from_counts(q, value_counts[c]) for q in QUANTILES]
    else:
        found = [exact_quantile(q, n, exact[("below", c, q)] or 0, np.sort(np.asarray(exact[("near", c, q)] or [],
                                                                                      dtype=float)))
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

file_mib = source_bytes / 2**20
print(f"{rows:,} rows x {cols:,} columns; {file_mib:,.1f} MiB on disk, never loaded whole.")
print(f"Exact over all rows: counts, missing values, distinct values (≈ marks a HyperLogLog estimate above "
      f"{EXACT_DISTINCT:,}), means, quantiles, skewness, value counts, histograms. Associations that need "
      f"rows use a fixed sample of {len(sample):,} rows (those whose row hash falls in a fixed range).")
overview = pd.DataFrame({"type": stats["type"], "kind": kinds, "present": present, "missing": rows - present,
                         "missing %": (100 * (rows - present) / max(rows, 1)).round(1), "distinct": distinct,
                         "distinct is": np.where(distinct_exact, "exact", "≈ approx")})
findings["shape"] = [rows, cols]
findings["memory_mib"] = round(float(file_mib), 2)
findings["columns"] = [str(c) for c in columns]
findings["kinds"] = {str(k): int(v) for k, v in kinds.value_counts().items()}
findings["sample_rows"] = len(sample)
findings["out_of_core"] = {"engine": f"DuckDB {duckdb.__version__}", "file_mib": round(float(file_mib), 1),
                           "memory_limit": con.execute("SELECT current_setting('memory_limit')").fetchone()[0],
                           "sample_rows": len(sample),
                           "approximate": [f"distinct values of {c}" for c in columns if not distinct_exact[c]],
                           "quantiles_held_whole": fallbacks}
if cols > 60:
    print(f"Table below: the first 60 of {cols:,} columns.")
overview.head(60)'''


def alerts() -> str:
    """The same checks as the pandas path, from the exact counts (mixed types on the sample)."""
    return '''\
# Severity: 3 = fix or drop before analysis, 2 = check, 1 = keep in mind. Counts are exact (all rows);
# "mixed types" looks at up to 2,000 distinct values of the sample.
''' + ALERT_HELPER + '''

def looks_mixed(col):
    """Text where most (not all) distinct values are numbers."""
    values = pd.Series(sample[col].dropna().unique()[:2000])
    numbers = pd.to_numeric(values, errors="coerce").notna()
    if len(values) >= 5 and 0.5 <= numbers.mean() < 1:
        example = values[~numbers].iloc[0]
        return f"{numbers.mean():.0%} of distinct values are numbers, others text such as {example!r}"
    return None


for col in columns:
    n, kind, s = int(present[col]), kinds[col], stats.loc[col]
    if n == 0:
        alert(3, col, "empty", "every value is missing")
        continue
    missing_share = 1 - n / rows
    if missing_share >= MOSTLY_MISSING:
        alert(3 if missing_share >= 0.9 else 2, col, "mostly missing",
              f"{missing_share:.1%} missing (rule: at least {MOSTLY_MISSING:.0%})")
    if distinct[col] == 1 and distinct_exact[col]:
        value = short_label(value_counts[col].index[0]) if col in value_counts else "?"
        alert(3, col, "constant", f"one value, {value!r}, in every present row")
        continue
    integers = kind == "numeric" and s["whole"]
    unique = distinct[col] == n if distinct_exact[col] else distinct[col] >= 0.98 * n
    if (kind in ("categorical", "text") or integers) and unique and n >= ID_MIN_ROWS:
        how = "" if distinct_exact[col] else " (≈: estimated count)"
        alert(2, col, "unique (ID-like)", f"all {n:,} values differ{how}: an identifier, not a feature")
    elif kind == "text":
        alert(1, col, "high cardinality", f"{distinct[col]:,} distinct values (rule: more than {HIGH_CARDINALITY})")
    if kind == "numeric":
        zeros = s["zeros"] / n
        if zeros >= MOSTLY_ZEROS:
            alert(1, col, "mostly zeros", f"{zeros:.1%} of present values are 0 (rule: at least {MOSTLY_ZEROS:.0%})")
        if s["infinite"]:
            alert(2, col, "infinite values", f"{int(s['infinite']):,} values are ±inf")
        if abs(skews.get(col, 0) or 0) >= SKEWED:
            alert(1, col, "skewed", f"skewness {skews[col]:+.1f} (rule: |skewness| at least {SKEWED:g})")
    elif kind in ("categorical", "text") and (mixed := looks_mixed(col)):
        alert(2, col, "mixed types", mixed)

''' + ALERTS_RANKED


def missing(n: int) -> str:
    """Missing cells per column (exact), the matrix and co-missingness (pass 4, streamed)."""
    return f'''\
missing = (rows - present)[lambda s: s > 0].sort_values(ascending=False)
findings["missing_cells"] = int(missing.sum())
findings["missing_share"] = float(missing.sum() / max(rows * cols, 1))
findings["missing"] = {{str(k): int(v) for k, v in missing.head(3).items()}}
findings["missing_columns"] = len(missing)
if missing.empty:
    print("No missing values.")
else:
    print(f"{{int(missing.sum()):,}} missing cells ({{missing.sum() / (rows * cols):.1%}} of all cells) "
          f"in {{len(missing)}} of {{cols}} columns (exact).")
    if len(missing) > {n}:
        print(f"Table and matrix below: the {n} columns with most missing values.")
    display(pd.DataFrame({{"missing": missing, "percent": (100 * missing / rows).round(1)}}).head({n}))
    shown = list(missing.index[:{n}])
    # Pass 4: rows in file order, in blocks of `block` rows; a block is dark when any of its rows
    # misses the value. Exact, streamed from DuckDB a chunk at a time.
    block = max(1, -(-rows // 500))
    blocks, sums, products = missing_pass(shown, block)
    together = len(shown) >= 2
    fig, axes = plt.subplots(1, 2 if together else 1, squeeze=False,
                             figsize=(min(12, 2.5 + 0.45 * len(shown)) * (2 if together else 1), 4.2))
    ax = axes[0, 0]
    ax.imshow(blocks, aspect="auto", interpolation="nearest", cmap="Greys", vmin=0, vmax=1,
              extent=(-0.5, len(shown) - 0.5, rows, 0))
    ax.set_xticks(range(len(shown)), labels=[short_label(c, 18) for c in shown], rotation=90)
    ax.set_ylabel("row" + (f" (blocks of {{block:,}} rows)" if block > 1 else ""))
    ax.set_title("Missing values (dark = missing)")
    if together:
        mean = sums / rows
        cov = products / rows - np.outer(mean, mean)
        sd = np.sqrt(np.diag(cov))
        with np.errstate(invalid="ignore", divide="ignore"):
            co = pd.DataFrame(cov / np.outer(sd, sd), index=shown, columns=shown)
        ax = axes[0, 1]
        image = ax.imshow(co.values, cmap="coolwarm", vmin=-1, vmax=1)
        ax.set_xticks(range(len(shown)), labels=[short_label(c, 18) for c in shown], rotation=90)
        ax.set_yticks(range(len(shown)), labels=[short_label(c, 18) for c in shown])
        ax.set_title("Co-missingness (correlation of missing)")
        fig.colorbar(image, ax=ax, shrink=0.8)
    show(fig)
    if together:
        pairs = [(a, b, int(products[i, j])) for i, a in enumerate(shown) for j, b in enumerate(shown) if j > i]
        co_missing = pd.DataFrame(pairs, columns=["a", "b", "both missing"])
        share = co_missing["both missing"] / missing[co_missing["a"]].values
        co_missing["% of a's missing"] = (100 * share).round(1)
        co_missing = co_missing[co_missing["both missing"] > 0].sort_values("both missing", ascending=False)
        if not co_missing.empty:
            print("Columns missing in the same rows:")
            display(co_missing.head(10).reset_index(drop=True))'''


def duplicates() -> str:
    """Duplicate rows from pass 3's row hashes, with examples."""
    return '''\
# Rows are compared by a 64-bit hash of every column (pass 3): exact unless two different rows share a
# hash, which at this size is about as likely as rows**2 / 2**65.
findings["duplicates"] = duplicate_rows
print(f"{duplicate_rows:,} duplicate rows ({duplicate_rows / max(rows, 1):.1%} of all rows); chance that "
      f"a hash collision changed this count: about {min(1.0, rows**2 / 2**65):.1g}.")
if duplicate_rows:
    display(con.execute(f"SELECT * FROM data WHERE {hash_of} IN (SELECT {hash_of} AS h FROM data GROUP BY h "
                        f"HAVING count(*) > 1 LIMIT 5) LIMIT 10").df())'''


def numeric(n: int) -> str:
    """The numeric summary: exact counts, moments and quantiles."""
    return f'''\
numeric_cols = [c for c in columns if kinds[c] == "numeric"]
findings["numeric_columns"] = len(numeric_cols)
if not numeric_cols:
    print("No numeric columns.")
    numeric_summary = pd.DataFrame()
else:
    s = stats.loc[numeric_cols]
    q = quantiles.reindex(numeric_cols)
    numeric_summary = pd.DataFrame({{"count": s["finite"].astype(float), "mean": s["mean"], "std": s["std"],
                                    "min": s["min"], "5%": q[0.05], "25%": q[0.25], "50%": q[0.5],
                                    "75%": q[0.75], "95%": q[0.95], "max": s["max"]}})
    numeric_summary["missing %"] = (100 * (1 - s["present"] / max(rows, 1))).astype(float).round(1)
    numeric_summary["zeros %"] = (100 * s["zeros"] / s["present"].clip(lower=1)).astype(float).round(1)
    numeric_summary["skew"] = pd.Series(skews)
    print("Exact over all rows (quantiles by linear interpolation, as pandas; infinities left out).")
    if fallbacks:
        print(f"Quantiles of {{', '.join(map(str, fallbacks))}} were computed holding the column whole.")
    if len(numeric_cols) > {n}:
        print(f"Table below: the first {n} of {{len(numeric_cols)}} numeric columns.")
    display(numeric_summary.head({n}).astype(float).round(4))'''


def distributions(n: int) -> str:
    """Histograms from pass 2's exact bin counts."""
    return f'''\
varying = [c for c in columns if kinds[c] == "numeric" and distinct[c] > 1 and c in plans]
plotted = varying[:{n}]
if len(varying) > {n}:
    print(f"Histograms of the first {n} of {{len(varying)}} numeric columns that vary.")
if not plotted:
    print("No numeric column with more than one value.")
else:
    print("Bar heights are exact counts over all rows (pass 2).")
    fig, axes = panels(len(plotted))
    for ax, col in zip(axes, plotted):
        plan, counts = plans[col], exact.get(("bins", col)) or {{}}
        edges = np.asarray(plan["edges"], dtype=float)
        heights = np.zeros(len(edges) - 1)
        for index, count in counts.items():
            if index is not None:
                position = int(index - plan.get("offset", 0))  # whole numbers: one bar per value
                if 0 <= position < len(heights):
                    heights[position] += count
        title = short_label(col, 30) + plan["title"]
        if plan.get("clip"):
            title = short_label(col, 30) + f" (1-99%, {{int(stats.loc[col, 'finite']) - int(heights.sum()):,}} outside)"
        ax.stairs(heights, edges, fill=True, color="tab:blue", alpha=0.85)
        if plan.get("log"):
            ax.set_xscale("log")
        ax.set_title(title)
        ax.locator_params(axis="y", nbins=4)
    show(fig)'''


def categories(n: int) -> str:
    """Top values from pass 2's exact value counts."""
    return f'''\
categorical = [c for c in columns if kinds[c] in ("categorical", "boolean") and distinct[c] > 1]
text_columns = [c for c in columns if kinds[c] == "text"]
if text_columns:
    print(f"No bar chart for {{len(text_columns)}} column(s) with more than {{HIGH_CARDINALITY}} distinct values "
          f"(names, ids, free text): {{', '.join(map(str, text_columns[:10]))}}")
plotted = categorical[:{n}]
if len(categorical) > {n}:
    print(f"Bar charts of the first {n} of {{len(categorical)}} categorical columns.")
findings["top_values"] = {{}}
if not plotted:
    print(f"No categorical column with 2 to {{HIGH_CARDINALITY}} distinct values.")
else:
    print("Exact counts over all rows (pass 2).")
    fig, axes = panels(len(plotted), width=3, size=(4.4, 2.9))
    for ax, col in zip(axes, plotted):
        counts = value_counts[col]
        gap = int(rows - present[col])
        if gap:
            counts = pd.concat([counts, pd.Series([gap], index=[None])]).sort_values(ascending=False, kind="stable")
        top = counts.head(10)
        labels = ["(missing)" if pd.isna(v) else short_label(v) for v in top.index]
        if len(counts) > 10:
            labels.append(f"({{len(counts) - 10}} other values)")
            top = pd.concat([top, pd.Series([counts.iloc[10:].sum()])])
        colors = ["tab:gray" if label.startswith("(") else "tab:orange" for label in labels]
        ax.barh(labels[::-1], top.values[::-1], color=colors[::-1])
        ax.set_title(short_label(col, 34))
        ax.locator_params(axis="x", nbins=4)
        first = value_counts[col]
        findings["top_values"][str(col)] = [str(first.index[0]), round(float(first.iloc[0] / rows), 3)]
    show(fig)'''


def dates() -> str:
    """Date ranges (exact), rows per period (exact), numeric means per period (sample)."""
    return '''\
date_cols = [c for c in columns if kinds[c] == "date" and present[c] > 0]
findings["dates"] = {}
if not date_cols:
    print("No date columns.")
else:
    ranges = []
    for col in date_cols:
        first, last = pd.Timestamp(stats.loc[col, "min"]), pd.Timestamp(stats.loc[col, "max"])
        findings["dates"][str(col)] = [str(first), str(last)]
        ranges.append({"column": col, "first": first, "last": last, "span": last - first,
                       "missing": int(rows - present[col]), "period": period_for(first, last)})
    display(pd.DataFrame(ranges).set_index("column"))
    time_col = date_cols[0]
    trends = [c for c in columns if kinds[c] == "numeric" and distinct[c] > 1][:6]
    fig, axes = panels(min(len(date_cols), 3) + len(trends), width=3, size=(4.4, 2.6))
    for ax, col in zip(axes, date_cols[:3]):
        counts = pd.Series(exact[("periods", col)]).sort_index()
        ax.plot(pd.to_datetime(counts.index), counts.values, color="tab:blue", drawstyle="steps-mid")
        ax.set_title(f"rows per {period_for(stats.loc[col, 'min'], stats.loc[col, 'max'])}: {short_label(col, 20)}")
    unit = period_for(stats.loc[time_col, "min"], stats.loc[time_col, "max"])
    by_period = sample.assign(period=pd.to_datetime(sample[time_col]).dt.to_period(
        {"hour": "h", "day": "D", "week": "W", "month": "M", "quarter": "Q", "year": "Y"}[unit]).dt.start_time)
    for ax, col in zip(axes[min(len(date_cols), 3):], trends):
        means = by_period.groupby("period")[col].mean()
        ax.plot(means.index, means.values, color="tab:green", marker="." if len(means) < 60 else None)
        ax.set_title(f"mean {short_label(col, 22)} by {unit} (sample)")
    for ax in axes:
        locator = matplotlib.dates.AutoDateLocator(maxticks=5)
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(matplotlib.dates.ConciseDateFormatter(locator))
        ax.locator_params(axis="y", nbins=4)
    print(f"Rows per period: exact counts (pass 2). Means per {unit} of `{time_col}`: from the sample of "
          f"{len(sample):,} rows.")
    show(fig)'''


def outliers(n: int) -> str:
    """IQR fences from the exact quartiles; counts outside them from pass 3 (exact)."""
    return f'''\
# IQR rule: a value is an outlier below Q1 - 1.5*IQR or above Q3 + 1.5*IQR (exact quartiles and counts).
outlier_rows = []
for col, (low, high) in fences.items():
    q1, q3 = quantiles.loc[col, 0.25], quantiles.loc[col, 0.75]
    count = int(counted[col])
    skew = skews.get(col, np.nan)
    caveat = ""
    if q3 == q1:
        caveat = "IQR is 0: every value off the middle counts"
    elif abs(skew) >= SKEWED:
        caveat = f"skewed ({{skew:+.1f}}): the fences cut the long tail"
    outlier_rows.append({{"column": col, "Q1": q1, "Q3": q3, "low fence": low, "high fence": high,
                         "outliers": count, "percent": round(100 * count / int(stats.loc[col, "finite"]), 2),
                         "caveat": caveat}})
findings["outliers"] = []
if not outlier_rows:
    print("No numeric columns.")
else:
    outlier_table = pd.DataFrame(outlier_rows).set_index("column").sort_values("outliers", ascending=False)
    flagged = outlier_table[outlier_table["outliers"] > 0]
    findings["outliers"] = [[str(c), int(r["outliers"]), float(r["percent"]), r["caveat"]]
                            for c, r in flagged.head(3).iterrows()]
    print(f"{{len(flagged)}} of {{len(outlier_table)}} numeric columns have values outside the IQR fences "
          "(exact over all rows).")
    if len(outlier_table) > {n}:
        print(f"Table below: the {n} columns with most outliers.")
    display(outlier_table.head({n}))'''


def profiles(n: int, target: str | None) -> str:
    """The full profile of the most interesting columns, from the exact statistics."""
    return f'''\
interesting = [{target!r}] if {target!r} in columns else []
for col in [*alerts.loc[alerts["severity"] >= 2, "column"], *ranked[["a", "b"]].to_numpy().ravel()]:
    if col in columns and col not in interesting:
        interesting.append(col)
interesting = interesting[:{n}] or list(columns[:{n}])


def profile_of(col):
    kind, s = kinds[col], stats.loc[col]
    stats_of = {{"kind": kind, "type": str(s["type"]), "present": int(present[col]),
                "missing %": round(100 * (1 - present[col] / max(rows, 1)), 1),
                "distinct": f"{{int(distinct[col]):,}}" + ("" if distinct_exact[col] else " (≈)")}}
    if col in value_counts:
        first = value_counts[col]
        stats_of["most common"] = f"{{short_label(first.index[0], 20)}} ({{first.iloc[0] / max(present[col], 1):.0%}})"
    if kind == "numeric" and col in quantile_rows:
        q = quantiles.loc[col]
        stats_of.update({{"mean": s["mean"], "std": s["std"], "min": s["min"], "5%": q[0.05], "median": q[0.5],
                         "95%": q[0.95], "max": s["max"], "skew": skews.get(col),
                         "zeros %": round(100 * s["zeros"] / max(s["present"], 1), 1)}})
    if kind == "date" and present[col]:
        stats_of.update({{"min": s["min"], "max": s["max"]}})
    stats_of["alerts"] = "; ".join(alerts.loc[alerts["column"] == str(col), "alert"]) or "-"
    partners = ranked[(ranked["a"] == col) | (ranked["b"] == col)].head(1)
    for _, pair in partners.iterrows():
        other = pair["b"] if pair["a"] == col else pair["a"]
        signed = pair["measure"] in ("Pearson r", "Spearman ρ")
        value = f"{{pair['value']:+.2f}}" if signed else f"{{pair['value']:.2f}}"
        stats_of["strongest association"] = f"{{short_label(other, 20)}}: {{pair['measure']}} {{value}} (n = {{pair['n']:,}})"
    return pd.Series(stats_of, dtype=object)


column_profiles = pd.concat({{col: profile_of(col) for col in interesting}}, axis=1, sort=False)
print(f"Profiles of {{len(interesting)}} column(s) (exact statistics): {{', '.join(map(str, interesting))}}")
column_profiles.fillna("")'''


def associations(pandas_cell: str) -> str:
    """The pandas path's associations cell, with Pearson r exact over every row (pass 1) and the
    measures that need rows (Spearman ρ, Cramér's V, η) on the sample."""
    old = '''pearson = data.corr()
spearman = data.corr(method="spearman")
both = data.notna().astype(int)
pair_n = both.T @ both if num_cols else pd.DataFrame()  # rows where both are present
pairs = []
for i, a in enumerate(num_cols):
    for b in num_cols[i + 1:]:
        for measure, matrix in (("Pearson r", pearson), ("Spearman ρ", spearman)):
            pairs.append((a, b, measure, matrix.loc[a, b], int(pair_n.loc[a, b])))'''
    new = '''# Pearson r and its n: exact, over every row (pass 1). Spearman ρ, Cramér's V and η: the sample.
spearman = data.corr(method="spearman")
both = data.notna().astype(int)
pair_n = both.T @ both if num_cols else pd.DataFrame()  # sample rows where both are present
pearson = spearman * np.nan
pairs = []
for i, a in enumerate(num_cols):
    for b in num_cols[i + 1:]:
        r, n = pearson_r.get((a, b)) or pearson_r.get((b, a)) or (data[a].corr(data[b]), int(pair_n.loc[a, b]))
        pearson.loc[a, b] = pearson.loc[b, a] = r
        pairs.append((a, b, "Pearson r", r, int(n)))
        pairs.append((a, b, "Spearman ρ", spearman.loc[a, b], int(pair_n.loc[a, b])))
for a in num_cols:
    pearson.loc[a, a] = 1.0'''
    if old not in pandas_cell:
        raise AssertionError("the pandas associations cell changed; update the out-of-core variant")
    cell = pandas_cell.replace(old, new).replace("df.columns", "columns")
    return cell.replace('print(f"Strongest pairs ({len(sample):,} rows; n = rows where both are present):")',
                        'print(f"Strongest pairs (Pearson r over all {rows:,} rows; the other measures over the '
                        'sample of {len(sample):,} rows; n = rows where both are present):")')


def target(pandas_cell: str) -> str:
    """The pandas path's target cell, on the sample."""
    cell = (pandas_cell.replace("df[", "sample[").replace("df.loc", "sample.loc")
            .replace("df.columns", "columns"))
    return ('print(f"Measures and plots below use the sample of {len(sample):,} rows.")\n' + cell)
