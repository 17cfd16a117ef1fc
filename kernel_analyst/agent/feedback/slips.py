"""After a step: the code computes a near neighbour of what the question asks for.

Some slips give a number that is grounded, plausible and wrong, and no check of the answer
can tell: the question asks for the *population* standard deviation and pandas' ``.std()``
divides by n - 1; it asks for the RMSE and the code prints ``mean_squared_error``, its
square; it asks for the outliers by the interquartile range and the code keeps one bound
of the two; a last group "60 years old and above" binned on edges that end at a number; a
Kolmogorov-Smirnov test of one column run as the two-sample test; a month (an hour) found by
grouping whole dates; label encoding done as one-hot columns; normalizing done by
standardizing; a share of the wrong rows ("of the Saturday dinners, what percent were at
smokers' tables" as the Saturday smokers over all smokers); the largest rows taken for "the
lowest" or "the worst" (and the smallest for "the highest"); one-hot columns left out by
``select_dtypes('number')`` (they are ``bool``); two names given the same summary in one
cell (a copied line that kept its filter); a model given its target among its features (an
accuracy of 1.00); a threshold ("above the average fare") taken over the rows an earlier
filter of the cell kept; and, whatever it asks, a scipy test's result unpacked p-value
first. The 1.5B model did each on DABench or DSEval (easy 129, medium 8:
``@std_dev_fare[49.69]`` for 49.67; hard 30: ``@model_rmse[131440262.76]`` for 11464.74;
easy 18: 384.44 for 171.44; medium 6; easy 33; hard 28: every mean 0.0000; medium 176: a
median age of 32.00 for 31.5). Each :class:`Slip` pairs words of the question with a call of
the code that misses what they ask, and the line the model reads beside the step's output
says what to use instead. A slip is read only from the question's words and the step's code
(and, for a file's column recomputed, the uploaded files' column names): nothing runs,
nothing is guessed about data. Four slips are acted on, not only named: the population
standard deviation asked for runs as asked (:func:`mended_population_std`); the label
encoding of every categorical column asked for runs for ``get_dummies``
(:func:`mended_label_encoding`, from the table's own text columns); a scipy test's result
unpacked p-value first runs with the two names swapped (:func:`mended_statistic_first`);
and another change of the data that the question's words say is the wrong one
(:func:`wrong_change`) is undone.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ...kernels import VariableInfo
from ..prompting import message
from .checks import called_name, column_words, mentions, syntax_nodes, text_columns
from .decisions import Reason
from .intent import asks_to_change


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
_LOW_WORDS = r"\b(?:lowest|(?<!\bat )least|smallest|fewest|bottom|minimum|cheapest|shortest|youngest)\b"
_HIGH_WORDS = r"\b(?:highest|largest|biggest|greatest|maximum|longest|oldest|top|(?<!\bat )most)\b"
"""Words that rank, low and high ("at least 5", "at most 3" are bounds, not ranks)."""
_WORSE_HIGHER = (r"\b(?:delays?|late|lateness|errors?|loss(?:es)?|costs?|time|times|durations?|prices?|rank|"
                 r"distances?|deaths?|mortality|crimes?|pollution|unemploy\w*|debt|risk|fatalit\w*|injur\w*)\b")
"""Measures where more is worse: "the worst delays" are the largest."""
_TAKES_LARGEST = r"\bnlargest\(|ascending\s*=\s*False|\.idxmax\(|\.argmax\("
_TAKES_SMALLEST = (r"\bnsmallest\(|ascending\s*=\s*True|\.idxmin\(|\.argmin\(|"
                   r"\bsort_values\((?![^)]*ascending)[^)]*\)(?:\[[^\]]*\])?\.head\(")
"""The smallest first: ``nsmallest``, ``idxmin``, or ``sort_values`` (ascending by default) then ``head``."""
_TESTS = (r"(?:ttest_\w+|ks_2samp|kstest|shapiro|normaltest|pearsonr|spearmanr|kendalltau|mannwhitneyu|"
          r"f_oneway|kruskal|levene|bartlett|wilcoxon|jarque_bera|skewtest|kurtosistest)")
"""scipy.stats' tests that return the statistic, then the p-value."""
_P_NAME = re.compile(r"(?:p|\w*p_?val\w*)", re.I)
"""A name for a p-value (``p``, ``p_value``, ``pval``, ``ks_test_p_value``)."""


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
    # DABench hard 7 on 7ddff9d: `get_dummies` then `select_dtypes('number')`, the one-hot (bool) columns
    # left out of the model's features: 0.71 for 0.78
    Slip(asks=re.compile(""),
         does=re.compile(r"(?s)\A(?=.*\bget_dummies\()(?=.*\bselect_dtypes\(\s*(?:include\s*=\s*)?\[?\s*"
                         r"(?:['\"]number['\"]|np\.number)\s*\]?\s*\))"),
         unless=re.compile(r"\bselect_dtypes\([^)]*bool|\bget_dummies\([^)]*dtype\s*="),
         key="slip_dummies_dropped"),
    # DABench easy 33: `ks_test_p_value, normality_decision = ks_2samp(row_mz, 'norm')`
    Slip(asks=re.compile(""),
         does=re.compile(rf"(?m)^\s*{_P_NAME.pattern}\s*,\s*\w+\s*=\s*(?:[\w.]+\.)?{_TESTS}\(", re.I),
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
    # the conversation benchmark's mpg: "Which 3 cars have the worst mpg?" as `nlargest(3, 'mpg')`, twice
    Slip(asks=re.compile(rf"{_LOW_WORDS}|\bworst\b", re.I),
         does=re.compile(_TAKES_LARGEST),
         unless=re.compile(_TAKES_SMALLEST + r"|\.min\(\)"),
         key="slip_takes_largest",
         not_asked=re.compile(rf"{_HIGH_WORDS}|\bbest\b|\bworst\b[^.?]{{0,40}}{_WORSE_HIGHER}|"
                              rf"{_WORSE_HIGHER}[^.?]{{0,40}}\bworst\b", re.I)),
    Slip(asks=re.compile(_HIGH_WORDS, re.I),
         does=re.compile(_TAKES_SMALLEST),
         unless=re.compile(_TAKES_LARGEST + r"|\.max\(\)|\.tail\("),
         key="slip_takes_smallest",
         not_asked=re.compile(rf"{_LOW_WORDS}|\bworst\b|\bbest\b", re.I)),
    # DSEval employee-dataset: "Encode the categorical columns using label encoding" as `pd.get_dummies(df)`
    Slip(asks=re.compile(r"\blabel[- ]encod", re.I),
         does=re.compile(r"\bget_dummies\(|\bOneHotEncoder\("),
         unless=re.compile(r"\bLabelEncoder\(|\bOrdinalEncoder\(|\.cat\.codes\b|\bfactorize\("),
         key="slip_label_encoding",
         not_asked=re.compile(r"\bone[- ]hot|\bdummy|\bdummies", re.I)),
)
"""The slips looked for, in the order their lines are read."""


