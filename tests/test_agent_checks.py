"""The agent's judgement of results and answers, without a kernel or a model: comparisons
found in code, empty results, the form a question asks for, and the hints after errors."""

from __future__ import annotations

import re
from typing import Any

import pytest

from kernel_analyst import SessionManager
from kernel_analyst.agent.briefing.note import describe_variables
from kernel_analyst.agent.briefing.uploads import UploadedTable, frame_names, is_table
from kernel_analyst.agent.feedback.checks import (
    comparisons,
    empty_answer,
    never_matches_by_type,
    result_notes,
)
from kernel_analyst.agent.feedback.form import AnswerForm
from kernel_analyst.agent.feedback.hints import ErrorTeacher
from kernel_analyst.eda import detect
from kernel_analyst.kernels import Execution, ExecutionError, VariableChanges, VariableInfo
from tests.conftest import MESSY, SEABORN, SHARED

TIPS = VariableInfo(
    "df",
    "pandas.DataFrame",
    [244, 7],
    ["total_bill", "tip", "sex", "smoker", "day", "time", "size"],
    {
        "total_bill": "float64",
        "tip": "float64",
        "sex": "str",
        "smoker": "str",
        "day": "str",
        "time": "str",
        "size": "int64",
    },
)


@pytest.mark.parametrize(
    ("code", "found"),
    [
        ("df[df['smoker'] == True]", [("smoker", (True,), "df['smoker'] == True")]),
        ("df.loc[df.smoker != 'yes', 'tip'].mean()", [("smoker", ("yes",), "df.smoker != 'yes'")]),
        ("df[df['day'].isin(['Sat', 'Sun'])]", [("day", ("Sat", "Sun"), "df['day'].isin(['Sat', 'Sun'])")]),
        ("df.query(\"time == 'dinner'\")", [("time", ("dinner",), "time == 'dinner'")]),
        ("df[df['size'] > 2]", []),  # not an equality
        ("other[other['smoker'] == 'No']", []),  # not a known frame
        ("df[df['nope'] == 1]", []),  # not a column of it
        ("df[df['smoker'] ==", []),  # does not parse
    ],
)
def test_comparisons_with_literals_are_found(
    code: str, found: list[tuple[str, tuple[Any, ...], str]]
) -> None:
    got = comparisons(code, {"df": TIPS})
    assert [(c.column, c.values, c.text) for c in got] == found


@pytest.mark.parametrize(
    ("values", "dtype", "never"),
    [
        ((True,), "str", True),
        ((True,), "int64", None),  # True == 1 holds for 0/1 columns
        (("1",), "int64", True),
        ((1,), "str", True),
        (("Yes",), "str", None),
        (("Yes",), "object", None),
    ],
)
def test_a_type_that_cannot_match(values: tuple[Any, ...], dtype: str, never: bool | None) -> None:
    comparison = comparisons(f"df[df['smoker'] == {values[0]!r}]", {"df": TIPS})[0]
    assert never_matches_by_type(comparison, dtype) is never


def _ex(text: str = "", created: list[VariableInfo] | None = None, status: str = "ok") -> Execution:
    ex = Execution(code="x", status=status)  # type: ignore[arg-type]
    if text:
        ex.outputs.append({"output_type": "stream", "name": "stdout", "text": text})
    ex.variables = VariableChanges(created=created or [])
    return ex


@pytest.mark.parametrize(
    ("text", "flagged"),
    [
        ("nan\n", True),
        ("Mean tip: nan\n", True),
        ("Empty DataFrame\nColumns: [a]\nIndex: []\n", True),
        ("Series([], Name: tip, dtype: float64)\n", True),
        ("None\n", True),
        ("[]\n", True),
        ("3.0087\n", False),
        ("0\n", False),
        ("nan values: 3\n", False),
    ],
)
def test_a_nan_or_empty_result_is_flagged(text: str, flagged: bool) -> None:
    notes = result_notes(_ex(text))
    assert bool(notes) is flagged, notes


def test_an_empty_selection_is_flagged_by_name() -> None:
    empty = VariableInfo("smokers", "pandas.DataFrame", [0, 7])
    assert result_notes(_ex("", [empty])) == [
        "Check: `smokers` has 0 rows: the selection matched nothing (compare the filter's values with the "
        "column's real values)."
    ]
    assert result_notes(_ex("nan\n", status="error")) == []


@pytest.mark.parametrize(
    ("answer", "empty"),
    [
        ("nan", "nan"),
        ("NaN.", "NaN."),
        ("**None**", "None"),
        ("@mean_tip[nan]", "nan"),
        ("@a[nan] @b[3]", None),
        ("The mean is nan because no row matched.", None),
        ("", None),
        ("3.0", None),
    ],
)
def test_an_empty_answer(answer: str, empty: str | None) -> None:
    assert empty_answer(answer) == empty


