"""Errors that teach: one line (or a code block) after a failed step that says what went
wrong in terms of the user's data, and what to run instead.

Small models repeat a failing cell with the wrong fix: ``encoding='latin1'`` added to a
file that also needs ``sep=';'``, the same ``astype(int)`` on text like
``630308[495000-801000]``. The uploads' loader (:mod:`.uploads`) knows how each table
reads, so an error about reading one is answered with its call:

- a decode error names the file's real encoding;
- a ``ParserError`` gives the call whose options were checked on the file;
- a ``KeyError`` on a DataFrame whose one column name holds the file's delimiter says it
  was read with the wrong separator; a ``KeyError`` close to an existing column names it
  (a stray byte-order mark, case, spaces, a unit the real name goes on with), each of the
  names when it lists several; otherwise the frames' columns are listed (quoted where a
  name holds a newline or spaces at its ends);
- a conversion error shows a value that is not a plain number; one with no digit at all (a
  country's name) is a text column in a whole-table computation: select the numeric ones;
- a model that refuses missing values (scikit-learn, statsmodels) says how to drop or fill them;
- ``r, p = df['a'].corr(df['b'])`` (pandas gives the coefficient only) gets the call that
  gives both, ``scipy.stats.pearsonr``;
- an import of a name the installed library does not have (``from scipy.stats import
  cramers_v``) says nothing can be installed, with the call that does it where one is known;
- a library's name used without its import (``LogisticRegression``, ``stats``) gets the import;
- a stand-in of an example copied as code (``df[col]``, ``> x``, ``between(low, high)``) says
  what to write in its place, with the code's own frame and column;
- ``LabelEncoder`` given a whole table gets the loop over its text columns;
- a statistic of a text column (``df['region'].mean()``) names the text columns and the ways out;
- a text column compared with a number or a date gets the conversion (``pd.to_datetime``,
  ``pd.to_numeric``);
- a Series method called on one number (``df[col].skew().idxmax()``: the whole column's
  statistic where one per group was meant) gets the ``groupby`` that makes one per group;
- a cell made only of ``name: value`` lines (the answer's items written as code, which
  Python reads as annotations) is told to answer with them, outside a code block;
- a keyword or method the installed libraries no longer have (what a small model learned from
  older examples: ``mean_squared_error(squared=False)``, ``OneHotEncoder(sparse=False)``,
  ``DataFrame.append``) gets today's spelling; another unexpected keyword, how to list what
  the function takes; ``.round(2)`` on a plain number, ``round(x, 2)``.

The same error twice in a row gets a different, more concrete hint: the file's first lines
and the loader's call, or the code that takes the number out of the text, instead of the
same sentence again. :class:`ErrorTeacher` remembers the last error of a conversation.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ...kernels import Execution, VariableInfo
from ..briefing.note import written_column
from ..briefing.uploads import UploadedTable
from ..prompting import message
from .checks import syntax_nodes, text_columns

_MAX_FRAMES = 3
_MAX_COLUMNS = 40
_LITERAL_RE = re.compile(r"""['"]([^'"\n]{1,200})['"]""")
_VALUE_RE = re.compile(r""":\s*'([^']{1,80})'""")
_CONVERSION = ("invalid literal for int()", "could not convert string to float", "Unable to parse string",
               "invalid literal for float()")
_DELIMITERS = {";": "`;`", "\t": "TAB", "|": "`|`", ",": "`,`"}
_DIGITS = re.compile(r"\d+")
_NAN = re.compile(r"\bcontains (?:NaN|inf or nans|infinity)", re.IGNORECASE)
_DRIFT = ((re.compile(r"unexpected keyword argument 'squared'"), "hint_rmse"),
          (re.compile(r"unexpected keyword argument 'sparse'"), "hint_sparse_output"),
          (re.compile(r"OneHotEncoder.*unexpected keyword argument 'drop_first'"), "hint_drop_first"),
          (re.compile(r"object has no attribute 'append'"), "hint_append"),
          (re.compile(r"object has no attribute 'iteritems'"), "hint_iteritems"),
          (re.compile(r"^NotImplementedError: .*StringArray'> does not support reshape"),
           "hint_text_reshape"))