def _slipped(slip: Slip, question: str, code: str) -> bool:
    return bool(slip.asks.search(question) and not (slip.not_asked and slip.not_asked.search(question))
                and slip.does.search(code) and not slip.unless.search(code))


def slips_in(question: str, code: str) -> list[Reason]:
    """The slips of ``code`` against what ``question`` asks for (one line each)."""
    found = [Reason("slip", message(slip.key)) for slip in SLIPS if _slipped(slip, question, code)]
    return (found + unasked_ratios(question, code) + inverted_shares(question, code) + same_twice(code)
            + target_in_features(code) + narrowed_thresholds(question, code))


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


def same_twice(code: str) -> list[Reason]:
    """Two names bound to the same computation in one cell, as when a copied line kept its
    filter: "Was the average occupancy rate at Brussels Airport lower in 2016 than in 2015?"
    computed as ``rate_2016 = df[df['Quartier'] == 'Brussels Airport']['Occupancy rate'].mean()``
    and ``rate_2015`` the same, 0.68 and 0.68, "False" (the conversation benchmark's
    brussels-hotels with the 1.5B model). Only a summary of data (:func:`_summarizes`); one
    line, the first such pair."""
    seen: dict[str, str] = {}
    for node in syntax_nodes(code) or []:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        if not isinstance(target, ast.Name) or not isinstance(value, (ast.Call, ast.Subscript)) \
                or not _summarizes(value):
            continue
        key, name = ast.dump(value), target.id
        first = seen.setdefault(key, name)
        if first != name:
            return [Reason("slip", message("slip_same_twice", first=first, second=name,
                                           expression=ast.unparse(value)))]
    return []