def test_the_form_a_question_asks_for() -> None:
    form = AnswerForm.of(
        "Compute the mean. Answer as @mean_fare[value] and @count[n], rounded to two decimal places."
    )
    assert form.names == ("mean_fare", "count") and form.decimals == 2
    assert form.problems("The mean fare is 32.2.") == ["missing: @mean_fare[...], @count[...]"]
    assert form.problems("@mean_fare[32.204] @count[891]") == ["more than 2 decimals: @mean_fare[32.204]"]
    assert form.problems("@mean_fare[32.20], @count[891]") == []
    # rounded as asked: only the items' numbers, never code that prints the form
    said = "Mean 32.2041 `print(f'@mean_fare[{0.12345}]')` @mean_fare[32.204] @count[891] @other[1.2345]"
    assert form.rounded(said) == ("Mean 32.2041 `print(f'@mean_fare[{0.12345}]')` @mean_fare[32.20] "
                                  "@count[891] @other[1.2345]")
    assert AnswerForm.of("Answer as @r[value].").rounded("@r[0.081333]") == "@r[0.081333]"
    # DABench medium 34: each item to its own decimals, not all to the smallest named (0.4058 was 0.41)
    mixed = AnswerForm.of(
        "@correlation_coefficient[r_value] @p_value[p_value] @relationship_type[relationship_type] where "
        "\"r_value\" is a number between -1 and 1, rounded to two decimal places. where \"p_value\" is a "
        "number between 0 and 1, rounded to four decimal places. where \"relationship_type\" is a string.")
    assert [mixed.decimals_of(n) for n in mixed.names] == [2, 4, None]
    assert mixed.rounded("@correlation_coefficient[-0.0412] @p_value[0.40581] @relationship_type[none]") == (
        "@correlation_coefficient[-0.04] @p_value[0.4058] @relationship_type[none]")
    assert mixed.problems("@correlation_coefficient[-0.04] @p_value[0.4058] @relationship_type[none]") == []
    # DABench medium 647: two phrases in one sentence, each with the names before it; a name no
    # phrase goes with is not rounded when the question names several
    listed = AnswerForm.of(
        "@mean[mean_value] @p[p_value] @other[x], where \"mean_value\" is the mean, rounded to two decimal "
        "places, \"p_value\" is a number between 0 and 1, rounded to four decimal places, and more.")
    assert [listed.decimals_of(n) for n in listed.names] == [2, 4, None]
    assert listed.rounded("@mean[1.23456] @p[0.123456] @other[1.23456]") == (
        "@mean[1.23] @p[0.1235] @other[1.23456]")
    assert AnswerForm.of("What is the mean fare?").problems("About 32.") == []
    dabench = AnswerForm.of("Finish with @mean_fare[mean_fare_value]. Write each @name[value] as shown.")
    assert dabench.names == ("mean_fare",) and dabench.problems("@mean_fare[34.65]") == []
    # DABench 6: the answer was prose, with the code that printed the form restated under it.
    restated = "The mean fare is 34.65.\n```python\nprint(f'@mean_fare[{m:.2f}]')\n```"
    assert dabench.problems(restated) == ["missing: @mean_fare[...]"]
    assert dabench.problems("Run `print('@mean_fare[1]')`; it is 34.65.") == ["missing: @mean_fare[...]"]



def test_a_verdict_in_words_the_question_does_not_offer_is_not_its_form() -> None:
    # DABench easy 19: the cell printed `@is_normal[ False ]`, the answer was @is_normal[False]
    easy19 = AnswerForm.of('@is_normal[answer], where "answer" is a string value which can either be "Yes" '
                           'or "No", depending on whether the skewness lies within the boundaries.')
    assert easy19.words == ("Yes", "No")
    assert easy19.problems("@is_normal[False]") == [
        'the question writes the verdict as "Yes" or "No", not @is_normal[False]']
    assert easy19.problems("@is_normal[No]") == easy19.problems("@is_normal[no]") == []
    true_false = AnswerForm.of("@has_nan[boolean] where \"boolean\" is True or False")
    assert true_false.words == ("True", "False") and true_false.problems("@has_nan[yes]") != []
    assert AnswerForm.of("@normal[yes/no] and @p[value]").problems("@normal[True] @p[0.2]") != []
    # no words offered, or a value that is no verdict word: nothing to say
    assert AnswerForm.of("@is_normal[value]").problems("@is_normal[False]") == []
    # a word the pair does not know is no verdict word: it is told as a value not offered
    assert easy19.problems("@is_normal[not normal]") == [
        'not among the values the question offers: @is_normal[not normal] '
        '(the question offers "Yes" or "No")']


_EASY33 = ('@ks_test_p_value[p_value] @normality_decision[decision] where "p_value" is a number between 0 '
           'and 1, rounded to four decimal places, and "decision" is a string with either of the exact '
           'values: "normally distributed" or "not normally distributed".')


def test_the_values_a_question_offers_an_item_are_its_form() -> None:
    """DABench lists the words of 49 string items (``"linear", "nonlinear", or "none"``, in a
    sentence about the item's placeholder or inside its brackets) and scores them exactly."""
    easy33 = AnswerForm.of(_EASY33)
    assert easy33.choices == (("normality_decision", ("normally distributed", "not normally distributed")),)
    assert easy33.problems("@ks_test_p_value[0.0] @normality_decision[1.0]") == [
        'not among the values the question offers: @normality_decision[1.0] (the question offers '
        '"normally distributed" or "not normally distributed")']
    assert easy33.problems("@ks_test_p_value[0.0] @normality_decision[not normally distributed]") == []
    # spelled otherwise, it is written as offered; code that prints the form is left alone
    assert easy33.spelled("@normality_decision[Not_Normally  distributed] `@normality_decision[x]`") == (
        "@normality_decision[not normally distributed] `@normality_decision[x]`")
    inside = AnswerForm.of('@normality_test_result[A string that should be either "Normal" or "Not Normal"] '
                           '@p_value[The p-value, rounded to three decimal places]')
    assert inside.choices == (("normality_test_result", ("Normal", "Not Normal")),)
    two = AnswerForm.of('@dist_dem[dist_dem] @dist_gop[dist_gop] where "dist_dem" and "dist_gop" are strings '
                        'that can either be "Normal" or "Not Normal" based on the constraints.')
    assert dict(two.choices) == {"dist_dem": ("Normal", "Not Normal"), "dist_gop": ("Normal", "Not Normal")}
    assert two.spelled("@dist_dem[not normal] @dist_gop[NORMAL]") == "@dist_dem[Not Normal] @dist_gop[Normal]"
    # quoted names that offer no values (``"mean" is a number``) are no choices
    numbers = AnswerForm.of('@m[mean] where "mean" and "median" are numbers, rounded to 2 decimals.')
    assert numbers.choices == ()


