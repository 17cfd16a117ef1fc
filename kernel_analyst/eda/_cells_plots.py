"""The code of the playbook's per-column cells: distributions, top values, dates over
time, outliers, and the profiles of the most interesting columns; each one
:class:`~._template.Cell` for both engines.

Plots are drawn as one figure with many panels (one figure per column costs far more),
at 100 dpi; skewed columns get a log axis (all values positive) or a clipped range, and
bar charts show missing values as their own bar. The plotting is shared: pandas counts
over the loaded table, DuckDB hands over the counts of its passes over the file.
"""

from __future__ import annotations

from ._template import Cell
from .options import PlaybookOptions

DISTRIBUTIONS = Cell('''\
varying = [c for c in columns if kinds[c] == "numeric" and distinct[c] > 1$binned]
plotted = varying[:$n]
if len(varying) > $n:
    print(f"Histograms of the first $n of {len(varying)} numeric columns that vary.")
if not plotted:
    print("No numeric column with more than one value.")
else:
    $note
    fig, axes = panels(len(plotted))
    for ax, col in zip(axes, plotted):
        $heights
        title = short_label(col, 30)
        if log:
            ax.set_xscale("log")
            title += " (log x)"
        elif outside is not None:
            title += f" (1-99%, {outside:,} outside)"
        ax.hist(edges[:-1], bins=edges, weights=heights, color="tab:blue", alpha=0.85)
        ax.set_title(title)
        ax.locator_params(axis="y", nbins=4)
    show(fig)''',
    pandas={
        "binned": "",
        "note": "",
        "heights": '''\
values = df[col].astype("float64")
values = values[np.isfinite(values)]
skew, log, outside, bins = values.skew(), False, None, 30
if distinct[col] <= 30 and (values == values.round()).all() and values.max() - values.min() <= 60:
    bins = np.arange(values.min(), values.max() + 2) - 0.5  # one bar per whole number
elif abs(skew) >= SKEWED and values.min() > 0:
    bins, log = np.geomspace(values.min(), values.max(), 31), True
elif abs(skew) >= SKEWED:
    low, high = np.percentile(values, [1, 99])
    outside = int(((values < low) | (values > high)).sum())
    values = values[(values >= low) & (values <= high)]
heights, edges = np.histogram(values, bins=bins)''',
    },
    duckdb={
        "binned": " and c in plans",
        "note": 'print("Bar heights are exact counts over all rows (pass 2).")',
        "heights": '''\
plan, counts = plans[col], exact.get(("bins", col)) or {}
edges = np.asarray(plan["edges"], dtype=float)
heights = np.zeros(len(edges) - 1)
for index, count in counts.items():
    if index is not None:
        position = int(index - plan.get("offset", 0))  # whole numbers: one bar per value
        if 0 <= position < len(heights):
            heights[position] += count
log = plan.get("log", False)
outside = int(stats.loc[col, "finite"]) - int(heights.sum()) if plan.get("clip") else None''',
    },
)


def distributions(o: PlaybookOptions, engine: str) -> str:
    """Histograms of the numeric columns that vary."""
    return DISTRIBUTIONS.code(engine, n=o.max_hist_columns)