_TRANSFORMS = frozenset({"slip_label_encoding", "slip_normalize_min_max", "slip_open_bin",
                         "slip_clip_removes"})
"""The slips that change data the wrong way: one-hot columns for label codes, standard scores
for min-max, bins that leave the open last group out, outliers clipped, not removed."""


def wrong_change(question: str, code: str) -> bool:
    """``code`` changes data in a way the question's words say is not what it asks for (one
    of :data:`_TRANSFORMS`): a question that asks to change the data, and a step that changes
    it so, is undone (DSEval employee-dataset 7 with the 1.5B model: "Encode the categorical
    columns using label encoding. Save the result in-place." run as ``pd.get_dummies``, the
    slip named and not acted on, and the table's ``LeaveOrNot`` gone for the seven questions
    after it)."""
    return any(_slipped(slip, question, code) for slip in SLIPS if slip.key in _TRANSFORMS)


_POPULATION = next(slip for slip in SLIPS if slip.key == "slip_population_std")
_LABEL_ENCODING = next(slip for slip in SLIPS if slip.key == "slip_label_encoding")
"""The population standard deviation asked, the sample one computed."""


def mended_population_std(question: str, code: str) -> str | None:
    """``code`` with pandas' ``.std()`` and ``.var()`` called with ``ddof=0`` (and
    ``statistics.stdev`` as ``pstdev``), when the question asks for the population standard
    deviation or variance and the code computes the sample one, with the calls as written
    (None when there is nothing to mend). DABench easy 129 with the 1.5B model: told after
    its step that ``df['Fare'].std()`` divides by n - 1, it answered 49.69 (for 49.67) again,
    and so did each of three attempts in forked branches. The question's words are plain,
    so the step runs as they ask, and the model is told so. A ``'std'`` given to ``agg`` is
    not mended (the line after the step names it)."""
    slip = _POPULATION
    if not slip.asks.search(question) or not slip.does.search(code) or slip.unless.search(code):
        return None
    nodes = syntax_nodes(code)
    if nodes is None:
        return None
    lines = [line.encode() for line in code.split("\n")]  # ast's offsets count UTF-8 bytes
    edits: list[tuple[int, int, int, bytes]] = []  # (0-based line, start, end, new text)
    for node in nodes:
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        func = node.func
        receiver = func.value.id if isinstance(func.value, ast.Name) else ""
        if func.attr in ("std", "var") and receiver not in ("np", "numpy") and not node.args \
                and not node.keywords and node.end_lineno is not None and node.end_col_offset is not None:
            at = node.end_col_offset - 1
            if lines[node.end_lineno - 1][at:at + 1] == b")":
                edits.append((node.end_lineno - 1, at, at, b"ddof=0"))
        elif func.attr in ("stdev", "variance") and receiver == "statistics" \
                and func.end_lineno is not None and func.end_col_offset is not None:
            end = func.end_col_offset
            edits.append((func.end_lineno - 1, end - len(func.attr), end, b"p" + func.attr.encode()))
    for line, start, end, text in sorted(edits, reverse=True):
        lines[line] = lines[line][:start] + text + lines[line][end:]
    mended = "\n".join(line.decode() for line in lines)
    return mended if edits and syntax_nodes(mended) is not None else None