def test_a_verdict_the_answer_says_completes_its_form_and_a_value_not_offered_does_not() -> None:
    """DABench easy 33 with the 1.5B model: a cell printed ``@normality_decision[1.0]``, the
    partial answer said "not normally distributed", and the form was completed with 1.0."""
    easy33 = AnswerForm.of(_EASY33)
    said = "The p-value is 0.0000, less than 0.05. Therefore, the column is not normally distributed."
    printed = [(8, "@ks_test_p_value[0.0000]\n@normality_decision[1.0]\n")]
    assert easy33.complete(said, printed) == (
        f"{said}\n\n@ks_test_p_value[0.0000] @normality_decision[not normally distributed]", [8])
    # both values said, or none: the item stays missing (and is sent back)
    both = "Not normally distributed? The column is normally distributed."
    assert easy33.complete(both, []) == (both, [])
    assert easy33.complete("The p-value is 0.0000.", printed)[0].endswith("@ks_test_p_value[0.0000]")
    # an item the prose names exactly, with one number (DABench medium 6, a partial answer)
    fares = AnswerForm.of("@mean_fare_child[mean_fare], @mean_fare_adult[mean_fare], rounded to 2 decimals.")
    stated = "The `mean_fare_child` is 31.54.\nThe `mean_fare_adult` is 35.17."
    assert fares.complete(stated, []) == (f"{stated}\n\n@mean_fare_child[31.54] @mean_fare_adult[35.17]", [])
    for unsure in ("mean_fare_child is 1.2, then mean_fare_child = 1.3.",  # two values: none taken
                   "```python\nmean_fare_child = 5\n```", "The child fare is 31.54."):  # code; no name
        assert fares.complete(unsure, []) == (unsure, [])
    # a plain word may name something else: only in backticks
    assert AnswerForm.of("@mean[value]").complete("The mean is 2.5.", []) == ("The mean is 2.5.", [])
    assert AnswerForm.of("@mean[value]").complete("`mean` is 2.5.", [])[0].endswith("@mean[2.5]")
    # "no" is in too many sentences to be a verdict read off prose
    yes_no = AnswerForm.of('@significant[s] where "s" is a string that can either be "yes" or "no".')
    assert yes_no.complete("There is no significant difference.", []) == (
        "There is no significant difference.", [])

def test_table_names_and_endings() -> None:
    assert is_table("a.csv") and is_table("b.CSV.gz") and is_table("c.parquet") and not is_table("d.png")
    tables = [UploadedTable("sales-2024.csv", None), UploadedTable("2023.csv", None)]
    assert frame_names(tables[:1], set()) == ["df"]
    assert frame_names(tables[:1], {"df"}) == ["sales_2024"]
    assert frame_names(tables, {"sales_2024"}) == ["sales_2024_2", "df_2023"]


def test_a_conversion_error_shows_the_value_and_then_the_recipe() -> None:
    teacher = ErrorTeacher()
    error = ExecutionError(
        "ValueError", "invalid literal for int() with base 10: '630308[495000-801000]'", []
    )
    ex = Execution(code="df['x'].astype(int)", status="error")
    ex.error = error
    first = teacher.hint(ex, ex.code, {})
    assert "Some values are not plain numbers (e.g. '630308[495000-801000]')" in first
    second = teacher.hint(ex, ex.code, {})
    assert second.startswith("This is the same error again. Take the number out of the text")
    assert teacher.hint(Execution(code="1", status="ok"), "1", {}) == "" and teacher.last is None


def _hint_after(fail: Any, code: str = "...", variables: dict[str, VariableInfo] | None = None) -> str:
    """The hint for the error ``fail()`` raises (the installed library's own message), as if
    a step running ``code`` had raised it."""
    try:
        fail()
    except Exception as exc:  # whichever error the library raises is the case
        ex = Execution(code=code, status="error")
        ex.error = ExecutionError(type(exc).__name__, str(exc), [])
        return ErrorTeacher().hint(ex, code, variables or {})
    raise AssertionError("the call did not fail: the installed library takes it")


def test_a_word_where_a_number_was_expected_is_a_text_column_in_the_computation() -> None:
    """DABench medium 117: ``df.corr()`` on a table with a ``Country`` column failed on
    'Denmark', and the 1.5B model left out one country after another (nine steps). The
    installed pandas' own message; no number to take out of the text here."""
    import pandas as pd

    table = pd.DataFrame({"Country": ["Denmark", "Norway"], "Score": [7.5, 7.4], "GDP": [1.3, 1.4]})
    hint = _hint_after(table.corr, "df.corr()")
    assert hint.startswith("'Denmark' is a word, not a number written oddly"), hint
    assert "df.select_dtypes(['number', 'bool'])" in hint and "leaving out rows does not help" in hint
    # DABench hard 7 on 7ddff9d: `select_dtypes('number')` after `get_dummies` left out the one-hot
    # columns (bool), 0.71 for 0.78; the hint's selection keeps them
    dummies = pd.get_dummies(table, columns=["Country"])
    assert list(dummies.select_dtypes(["number", "bool"]).columns) == [
        "Score", "GDP", "Country_Denmark", "Country_Norway"]


def test_a_series_method_on_one_number_is_a_statistic_meant_per_group() -> None:
    """DABench medium 252: ``df['gdpPercap_1992'].skew().idxmax()`` for "which country's ...
    had the highest skewness", 18 failing cells over its attempts. The installed numpy's own
    message."""
    import pandas as pd

    table = pd.DataFrame({"country": ["A", "B", "C"], "gdp": [1.0, 2.0, 7.0]})
    hint = _hint_after(lambda: table["gdp"].skew().idxmax())
    assert hint.startswith("`.idxmax` was called on one number"), hint
    assert "df.groupby(group_col)[col].skew()" in hint
    assert not _hint_after(lambda: table.idxmaxx()).startswith("`.idxmax")  # a DataFrame's own slip


