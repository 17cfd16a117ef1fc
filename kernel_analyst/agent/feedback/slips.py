"""After a step: the code computes a near neighbour of what the question asks for.

Some slips give a number that is grounded, plausible and wrong, and no check of the answer
can tell: the question asks for the *population* standard deviation and pandas' ``.std()``
divides by n - 1; it asks for the RMSE and the code prints ``mean_squared_error``, its
square; it asks for the outliers by the interquartile range and the code keeps one bound
of the two; a last group "60 years old and above" binned on edges that end at a number; a
Kolmogorov-Smirnov test of one column run as the two-sample test; a month (an hour) found by
grouping whole dates; label encoding done as one-hot columns; normalizing done by
standardizing; and, whatever it asks, a scipy test's result unpacked p-value first. The 1.5B
model did each on DABench or DSEval (easy 129, medium 8: ``@std_dev_fare[49.69]`` for 49.67;
hard 30: ``@model_rmse[131440262.76]`` for 11464.74; easy 18: 384.44 for 171.44; medium 6;
easy 33; hard 28: every mean 0.0000). Each :class:`Slip` pairs
words of the question with a call of the code that misses what they ask, and the line the
model reads beside the step's output says what to use instead. A slip is read only from
the question's words and the step's code: nothing runs, nothing is guessed about data.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from ..prompting import message
from .checks import column_words, mentions, syntax_nodes
from .decisions import Reason


@dataclass(frozen=True)
class Slip:
    """Words of a question, a call of the code that misses them, and what to say."""

    asks: re.Pattern[str]
    """The question asks for this (its words)."""
    does: re.Pattern[str]
    """The code computes the neighbour instead (a call)."""
    unless: re.Pattern[str]
    """The code already does what is asked (it is no slip then)."""
    key: str
    """The message (``messages.txt``) the model reads."""
    not_asked: re.Pattern[str] | None = None
    """The question asks for the neighbour too (it is no slip then): "the population
    standard deviation, not the sample one"."""


_NP_STD = r"\b(?:np|numpy)\.std\("
_FENCE = r"\s*\(?\s*(?:1\.5\s*\*|[A-Za-z_][\w.]*\s*\*\s*1\.5\b)"
"""``1.5 * IQR`` or ``IQR * 1.5`` after the sign of a bound."""
_LOW, _HIGH = rf"-{_FENCE}", rf"\+{_FENCE}"
_DATEISH = r"['\"][^'\"]*(?i:date|time|pickup|dropoff)[^'\"]*['\"]"
"""A column named for a date or a moment (``'Date'``, ``'pickup'``, ``'tpep_pickup_datetime'``)."""
_TESTS = (r"(?:ttest_\w+|ks_2samp|kstest|shapiro|normaltest|pearsonr|spearmanr|kendalltau|mannwhitneyu|"
          r"f_oneway|kruskal|levene|bartlett|wilcoxon|jarque_bera|skewtest|kurtosistest)")
