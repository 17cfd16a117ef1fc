"""The code of the playbook's cells on pairs of columns: associations of every kind,
scatter plots of the strongest pairs, and every feature against a target; each one
:class:`~._template.Cell` for both engines.

Measures: Pearson r and Spearman ρ for numeric pairs, Cramér's V for categorical pairs,
the correlation ratio η for categorical-numeric pairs; each with the rows it was computed
from, and a caveat when they are few. All of it plain pandas and numpy, over the table or
(out of core) over the fixed sample, but Pearson r, which DuckDB computes over every row.
"""

from __future__ import annotations

from ._template import Cell
from .options import PlaybookOptions

ASSOCIATIONS = Cell('''\
num_cols = [c for c in columns if kinds[c] == "numeric" and distinct[c] > 1]
cat_cols = [c for c in columns if kinds[c] in ("categorical", "boolean") and distinct[c] > 1]
if len(num_cols) > $max_num or len(cat_cols) > $max_cat:
    print(f"Using the first $max_num numeric and $max_cat categorical columns "
          f"(of {len(num_cols)} and {len(cat_cols)}).")
num_cols, cat_cols = num_cols[:$max_num], cat_cols[:$max_cat]
data = sample[num_cols].astype("float64").replace([np.inf, -np.inf], np.nan)
spearman = data.corr(method="spearman")
both = data.notna().astype(int)
pair_n = both.T @ both if num_cols else pd.DataFrame()  # $rows where both are present
$pearson
pairs = []
for i, a in enumerate(num_cols):
    for b in num_cols[i + 1:]:
        pairs.append((a, b, "Pearson r", pearson.loc[a, b], int(pearson_n.loc[a, b])))
        pairs.append((a, b, "Spearman ρ", spearman.loc[a, b], int(pair_n.loc[a, b])))
for i, a in enumerate(cat_cols):
    for b in cat_cols[i + 1:]:
        pairs.append((a, b, "Cramér's V", *cramers_v(sample[a], sample[b])))
for a in cat_cols:
    for b, row in correlation_ratios(sample[a], data).iterrows():
        pairs.append((a, b, "correlation ratio η", row["eta"], int(row["n"])))
associations = pd.DataFrame(pairs, columns=["a", "b", "measure", "value", "n"]).dropna(subset=["value"])


def caveat(row):
    if row["n"] < SMALL_N:
        return f"only {row['n']} rows: unreliable"
    if row["measure"] == "Cramér's V" and row["n"] < 5 * distinct[row["a"]] * distinct[row["b"]]:
        return "few rows per cell of the table: V overstates"
    return ""


associations["caveat"] = associations.apply(caveat, axis=1) if len(associations) else []
# Strongest first, but pairs measured on fewer than SMALL_N rows after every reliable one.
ranked = (associations.assign(strength=associations["value"].abs(), reliable=associations["n"] >= SMALL_N)
          .sort_values(["reliable", "strength"], ascending=False, kind="stable")
          .drop_duplicates(["a", "b"]).drop(columns="reliable").reset_index(drop=True))
findings["associations"] = [[str(r.a), str(r.b), r.measure, round(float(r.value), 4), int(r.n), r.caveat]
                            for r in ranked.head(5).itertuples()]
findings["correlations"] = [[str(r.a), str(r.b), round(float(r.value), 4)]
                            for r in ranked[ranked["measure"] == "Pearson r"].head(5).itertuples()]
if associations.empty:
    print("Fewer than two columns to relate: no associations.")
else:
    used = num_cols + cat_cols
    strength = pd.DataFrame(np.eye(len(used)), index=used, columns=used)
    for r in ranked.itertuples():
        strength.loc[r.a, r.b] = strength.loc[r.b, r.a] = r.strength
    shown = [(pearson, "Pearson r (numeric pairs)", -1)] if len(num_cols) >= 2 else []
    shown.append((strength, "strength of association, any kinds (0-1)", 0))
    size = min(7.5, max(3.6, 0.42 * len(used) + 1.6))
    fig, axes = plt.subplots(1, len(shown), figsize=(size * len(shown) + 1, size), squeeze=False)
    for ax, (matrix, title, low) in zip(axes.flat, shown):
        image = ax.imshow(matrix.values.astype(float), cmap="coolwarm" if low < 0 else "Reds",
                          vmin=low, vmax=1)
        labels = [short_label(c, 16) for c in matrix.columns]
        ax.set_xticks(range(len(labels)), labels=labels, rotation=90)
        ax.set_yticks(range(len(labels)), labels=labels)
        if len(labels) <= 12:
            for (i, j), v in np.ndenumerate(matrix.values.astype(float)):
                if np.isfinite(v) and i != j:
                    ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7)
        ax.set_title(title)
        fig.colorbar(image, ax=ax, shrink=0.75)
    show(fig)
    print(f"Strongest pairs ($over; n = rows where both are present):")
    display(ranked.drop(columns="strength").head(15))''',
    pandas={"rows": "rows", "pearson": "pearson, pearson_n = data.corr(), pair_n",
            "over": "{len(sample):,} rows"},
    duckdb={
        "rows": "sample rows",
        "pearson": '''\
# Pearson r and its n: exact, over every row (pass 1). Spearman ρ, Cramér's V and η: the sample.
pearson, pearson_n = spearman * np.nan, pair_n.copy()
for i, a in enumerate(num_cols):
    for b in num_cols[i + 1:]:
        r, n = (pearson_r.get((a, b)) or pearson_r.get((b, a))
                or (data[a].corr(data[b]), int(pair_n.loc[a, b])))
        pearson.loc[a, b] = pearson.loc[b, a] = r
        pearson_n.loc[a, b] = pearson_n.loc[b, a] = n
for a in num_cols:
    pearson.loc[a, a] = 1.0''',
        "over": ("Pearson r over all {rows:,} rows; the other measures over the sample of "
                 "{len(sample):,} rows"),
    },
)