"""Errors of code written for older library versions (seen in the 1.5B model's DABench
cells: ``squared`` 52 times, ``sparse`` 24, ``drop_first`` 18), and today's spelling; pandas 3
keeps text in an Arrow array, which has no ``reshape`` (``df['Sex'].values.reshape(-1, 1)`` for
a ``OneHotEncoder``: DABench hard 7 on 7ddff9d)."""
_UNEXPECTED_KEYWORD = re.compile(r"unexpected keyword argument '(\w+)'")
_UNPACK_ONE = re.compile(r"cannot unpack non-iterable (?:numpy\.)?float(?:64)? object")
_CORR_CALL = re.compile(r"\.corr(?:with)?\(")
_NO_SUCH_NAME = re.compile(r"^cannot import name '([\w.]+)' from '([\w.]+)'")
_NO_MODULE = re.compile(r"^No module named '([\w.]+)'")
_UNDEFINED = re.compile(r"^name '(\w+)' is not defined")
_RECIPES = {("scipy.stats", "cramers_v"): (
    "Cramér's V of two columns: `from scipy.stats.contingency import association`, then "
    "`association(pd.crosstab(a, b), method='cramer')`.")}
"""What a small model imports that its library never had, and the call that does it."""
_IMPORTS = {
    **{name: f"from sklearn.{module} import {name}" for module, names in (
        ("linear_model", "LinearRegression LogisticRegression Ridge Lasso ElasticNet"),
        ("ensemble", "RandomForestClassifier RandomForestRegressor GradientBoostingClassifier "
                     "GradientBoostingRegressor VotingClassifier AdaBoostClassifier"),
        ("tree", "DecisionTreeClassifier DecisionTreeRegressor"),
        ("neighbors", "KNeighborsClassifier KNeighborsRegressor"),
        ("svm", "SVC SVR"), ("naive_bayes", "GaussianNB"), ("cluster", "KMeans DBSCAN"),
        ("decomposition", "PCA"),
        ("preprocessing", "LabelEncoder OneHotEncoder StandardScaler MinMaxScaler PolynomialFeatures"),
        ("model_selection", "train_test_split GridSearchCV RandomizedSearchCV cross_val_score KFold "
                            "StratifiedKFold"),
        ("metrics", "accuracy_score precision_score recall_score f1_score roc_auc_score confusion_matrix "
                    "classification_report mean_squared_error root_mean_squared_error mean_absolute_error "
                    "r2_score silhouette_score"),
        ("impute", "SimpleImputer"), ("pipeline", "Pipeline make_pipeline"), ("compose", "ColumnTransformer"))
       for name in names.split()},
    **{name: f"from scipy.stats import {name}" for name in (
        "pearsonr", "spearmanr", "kendalltau", "ttest_ind", "ttest_rel", "ttest_1samp", "shapiro",
        "normaltest", "chi2_contingency", "f_oneway", "mannwhitneyu", "kruskal", "levene", "zscore", "skew",
        "kurtosis", "linregress", "anderson", "kstest")},
    "SMOTE": "from imblearn.over_sampling import SMOTE", "stats": "from scipy import stats",
    "scipy": "import scipy", "math": "import math", "np": "import numpy as np", "pd": "import pandas as pd",
    "plt": "import matplotlib.pyplot as plt", "sns": "import seaborn as sns",
    "sm": "import statsmodels.api as sm", "smf": "import statsmodels.formula.api as smf"}
"""Names a small model uses without importing them, and their import (DSEval employee-dataset:
``LogisticRegression`` in a voting classifier, three times; DABench: ``stats.``, ``kendalltau``)."""
_PLACEHOLDERS = {"col": "placeholder_column", "group_col": "placeholder_column", "x": "placeholder_number",
                 "threshold": "placeholder_number", "low": "placeholder_bound", "high": "placeholder_bound",
                 "subset": "placeholder_subset"}
"""The stand-ins of the examples in the messages (``df[col]``, ``(subset[col] > x)``,
``between(low, high)``), and what each stands for. The mpg conversation with the 1.5B model:
``(euro_df[col] > x).mean()`` copied as written, then ``(euro_df['mpg'] > x)``, two steps."""
_COMPARED_WITH = r"(?:[<>]=?|==|!=)\s*{name}\b|\b{name}\s*(?:[<>]=?|==|!=)"
_TEXT_COMPARED = re.compile(r"^Invalid comparison between dtype=(?:str|object) and (\w+)|"
                            r"^'[<>]=?' not supported between instances of 'str' and '(\w+)'|"
                            r"^'[<>]=?' not supported between instances of '(\w+)' and 'str'")