"""scipy.stats' tests that return the statistic, then the p-value."""
SLIPS: tuple[Slip, ...] = (
    Slip(asks=re.compile(r"\bpopulation (?:standard deviation|std|variance)|\bddof\s*=\s*0", re.I),
         does=re.compile(r"(?<!\bnp)(?<!\bnumpy)\.(?:std|var)\((?![^)]*ddof)|['\"](?:std|var)['\"]|"
                         r"\bstatistics\.(?:stdev|variance)\("),
         unless=re.compile(r"ddof\s*=\s*0|\bpstdev\(|\bpvariance\("),
         key="slip_population_std"),
    Slip(asks=re.compile(r"\bsample (?:standard deviation|std|variance)\b|\bddof\s*=\s*1", re.I),
         does=re.compile(rf"{_NP_STD}(?![^)]*ddof)|\b(?:np|numpy)\.var\((?![^)]*ddof)"),
         unless=re.compile(r"ddof\s*=\s*1"),
         key="slip_sample_std",
         not_asked=re.compile(r"\bpopulation (?:standard deviation|std|variance)", re.I)),
    Slip(asks=re.compile(r"\bRMSE\b|\broot[- ]mean[- ]squared?[- ]error", re.I),
         does=re.compile(r"\bmean_squared_error\("),
         unless=re.compile(r"\bsqrt\b|\*\*\s*\(?0?\.5|squared\s*=\s*False|\broot_mean_squared_error\("),
         key="slip_rmse"),
    # DABench easy 18: `df[df.x > q1 - 1.5 * iqr]` alone, the upper outliers kept (384.44 for 171.44)
    Slip(asks=re.compile(r"\bIQR\b|\binter-?quartile|\bquartile range", re.I),
         does=re.compile(rf"{_LOW}|{_HIGH}"),
         unless=re.compile(rf"(?s)\A(?=.*{_LOW})(?=.*{_HIGH})|\.between\(|\.clip\("),
         key="slip_iqr_one_side",
         not_asked=re.compile(r"\bonly\b[^.]{0,40}\b(?:upper|lower|above|below|high|low)\b|"
                             r"\b(?:upper|lower|above|below)\b[^.]{0,40}\bonly\b", re.I)),
    # DABench easy 18 again: "Outliers are to be pruned" done as `.clip(lower, upper)`, which keeps them
    Slip(asks=re.compile(r"(?s)(?=.*(?:\bIQR\b|\binter-?quartile|\bquartile range|\boutlier))"
                         r"(?=.*\b(?:prune|pruned|pruning|remove|removed|removing|exclude|excluded|excluding|drop|"
                         r"dropped|dropping|discard|discarded|filter out|filtered out|without)\b)", re.I),
         does=re.compile(r"\.clip\("),
         unless=re.compile(r"(?!)"),
         key="slip_clip_removes"),
    # DABench easy 33: `ks_test_p_value, normality_decision = ks_2samp(row_mz, 'norm')`
    Slip(asks=re.compile(""),
         does=re.compile(rf"(?m)^\s*(?:p|\w*p_?val\w*)\s*,\s*\w+\s*=\s*(?:[\w.]+\.)?{_TESTS}\(", re.I),
         unless=re.compile(r"(?!)"),
         key="slip_statistic_first"),
    Slip(asks=re.compile(r"\bKolmogorov|\bK-?S test\b", re.I),
         does=re.compile(r"\bks_2samp\("),
         unless=re.compile(r"(?!)"),
         key="slip_ks_one_sample",
         not_asked=re.compile(r"\btwo[- ]sample|\bcompare the distributions?\b|\bbetween (?:the )?two\b",
                              re.I)),
    # the conversation benchmark's brussels-hotels: "In which month of the year ..." grouped by the
    # whole date, and the best day's month given (June for October); the "at which hour"
    Slip(asks=re.compile(r"\b(?:which|what|at what|in what) (?:month|hour|weekday|day of the week|"
                         r"time of day)\b|\bby (?:month|hour|weekday)\b", re.I),
         does=re.compile(rf"\bgroupby\(\s*(?:\w+\[)?{_DATEISH}\]?\s*\)|\[{_DATEISH}\]\.value_counts\(\)"),
         unless=re.compile(r"\.dt\.|\bpd\.Grouper\(|\.resample\(|\.month\b|\.hour\b|\.weekday\b|\.day_name\("),
         key="slip_date_part"),
    # DABench medium 6: "'Elderly' (60 years old and above)" as `pd.cut(df.Age, bins=[0, 12, 19, 59, 60])`
    Slip(asks=re.compile(r"\b\d[\d,.]*(?:\s+[a-z]+){0,3}\s+(?:and|or) "
                         r"(?:above|older|over|more|higher|greater)\b|\b\d+\s*\+(?![\d\s])", re.I),
         does=re.compile(r"\bcut\((?:[^()]|\([^()]*\))*?\[[^\]\[]*\d\s*\]"),
         unless=re.compile(r"\binf\b|\.max\(\)|\bmax\("),
         key="slip_open_bin"),
    # DABench hard 28: "Normalize 'age', 'bmi', 'children', and 'charges' columns" with StandardScaler,
    # every mean 0.0000 (min-max: 0.4610 ...); all of DABench's eight "normalize" questions mean min-max
    Slip(asks=re.compile(r"\bnormali[sz](?:e|es|ed|ing|ation)\b", re.I),
         does=re.compile(r"\bStandardScaler\(|\bzscore\(|\.mean\(\)\s*\)\s*/\s*[\w.\[\]'\"]*\.std\("),
         unless=re.compile(r"\bMinMaxScaler\(|\.min\(\)"),
         key="slip_normalize_min_max",
         not_asked=re.compile(r"\bstandardi[sz]|\bz[- ]?scores?\b|\bzero mean\b|\bunit variance\b|"
                              r"\bmean (?:of )?0\b|\bStandardScaler\b|\bstandard scal", re.I)),
    # DSEval employee-dataset: "Encode the categorical columns using label encoding" as `pd.get_dummies(df)`
    Slip(asks=re.compile(r"\blabel[- ]encod", re.I),
         does=re.compile(r"\bget_dummies\(|\bOneHotEncoder\("),
         unless=re.compile(r"\bLabelEncoder\(|\bOrdinalEncoder\(|\.cat\.codes\b|\bfactorize\("),
         key="slip_label_encoding",
         not_asked=re.compile(r"\bone[- ]hot|\bdummy|\bdummies", re.I)),
)
"""The slips looked for, in the order their lines are read."""