CATEGORIES = Cell('''\
categorical = [c for c in columns if kinds[c] in ("categorical", "boolean") and distinct[c] > 1]
text_columns = [c for c in columns if kinds[c] == "text"]
if text_columns:
    print(f"No bar chart for {len(text_columns)} column(s) with more than {HIGH_CARDINALITY} distinct values "
          f"(names, ids, free text): {', '.join(map(str, text_columns[:10]))}")
plotted = categorical[:$n]
if len(categorical) > $n:
    print(f"Bar charts of the first $n of {len(categorical)} categorical columns.")
findings["top_values"] = {}
if not plotted:
    print(f"No categorical column with 2 to {HIGH_CARDINALITY} distinct values.")
else:
    $note
    fig, axes = panels(len(plotted), width=3, size=(4.4, 2.9))
    for ax, col in zip(axes, plotted):
        $counts
        top = counts.head(10)
        labels = ["(missing)" if pd.isna(v) else short_label(v) for v in top.index]
        if len(counts) > 10:
            labels.append(f"({len(counts) - 10} other values)")
            top = pd.concat([top, pd.Series([counts.iloc[10:].sum()])])
        colors = ["tab:gray" if label.startswith("(") else "tab:orange" for label in labels]
        ax.barh(labels[::-1], top.values[::-1], color=colors[::-1])
        ax.set_title(short_label(col, 34))
        ax.locator_params(axis="x", nbins=4)
        first = counts.drop([v for v in counts.index if pd.isna(v)], errors="ignore")
        findings["top_values"][str(col)] = [str(first.index[0]), round(float(first.iloc[0] / rows), 3)]
    show(fig)''',
    pandas={"note": "", "counts": "counts = df[col].value_counts(dropna=False)"},
    duckdb={
        "note": 'print("Exact counts over all rows (pass 2).")',
        "counts": '''\
counts = value_counts[col]
gap = int(rows - present[col])
if gap:  # missing values: a bar of their own, as pandas' value_counts(dropna=False) makes it
    counts = pd.concat([counts, pd.Series([gap], index=[None])])
    counts = counts.sort_values(ascending=False, kind="stable")''',
    },
)


def categories(o: PlaybookOptions, engine: str) -> str:
    """Top values of the categorical columns, missing values as a bar of their own."""
    return CATEGORIES.code(engine, n=o.max_bar_columns)


DATES = Cell('''\
date_cols = [c for c in columns if kinds[c] == "date" and present[c] > 0]
$not_parsed
$periods
findings["dates"] = {}
if not date_cols:
    print("No date columns.")
else:
    date_ranges = []
    for col in date_cols:
        first, last = $first_last
        findings["dates"][str(col)] = [str(first), str(last)]
        date_ranges.append({"column": col, "first": first, "last": last, "span": last - first,
                            "missing": int(rows - present[col]), "period": period_for(first, last)})
    date_ranges = pd.DataFrame(date_ranges).set_index("column")
    display(date_ranges)
    time_col = date_cols[0]
    unit = date_ranges.loc[time_col, "period"]
    trends = [c for c in columns if kinds[c] == "numeric" and distinct[c] > 1][:6]
    fig, axes = panels(min(len(date_cols), 3) + len(trends), width=3, size=(4.4, 2.6))
    for ax, col in zip(axes, date_cols[:3]):
        $rows_per_period
        ax.plot(counts.index, counts.values, color="tab:blue", drawstyle="steps-mid")
        ax.set_title(f"rows per {date_ranges.loc[col, 'period']}: {short_label(col, 20)}")
    $by_period
    for ax, col in zip(axes[min(len(date_cols), 3):], trends):
        means = by_period[col].mean()
        ax.plot(means.index, means.values, color="tab:green", marker="." if len(means) < 60 else None)
        ax.set_title(f"mean {short_label(col, 22)} by {unit}$sampled")
    for ax in axes:  # few, short date labels: readable, and text is most of a figure's drawing time
        locator = matplotlib.dates.AutoDateLocator(maxticks=5)
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(matplotlib.dates.ConciseDateFormatter(locator))
        ax.locator_params(axis="y", nbins=4)
    $note
    if trends:
        print(f"Numeric columns over time: the mean per {unit} "
              f"of `{time_col}`$from_sample.")
    show(fig)''',
    pandas={
        "first_last": "df[col].min(), df[col].max()",
        "rows_per_period": '''\
counts = df.groupby(pd.Grouper(key=col, freq=FREQ[date_ranges.loc[col, "period"]])).size()''',
        "periods": '''\
FREQ = {"hour": "h", "day": "D", "week": "W", "month": "MS", "quarter": "QS", "year": "YS"}''',
        "by_period": "by_period = df.groupby(pd.Grouper(key=time_col, freq=FREQ[unit]))",
        "sampled": "",
        "note": "",
        "from_sample": "",
    },
    duckdb={
        "periods": "",
        "first_last": 'pd.Timestamp(stats.loc[col, "min"]), pd.Timestamp(stats.loc[col, "max"])',
        "rows_per_period": '''\
counts = pd.Series(exact[("periods", col)]).sort_index()
counts.index = pd.to_datetime(counts.index)''',
        "by_period": '''\
period = {"hour": "h", "day": "D", "week": "W", "month": "M", "quarter": "Q", "year": "Y"}[unit]
by_period = sample.groupby(pd.to_datetime(sample[time_col]).dt.to_period(period).dt.start_time)''',
        "sampled": " (sample)",
        "note": 'print("Rows per period: exact counts over all rows (pass 2).")',
        "from_sample": ", from the sample of {len(sample):,} rows",
    },
)