def mended_statistic_first(code: str) -> str | None:
    """``code`` with the two names a scipy test's result is unpacked into swapped, where the
    first names a p-value and the second does not (``p_value, _ = mannwhitneyu(a, b)`` runs
    as ``_, p_value = mannwhitneyu(a, b)``); None when there is nothing to mend. Every test
    in :data:`_TESTS` returns the statistic first, whatever the question, and the names say
    what the code meant. DABench hard 177 with the 1.5B model, twice (before and on
    051e628): told after its step that ``p_value`` held the U statistic (49572.0), it sent
    the same cell again three times, and no attempt unpacked it right; easy 33 the same
    with ``ks_2samp``."""
    nodes = syntax_nodes(code)
    if nodes is None:
        return None
    lines = [line.encode() for line in code.split("\n")]  # ast's offsets count UTF-8 bytes
    edits: list[tuple[int, int, int, bytes]] = []
    for node in nodes:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call)):
            continue
        target = node.targets[0]
        called = called_name(node.value.func)
        if not (isinstance(target, ast.Tuple) and len(target.elts) == 2
                and all(isinstance(e, ast.Name) for e in target.elts) and re.fullmatch(_TESTS, called)
                and target.lineno == target.end_lineno and target.end_col_offset is not None):
            continue
        first, second = (e.id for e in target.elts if isinstance(e, ast.Name))
        if _P_NAME.fullmatch(first) and not _P_NAME.fullmatch(second):
            edits.append((target.lineno - 1, target.col_offset, target.end_col_offset,
                          f"{second}, {first}".encode()))
    for line, start, end, text in sorted(edits, reverse=True):
        lines[line] = lines[line][:start] + text + lines[line][end:]
    mended = "\n".join(line.decode() for line in lines)
    return mended if edits and syntax_nodes(mended) is not None else None


_ENCODE_ALL = re.compile(r"\bencod\w*\b.{0,60}\bcategorical (?:columns?|features?|variables?|data|values)\b"
                         r"|\bcategorical (?:columns?|features?|variables?)\b.{0,60}\bencod", re.I | re.S)
"""A question that asks to encode every categorical column (DSEval's "Encode the categorical
features using label encoder from sklearn. Save the encoded dataset in-place.")."""
_NAMES_COLUMNS = re.compile(r"[\"'\u201c\u2018][^\"'\u201d\u2019\n]{1,60}[\"'\u201d\u2019]|"
                            r"\bmodel\b|\bpipeline\b|\bpredict", re.I)
"""A question that names its columns (DSEval bank-customer-churn: "one-hot encoding for
"Geography" and "Card Type", and label encoding for "Gender"", the surname left as text), or
encodes inside a model (automobile-dataset: the car's name stays text in ``cars``)."""


def encodes_whole(question: str) -> bool:
    """The question asks to encode every categorical column, and names none."""
    return bool(_ENCODE_ALL.search(question)) and not _NAMES_COLUMNS.search(question)


def mended_label_encoding(question: str, code: str,
                          frames: Mapping[str, VariableInfo]) -> tuple[str, str, list[str]] | None:
    """``code`` with ``frame = pd.get_dummies(frame, ...)`` run as the label encoding the
    question asks for, of every text column of ``frame`` (as the question found it), and the
    frame and those columns (None when there is nothing to mend). DSEval employee-dataset with
    the 1.5B model: "Encode the categorical columns using label encoding" run as
    ``get_dummies``; undone and told (with the loop to run), it answered "encoded" twice, and the
    seven questions after fit their models on text. The words are plain, so the step runs as
    they ask, and the model is told."""
    if not encodes_whole(question) or not re.search(r"\blabel\b", question, re.I) \
            or _LABEL_ENCODING.unless.search(code):
        return None
    try:
        body = ast.parse(code).body
    except (SyntaxError, ValueError):
        return None
    lines = code.split("\n")
    for node in body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call) and called_name(node.value.func) == "get_dummies"
                and node.value.args and isinstance(node.value.args[0], ast.Name)
                and node.value.args[0].id == node.targets[0].id and node.end_lineno is not None):
            continue
        name = node.targets[0].id
        frame = frames.get(name)
        left = text_columns(frame) if frame is not None else []
        if not left:
            return None
        loop = ["from sklearn.preprocessing import LabelEncoder", f"for _column in {left!r}:",
                f"    {name}[_column] = LabelEncoder().fit_transform({name}[_column])"]
        mended = "\n".join(lines[:node.lineno - 1] + loop + lines[node.end_lineno:])
        return (mended, name, left) if syntax_nodes(mended) is not None else None
    return None


