"""The code of the playbook's per-column cells: distributions, top values, dates over
time, outliers, and the profiles of the most interesting columns.

Plots are drawn as one figure with many panels (one figure per column costs far more),
at 100 dpi; skewed columns get a log axis (all values positive) or a clipped range, and
bar charts show missing values as their own bar.
"""

from __future__ import annotations

from ._cells import fill
from .options import PlaybookOptions


def distributions(o: PlaybookOptions) -> str:
    """Histograms of the numeric columns that vary."""
    return fill('''\
varying = [c for c in df.columns if kinds[c] == "numeric" and distinct[c] > 1]
plotted = varying[:$n]
if len(varying) > $n:
    print(f"Histograms of the first $n of {len(varying)} numeric columns that vary.")
if not plotted:
    print("No numeric column with more than one value.")
else:
    fig, axes = panels(len(plotted))
    for ax, col in zip(axes, plotted):
        values = df[col].astype("float64")
        values = values[np.isfinite(values)]
        skew, title = values.skew(), short_label(col, 30)
        if distinct[col] <= 30 and (values == values.round()).all() and values.max() - values.min() <= 60:
            bins = np.arange(values.min(), values.max() + 2) - 0.5  # one bar per whole number
        elif abs(skew) >= SKEWED and values.min() > 0:
            bins = np.geomspace(values.min(), values.max(), 31)
            ax.set_xscale("log")
            title += " (log x)"
        elif abs(skew) >= SKEWED:
            low, high = np.percentile(values, [1, 99])
            outside = int(((values < low) | (values > high)).sum())
            values = values[(values >= low) & (values <= high)]
            bins = 30
            title += f" (1-99%, {outside:,} outside)"
        else:
            bins = 30
        ax.hist(values, bins=bins, color="tab:blue", alpha=0.85)
        ax.set_title(title)
        ax.locator_params(axis="y", nbins=4)
    show(fig)''', n=o.max_hist_columns)


def categories(o: PlaybookOptions) -> str:
    """Top values of the categorical columns, missing values as a bar of their own."""
    return fill('''\
categorical = [c for c in df.columns if kinds[c] in ("categorical", "boolean") and distinct[c] > 1]
text_columns = [c for c in df.columns if kinds[c] == "text"]
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
    fig, axes = panels(len(plotted), width=3, size=(4.4, 2.9))
    for ax, col in zip(axes, plotted):
        counts = df[col].value_counts(dropna=False)
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
    show(fig)''', n=o.max_bar_columns)


def dates(o: PlaybookOptions, expected: tuple[str, ...]) -> str:
    """Date ranges, rows over time, and numeric columns over time."""
    check = ""
    if expected:
        check = f'''
not_parsed = [c for c in {list(expected)!r} if c in df and not pd.api.types.is_datetime64_any_dtype(df[c])]
if not_parsed:
    print(f"Detected as dates in a sample, but not every value matched, so left as text: {{not_parsed}}")'''
    return '''\
date_cols = [c for c in df.columns if kinds[c] == "date" and present[c] > 0]''' + check + '''
findings["dates"] = {}


def period_for(first, last):
    """The shortest of hour/day/week/month/quarter/year that gives at most 120 bars."""
    span = (last - first) / pd.Timedelta(days=1)
    for freq, days in (("h", 1 / 24), ("D", 1), ("W", 7), ("MS", 30.4), ("QS", 91.3), ("YS", 365.25)):
        if span / days <= 120:
            return freq
    return "YS"


if not date_cols:
    print("No date columns.")
else:
    ranges = []
    for col in date_cols:
        first, last = df[col].min(), df[col].max()
        findings["dates"][str(col)] = [str(first), str(last)]
        ranges.append({"column": col, "first": first, "last": last, "span": last - first,
                       "missing": int(rows - present[col]), "period": period_for(first, last)})
    display(pd.DataFrame(ranges).set_index("column"))
    time_col = date_cols[0]
    freq = period_for(df[time_col].min(), df[time_col].max())
    trends = [c for c in df.columns if kinds[c] == "numeric" and distinct[c] > 1][:6]
    fig, axes = panels(min(len(date_cols), 3) + len(trends), width=3, size=(4.4, 2.6))
    for ax, col in zip(axes, date_cols[:3]):
        counts = df.groupby(pd.Grouper(key=col, freq=period_for(df[col].min(), df[col].max()))).size()
        ax.plot(counts.index, counts.values, color="tab:blue", drawstyle="steps-mid")
        ax.set_title(f"rows per period: {short_label(col, 24)}")
    grouped = df.groupby(pd.Grouper(key=time_col, freq=freq))
    for ax, col in zip(axes[min(len(date_cols), 3):], trends):
        means = grouped[col].mean()
        ax.plot(means.index, means.values, color="tab:green", marker="." if len(means) < 60 else None)
        ax.set_title(f"mean {short_label(col, 22)} by {short_label(time_col, 14)}")
    for ax in axes:  # few, short date labels: readable, and text is most of a figure's drawing time
        locator = matplotlib.dates.AutoDateLocator(maxticks=5)
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(matplotlib.dates.ConciseDateFormatter(locator))
        ax.locator_params(axis="y", nbins=4)
    if trends:
        print(f"Numeric columns over time: the mean per period ({freq}) of `{time_col}`.")
    show(fig)'''