def test_the_answers_items_written_as_lines_of_code_are_told_to_be_the_answer() -> None:
    """DABench hard 124 with the 1.5B model: a cell of ``significance_of_difference: no`` and
    ``p_value: 0.9700`` (``NameError: name 'no' is not defined``), sent twice and rolled back."""
    code = "significance_of_difference: no\np_value: 0.9700\n"
    hint = _hint_after(lambda: exec(compile(code, "<cell>", "exec", dont_inherit=True), {}), code)
    assert hint.startswith("These lines are your answer's items written as code"), hint
    assert "@significance_of_difference[no] @p_value[0.9700]" in hint
    other = "x = 1\nlabel: no\n"
    failing = compile(other, "<cell>", "exec", dont_inherit=True)
    assert not _hint_after(lambda: exec(failing, {}), other).startswith("These lines")


def test_round_on_a_plain_number_gets_the_builtin() -> None:
    """The mpg conversation with the 1.5B model: ``print((len(a) / len(b) * 100).round(2))``
    three times in one question; a plain float has no ``.round``."""
    import numpy as np

    hint = _hint_after(lambda: (392 / 392 * 100).round(2))  # type: ignore[attr-defined]
    assert hint.startswith("A plain Python number has no `.round()`"), hint
    assert "`round(value, 2)`" in hint
    assert not _hint_after(lambda: np.float64(1.5).rounded()).startswith("A plain")  # numpy's own


def test_the_answers_form_written_as_code_is_told_to_be_printed() -> None:
    """DABench medium 219: the 1.5B model ended its cell with the answer's form as lines of
    code, ``@site_identifiers[outliers['site'].tolist()]``, a SyntaxError Python reports as
    "incomplete input" (a decorator with nothing after it). The hint's print runs."""
    code = ("outliers = df[df.x > 2]\n"
            "@site_identifiers[outliers['site'].tolist()]\n@outlier_values[outliers['x'].tolist()]\n")
    hint = _hint_after(lambda: compile(code, "<cell>", "exec"), code)
    assert hint.startswith("A line `@site_identifiers[...]` is the answer's form, not Python"), hint
    printing = re.search(r"`(print\(f\"[^`]+)`", hint)
    assert printing is not None, hint
    import io
    from contextlib import redirect_stdout

    import pandas as pd

    out = io.StringIO()
    with redirect_stdout(out):
        exec(printing.group(1), {"outliers": pd.DataFrame({"site": ["a", "b"], "x": [3, 4]})})
    assert out.getvalue() == "@site_identifiers[['a', 'b']]\n"
    fine = "x = 1\nif x:\nprint(x)"  # another SyntaxError: no such hint
    assert not _hint_after(lambda: compile(fine, "<cell>", "exec"), fine).startswith("A line `@")


def test_an_import_the_library_never_had_is_no_matter_of_installing() -> None:
    """DSEval's students-performance: ``from scipy.stats import cramers_v``, and the 1.5B
    model's answer told the person to ``pip install scipy``. The installed scipy's message;
    the recipe is run here to show it works."""
    import pandas as pd

    hint = _hint_after(lambda: exec("from scipy.stats import cramers_v", {}))
    assert hint.startswith("`scipy.stats`, as installed here, has no `cramers_v`"), hint
    recipe = re.search(r"`(from scipy[^`]+)`, then `([^`]+)`", hint)
    assert recipe is not None, hint
    a, b = pd.Series([1, 2, 1, 2, 1, 2]), pd.Series(["x", "y", "x", "y", "x", "y"])
    namespace = {"pd": pd, "a": a, "b": b}
    exec(recipe.group(1), namespace)
    assert eval(recipe.group(2), namespace) == 1.0  # perfectly associated
    assert _hint_after(lambda: exec("import pingouin_not_here", {})).startswith(
        "`pingouin_not_here` is not installed here")
    hint = _hint_after(lambda: exec("cramers_v(a, b)", namespace))  # called, never imported
    assert hint.startswith("No library gives `cramers_v`") and recipe.group(0) in hint, hint
    assert "No library gives" not in _hint_after(lambda: exec("total + 1", {}))


def test_text_compared_with_a_date_or_a_number_gets_the_conversion() -> None:
    """DSEval's netflix-userbase: ``netflix['Last Payment Date'] > datetime.now() - ...`` on
    the text dates, twice. The installed pandas' own messages, and Python's."""
    import datetime

    import pandas as pd

    dates = pd.Series(["15-06-22", "16-06-22"])
    cases = ((lambda: dates > datetime.datetime.now(), "pd.to_datetime"),
             (lambda: dates > 5, "pd.to_numeric"),
             (lambda: pd.Series(["a"], dtype=object) > 5, "pd.to_numeric"))
    for compare, convert in cases:
        hint = _hint_after(compare)
        assert hint.startswith("The column holds text, and text is not compared with"), hint
        assert convert in hint, hint


def test_text_cut_into_bins_gets_the_mapping() -> None:
    """DSEval students-exam-scores with the 1.5B model: ``pd.cut`` of the weekly study hours,
    which are the groups '< 5', '5 - 10' and '> 10' as text, three steps in a row. The
    installed pandas' own message."""
    import pandas as pd

    hours = pd.Series(["< 5", "5 - 10", "> 10"])
    code = "df['h'] = pd.cut(df['WklyStudyHours'], bins=[0, 5, 10, 15], labels=[2.5, 7.5, 15])"
    hint = _hint_after(lambda: pd.cut(hours, bins=[0, 5, 10, 15]), code)
    assert hint.startswith("The column you cut into bins holds text"), hint
    assert "df[col].map({'< 5': 2.5, ...})" in hint
    assert _hint_after(lambda: hours > 5).startswith("The column holds text"), "not a cut: the conversion"