def recomputed_columns(question: str, code: str, columns: Mapping[str, str]) -> list[Reason]:
    """A column of an uploaded file (``columns``: its name -> the file) replaced by a
    computation of other columns, for a question that does not ask to change the data:
    "Which country has the highest average number of daily vaccinations per million
    people?" run as ``df['daily_vaccinations_per_million'] = df['daily_vaccinations'] /
    df['total_vaccinations'] * 1e6`` over the file's own column of that name (DABench easy
    123 with the 1.5B model: Algeria, for Gibraltar). Only an assignment whose value reads
    other columns of the files and not the replaced one (a cleaning of the column reads it:
    ``df['Age'] = df['Age'].fillna(...)``); one line, the first. Of DSEval's 396 reference
    cells, 4 replace a file's column without reading it, and none of them is for a question
    that asks for no change."""
    if not columns or asks_to_change(question):
        return []
    for node in syntax_nodes(code) or []:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target = node.targets[0]
        column = target.slice.value if isinstance(target, ast.Subscript) \
            and isinstance(target.slice, ast.Constant) else None
        if not isinstance(column, str) or column not in columns:
            continue
        read = {inner.value for inner in ast.walk(node.value)
                if isinstance(inner, ast.Constant) and isinstance(inner.value, str)}
        if column not in read and read & (set(columns) - {column}):
            return [Reason("slip", message("slip_recomputed_column", column=column, file=columns[column],
                                           code=ast.unparse(node)))]
    return []


_FITTING = {"train_test_split": 0, "fit": 0, "cross_val_score": 1, "cross_validate": 1,
            "cross_val_predict": 1}
"""Calls given the features and then the target, by the position of the features."""


def target_in_features(code: str) -> list[Reason]:
    """A model given its target among its features: ``train_test_split(df[['IsAlone',
    'Survived']], df['Survived'])`` (DABench hard 137 with the 1.5B model: an accuracy of
    1.00, for 0.61), or ``df.drop(...)`` that keeps the target column. Read from the cell's
    code only: the features and the target written in the call or bound by a plain
    assignment in the same cell. One line, the first such call."""
    nodes = syntax_nodes(code) or []
    bound: dict[str, ast.AST] = {}
    for node in nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            if isinstance(target, ast.Name):
                bound[target.id] = value
            elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) \
                    and len(target.elts) == len(value.elts):
                pairs = zip(target.elts, value.elts, strict=True)
                bound.update((t.id, v) for t, v in pairs if isinstance(t, ast.Name))
    for node in nodes:
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        at = _FITTING.get(name)
        if at is None or len(node.args) < at + 2:
            continue
        features, predicted = (_resolve(arg, bound) for arg in node.args[at:at + 2])
        column = _column_read(predicted)
        if column is None or not _keeps(features, column):
            continue
        return [Reason("slip", message("slip_target_in_features", column=repr(column[1]),
                                       expression=ast.unparse(features)))]
    return []


def _resolve(node: ast.AST, bound: dict[str, ast.AST]) -> ast.AST:
    """The expression a plain name was bound to in the cell (the node itself otherwise)."""
    return bound.get(node.id, node) if isinstance(node, ast.Name) else node