def outliers(o: PlaybookOptions) -> str:
    """Values outside the interquartile-range fences, with a caveat where the rule misleads."""
    return fill('''\
# IQR rule: a value is an outlier below Q1 - 1.5*IQR or above Q3 + 1.5*IQR. The rule assumes a
# roughly symmetric distribution: on skewed columns it flags the long tail, not errors.
outlier_rows = []
for col in [c for c in df.columns if kinds[c] == "numeric"]:
    values = df[col].astype("float64")
    values = values[np.isfinite(values)]
    if values.empty:
        continue
    q1, q3 = values.quantile(0.25), values.quantile(0.75)
    low, high = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
    count = int(((values < low) | (values > high)).sum())
    skew = values.skew()
    caveat = ""
    if q3 == q1:
        caveat = "IQR is 0: every value off the middle counts"
    elif abs(skew) >= SKEWED:
        caveat = f"skewed ({skew:+.1f}): the fences cut the long tail"
    outlier_rows.append({"column": col, "Q1": q1, "Q3": q3, "low fence": low, "high fence": high,
                         "outliers": count, "percent": round(100 * count / len(values), 2), "caveat": caveat})
findings["outliers"] = []
if not outlier_rows:
    print("No numeric columns.")
else:
    outlier_table = pd.DataFrame(outlier_rows).set_index("column").sort_values("outliers", ascending=False)
    flagged = outlier_table[outlier_table["outliers"] > 0]
    findings["outliers"] = [[str(c), int(r["outliers"]), float(r["percent"]), r["caveat"]]
                            for c, r in flagged.head(3).iterrows()]
    print(f"{len(flagged)} of {len(outlier_table)} numeric columns have values outside the IQR fences.")
    if len(outlier_table) > $n:
        print(f"Table below: the $n columns with most outliers.")
    display(outlier_table.head($n))''', n=o.max_table_rows)


def profiles(o: PlaybookOptions) -> str:
    """One table: the full profile of the columns with alerts or strong associations."""
    target = repr(o.target) if o.target else "None"
    return fill('''\
# Most interesting first: the target, columns with serious alerts, then those in the strongest associations.
interesting = [$target] if $target in df.columns else []
for col in [*alerts.loc[alerts["severity"] >= 2, "column"], *ranked[["a", "b"]].to_numpy().ravel()]:
    if col in df.columns and col not in interesting:
        interesting.append(col)
interesting = interesting[:$n] or list(df.columns[:$n])


def profile_of(col):
    values, kind = df[col], kinds[col]
    counts = values.value_counts()
    stats = {"kind": kind, "type": str(values.dtype), "present": int(present[col]),
             "missing %": round(100 * (1 - present[col] / max(rows, 1)), 1), "distinct": int(distinct[col])}
    if len(counts):
        share = counts.iloc[0] / max(present[col], 1)
        stats["most common"] = f"{short_label(counts.index[0], 20)} ({share:.0%})"
    if kind == "numeric" and present[col]:
        finite = values.astype("float64")[lambda s: np.isfinite(s)]
        stats.update({"mean": finite.mean(), "std": finite.std(), "min": finite.min(),
                      "5%": finite.quantile(0.05), "median": finite.median(), "95%": finite.quantile(0.95),
                      "max": finite.max(), "skew": finite.skew(),
                      "zeros %": round(100 * (finite == 0).mean(), 1)})
    if kind == "date" and present[col]:
        stats.update({"min": values.min(), "max": values.max()})
    stats["alerts"] = "; ".join(alerts.loc[alerts["column"] == str(col), "alert"]) or "-"
    partners = ranked[(ranked["a"] == col) | (ranked["b"] == col)].head(1)
    for _, pair in partners.iterrows():
        other = pair["b"] if pair["a"] == col else pair["a"]
        signed = pair["measure"] in ("Pearson r", "Spearman ρ")
        value = f"{pair['value']:+.2f}" if signed else f"{pair['value']:.2f}"
        measure = f"{pair['measure']} {value} (n = {pair['n']:,})"
        stats["strongest association"] = f"{short_label(other, 20)}: {measure}"
    return pd.Series(stats, dtype=object)


column_profiles = pd.concat({col: profile_of(col) for col in interesting}, axis=1, sort=False)
print(f"Profiles of {len(interesting)} column(s): {', '.join(map(str, interesting))}")
column_profiles.fillna("")''', n=o.max_profiles, target=target)