"""A text column compared with a number or a date (pandas' and Python's words; ``pd.cut``
of a text column compares the bins' numbers with its texts: DSEval students-exam-scores,
``'5 - 10'`` hours cut at ``[0, 5, 10, 15]``, three steps)."""
_ENCODER_TABLE = re.compile(r"^y should be a 1d array, got an array of shape \(\d+, \d+\)")
"""``LabelEncoder().fit_transform(df)``: it encodes one column (DSEval housing-price-prediction
with the 1.5B model: twice on the whole table, rolled back, the question ended unencoded)."""
_TEXT_REDUCTION = re.compile(r"^Cannot perform reduction '(\w+)' with string dtype")
"""A statistic of a text column (pandas 3's words; DABench hard 28: ``df['region'].mean()`` for
a form that lists every column, three cells; 7 notebooks of the 1.5B model's runs)."""
_BINNED = re.compile(r"\b(?:pd\.)?(?:cut|qcut)\(")
_DATE_TYPES = ("datetime", "Timestamp", "date", "datetime64")
_NO_ATTRIBUTE = re.compile(r"^'(?:DataFrame|Series|DataFrameGroupBy|SeriesGroupBy)' object has no attribute "
                           r"'([^']+)'")
"""A column written as an attribute that is not one (``df.Occupancy_rate``)."""
_ONE_NUMBER = re.compile(r"^'(?:numpy\.)?(?:float|int)(?:\d+)?' object has no attribute "
                         r"'(idxmax|idxmin|nlargest|nsmallest|sort_values|index|iloc|loc|values|items|"
                         r"head|tail|max|min|argmax|argmin)'")
"""Series methods called on a number: a whole column's statistic taken for one per group."""
_ROUND_ON_FLOAT = re.compile(r"^'(?:float|int)' object has no attribute 'round'")
_CONTINUOUS_CLASSES = re.compile(r"Classification metrics can't handle a mix of (?:binary|multiclass) and "
                                 r"continuous")
"""scikit-learn's accuracy of a regression's predictions (DABench hard 7: "linear regression ...
predict whether a passenger survived", three cells)."""
"""``(a / b * 100).round(2)``: a plain Python number has no ``.round`` (a Series has)."""
_ANSWER_LINE = re.compile(r"^[ \t]*([A-Za-z_]\w*)[ \t]*:[ \t]*(\S.*?)[ \t]*$")
"""A line ``name: value``: an answer's item, which Python reads as an annotation."""
_FORM_LINE = re.compile(r"^[ \t]*@(\w+)\[(.*)\][ \t]*$", re.M)
"""A line of code that is an answer's ``@name[value]`` item (Python reads ``@`` as a decorator)."""