def _column_read(node: ast.AST) -> tuple[str, str] | None:
    """(frame, column) of ``frame['col']``."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
            and isinstance(node.slice.value, str):
        return ast.unparse(node.value), node.slice.value
    return None


def _keeps(features: ast.AST, column: tuple[str, str]) -> bool:
    """``features`` holds ``column``: ``frame[[..., col, ...]]``, or ``frame.drop(...)`` of
    the same frame whose (literal) arguments leave it in."""
    frame, name = column
    if isinstance(features, ast.Subscript) and isinstance(features.slice, ast.List):
        return any(isinstance(e, ast.Constant) and e.value == name for e in features.slice.elts)
    if isinstance(features, ast.Call) and isinstance(features.func, ast.Attribute) \
            and features.func.attr == "drop" and ast.unparse(features.func.value) == frame:
        given = [*features.args, *(k.value for k in features.keywords if k.arg in ("columns", "labels"))]
        literals = [e for arg in given
                    for e in (arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg])]
        if not literals or not all(isinstance(e, ast.Constant) for e in literals):
            return False  # a name or an expression: what it drops is not read here
        return name not in {e.value for e in literals if isinstance(e, ast.Constant)}
    return False


_SUMMARIES = frozenset({"mean", "median", "sum", "max", "min", "count", "std", "var", "nunique", "len",
                        "corr", "quantile", "idxmax", "idxmin", "value_counts", "mode", "size", "shape",
                        "average"})
"""What a computation from data that two names should not share calls (or reads)."""


def _summarizes(value: ast.AST) -> bool:
    """``value`` summarizes data (a mean, a count, a maximum ...), not a copy, a file read, a
    model or random numbers, which two names may well share."""
    for node in ast.walk(value):
        if isinstance(node, ast.Attribute) and node.attr in _SUMMARIES:
            return True
        if isinstance(node, ast.Name) and node.id in _SUMMARIES and node.id != "size":
            return True
    return False


Condition = tuple[str, str, str | None]
"""A row filter: the column, its test as written (``== 'Sat'``), the text value it compares
with (or None)."""
Conditions = frozenset[Condition]
_NO_CONDITIONS: Conditions = frozenset()
_SYMBOLS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
            ast.In: "in", ast.NotIn: "not in"}
_TESTS_CALLED = frozenset({"isin", "notna", "notnull", "isna", "isnull", "between"})
_SAME_ROWS = frozenset({"copy", "dropna", "reset_index"})
_SHARE_ASKED = re.compile(r"percent|%|\bshare\b|proportion|fraction|\bmost\b|\bmajority\b|\bhow many\b",
                          re.I)
_BASE_MARKER = re.compile(r"\b(?:of|among|amongst)\s+(?:the|all(?:\s+the)?|those|these)\b", re.I)
_BASE_WORDS = 4
"""A condition named within this many words after "of the" / "among" is the base's."""


def inverted_shares(question: str, code: str) -> list[Reason]:
    """A share of the wrong rows: "Of the Saturday dinners, what percent were at smokers'
    tables?" computed as the Saturday smokers over all smokers (the conversation benchmark's
    tips question 3 with the 1.5B model: 45.16% for 48.28%). Read from the code: a count of
    the rows where A and B divided by the count where B alone, or a mean of a test over a
    subset; from the question: A is named right after "of the" (or "among"), B later and not
    so. One line, the first such share."""
    subsets: dict[str, Conditions] = {}
    counts: dict[str, Conditions] = {}
    for statement in _in_order(code):
        for node in ast.walk(statement):
            share = _share(node, subsets, counts)
            if share is None:
                continue
            counted, among = share
            found = _inverted(question, counted - among, among)
            if found:
                base, phrase = found
                return [Reason("slip", message("slip_inverted_share", share=ast.unparse(node),
                                               counted=_shown(counted), among=_shown(among),
                                               base=_shown(base), phrase=phrase))]
        if (bound := _bound(statement)) is not None:
            name, value = bound
            if (rows := _rows(value, subsets)) is not None:
                subsets[name] = rows
            if (tally := _count(value, subsets, counts)) is not None:
                counts[name] = tally
    return []


def _in_order(code: str) -> list[ast.stmt]:
    """``code``'s statements, those nested in others too, in the order they are written."""
    statements = [node for node in syntax_nodes(code) or [] if isinstance(node, ast.stmt)]
    return sorted(statements, key=lambda node: (node.lineno, node.col_offset))


def _bound(statement: ast.stmt) -> tuple[str, ast.expr] | None:
    """The name and the value of ``name = value``."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
            and isinstance(statement.targets[0], ast.Name):
        return statement.targets[0].id, statement.value
    return None


def _share(node: ast.AST, subsets: dict[str, Conditions],
           counts: dict[str, Conditions]) -> tuple[Conditions, Conditions] | None:
    """The rows counted and the rows they are counted among, for a count over a count of
    fewer conditions (``len(a) / len(b)``) or the mean of a test (``(s.x == 1).mean()``)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        counted, among = _count(node.left, subsets, counts), _count(node.right, subsets, counts)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "mean" \
            and not node.args and (test := _test(node.func.value, subsets)) is not None:
        among, tested = test
        counted = among | tested
    else:
        return None
    if counted is None or among is None or not among or not among < counted:
        return None
    return counted, among