def associations(o: PlaybookOptions, engine: str) -> str:
    """Every pair's association, a matrix of each kind, and the pairs ranked by strength."""
    return ASSOCIATIONS.code(engine, max_num=o.max_corr_columns, max_cat=o.max_cat_columns)


SCATTER = Cell('''\
# Pairs worth a look: numeric, from at least SMALL_N rows, |r| or |ρ| at least 0.3.
numeric_pairs = ranked[ranked["measure"].isin(["Pearson r", "Spearman ρ"]) & (ranked["n"] >= SMALL_N)
                       & (ranked["strength"] >= 0.3)].head(6)
if numeric_pairs.empty:
    print(f"No pair of numeric columns with |r| or |ρ| at least 0.3 over at least {SMALL_N} rows.")
else:
    points = sample.sample($points, random_state=0) if len(sample) > $points else sample
    print(f"Each panel draws {len(points):,} of {rows:,} rows"
          + (" (a random sample)." if len(points) < rows else "."))
    fig, axes = panels(len(numeric_pairs), width=3, size=(3.8, 3.2))
    for ax, pair in zip(axes, numeric_pairs.itertuples()):
        ax.scatter(points[pair.a], points[pair.b], s=6, alpha=0.35, color="tab:purple", linewidths=0)
        ax.set_xlabel(short_label(pair.a, 30))
        ax.set_ylabel(short_label(pair.b, 30))
        ax.set_title(f"{pair.measure} {pair.value:+.2f} (n = {pair.n:,})")
        ax.locator_params(nbins=4)
        for axis in "xy":
            values = points[pair.a if axis == "x" else pair.b]
            if values.min() > 0 and abs(values.skew()) >= SKEWED:
                (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    show(fig)''')
"""Scatter plots of the strongest numeric pairs, on a sample of points (the same for both engines)."""


def scatter(o: PlaybookOptions, engine: str) -> str:
    """Scatter plots of the strongest numeric pairs, on a sample of points."""
    return SCATTER.code(engine, points=o.plot_points)