def test_a_key_error_with_a_byte_order_mark_names_the_column() -> None:
    teacher = ErrorTeacher()
    frame = VariableInfo("df", "pandas.DataFrame", [2, 3], ["\ufefffoo", "bar", "baz"])
    ex = Execution(code="df['foo']", status="error")
    ex.error = ExecutionError("KeyError", "'foo'", [])
    hint = teacher.hint(ex, ex.code, {"df": frame})
    assert hint.startswith("There is no column 'foo'; the closest is '\\ufefffoo'")


def test_names_that_are_not_columns_each_get_the_column_they_mean() -> None:
    """DSEval's countries of the world: the 1.5B model wrote ``'Density'`` and
    ``'Land Area (Km2)'`` for ``'Density\\n(P/Km2)'`` and ``'Land Area(Km2)'`` in three cells
    in a row. The installed pandas' own messages, on the set's own file."""
    import pandas as pd

    world = pd.read_csv(SHARED / "datasets/dseval-kaggle/problems/_inputs/countries-of-the-world-2023/"
                        "world-data-2023.csv")
    frame = VariableInfo("world_data", "pandas.DataFrame", list(world.shape), list(world.columns))
    asked = ["Density", "Land Area (Km2)", "Arable Land (%)"]
    for code in ("world_data[asked]", "world_data.loc[:, asked]", "world_data[asked[:1]]",
                 "world_data.drop(columns=asked[:1])"):  # .drop's words: "['Density'] not found in axis"
        hint = _hint_after(lambda: eval(code, {"world_data": world, "asked": asked}),  # noqa: B023
                           code, {"world_data": frame})
        if "[:1]" in code:
            assert hint.startswith("There is no column 'Density'; the closest is 'Density\\n(P/Km2)'"), hint
            continue
        assert hint.startswith("These names are not columns: 'Density' is 'Density\\n(P/Km2)'; "
                               "'Land Area (Km2)' is 'Land Area(Km2)' "), hint
        assert "No column is close to 'Arable Land (%)'" in hint, hint
        assert "world_data: Country, 'Density\\n(P/Km2)', Abbreviation, Agricultural Land( %)" in hint, hint
    assert "columns: Country, 'Density\\n(P/Km2)', Abbreviation," in describe_variables([frame])


def test_a_missing_file_lists_the_uploads() -> None:
    plan = detect(MESSY / "csvkit_test_latin1.csv")
    teacher = ErrorTeacher(tables={"csvkit_test_latin1.csv": UploadedTable("csvkit_test_latin1.csv", plan)})
    ex = Execution(code="pd.read_csv('latin1.csv')", status="error")
    ex.error = ExecutionError("FileNotFoundError", "[Errno 2] No such file or directory: 'latin1.csv'", [])
    assert teacher.hint(ex, ex.code, {}) == (
        "The uploaded tables are: `csvkit_test_latin1.csv` (in the working directory)."
    )


async def test_a_table_too_large_for_pandas_is_pointed_to_duckdb_not_to_the_call() -> None:
    from kernel_analyst.agent.briefing.uploads import read_uploads, tables_note

    path = MESSY / "csvkit_realdata_ks_1033_data.csv"  # 212 kB: over an eighth of a 1 MiB kernel
    (small,) = await read_uploads([path], [path.name], memory_mb=1024)
    (large,) = await read_uploads([path], [path.name], memory_mb=1)
    assert not small.too_large and "read it with exactly this code" in tables_note([small])
    assert large.too_large and tables_note([large]) == (
        f"`{path.name}` (delimited text, encoding utf-8, delimiter ',') is too large to load with pandas in "
        "this kernel: query it with DuckDB, as said above, and fetch only aggregates or samples into pandas.")


def test_a_model_that_refuses_missing_values_is_answered_with_how_to_drop_them() -> None:
    import numpy as np
    from sklearn.linear_model import LinearRegression

    try:  # the real message of the installed scikit-learn
        LinearRegression().fit(np.array([[1.0], [np.nan], [3.0]]), np.array([1.0, 2.0, 3.0]))
    except ValueError as exc:
        error = ExecutionError("ValueError", str(exc), [])
    ex = Execution(code="model.fit(X, y)", status="error")
    ex.error = error
    assert ErrorTeacher().hint(ex, ex.code, {}).startswith(
        "The model refuses missing values: keep the rows where every column you use has a value")
    # DABench hard 125: the target left out of the subset, four cells; the hint names every column used
    titanic = UploadedTable("titanic.csv", detect(SEABORN / "titanic.csv"))
    teacher = ErrorTeacher(tables={"titanic.csv": titanic})
    ex = Execution(code="data = df.dropna(subset=['age', 'fare'])\n"
                        "model.fit(data[['age', 'fare']], data['deck'] == 'C')", status="error")
    ex.error = error
    assert teacher.hint(ex, ex.code, {}) == (
        "The model refuses missing values: keep the rows where every column the code uses has a value, the "
        "target's too, then fit and score on them: `data = df.dropna(subset=['age', 'fare', 'deck'])`, and "
        "take `X` and `y` from `data`.")
    ex.error = ExecutionError("ValueError", "could not broadcast input array", [])
    assert ErrorTeacher().hint(ex, ex.code, {}) == ""


def test_a_regressions_predictions_scored_as_classes_are_answered_with_a_threshold() -> None:
    """DABench hard 7 with the 1.5B model: "linear regression ... predict whether a passenger
    survived", ``accuracy_score(y_test, model.predict(X_test))``, three cells. The installed
    scikit-learn's real message."""
    from sklearn.metrics import accuracy_score

    try:
        accuracy_score([0, 1, 1], [0.2, 0.7, 0.9])
    except ValueError as exc:
        error = ExecutionError("ValueError", str(exc), [])
    ex = Execution(code="print(accuracy_score(y_test, model.predict(X_test)))", status="error")
    ex.error = error
    assert ErrorTeacher().hint(ex, ex.code, {}).startswith(
        "A regression predicts numbers, not classes, and a classification score needs classes: "
        "turn the predictions into classes first (`pred = (model.predict(X_test) >= 0.5).astype(int)`")