@dataclass
class ErrorTeacher:
    """The hints of one conversation (it remembers the last step's error)."""

    last: tuple[str, str] | None = None
    """``(ename, evalue)`` of the previous step, when it failed (its numbers as ``#``)."""
    tables: dict[str, UploadedTable] = field(default_factory=dict)
    """Every table uploaded in the conversation, by name."""

    def hint(self, ex: Execution, code: str, variables: Mapping[str, VariableInfo]) -> str:
        """The hint for a step's outcome ("" when it did not fail or nothing useful is known)."""
        if ex.error is None:
            self.last = None
            return ""
        key = (ex.error.ename, _DIGITS.sub("#", ex.error.evalue))  # positions and counts may differ
        repeated = key == self.last
        self.last = key
        if _UNPACK_ONE.search(ex.error.evalue) and _CORR_CALL.search(code):
            return message("hint_corr_pvalue")  # r, p = df.a.corr(df.b): DABench hard 142, four times
        missing = _NO_SUCH_NAME.match(ex.error.evalue) if ex.error.ename == "ImportError" else None
        if missing is not None:  # from scipy.stats import cramers_v: DSEval students-performance
            name, module = missing.groups()
            recipe = _RECIPES.get((module, name))
            return message("hint_no_such_name", module=module, name=name,
                           recipe=f" {recipe}" if recipe else "")
        undefined = _UNDEFINED.match(ex.error.evalue) if ex.error.ename == "NameError" else None
        known = [recipe for (_, name), recipe in _RECIPES.items() if undefined and name == undefined.group(1)]
        if known and undefined:  # cramers_v(...) called as if a library had put it there (DSEval)
            return message("hint_undefined_known", name=undefined.group(1), recipe=f" {known[0]}")
        if undefined and undefined.group(1) in _IMPORTS:
            return message("hint_import", name=undefined.group(1), line=_IMPORTS[undefined.group(1)])
        if undefined and undefined.group(1) in _PLACEHOLDERS:
            text = self._placeholder(undefined.group(1), code)
            if text:
                return text
        absent = _NO_MODULE.match(ex.error.evalue) if ex.error.ename == "ModuleNotFoundError" else None
        if absent is not None:
            return message("hint_no_module", module=absent.group(1))
        compared = _TEXT_COMPARED.search(ex.error.evalue) if ex.error.ename == "TypeError" else None
        encoder = ex.error.ename == "ValueError" and _ENCODER_TABLE.search(ex.error.evalue)
        if encoder and "LabelEncoder" in code:
            return _encoder_table(code, variables)
        reduction = _TEXT_REDUCTION.search(ex.error.evalue) if ex.error.ename == "TypeError" else None
        if reduction is not None:
            return _text_reduction(reduction.group(1), code, variables)
        if compared is not None and _BINNED.search(code):
            return message("hint_text_binned")
        if compared is not None:  # text dates against datetime.now(): DSEval netflix-userbase, twice
            dates = (compared.group(1) or compared.group(2) or compared.group(3)) in _DATE_TYPES
            return message("hint_text_compared", kind="dates" if dates else "numbers",
                           convert="df[col] = pd.to_datetime(df[col])" if dates
                           else "df[col] = pd.to_numeric(df[col], errors='coerce')")
        items = _answer_lines(code) if ex.error.ename in ("NameError", "SyntaxError") else []
        if items:  # "significance_of_difference: no" and "p_value: 0.9700" as a cell: DABench hard 124
            written = " ".join(f"@{name}[{value}]" for name, value in items)
            return message("hint_answer_as_code", items=written)
        form = _FORM_LINE.search(code) if ex.error.ename in ("SyntaxError", "IndentationError") else None
        if form is not None:  # @site_identifiers[outliers['site'].tolist()] as code: DABench medium 219
            return message("hint_form_as_code", name=form.group(1), value=form.group(2))
        one = _ONE_NUMBER.search(ex.error.evalue) if ex.error.ename == "AttributeError" else None
        if one is not None:  # df[col].skew().idxmax(): DABench medium 252, 18 cells in its attempts
            return message("hint_one_number", attribute=one.group(1))
        if ex.error.ename == "AttributeError" and _ROUND_ON_FLOAT.search(ex.error.evalue):
            return message("hint_round_on_number")  # the mpg conversation: three cells in one question
        if ex.error.ename == "ValueError" and _CONTINUOUS_CLASSES.search(ex.error.evalue):
            return message("hint_continuous_classes")
        table = self._table_in(code)
        used = _used_columns(code, table) if table is not None else []
        if len(used) >= 2 and self._missing_values(ex, table, variables, repeated):
            # DABench hard 125: `df.dropna(subset=[the two features])`, the target left out, four cells
            return message("hint_missing_values_columns", frame=(table.variable if table else None) or "df",
                           columns=repr(used))
        for teach in (self._decode, self._parser, self._separator, self._close_column, self._conversion,
                      self._missing_file, self._missing_values, self._version_drift):
            text = teach(ex, table, variables, repeated)
            if text:
                return text
        if ex.error.ename == "KeyError":
            return _columns_hint(variables)
        return message("hint_repeat") if repeated else ""

    def _placeholder(self, name: str, code: str) -> str:
        """What the example's stand-in ``name`` (used in ``code``, defined nowhere) is to be
        written as: the code's own table and column where it names them."""
        kind = _PLACEHOLDERS[name]
        if kind == "placeholder_number" and not re.search(_COMPARED_WITH.format(name=name), code):
            return ""  # an `x` of the model's own (a plot's data, a feature array) it forgot to define
        table = self._table_in(code)
        indexed = rf"\b([A-Za-z_]\w*)\[\s*{name}\s*\]"  # euro_df[col]: the frame it indexes
        frames = re.findall(indexed, code) if kind == "placeholder_column" else []
        frame = frames[0] if frames else (table.variable if table and table.variable else "df")
        columns = (_used_columns(code, table) or _used_columns(code, table, attributes=True)) if table else []
        column = columns[0] if columns else (table.columns[0] if table and table.columns else "column")
        return message("hint_placeholder", name=name, meaning=message(kind, example=f"{frame}[{column!r}]"))

    # -- which table --------------------------------------------------------------------------

    def _table_in(self, code: str) -> UploadedTable | None:
        """The table the code names, or the only readable one."""
        readable = [t for t in self.tables.values() if t.plan is not None]
        named = [t for t in readable if t.file in _literals(code)]
        if named:
            return named[0]
        return readable[0] if len(readable) == 1 else None

    def _read_it(self, table: UploadedTable, repeated: bool) -> str:
        """The loader's call (and, for a repeat, the file's first lines first)."""
        parts = []
        if repeated:
            lines = table.first_lines()
            if lines:
                parts += [message("hint_first_lines", file=table.file), _block(lines, "text")]
            parts.append(message("hint_repeat_file"))
        parts.append(_block(table.call(), "python"))
        if table.variable is not None:
            parts.append(message("hint_loaded", file=table.file, var=table.variable))
        return "\n".join(parts)

    # -- the errors -------------------------------------------------------------------------

    def _decode(self, ex: Execution, table: UploadedTable | None, _: Mapping[str, VariableInfo],
                repeated: bool) -> str:
        assert ex.error is not None
        decode = ex.error.ename in ("UnicodeDecodeError", "UnicodeError")
        if not decode or table is None or table.plan is None:
            return ""
        encoding = getattr(table.plan, "encoding", None) or table.plan.describe()
        text = message("hint_decode", file=table.file, encoding=encoding)
        return text + "\n" + self._read_it(table, repeated)

    def _parser(self, ex: Execution, table: UploadedTable | None, _: Mapping[str, VariableInfo],
                repeated: bool) -> str:
        assert ex.error is not None
        if table is None or table.plan is None:
            return ""
        if ex.error.ename != "ParserError" and "Error tokenizing data" not in ex.error.evalue:
            return ""
        text = message("hint_parser", file=table.file, how=table.plan.describe())
        return text + "\n" + self._read_it(table, repeated)

    def _separator(self, ex: Execution, table: UploadedTable | None, variables: Mapping[str, VariableInfo],
                   repeated: bool) -> str:
        assert ex.error is not None
        if ex.error.ename != "KeyError":
            return ""
        for info in variables.values():
            if not info.columns or len(info.columns) != 1:
                continue
            column = info.columns[0]
            owner = self._file_with_delimiter_in(column) or table
            sep = getattr(owner.plan, "sep", None) if owner is not None else None
            if owner is None or sep is None or sep not in column:
                continue
            text = message("hint_separator", var=info.name, column=repr(_short(column)), file=owner.file,
                           sep=_DELIMITERS.get(sep, repr(sep)))
            return text + "\n" + self._read_it(owner, repeated)
        return ""

    def _file_with_delimiter_in(self, column: str) -> UploadedTable | None:
        for table in self.tables.values():
            sep = getattr(table.plan, "sep", None)
            shape = table.plan.shape if table.plan is not None else None
            if (sep and sep in column and shape is not None and shape.columns
                    and column.split(sep)[0].strip('"\ufeff ') == shape.columns[0][0].strip()):
                return table
        return None

    def _close_column(self, ex: Execution, _: UploadedTable | None, variables: Mapping[str, VariableInfo],
                      repeated: bool) -> str:
        """Names that are not columns, each with the column it is close to: the spelling, case,
        spaces or invisible characters, or the unit the real name goes on with
        (``'Density'`` for ``'Density\\n(P/Km2)'``: DSEval's countries of the world, where the
        1.5B model wrote the short names in three cells in a row)."""
        assert ex.error is not None
        attribute = _NO_ATTRIBUTE.match(ex.error.evalue) if ex.error.ename == "AttributeError" else None
        if ex.error.ename != "KeyError" and attribute is None:
            return ""
        columns = [c for info in variables.values() for c in (info.columns or [])]
        named = [attribute.group(1)] if attribute is not None else _missing_keys(ex.error.evalue)
        keys = [key for key in named if key and key not in columns]
        matches = [(key, match) for key in keys if (match := _closest(key, columns)) is not None]
        if not matches:
            return ""
        if attribute is not None:  # df.Occupancy_rate for 'Occupancy rate' (conversation benchmark)
            column = matches[0][1]
            text = message("hint_close_column", key=repr(keys[0]), column=repr(column))
            if not column.isidentifier():
                text += " " + message("hint_column_brackets", column=repr(column))
        elif len(keys) == 1:
            text = message("hint_close_column", key=repr(keys[0]), column=repr(matches[0][1]))
        else:
            found = {key for key, _ in matches}
            pairs = "; ".join(f"{key!r} is {match!r}" for key, match in matches)
            lost = ", ".join(repr(key) for key in keys if key not in found)
            text = message("hint_close_columns", pairs=pairs,
                           none=" " + message("hint_no_close_column", keys=lost) if lost else "")
        return text + "\n" + _columns_hint(variables)

    def _conversion(self, ex: Execution, _: UploadedTable | None, __: Mapping[str, VariableInfo],
                    repeated: bool) -> str:
        assert ex.error is not None
        conversion = any(m in ex.error.evalue for m in _CONVERSION)
        if ex.error.ename not in ("ValueError", "TypeError") or not conversion:
            return ""
        found = _VALUE_RE.search(ex.error.evalue) or _LITERAL_RE.search(ex.error.evalue)
        value = repr(found.group(1)) if found else "in the error above"
        if found and not any(ch.isdigit() for ch in found.group(1)):
            # 'Denmark': a text column in a whole-table computation (DABench medium 117 left
            # out one country after another, nine steps, each failing on the next name)
            return message("hint_text_values", value=value)
        return message("hint_conversion_repeat" if repeated else "hint_conversion", value=value)

    def _missing_file(self, ex: Execution, _: UploadedTable | None, __: Mapping[str, VariableInfo],
                      repeated: bool) -> str:
        assert ex.error is not None
        if ex.error.ename != "FileNotFoundError" or not self.tables:
            return ""
        listed = ", ".join(f"`{name}`" for name in self.tables)
        return message("hint_no_file", files=listed)


    def _missing_values(self, ex: Execution, _: UploadedTable | None, __: Mapping[str, VariableInfo],
                        repeated: bool) -> str:
        """scikit-learn's ``Input X contains NaN``, statsmodels' ``MissingDataError``."""
        assert ex.error is not None
        text = f"{ex.error.ename}: {ex.error.evalue}"
        if not (_NAN.search(text) or ex.error.ename == "MissingDataError"):
            return ""
        return message("hint_missing_values")

    def _version_drift(self, ex: Execution, _: UploadedTable | None, __: Mapping[str, VariableInfo],
                       repeated: bool) -> str:
        """A keyword or method of older library versions: today's spelling."""
        assert ex.error is not None
        if ex.error.ename not in ("TypeError", "AttributeError", "NotImplementedError"):
            return ""
        text = f"{ex.error.ename}: {ex.error.evalue}"
        for pattern, key in _DRIFT:
            if pattern.search(text):
                return message(key)
        found = _UNEXPECTED_KEYWORD.search(text)
        return message("hint_unexpected_keyword", name=found.group(1)) if found else ""