TARGET = Cell('''\
$over
target = $target
y = $table[target]
if kinds[target] not in ("numeric", "categorical", "boolean") or distinct[target] < 2:
    print(f"Target `{target}` is a {kinds[target]} column with {int(distinct[target]):,} distinct "
          "value(s): there is nothing to rank features against (choose a numeric or categorical column).")
    findings["target"] = {"column": str(target), "classes": False, "ranked": []}
else:
    classes = kinds[target] in ("categorical", "boolean") or distinct[target] <= 10
    print(f"Target `{target}`: {'classes' if classes else 'numeric'}, {int(present[target]):,} present, "
          f"{int(distinct[target]):,} distinct values.")
    features = [c for c in columns if c != target and kinds[c] in ("numeric", "categorical", "boolean")
                and distinct[c] > 1]
    rows_t = []
    for col in features:
        if kinds[col] == "numeric" and classes:
            rows_t.append((col, "correlation ratio η", *correlation_ratio(sample[target], sample[col])))
        elif kinds[col] == "numeric":
            both = sample[[col, target]].astype("float64").dropna()
            rows_t.append((col, "Spearman ρ", both[col].corr(both[target], method="spearman"), len(both)))
        elif classes:
            rows_t.append((col, "Cramér's V", *cramers_v(sample[col], sample[target])))
        else:
            rows_t.append((col, "correlation ratio η", *correlation_ratio(sample[col], sample[target])))
    target_associations = pd.DataFrame(rows_t, columns=["feature", "measure", "value", "n"])
    target_associations = target_associations.dropna(subset=["value"])
    target_associations["caveat"] = np.where(target_associations["n"] < SMALL_N, "few rows: unreliable", "")
    target_associations = (target_associations.assign(strength=target_associations["value"].abs())
                           .sort_values("strength", ascending=False, kind="stable").drop(columns="strength")
                           .reset_index(drop=True))
    findings["target"] = {"column": str(target), "classes": bool(classes), "ranked": [
        [str(r.feature), r.measure, round(float(r.value), 4), int(r.n)]
        for r in target_associations.head(5).itertuples()]}
    display(target_associations.head(20))

    shown = list(target_associations["feature"][:8])
    fig, axes = panels(1 + len(shown), width=3, size=(4.2, 3.0))
    if classes:
        counts = y.value_counts(dropna=False).head(12)
        axes[0].bar(["(missing)" if pd.isna(v) else short_label(v, 12) for v in counts.index], counts.values,
                    color="tab:red")
        axes[0].tick_params(axis="x", labelrotation=30)
    else:
        axes[0].hist(y.dropna().astype("float64"), bins=30, color="tab:red")
    axes[0].set_title(f"target: {short_label(target, 28)}")
    levels = list(y.value_counts().index[:6]) if classes else []
    for ax, col in zip(axes[1:], shown):
        if classes and kinds[col] == "numeric":
            ax.boxplot([$table.loc[y == level, col].dropna() for level in levels], showfliers=False)
            ax.set_xticks(range(1, len(levels) + 1), labels=[short_label(v, 10) for v in levels])
            ax.set_xlabel(short_label(target, 24))
        elif classes:
            top = $table[col].value_counts().index[:8]
            shares = pd.crosstab($table[col], y, normalize="index")
            shares = shares.reindex(index=top, columns=levels, fill_value=0)
            left = np.zeros(len(shares))
            for level in levels:  # one stacked bar per value of the feature
                ax.barh([short_label(v, 14) for v in shares.index], shares[level], left=left, height=0.8,
                        label=short_label(level, 12))
                left += shares[level].to_numpy()
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1, 1), frameon=False)
            ax.set_xlabel(f"share of {short_label(target, 18)}")
        elif kinds[col] == "numeric":
            points = sample.sample($points, random_state=0) if len(sample) > $points else sample
            ax.scatter(points[col], points[target], s=6, alpha=0.35, linewidths=0)
            ax.set_ylabel(short_label(target, 24))
        else:
            top = $table[col].value_counts().index[:8]
            ax.boxplot([$table.loc[$table[col] == level, target].dropna() for level in top], showfliers=False)
            ax.set_xticks(range(1, len(top) + 1), labels=[short_label(v, 10) for v in top], rotation=30)
        ax.set_title(short_label(col, 30))
    show(fig)''',
    pandas={"over": "", "table": "df"},
    duckdb={"over": 'print(f"Measures and plots below use the sample of {len(sample):,} rows.")',
            "table": "sample"},
)


def target(o: PlaybookOptions, engine: str) -> str:
    """The target's distribution, each feature's association with it (ranked), and plots."""
    return TARGET.code(engine, target=repr(o.target), points=o.plot_points)