def test_code_written_for_older_libraries_gets_todays_spelling() -> None:
    """The installed libraries' real messages (DABench hard 30 and 70 answered a made-up
    RMSE after ``mean_squared_error(..., squared=False)`` failed)."""
    import pandas as pd
    from sklearn.metrics import mean_squared_error
    from sklearn.preprocessing import OneHotEncoder

    assert "root_mean_squared_error(y_test, y_pred)" in _hint_after(
        lambda: mean_squared_error([1.0, 2.0], [1.0, 3.0], squared=False))
    assert "OneHotEncoder(sparse_output=False)" in _hint_after(lambda: OneHotEncoder(sparse=False))
    assert "drop='first'" in _hint_after(lambda: OneHotEncoder(drop_first=True))
    assert "pd.concat" in _hint_after(lambda: pd.DataFrame({"a": [1]}).append(pd.DataFrame({"a": [2]})))
    assert ".items()" in _hint_after(lambda: pd.Series([1]).iteritems())
    text = pd.read_csv(SEABORN / "titanic.csv")["sex"]  # as the kernel reads it: pandas' own text dtype
    hint = _hint_after(lambda: OneHotEncoder().fit_transform(text.values.reshape(-1, 1)))
    assert "write `df[['Sex']]` (two brackets)" in hint, hint
    table = pd.DataFrame({"Sex": text})
    assert OneHotEncoder().fit_transform(table[["Sex"]]).shape == (891, 2)  # the hint's way runs
    other = _hint_after(lambda: pd.DataFrame({"a": [1]}).sum(skipnans=True))
    assert "takes no `skipnans`" in other and "inspect.signature" in other


def test_a_p_value_unpacked_from_pandas_corr_gets_the_call_that_gives_both() -> None:
    """DABench hard 142: ``r, p = df['diff'].corr(df['pct'])`` failed four times (the 1.5B
    model expects a pair); the real error of the installed pandas gets ``pearsonr``."""
    import pandas as pd

    code = "r_value, p_value = df['a'].corr(df['b'])"
    df = pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": [2.0, 1.0, 4.0]})
    try:
        exec(code, {"df": df})  # the code as the model sent it
    except TypeError as exc:
        error = ExecutionError("TypeError", str(exc), [])
    ex = Execution(code=code, status="error")
    ex.error = error
    hint = ErrorTeacher().hint(ex, code, {})
    assert hint.startswith("pandas' `.corr()` returns the coefficient only")
    assert "r, p = pearsonr(x, y)" in hint
    other = "x, y = total"  # the same error elsewhere is not about a correlation
    assert "pearsonr" not in ErrorTeacher().hint(ex, other, {})


async def test_a_nan_number_the_step_made_is_told_though_not_printed(manager: SessionManager) -> None:
    """DABench hard 109: ``ttest_ind`` on a column with gaps gave ``p_value`` NaN, and the
    cell printed only the verdict from it (``p_value < 0.05`` is False for NaN): "no
    significant", wrong. The kernel's own variable summaries (a real kernel) name it."""
    session = await manager.session("checks-nan-variables")
    code = ("import numpy as np\nfrom scipy.stats import ttest_ind\n"
            "t_stat, p_value = ttest_ind([1.0, 2.0, np.nan], [3.0, 4.0, 5.0])\nalpha = 0.05\n"
            "print('significant' if p_value < alpha else 'no significant')")
    ex = await session.execute(code)
    assert ex.status == "ok" and ex.text.strip() == "no significant"
    notes = result_notes(ex)
    assert [n for n in notes if "NaN" in n] == [
        "Check: `t_stat`, `p_value` are NaN: computed from values with missing ones among them "
        "(scipy's tests, correlations and numpy's means give NaN then) or infinite ones (`np.log` of 0 "
        "is -inf, and -inf minus -inf is NaN), and anything computed from NaN is wrong too (`p_value < "
        "0.05` is False for NaN). Drop the missing values first (`x.dropna()`, or `nan_policy='omit'` in "
        "scipy's tests), or the zeros before a log, and run it again."], notes
    fine = await session.execute("t_stat, p_value = ttest_ind([1.0, 2.0, 2.5], [3.0, 4.0, 5.0])")
    assert result_notes(fine) == []


def test_the_nan_numbers_a_question_left_are_those_not_made_again() -> None:
    from kernel_analyst.agent.feedback.checks import nan_numbers
    from kernel_analyst.kernels import Execution, VariableInfo
    from kernel_analyst.kernels.execution import VariableChanges

    def made(code: str, *infos: VariableInfo, status: str = "ok", deleted: tuple[str, ...] = ()) -> Execution:
        return Execution(code=code, status=status,  # type: ignore[arg-type]
                         variables=VariableChanges(created=list(infos), deleted=list(deleted)))

    nan = VariableInfo("skewness", "numpy.float64", [], summary="np.float64(nan)")
    p_nan = VariableInfo("p", "float", summary="nan")
    fine = VariableInfo("skewness", "numpy.float64", [], summary="np.float64(7.35)")
    assert nan_numbers([made("a", nan), made("b", p_nan)]) == ["skewness", "p"]
    assert nan_numbers([made("a", nan), made("b", fine)]) == []  # computed again without the gaps
    assert nan_numbers([made("a", nan), made("b", deleted=("skewness",))]) == []
    assert nan_numbers([made("a", nan, status="error")]) == []  # a failed step made nothing
    assert nan_numbers([made("a", VariableInfo("n", "int", summary="3"))]) == []