def dates(o: PlaybookOptions, engine: str, expected: tuple[str, ...] = ()) -> str:
    """Date ranges, rows over time, and numeric columns over time; ``expected``: the columns
    the loading cell parses as dates (pandas: those it could not are said to be text)."""
    check = ""
    if expected and engine == "pandas":
        check = f'''\
not_parsed = [c for c in {list(expected)!r} if c in df and not pd.api.types.is_datetime64_any_dtype(df[c])]
if not_parsed:
    print(f"Detected as dates in a sample, but not every value matched, so left as text: {{not_parsed}}")'''
    return DATES.code(engine, not_parsed=check)


OUTLIERS = Cell('''\
# IQR rule: a value is an outlier below Q1 - 1.5*IQR or above Q3 + 1.5*IQR. The rule assumes a
# roughly symmetric distribution: on skewed columns it flags the long tail, not errors.
$how
outlier_rows = []
for col in [c for c in columns if kinds[c] == "numeric"]:
    $fences
    caveat = ""
    if q3 == q1:
        caveat = "IQR is 0: every value off the middle counts"
    elif abs(skew) >= SKEWED:
        caveat = f"skewed ({skew:+.1f}): the fences cut the long tail"
    outlier_rows.append({"column": col, "Q1": q1, "Q3": q3, "low fence": low, "high fence": high,
                         "outliers": count, "percent": round(100 * count / n, 2), "caveat": caveat})
findings["outliers"] = []
if not outlier_rows:
    print("No numeric columns.")
else:
    outlier_table = pd.DataFrame(outlier_rows).set_index("column").sort_values("outliers", ascending=False)
    flagged = outlier_table[outlier_table["outliers"] > 0]
    findings["outliers"] = [[str(c), int(r["outliers"]), float(r["percent"]), r["caveat"]]
                            for c, r in flagged.head(3).iterrows()]
    print(f"{len(flagged)} of {len(outlier_table)} numeric columns have values outside the IQR "
          f"fences$exact.")
    if len(outlier_table) > $n:
        print(f"Table below: the $n columns with most outliers.")
    display(outlier_table.head($n))''',
    pandas={
        "how": "",
        "fences": '''\
values = df[col].astype("float64")
values = values[np.isfinite(values)]
if values.empty:
    continue
q1, q3 = values.quantile(0.25), values.quantile(0.75)
low, high = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
count, n, skew = int(((values < low) | (values > high)).sum()), len(values), values.skew()''',
        "exact": "",
    },
    duckdb={
        "how": "# Quartiles and counts are exact, over all rows (fences from pass 2, counts from pass 3).",
        "fences": '''\
if col not in fences:  # no finite value
    continue
(low, high), q1, q3 = fences[col], quantiles.loc[col, 0.25], quantiles.loc[col, 0.75]
count, n, skew = int(counted[col]), int(stats.loc[col, "finite"]), skews.get(col, np.nan)''',
        "exact": " (exact over all rows)",
    },
)