def _inverted(question: str, base: Conditions, among: Conditions) -> tuple[Conditions, str] | None:
    """``base`` is what the question counts among ("Of the Saturday dinners") and ``among``
    is named after it, outside any such phrase: the share is inverted. The base and the
    question's words that name it."""
    if not _SHARE_ASKED.search(question):
        return None
    words = list(re.finditer(r"[^\W\d_]{3,}", question))
    markers = list(_BASE_MARKER.finditer(question))

    def named(conditions: Conditions) -> list[re.Match[str]]:
        return [word for word in words for column, _, value in conditions
                if any(mentions(word.group(), literal) for literal in [*([value] if value else []),
                                                                         *column_words(column)])]

    def in_base(word: re.Match[str]) -> re.Match[str] | None:
        for marker in markers:
            between = question[marker.end():word.start()]
            if marker.end() <= word.start() and "," not in between and len(between.split()) < _BASE_WORDS:
                return marker
        return None

    for word in named(base):
        marker = in_base(word)
        if marker and any(other.start() > word.end() and in_base(other) is None for other in named(among)):
            return base, question[marker.start():word.end()]
    return None


def _rows(node: ast.AST, subsets: dict[str, Conditions]) -> Conditions | None:
    """The conditions of the rows ``node`` holds: a table (none), a filter of one, a column
    or columns of one; None when it is none of these."""
    if isinstance(node, ast.Name):
        return subsets.get(node.id, _NO_CONDITIONS)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _SAME_ROWS:
        return _rows(node.func.value, subsets)
    if not isinstance(node, ast.Subscript):
        return None
    frame, key = node.value, node.slice
    if isinstance(frame, ast.Attribute) and frame.attr == "loc":
        frame = frame.value
        if isinstance(key, ast.Tuple) and key.elts:
            key = key.elts[0]
    rows = _rows(frame, subsets)
    if rows is None:
        return None
    if isinstance(key, ast.Constant) or (isinstance(key, ast.List) and all(isinstance(e, ast.Constant)
                                                                          for e in key.elts)):
        return rows
    test = _test(key, subsets)
    return None if test is None else rows | test[0] | test[1]