def test_a_filter_an_earlier_question_asked_for_is_named_when_carried_on() -> None:
    from kernel_analyst.agent.feedback.checks import carried_filter_notes

    tips = {"df": VariableInfo("df", "pandas.DataFrame", [176, 7],
                               columns=["total_bill", "tip", "sex", "smoker", "day", "time", "size"])}
    earlier = ("On which day is the average tip highest?",
               "Of the Saturday dinners, what percent were at smokers' tables?")
    saturday = "df_saturday = df[df['day'] == 'Sat']\nprint(df_saturday['tip'].max())"
    # the conversation benchmark's tips question 4, on the 1.5B model's own cell
    notes = carried_filter_notes(saturday, tips, "What was the bill of the customer who tipped the highest "
                                 "percent of their bill?", earlier)
    assert notes == ["Check: df['day'] == 'Sat' keeps only the rows an earlier question asked about; this "
                     "question does not ask for them. Unless it means those rows, compute it on all of `df`."]
    for goes_on in ("Of those, what was the highest tip?", "And their largest bill?",
                    "What was the highest tip on Saturday?",  # the rows meant, or named again
                    "What was the largest bill on that day?", "And the mean tip on those days?"):
        assert carried_filter_notes(saturday, tips, goes_on, earlier) == [], goes_on
    # a value no earlier question named is the model's own reading of this question
    assert carried_filter_notes("x = df[df['smoker'] == 'Yes']", tips, "What is the mean tip of smokers?",
                                earlier) == []
    assert carried_filter_notes(saturday, tips, "What was the largest bill?", ()) == []
    # the conversation benchmark's taxis question 5: "that borough" is the previous answer's
    # (sent back as a carried filter, the model then answered for all of Manhattan's neighbours)
    taxis = {"df": VariableInfo("df", "pandas.DataFrame", [6389, 14],
                                columns=["pickup", "dropoff", "pickup_borough", "dropoff_zone", "tip"])}
    borough = "print(df[df.pickup_borough == 'Manhattan']['dropoff_zone'].value_counts().nlargest(2))"
    taxis_earlier = ("Of the remaining rides picked up in Manhattan, what percent were paid in cash?",
                     "Which pickup borough has the highest average tip?")
    assert carried_filter_notes(borough, taxis, "Which 2 dropoff zones are reached most often from that "
                                "borough?", taxis_earlier) == []
    assert carried_filter_notes(borough, taxis, "Which 2 dropoff zones are reached most often?",
                                taxis_earlier)
    assert carried_filter_notes(borough, taxis, "Which 2 dropoff zones are reached most often on that day?",
                                taxis_earlier), "a back-reference to another column leaves the filter carried"
    # the conversation benchmark's mpg: the data guard undid `df = df[...]`, and the model
    # filtered a copy of df the same way in every later question
    cars = {"df": VariableInfo("df", "pandas.DataFrame", [392, 9], columns=["mpg", "origin", "model_year"])}
    copied = ("df_work = df\ndf_work = df_work[df_work.origin == 'europe']\n"
              "print(df_work['model_year'].mean())")
    mpg_earlier = ("Of the remaining European cars, what percent get more than 30 mpg?",)
    assert carried_filter_notes(copied, cars, "In which model year was the average mpg highest?",
                                mpg_earlier) == [
        "Check: df_work.origin == 'europe' keeps only the rows an earlier question asked about; this "
        "question does not ask for them. Unless it means those rows, compute it on all of `df`."]
    sorted_copy = "s = df.sort_values('mpg')\nprint(s[s['origin'] == 'europe'].mpg.max())"
    assert carried_filter_notes(sorted_copy, cars, "What is the best mpg?", mpg_earlier)
    assert carried_filter_notes(copied, cars, "Of the European cars, in which year was mpg highest?",
                                mpg_earlier) == []


def test_a_column_written_as_an_attribute_it_is_not_gets_its_real_name() -> None:
    import pandas as pd

    # the conversation benchmark's brussels-hotels: `df.Occupancy_rate` for 'Occupancy rate', three times
    hotels = pd.DataFrame({"Quartier": ["All"], "Occupancy rate": [0.61]})
    frames = {"df": VariableInfo("df", "pandas.DataFrame", [1, 2], columns=list(hotels.columns))}
    hint = _hint_after(lambda: hotels.Occupancy_rate, "print(df.Occupancy_rate.max())", frames)
    assert hint.startswith("There is no column 'Occupancy_rate'; the closest is 'Occupancy rate'"), hint
    assert "`df['Occupancy rate']`" in hint
    grouped = _hint_after(lambda: hotels.groupby("Quartier").Occupancy_rat, "...", frames)
    assert "the closest is 'Occupancy rate'" in grouped, grouped
    # a method that does not exist is no column: nothing close, no column hint
    assert "closest" not in _hint_after(lambda: hotels.not_a_method_at_all(), "...", frames)


def test_the_columns_a_step_coerces_to_numbers() -> None:
    from kernel_analyst.agent.feedback.coercion import coerced_columns

    assert coerced_columns("df['n'] = pd.to_numeric(df['No. of cases'], errors='coerce')") == ["No. of cases"]
    assert coerced_columns("x = pd.to_numeric(df['a'].astype(str).str.strip(), errors='coerce')") == ["a"]
    assert coerced_columns("x = pd.to_numeric(df['a'])") == []  # raises instead: the conversion hint's case
    assert coerced_columns("x = pd.to_numeric(values, errors='coerce')") == []  # no column to read
    assert coerced_columns("x = (") == []