def outliers(o: PlaybookOptions, engine: str) -> str:
    """Values outside the interquartile-range fences, with a caveat where the rule misleads."""
    return OUTLIERS.code(engine, n=o.max_table_rows)


PROFILES = Cell('''\
# Most interesting first: the target, columns with serious alerts, then those in the strongest associations.
interesting = [$target] if $target in columns else []
for col in [*alerts.loc[alerts["severity"] >= 2, "column"], *ranked[["a", "b"]].to_numpy().ravel()]:
    if col in columns and col not in interesting:
        interesting.append(col)
interesting = interesting[:$n] or list(columns[:$n])


def profile_of(col):
    kind = kinds[col]
    $counts
    profile = {"kind": kind, "type": $type, "present": int(present[col]),
               "missing %": round(100 * (1 - present[col] / max(rows, 1)), 1),
               "distinct": $distinct}
    if len(counts):
        share = counts.iloc[0] / max(present[col], 1)
        profile["most common"] = f"{short_label(counts.index[0], 20)} ({share:.0%})"
    if kind == "numeric" and $has_numbers:
        $numbers
    if kind == "date" and present[col]:
        profile.update({"min": $first, "max": $last})
    profile["alerts"] = "; ".join(alerts.loc[alerts["column"] == str(col), "alert"]) or "-"
    partners = ranked[(ranked["a"] == col) | (ranked["b"] == col)].head(1)
    for _, pair in partners.iterrows():
        other = pair["b"] if pair["a"] == col else pair["a"]
        signed = pair["measure"] in ("Pearson r", "Spearman ρ")
        value = f"{pair['value']:+.2f}" if signed else f"{pair['value']:.2f}"
        measure = f"{pair['measure']} {value} (n = {pair['n']:,})"
        profile["strongest association"] = f"{short_label(other, 20)}: {measure}"
    return pd.Series(profile, dtype=object)


column_profiles = pd.concat({col: profile_of(col) for col in interesting}, axis=1, sort=False)
print(f"Profiles of {len(interesting)} column(s)$exact: {', '.join(map(str, interesting))}")
column_profiles.fillna("")''',
    pandas={
        "counts": '''\
values = df[col]
counts = values.value_counts()''',
        "type": "str(values.dtype)",
        "distinct": "int(distinct[col])",
        "has_numbers": "present[col]",
        "numbers": '''\
finite = values.astype("float64")[lambda s: np.isfinite(s)]
profile.update({"mean": finite.mean(), "std": finite.std(), "min": finite.min(),
                "5%": finite.quantile(0.05), "median": finite.median(), "95%": finite.quantile(0.95),
                "max": finite.max(), "skew": finite.skew(),
                "zeros %": round(100 * (finite == 0).mean(), 1)})''',
        "first": "values.min()",
        "last": "values.max()",
        "exact": "",
    },
    duckdb={
        "counts": '''\
s = stats.loc[col]
counts = value_counts.get(col, pd.Series(dtype="int64"))''',
        "type": 'str(s["type"])',
        "distinct": 'f"{int(distinct[col]):,}" + ("" if distinct_exact[col] else " (≈)")',
        "has_numbers": "col in quantile_rows",
        "numbers": '''\
q = quantiles.loc[col]
profile.update({"mean": s["mean"], "std": s["std"], "min": s["min"], "5%": q[0.05], "median": q[0.5],
                "95%": q[0.95], "max": s["max"], "skew": skews.get(col),
                "zeros %": round(100 * s["zeros"] / max(s["present"], 1), 1)})''',
        "first": 's["min"]',
        "last": 's["max"]',
        "exact": " (exact statistics)",
    },
)


def profiles(o: PlaybookOptions, engine: str) -> str:
    """One table: the full profile of the columns with alerts or strong associations."""
    return PROFILES.code(engine, n=o.max_profiles, target=repr(o.target) if o.target else "None")