def _test(node: ast.AST, subsets: dict[str, Conditions]) -> tuple[Conditions, Conditions] | None:
    """A row test (``s['x'] == 1``, ``(a) & (b)``, ``s.x.isin([...])``): the conditions of the
    rows its columns come from, and its own."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd):
        left, right = _test(node.left, subsets), _test(node.right, subsets)
        if left is None or right is None:
            return None
        return left[0] | right[0], left[1] | right[1]
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _SYMBOLS:
        column, compared = node.left, node.comparators[0]
        written = f"{_SYMBOLS[type(node.ops[0])]} {ast.unparse(compared)}"
        value = compared.value if isinstance(compared, ast.Constant) and isinstance(compared.value, str) \
            else None
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in _TESTS_CALLED:
        column, value = node.func.value, None
        written = f".{node.func.attr}({', '.join(ast.unparse(a) for a in node.args)})"
    else:
        return None
    name = _column_of(column)
    if name is None or not isinstance(column, (ast.Subscript, ast.Attribute)):
        return None
    rows = _rows(column.value, subsets)
    return None if rows is None else (rows, frozenset({(name, written, value)}))


def _count(node: ast.AST, subsets: dict[str, Conditions], counts: dict[str, Conditions]) -> Conditions | None:
    """The conditions of the rows ``node`` counts: ``len(s)``, ``s.shape[0]``, ``s.count()``,
    ``(test).sum()``, a name bound to one of these."""
    if isinstance(node, ast.Name):
        return counts.get(node.id)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" \
            and len(node.args) == 1:
        return _rows(node.args[0], subsets)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) \
            and node.value.attr == "shape" and isinstance(node.slice, ast.Constant) and node.slice.value == 0:
        return _rows(node.value.value, subsets)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args:
        if node.func.attr == "count":
            return _rows(node.func.value, subsets)
        if node.func.attr == "sum" and (test := _test(node.func.value, subsets)) is not None:
            return test[0] | test[1]
    return None


_THRESHOLD_CALLS = frozenset({"mean", "median", "quantile", "average"})
_OWN_THRESHOLD = re.compile(r"\b(?:among|amongst|within)\b|\b(?:their|its)\s+(?:own\s+)?"
                            r"(?:average|mean|median)\b", re.I)
"""The question takes the threshold over the rows it kept ("above the average among them")."""
_THRESHOLD_OF = re.compile(r"\b(?:than|above|below|over|under|exceed\w*)\s+(?:the\s+|an?\s+)?(?:overall\s+)?"
                           r"(?:average|mean|median|\d+(?:st|nd|rd|th)\s+(?:percentile|quantile))\b"
                           r"((?:\s+[\w'-]+){0,6})", re.I)
"""A threshold in the question ("greater than the average fare of the men"), with the words
after it that may say whose average it is."""


def narrowed_thresholds(question: str, code: str) -> list[Reason]:
    """A row filter's threshold summarized over the rows an earlier filter of the cell kept:
    "male passengers who survived and paid a fare greater than the average fare" as
    ``df = df[df.Sex == 'male']``, ``df = df[df.Survived == 1]``, then
    ``df = df[df.Fare > df.Fare.mean()]``, the average of the male survivors' fares, not
    of all (DABench medium 176 with the 1.5B model: a median age of 32.00 for 31.5). Not a
    slip where the question takes the threshold over those rows ("among them", "the average
    fare of the men"), nor where every condition filters the whole table at once. One line."""
    if not _THRESHOLD_OF.search(question) or _OWN_THRESHOLD.search(question):
        return []
    subsets: dict[str, Conditions] = {}
    thresholds: dict[str, tuple[Conditions, str]] = {}
    for statement in _in_order(code):
        for node in ast.walk(statement):
            if not isinstance(node, ast.Subscript):
                continue
            for test in ast.walk(node.slice):
                if not (isinstance(test, ast.Compare) and len(test.ops) == 1
                        and isinstance(test.ops[0], (ast.Gt, ast.GtE, ast.Lt, ast.LtE))):
                    continue
                for side in (test.left, test.comparators[0]):
                    found = _threshold(side, subsets, thresholds)
                    if found and not _whose(question, found[0]):
                        said = message("slip_narrowed_threshold", comparison=ast.unparse(test),
                                       summary=found[1], kept=_shown(found[0]))
                        return [Reason("slip", said)]
        if (bound := _bound(statement)) is not None:
            name, value = bound
            if (rows := _rows(value, subsets)) is not None:
                subsets[name] = rows
            elif (found := _threshold(value, subsets, thresholds)) is not None:
                thresholds[name] = found
    return []


def _threshold(node: ast.AST, subsets: dict[str, Conditions],
               thresholds: dict[str, tuple[Conditions, str]]) -> tuple[Conditions, str] | None:
    """The rows a summary used as a threshold was taken over, when a filter kept them
    (``s.fare.mean()``, ``s['fare'].quantile(0.75)``, a name bound to one), and the summary."""
    if isinstance(node, ast.Name):
        return thresholds.get(node.id)
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in _THRESHOLD_CALLS):
        return None
    column = node.func.value
    if not isinstance(column, (ast.Subscript, ast.Attribute)) or _column_of(column) is None:
        return None
    rows = _rows(column.value, subsets)
    return (rows, ast.unparse(node)) if rows else None


def _whose(question: str, kept: Conditions) -> bool:
    """The question says the average is of rows a filter kept: one of their conditions is
    named in the words right after the threshold ("than the average fare of the male
    passengers")."""
    for match in _THRESHOLD_OF.finditer(question):
        words = re.findall(r"[^\W\d_]{3,}", match.group(1))
        if any(mentions(word, literal) for word in words for column, _, value in kept
               for literal in [*([value] if value else []), *column_words(column)]):
            return True
    return False


def _shown(conditions: Conditions) -> str:
    return " and ".join(f"`{column} {written}`" for column, written, _ in sorted(conditions))


__all__ = ["SLIPS", "Slip", "encodes_whole", "inverted_shares", "mended_label_encoding",
           "mended_population_std", "mended_statistic_first", "narrowed_thresholds", "recomputed_columns",
           "same_twice", "slips_in", "unasked_ratios", "wrong_change"]