def test_an_examples_stand_in_copied_as_code_is_told_to_be_written_out() -> None:
    """The mpg conversation with the 1.5B model: the doubt's example ``(subset[col] > x)`` was
    copied as ``(euro_df[col] > x).mean()`` (NameError on ``col``), then as
    ``(euro_df['mpg'] > x)`` (NameError on ``x``). The hint names what each stand-in is for,
    with the code's own frame and column; an ``x`` of the model's own is left alone."""
    mpg = UploadedTable("mpg.csv", detect(SEABORN / "mpg.csv"))
    teacher = ErrorTeacher(tables={"mpg.csv": mpg})

    import pandas as pd

    frame = pd.read_csv(SEABORN / "mpg.csv")

    def hint(code: str) -> str:
        try:
            exec(code, {"euro_df": frame})
        except NameError as exc:
            ex = Execution(code=code, status="error")
            ex.error = ExecutionError("NameError", str(exc), [])
            return teacher.hint(ex, code, {})
        raise AssertionError("no NameError")

    first = "euro_df = euro_df\nprint((euro_df[col] > x).mean() * 100)"
    assert hint(first) == ("`col` stands for something in an example you were given; nothing here is named "
                           "`col`. Write the column's own name, in quotes (e.g. `euro_df['mpg']`) in its "
                           "place and run it again.")
    assert "number itself" in hint("print((euro_df.mpg > x).mean() * 100)")
    assert "q3 + 1.5 * iqr" in hint("kept = euro_df[euro_df.mpg.between(low, high)]")
    assert "stands for" not in hint("import matplotlib.pyplot as plt\nplt.plot(x, euro_df.mpg)")


def test_a_library_name_used_without_its_import_gets_the_import() -> None:
    """DSEval employee-dataset with the 1.5B model: ``LogisticRegression`` in a voting
    classifier, never imported, three cells. Every import the hints give runs with the
    installed libraries (those installed here: imbalanced-learn may not be)."""
    import importlib.util

    from kernel_analyst.agent.feedback.hints import _IMPORTS

    hint = _hint_after(lambda: exec("model = LogisticRegression()", {}))
    assert hint == ("`LogisticRegression` is not imported here: add `from sklearn.linear_model import "
                    "LogisticRegression` at the top of the cell, and run it again."), hint
    assert "from scipy import stats" in _hint_after(lambda: exec("stats.skew([1, 2, 3])", {}))
    checked = 0
    for name, line in _IMPORTS.items():
        module = line.split()[1].split(".")[0]
        if importlib.util.find_spec(module) is None:
            continue
        namespace: dict[str, object] = {}
        exec(line, namespace)
        assert name in namespace, line
        checked += 1
    assert checked >= len(_IMPORTS) - 2, checked


def test_a_statistic_of_a_text_column_names_the_column_and_the_ways_out() -> None:
    """DABench hard 28 with the 1.5B model: the form lists a mean for every column, and
    ``df['region'].mean()`` failed in three cells, rolled back, then answered with made-up
    means. The installed pandas' own message; the text column is named from the variables."""
    import pandas as pd

    table = pd.read_csv(SEABORN / "tips.csv")
    info = VariableInfo("df", "pandas.DataFrame", list(table.shape), list(table.columns),
                        {str(k): str(v) for k, v in table.dtypes.items()})
    code = "print(df['tip'].mean(), df['day'].mean())"
    hint = _hint_after(lambda: table["day"].mean(), code, {"df": info})
    assert hint.startswith("`.mean()` was taken of text (`day`), and words have no mean."), hint
    assert "df.select_dtypes(['number', 'bool'])" in hint
    whole = _hint_after(lambda: table.skew(), "df.skew()", {})
    assert "of text (a column of words), and words have no skew" in whole, whole


def test_a_conversion_is_mended_only_where_each_value_begins_with_its_number(tmp_path: Any) -> None:
    """``pd.to_numeric(..., errors='coerce')`` runs on the number each value begins with when
    the values it would lose are numbers written with text (``'630308[495000-801000]'``), not
    when they are dates (their year is not their number) or thousands written with commas."""
    from kernel_analyst.agent.feedback.coercion import mended_coercion

    path = tmp_path / "counts.csv"
    rows = [f"{100 + i}[{90 + i}-{110 + i}],2020-01-{i + 1:02d},\"{i + 1},500\"" for i in range(20)]
    path.write_text("cases,day,amount\n" + "\n".join(rows) + "\n")
    tables = {"counts.csv": UploadedTable("counts.csv", detect(path), source=path)}
    code = "df['cases'] = pd.to_numeric(df['cases'], errors='coerce')\nprint(df['cases'].mean())"
    mended = mended_coercion(code, tables)
    assert mended is not None, "ranges beside their counts"
    assert mended[0].startswith("df['cases'] = pd.to_numeric(df['cases'].astype(str).str.extract("), mended
    assert "would have made NaN of 20 of the 20 values of 'cases'" in mended[1][0], mended[1]
    for column in ("day", "amount"):
        assert mended_coercion(f"x = pd.to_numeric(df['{column}'], errors='coerce')", tables) is None, column
    assert mended_coercion("x = pd.to_numeric(df['cases'])", tables) is None  # no coercion: an error, a hint


def test_a_label_encoder_given_a_whole_table_gets_the_loop_over_its_text_columns() -> None:
    """DSEval housing-price-prediction with the 1.5B model: ``housing = le.fit_transform(housing)``
    twice (scikit-learn: "y should be a 1d array"), rolled back, the table left unencoded for
    the questions after. The installed scikit-learn's message; the loop given runs."""
    import pandas as pd
    from sklearn.preprocessing import LabelEncoder

    from tests.dseval_problems import PROBLEMS

    housing = pd.read_csv(PROBLEMS / "_inputs" / "housing-price-prediction" / "Housing.csv")
    info = VariableInfo("housing", "pandas.DataFrame", list(housing.shape), list(housing.columns),
                        {str(k): str(v) for k, v in housing.dtypes.items()})
    code = "le = LabelEncoder()\nhousing = le.fit_transform(housing)"
    hint = _hint_after(lambda: LabelEncoder().fit_transform(housing), code, {"housing": info})
    assert hint.startswith("`LabelEncoder` encodes one column at a time, not a whole table"), hint
    loop = re.search(r"`(for col in [^`]+)`", hint)
    assert loop is not None, hint
    namespace = {"housing": housing.copy(), "LabelEncoder": LabelEncoder}
    exec(loop.group(1), namespace)
    assert all(pd.api.types.is_numeric_dtype(t) for t in namespace["housing"].dtypes)