def _answer_lines(code: str) -> list[tuple[str, str]]:
    """The ``name: value`` items of a cell made only of them (none when any line is other code)."""
    lines = [line for line in code.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    found = [_ANSWER_LINE.match(line) for line in lines]
    if not found or any(match is None for match in found):
        return []
    return [(match.group(1), match.group(2)) for match in found if match is not None]


def _used_columns(code: str, table: UploadedTable, *, attributes: bool = False) -> list[str]:
    """The table's columns the code names, in the order it first names them: as strings
    (``df['mpg']``), or with ``attributes`` as attributes (``euro_df.mpg``)."""
    columns = set(table.columns)
    found = []
    for node in syntax_nodes(code) or []:
        if attributes and isinstance(node, ast.Attribute):
            found.append((node.lineno, node.col_offset, node.attr))
        elif not attributes and isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append((node.lineno, node.col_offset, node.value))
    return list(dict.fromkeys(name for _, _, name in sorted(found) if name in columns))


def _encoder_table(code: str, variables: Mapping[str, VariableInfo]) -> str:
    """``LabelEncoder`` given a whole table: the loop over the text columns of the frame the
    code names."""
    names = {node.id for node in syntax_nodes(code) or [] if isinstance(node, ast.Name)}
    frames = [info for info in variables.values() if info.name in names and text_columns(info)]
    if not frames:
        return message("hint_encoder_table", example="")
    frame = frames[0]
    loop = message("text_left_label", frame=frame.name, columns=repr(text_columns(frame)))
    return message("hint_encoder_table", example=" " + loop)


def _text_reduction(statistic: str, code: str, variables: Mapping[str, VariableInfo]) -> str:
    """``.mean()`` (``statistic``) of a text column: which columns the code names are text."""
    attributes = {node.attr for node in syntax_nodes(code) or [] if isinstance(node, ast.Attribute)}
    literals = _literals(code) | attributes
    text = [f"`{name}`" for info in variables.values() for name, dtype in (info.dtypes or {}).items()
            if name in literals and (dtype in ("str", "object", "string") or dtype.startswith("string"))]
    named = ", ".join(dict.fromkeys(text)) if text else "a column of words"
    return message("hint_text_reduction", statistic=statistic, columns=named)


def _literals(code: str) -> set[str]:
    """The string constants of ``code`` (a regex pass when it does not parse)."""
    nodes = syntax_nodes(code)
    if nodes is None:
        return set(_LITERAL_RE.findall(code))
    return {node.value for node in nodes if isinstance(node, ast.Constant) and isinstance(node.value, str)}


_KEY_LIST = re.compile(r"^\"?(\[.*\]) not (?:in index|found in axis)\"?$|"
                       r"^\"?None of \[Index\((\[.*?\]), dtype=", re.DOTALL)


def _missing_keys(evalue: str) -> list[str]:
    """The names a ``KeyError`` says are missing: one (``'foo'``), or a list (pandas'
    ``"['a', 'b'] not in index"``, ``.drop``'s ``"['a'] not found in axis"`` and ``"None of
    [Index(['a', 'b'], dtype=...)] are in the [columns]"``)."""
    text = evalue.strip()
    found = _KEY_LIST.match(text)
    if found is None:
        return [text.strip("'\"")]
    try:
        names = ast.literal_eval(found.group(1) or found.group(2))
    except (SyntaxError, ValueError):
        return []
    return [name for name in names if isinstance(name, str)]


def _closest(key: str, columns: list[str]) -> str | None:
    """The column ``key`` most likely means: the same name but for case, spaces and invisible
    characters; the one column that begins with it and goes on after a space, a newline or a
    bracket (a unit); else one at least 80% alike."""
    folded = {_fold(c): c for c in columns}
    if (match := folded.get(_fold(key))) is not None:
        return match
    goes_on = re.compile(re.escape(key.strip()) + r"\s*[\n(\[]", re.IGNORECASE)
    prefix = [c for c in columns if goes_on.match(c.strip())]
    if len(prefix) == 1:
        return prefix[0]
    close = difflib.get_close_matches(_fold(key), list(folded), n=1, cutoff=0.8)
    return folded[close[0]] if close else None


def _fold(name: str) -> str:
    return "".join(name.replace("\ufeff", "").split()).casefold()


def _short(text: str, width: int = 80) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _block(text: str, language: str) -> str:
    return f"```{language}\n{text}\n```"


def _columns_hint(variables: Mapping[str, VariableInfo]) -> str:
    """The columns of the DataFrames the model has (after a KeyError)."""
    frames = [v for v in variables.values() if v.columns][:_MAX_FRAMES]
    if not frames:
        return ""
    listed = "; ".join(f"{v.name}: " + ", ".join(map(written_column, (v.columns or [])[:_MAX_COLUMNS]))
                       for v in frames)
    return message("key_error_columns", frames=listed)


__all__ = ["ErrorTeacher"]