def slips_in(question: str, code: str) -> list[Reason]:
    """The slips of ``code`` against what ``question`` asks for (one line each)."""
    found = [Reason("slip", message(slip.key)) for slip in SLIPS
             if slip.asks.search(question) and not (slip.not_asked and slip.not_asked.search(question))
             and slip.does.search(code) and not slip.unless.search(code)]
    return found + unasked_ratios(question, code)


_RATIO_WORDS = re.compile(r"\bper\b|\bratio|\brate\b|\brates\b|proportion|\bshare|percent|%|fraction|divid|"
                          r"relative|normali[sz]|density|efficien|\beach\b|\bby\b", re.I)
"""Words of a question that ask for one quantity over another."""


def unasked_ratios(question: str, code: str) -> list[Reason]:
    """A column divided by another the question does not name, for a question that names the
    first and asks for no ratio: "Which pickup borough has the highest average tip?" computed
    on ``df['tip'] / df['passengers']`` (the conversation benchmark's taxis question 4 with
    the 1.5B model: Manhattan, for Queens). One line, the first such division."""
    if _RATIO_WORDS.search(question):
        return []
    for node in syntax_nodes(code) or []:
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)):
            continue
        top, bottom = _column_of(node.left), _column_of(node.right)
        if top and bottom and top != bottom and _named(top, question) and not _named(bottom, question):
            return [Reason("slip", message("slip_unasked_ratio", comparison=ast.unparse(node), column=bottom,
                                           name=top))]
    return []


_NOT_FRAMES = frozenset({"np", "numpy", "math", "pd", "pandas", "scipy", "stats", "sp", "self"})
_NOT_COLUMNS = frozenset({"size", "shape", "values", "index", "columns", "dtypes", "ndim", "empty", "loc",
                          "iloc"})


def _column_of(node: ast.AST) -> str | None:
    """The column a ``frame['col']`` (or ``frame.col``) expression reads; not a module's
    constant (``np.pi``) nor a frame's own attribute (``df.size``)."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
            and isinstance(node.slice.value, str):
        column: str | None = node.slice.value
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
            and node.value.id not in _NOT_FRAMES and node.attr not in _NOT_COLUMNS:
        column = node.attr
    else:
        return None
    return column if column and re.search(r"[A-Za-z]{3,}", column) else None


def _named(column: str, question: str) -> bool:
    """Some word of ``column``'s name is a word of the question, or begins one or is begun by
    one ("tip" in "tips", "passengers" for "passenger")."""
    return any(mentions(question, word) for word in column_words(column))


__all__ = ["SLIPS", "Slip", "slips_in", "unasked_ratios"]
