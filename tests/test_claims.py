"""The claims matcher on real outputs: pandas ``describe()``, ``value_counts(normalize=True)``,
``corr()``, a regression (``scipy.stats.linregress`` and ``numpy.linalg.lstsq``), a t-test
(``scipy.stats.ttest_ind``) on seaborn's titanic, tips and flights tables.

The cells are built here from the real objects the way IPython shows them (``repr`` as
``text/plain``, ``_repr_html_`` as ``text/html``, ``print`` as stdout, variables as the
kernel records them), so each case reads an output exactly as a conversation has it. Every
case names the number of the answer it is about and what must come of it: grounded (and
the exact source value), derived, unsupported, or ignored (and why).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from kernel_analyst.claims import ClaimStatus, Grounding, SourceIndex, cite_markdown, ground, recheck
from kernel_analyst.claims.grounding import Claim
from tests.conftest import SEABORN


def _result(obj: Any) -> dict[str, Any]:
    data = {"text/plain": repr(obj)}
    if hasattr(obj, "_repr_html_"):
        data["text/html"] = obj._repr_html_()
    return {"output_type": "execute_result", "data": data, "metadata": {}, "execution_count": None}


def _printed(*values: Any) -> dict[str, Any]:
    return {"output_type": "stream", "name": "stdout", "text": " ".join(str(v) for v in values) + "\n"}


def _cell(
    count: int, source: str, outputs: list[dict[str, Any]], variables: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"status": "ok"}
    if variables:
        meta["variables"] = {"created": variables, "changed": [], "deleted": []}
    return {
        "cell_type": "code",
        "id": f"c{count:02d}",
        "execution_count": count,
        "source": source,
        "outputs": outputs,
        "metadata": {"kernel_analyst": meta},
    }


def build_cells() -> list[dict[str, Any]]:
    """A conversation's cells from real outputs (a markdown cell first, as the agent writes)."""
    titanic = pd.read_csv(SEABORN / "titanic.csv")
    tips = pd.read_csv(SEABORN / "tips.csv")
    flights = pd.read_csv(SEABORN / "flights.csv")
    taxis = pd.read_csv(SEABORN / "taxis.csv", parse_dates=["pickup"])
    regression = stats.linregress(tips.total_bill, tips.tip)
    ttest = stats.ttest_ind(tips[tips.sex == "Male"].tip, tips[tips.sex == "Female"].tip)
    design = np.column_stack([np.ones(len(tips)), tips.total_bill])
    coefficients = np.linalg.lstsq(design, tips.tip, rcond=None)[0]
    share = titanic["class"].value_counts(normalize=True)["Third"]
    cells: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]] | None]] = [
        (
            "import pandas as pd\ndf = pd.read_csv('titanic.csv')\ndf.describe()",
            [_result(titanic.describe())],
            [{"name": "df", "type": "pandas.DataFrame", "shape": list(titanic.shape)}],
        ),
        (
            "df['class'].value_counts(normalize=True)",
            [_result(titanic["class"].value_counts(normalize=True))],
            None,
        ),
        ("df['sex'].value_counts()", [_result(titanic["sex"].value_counts())], None),
        ("print(df['survived'].mean())", [_printed(titanic["survived"].mean())], None),
        ("df.groupby('sex')['survived'].mean()", [_result(titanic.groupby("sex")["survived"].mean())], None),
        (
            "tips[['total_bill', 'tip', 'size']].corr()",
            [_result(tips[["total_bill", "tip", "size"]].corr())],
            None,
        ),
        ("print(coefficients)", [_printed(coefficients)], None),
        ("print(stats.linregress(tips.total_bill, tips.tip))", [_printed(regression)], None),
        ("print(stats.ttest_ind(male, female))", [_printed(ttest)], None),
        (
            "flights.groupby('year').passengers.sum().tail(3)",
            [_result(flights.groupby("year").passengers.sum().tail(3))],
            None,
        ),
        (
            "share = df['class'].value_counts(normalize=True)['Third']\nprint(f'Third class: {share:.1%}')",
            [_printed(f"Third class: {share:.1%}")],
            [{"name": "share", "type": "numpy.float64", "summary": repr(share)}],
        ),
        ("n_rows = len(flights)", [], [{"name": "n_rows", "type": "int", "summary": repr(len(flights))}]),
        (
            "pd.date_range('1949-01-01', periods=3, freq='MS')",
            [_result(pd.date_range("1949-01-01", periods=3, freq="MS"))],
            None,
        ),
        ("df['age'].head(15)", [_result(titanic["age"].head(15))], None),
        (
            "flights.assign(change=flights.passengers.diff()).iloc[3]",
            [_result(flights.assign(change=flights.passengers.diff()).iloc[3])],
            None,
        ),
        ("tips.groupby('day').size().diff()", [_result(tips.groupby("day").size().diff())], None),
        (
            "print(tips.groupby('sex').tip.mean().diff())",
            [_printed(tips.groupby("sex").tip.mean().diff())],
            None,
        ),
        ("old = df[df.age > 60]\nprint(len(old))", [_printed(int((titanic.age > 60).sum()))], None),
        ("taxis.pickup.min()", [_result(taxis.pickup.min())], None),
    ]
    markdown = {"cell_type": "markdown", "id": "q1", "metadata": {}, "source": "**Question:** titanic"}
    return [markdown, *(_cell(n, *cell) for n, cell in enumerate(cells, start=1))]


@pytest.fixture(scope="module")
def cells() -> list[dict[str, Any]]:
    return build_cells()


@pytest.fixture(scope="module")
def index(cells: list[dict[str, Any]]) -> SourceIndex:
    return SourceIndex.from_cells(cells)


G, D, U, IGN = "grounded", "derived", "unsupported", "ignored"


@dataclass(frozen=True)
class Case:
    answer: str
    number: str
    expected: str
    source: str = ""
    question: str = ""
    files: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.number!r} in {self.answer!r}"


CASES = [
    # describe(): rounding to the digits shown, and near misses one digit off
    Case("The mean age was 29.7 years.", "29.7", G, "29.699118"),
    Case("The mean age was 29.70 years.", "29.70", G, "29.699118"),
    Case("The mean age was 29.69 years.", "29.69", U),
    Case("The mean age was 29.6 years.", "29.6", U),
    Case("The mean age was about 30.", "30", G, "29.699118"),
    Case("The mean age was 29 years.", "29", U),
    Case("The average fare was $32.20.", "$32.20", G, "32.204208"),
    Case("The average fare was $32.21.", "$32.21", U),
    Case("The highest fare was $512.33.", "$512.33", G, "512.329200"),
    Case("The median fare was 14.45.", "14.45", G, "14.454200"),
    Case("The median fare was 14.46.", "14.46", U),
    Case("The youngest passenger was 0.42 years old.", "0.42", G, "0.420000"),
    Case("The fares have a standard deviation of 49.69.", "49.69", G, "49.693429"),
    Case("714 passengers have a recorded age.", "714", G, "714.000000"),
    Case("Only 713 passengers have a recorded age.", "713", U),
    Case("The table has 891 rows.", "891", G, "891.000000"),
    Case("The table has 891 rows and fifteen columns.", "fifteen", G, "15"),
    # value_counts(normalize=True): a ratio as a percentage
    Case("55.1% travelled in third class.", "55.1%", G, "55.1%"),
    Case("55% travelled in third class.", "55%", G, "55.1%"),
    Case("55.11% travelled in third class.", "55.11%", G, "0.551066"),
    Case("55.2% travelled in third class.", "55.2%", U),
    Case("5.5% travelled in third class.", "5.5%", U),
    Case("Third class was 55.1 of the passengers.", "55.1", U),
    Case("A share of 0.551 travelled in third class.", "0.551", G, "0.551066"),
    Case("A share of 0.5511 travelled in third class.", "0.5511", G, "0.551066"),
    Case("24.2% travelled first class.", "24.2%", G, "0.242424"),
    Case("20.7% travelled second class.", "20.7%", G, "0.206510"),
    Case("20.6% travelled second class.", "20.6%", U),
    Case("About 21 percent travelled second class.", "21 percent", G, "0.206510"),
    # value_counts(): counts, bounds, approximations
    Case("577 passengers were male.", "577", G, "577"),
    Case("578 passengers were male.", "578", U),
    Case("About 580 passengers were male.", "580", G, "577"),
    Case("More than 500 passengers were male.", "500", G, "577"),
    Case("More than 600 passengers were male.", "600", U),
    Case("Fewer than 600 passengers were male.", "600", G, "577"),
    Case("314 passengers were female.", "314", G, "314"),
    # print(mean): the survival rate
    Case("The survival rate was 38.4%.", "38.4%", G, "0.3838383838383838"),
    Case("The survival rate was 38%.", "38%", G, "0.3838383838383838"),
    Case("The survival rate was 38.38%.", "38.38%", G, "0.3838383838383838"),
    Case("The survival rate was 38.3%.", "38.3%", U),
    Case("The survival rate was 41.2%.", "41.2%", U),
    Case("The survival rate was 0.38.", "0.38", G, "0.3838383838383838"),
    Case("The survival rate was 3.8%.", "3.8%", U),
    # groupby mean; derived differences and ratios
    Case("74.2% of women survived.", "74.2%", G, "0.742038"),
    Case("18.9% of men survived.", "18.9%", G, "0.188908"),
    Case(
        "74.2% of women and 18.9% of men survived: a gap of 55.3 percentage points.",
        "55.3 percentage points",
        D,
    ),
    Case(
        "74.2% of women and 18.9% of men survived: a gap of 55.4 percentage points.",
        "55.4 percentage points",
        U,
    ),
    Case("Women (74.2%) were 3.9 times as likely to survive as men (18.9%).", "3.9", D),
    Case("577 men and 314 women sailed: 263 more men than women.", "263", D),
    Case("577 men and 314 women sailed: 264 more men than women.", "264", U),
    Case("577 men and 314 women: 891 in all.", "891", G, "891.000000"),
    # corr(): signs
    Case("Bill and tip correlate at 0.68.", "0.68", G, "0.6757341092113641"),
    Case("Bill and tip correlate at 0.676.", "0.676", G, "0.6757341092113641"),
    Case("Bill and tip correlate at 0.675734.", "0.675734", G, "0.675734"),
    Case("Bill and tip correlate at 0.67.", "0.67", U),
    Case("Bill and tip correlate at -0.68.", "-0.68", U),
    Case("Party size and tip correlate at 0.49.", "0.49", G, "0.489299"),
    # a regression: linregress and lstsq
    Case("Each dollar of the bill adds 0.105 to the tip.", "0.105", G, "0.1050245173843534"),
    Case("The slope is 0.1050.", "0.1050", G, "0.1050245173843534"),
    Case("The slope is 0.106.", "0.106", U),
    Case("The intercept is 0.92.", "0.92", G, "0.9202696135546726"),
    Case("The intercept is 0.9203.", "0.9203", G, "0.9202696135546726"),
    Case("r = 0.676", "0.676", G, "0.6757341092113641"),
    Case("The least-squares slope is 0.10502452.", "0.10502452", G, "0.10502452"),
    Case("The slope is significant (p = 6.69e-34).", "6.69e-34", G, "6.692470646864481e-34"),
    Case("The slope is significant (p = 6.7 × 10^-34).", "6.7 × 10^-34", G, "6.692470646864481e-34"),
    Case("The slope is significant (p = 6.7×10⁻³⁴).", "6.7×10⁻³⁴", G, "6.692470646864481e-34"),
    Case("The slope is significant (p = 6.8e-34).", "6.8e-34", U),
    Case("The slope is significant (p < 0.001).", "0.001", G, "6.692470646864481e-34"),
    Case("The slope's standard error is 0.0074.", "0.0074", G, "0.007364789848762602"),
    # a t-test
    Case("The t statistic is 1.39.", "1.39", G, "1.387859705421269"),
    Case("The t statistic is 1.38.", "1.38", U),
    Case("The difference is not significant (p = 0.166).", "0.166", G, "0.16645623503456755"),
    Case("The difference is not significant (p = 0.17).", "0.17", G, "0.16645623503456755"),
    Case("The difference is not significant (p = 0.167).", "0.167", U),
    Case("The difference is significant (p < 0.05).", "0.05", G, "6.692470646864481e-34"),
    Case("The test has 242 degrees of freedom.", "242", G, "242.0"),
    # years and counts
    Case("In 1960 the airline carried 5,714 thousand passengers.", "1960", G, "1960"),
    Case("In 1960 the airline carried 5,714 thousand passengers.", "5,714 thousand", U),
    Case("In 1960 the airline carried 5,714 passengers (thousands).", "5,714", G, "5714"),
    Case("In 1960 it carried 5.7 thousand passengers.", "5.7 thousand", G, "5714"),
    Case("In 1960 it carried 5.8 thousand passengers.", "5.8 thousand", U),
    Case("The data ends in 2023.", "2023", U),
    Case("The table has 2,023 rows.", "2,023", U),
    Case("The series starts on 1949-01-01.", "1949-01-01", G, "1949-01-01"),
    Case("The series starts in February 1949.", "February 1949", G, "1949-02-01"),
    Case("The series starts in 1949.", "1949", G),
    Case("The first ride was on 2019-02-28.", "2019-02-28", G, "2019-02-28 23:29:03"),
    Case("The first ride was on February 28, 2019.", "February 28, 2019", G, "2019-02-28 23:29:03"),
    Case("The rides are from 2019.", "2019", G, "2019-02-28 23:29:03"),
    Case("There were 2,019 rides.", "2,019", U),
    Case("The first ride was on 2019-02-27.", "2019-02-27", U),
    # a sign in words
    Case("In April 1949 passengers fell by 3, to 129.", "3", G, "-3.0"),
    Case("In April 1949 passengers fell by 3, to 129.", "129", G, "129"),
    Case("In April 1949 passengers rose by 3.", "3", IGN),
    Case("Sunday had 11 fewer tables than Saturday.", "11", G, "-11.0"),
    Case("Sunday had 11 more tables than Saturday.", "11", U),
    Case("Men tip 0.26 more than women.", "0.26", G),
    Case("Women tip 0.26 less than men.", "0.26", G),
    Case("Men tip 0.26 less than women.", "0.26", G),
    # numbers a variable holds, and numbers in code
    Case("The flights table has 144 rows.", "144", G, "144"),
    Case("Share is 0.55106622 of all.", "0.55106622", G, "0.5510662177328844"),
    Case("22 passengers were older than 60.", "60", G, "60"),
    Case("22 passengers were older than 60.", "22", G, "22"),
    # row numbers of a table are not results
    Case("13 of the first 15 passengers have an age.", "13", U),
    # the question and the file names restate, small numbers are not claims
    Case(
        "Of the 891 passengers, 38.38% survived.",
        "891",
        IGN,
        question="How many of the 891 passengers survived?",
    ),
    Case(
        "Of the 891 passengers, 38.38% survived.",
        "38.38%",
        G,
        "0.3838383838383838",
        question="How many of the 891 passengers survived?",
    ),
    Case("Yes: $32.20 is above $30.", "$30", IGN, question="Is the mean fare above $30?"),
    Case("The file covers 2023 only.", "2023", IGN, files=("sales_2023.csv",)),
    Case("There are 3 classes.", "3", IGN),
    Case("There are three classes.", "three", IGN),
]


def _claim(grounding: Grounding, case: Case) -> Claim | None:
    return next((c for c in grounding.claims if c.text == case.number), None)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_matcher_on_real_outputs(index: SourceIndex, case: Case) -> None:
    grounding = ground(case.answer, index, question=case.question, files=case.files)
    if case.expected == IGN:
        assert any(i.text == case.number for i in grounding.ignored), grounding.to_dict()
        assert _claim(grounding, case) is None
        return
    claim = _claim(grounding, case)
    assert claim is not None, f"{case.number!r} not read as a claim: {grounding.to_dict()}"
    assert claim.status.value == case.expected, claim.describe()
    if case.expected == G and case.source:
        assert claim.source is not None and claim.source.value == case.source, claim.describe()
    if case.expected == D:
        assert claim.derivation is not None and claim.source is None


def test_the_table_is_large_enough_and_covers_every_outcome() -> None:
    assert len(CASES) >= 60
    assert {c.expected for c in CASES} == {G, D, U, IGN}


def test_a_printed_percentage_grounds_a_ratio_and_a_printed_ratio_a_percentage() -> None:
    cells = [
        _cell(1, "print(f'{rate:.1%}')", [_printed("Share: 12.5%")]),
        _cell(2, "print(ratio)", [_printed("0.0625")]),
    ]
    grounding = ground("A share of 0.125, and 6.25% of the rest; not 0.126.", SourceIndex.from_cells(cells))
    share, rest, wrong = grounding.claims
    assert share.source is not None and share.source.form == "as a ratio" and share.source.value == "12.5%"
    assert rest.source is not None and rest.source.form == "as a percentage" and rest.source.value == "0.0625"
    assert wrong.status is ClaimStatus.UNSUPPORTED


def test_an_exponent_beyond_a_float_is_text_not_a_number() -> None:
    """A saved output's name such as ``out-9-14e326.txt`` in code once raised OverflowError
    (CI): ``14e326`` is past what a float holds, so it is no number on either side."""
    cells = [_cell(1, "open('out-9-14e326.txt').read()  # 1e-400", [_printed("rows: 12")])]
    index = SourceIndex.from_cells(cells)
    grounding = ground("12 rows, not 14e326 or 1e-400.", index)
    assert [c.text for c in grounding.claims] == ["12"]
    assert grounding.claims[0].status is ClaimStatus.GROUNDED


def test_sources_name_the_cell_the_part_and_the_form(index: SourceIndex) -> None:
    grounding = ground(
        "The survival rate was 38.4%, slope 0.105, and 144 flights; size and tip at 0.49.", index
    )
    rate, slope, rows, corr = grounding.claims
    assert rate.source is not None and rate.source.cell == 4 and rate.source.part == "stdout"
    assert rate.source.form == "as a percentage" and rate.source.cell_id == "c04"
    assert slope.source is not None and slope.source.label == "slope" and slope.source.form == "rounded"
    assert rows.source is not None and rows.source.where == "variable" and rows.source.part == "n_rows"
    assert corr.source is not None and corr.source.part == "output 1" and corr.source.label == "tip"
    assert grounding.summary() == "4 numbers: 4 from cells 4, 6, 8, 12"


def test_derived_numbers_name_their_operands(index: SourceIndex) -> None:
    answer = "74.2% of women and 18.9% of men survived: 55.3 points apart."
    grounding = ground(answer, index)
    _women, _men, gap = grounding.claims
    assert gap.status is ClaimStatus.DERIVED and gap.derivation is not None
    assert gap.derivation.op == "difference" and gap.derivation.operands == (0, 1)
    assert gap.derivation.expression == "74.2% − 18.9%"
    assert grounding.summary() == "3 numbers: 2 from cell 5; 1 derived from them"


def test_summary_counts_cells_and_names_the_unsupported(index: SourceIndex) -> None:
    answer = "The survival rate is 41.2%, 577 were male, 314 female, slope 0.105, and 38.4% survived."
    grounding = ground(answer, index)
    assert grounding.summary() == "5 numbers: 4 from cells 3, 4, 8; 1 unsupported: 41.2%"
    assert [c.text for c in grounding.unsupported] == ["41.2%"] and not grounding.all_grounded
    assert ground("No numbers here.", index).summary() == "no numbers to check"


def test_round_trips_through_dicts(index: SourceIndex) -> None:
    answer = "74.2% of women and 18.9% of men survived (55.3 points); 41.2% is made up; 3 classes."
    grounding = ground(answer, index, question="Who survived?")
    again = Grounding.from_dict(grounding.to_dict())
    assert again == grounding and again.to_dict() == grounding.to_dict()
    assert grounding.to_dict()["summary"] == grounding.summary()


def test_numbers_in_code_links_and_list_markers_are_not_claims(index: SourceIndex) -> None:
    answer = (
        "1. The rate is `0.3838`, see [run 2024](https://example.org/2024/x).\n"
        "2. Computed with:\n```python\nprint(df.age.mean() * 1000)\n```\n"
        "Kept columns col_2 and Q3; Python 3.11.4; the 2nd class."
    )
    grounding = ground(answer, index)
    assert [c.text for c in grounding.claims] == ["0.3838"]


def test_citations_link_each_number_to_its_cell(index: SourceIndex) -> None:
    answer = "The survival rate was 38.4%, not 41.2%; women 74.2%, men 18.9%: a gap of 55.3 points. <b>x</b>"
    text = cite_markdown(ground(answer, index))
    assert '[38.4%](#cell-id=c04 "cell [4] stdout: 0.3838383838383838 (as a percentage)")' in text
    assert '<mark title="unsupported: no cell of this conversation produced this number">41.2%</mark>' in text
    assert '[55.3 points](#cell-id=c05 "derived: 74.2% − 18.9% (difference)")' in text
    assert "&lt;b>x&lt;/b>" in text  # the model's own HTML stays text
    assert text.endswith("*5 numbers: 3 from cells 4, 5; 1 derived from them; 1 unsupported: 41.2%.*")


def _rerun_with(cells: list[dict[str, Any]], position: int, outputs: list[dict[str, Any]]) -> dict[int, Any]:
    rerun = {i: c for i, c in enumerate(cells) if c["cell_type"] == "code"}
    rerun[position] = {**rerun[position], "outputs": outputs}
    return rerun


def test_recheck_reports_the_numbers_that_moved(cells: list[dict[str, Any]], index: SourceIndex) -> None:
    answer = "38.4% survived; women 74.2%, men 18.9% (55.3 points apart); the mean age was 29.7."
    grounding = ground(answer, index)
    same = recheck(grounding, {i: c for i, c in enumerate(cells) if c["cell_type"] == "code"}, cell_index=30)
    assert same.reproduced and same.claims == 5 and same.moved == []

    titanic = pd.read_csv(SEABORN / "titanic.csv")
    changed = titanic.iloc[:800]  # the data file changed: fewer rows
    position = next(i for i, c in enumerate(cells) if c.get("execution_count") == 4)
    rerun = _rerun_with(cells, position, [_printed(changed["survived"].mean())])
    check = recheck(grounding, rerun, cell_index=30)
    assert not check.reproduced
    assert [(m.text, m.old, m.new) for m in check.moved] == [
        ("38.4%", "0.3838383838383838", str(changed["survived"].mean()))
    ]
    assert "was 0.3838383838383838, now 0.3" in check.describe()

    by_sex = changed.groupby("sex")["survived"].mean()
    position = next(i for i, c in enumerate(cells) if c.get("execution_count") == 5)
    check = recheck(grounding, _rerun_with(cells, position, [_result(by_sex)]), cell_index=30)
    moved = {m.text: m for m in check.moved}
    assert set(moved) == {"74.2%", "18.9%", "55.3 points"}
    assert moved["74.2%"].old == "0.742038" and moved["74.2%"].new == f"{by_sex['female']:.6f}"


def test_a_number_printed_in_several_cells_cites_the_latest(cells: list[dict[str, Any]]) -> None:
    many = [dict(c, id=f"{c['id']}-{k}") for k in range(2) for c in cells]  # 36 code cells
    answer = (
        "The survival rate was 38.4% (41.2% is wrong); 577 men and 314 women, 263 more men; women "
        "74.2%, men 18.9%; slope 0.105 (p < 0.001); in 1960 5,714 passengers; t = 1.39, p = 0.166."
    )
    grounding = ground(answer, SourceIndex.from_cells(many))
    assert len(grounding.claims) == 13 and [c.text for c in grounding.unsupported] == ["41.2%"]
    rate = grounding.claims[0]
    assert (
        rate.source is not None
        and rate.source.cell_id == "c04-1"
        and rate.source.cell_index == len(cells) + 4
    )


def test_a_citation_points_at_the_cell_that_computed_the_number() -> None:
    """The question's own cells first (the latest first), an earlier question's next, a
    table's profile last: "100.0%" printed by the question's cell, not the profile's
    "2013 (100%)" (issue 34)."""
    profile = _cell(1, "df = load()", [_printed("year: 2013 (100%)")])
    profile["metadata"]["kernel_analyst"]["role"] = "profile"
    earlier = _cell(2, "print(share)", [_printed(100.0)])
    question = {"cell_type": "markdown", "source": "### Question", "metadata": {}}
    first = _cell(3, "late = jfk[jfk.dep_delay > 15]; print(len(late) / len(late) * 100)", [_printed(100.0)])
    last = _cell(4, "print(round(len(late) / len(jfk) * 100, 1))", [_printed(100.0)])
    cells = [profile, earlier, question, first, last]
    grounded = ground("100.0% of them left late.", SourceIndex.from_cells(cells), prefer_from=2)
    assert grounded.claims[0].source is not None and grounded.claims[0].source.cell == 4
    without_question = ground("100.0% of them left late.", SourceIndex.from_cells(cells[:2]), prefer_from=2)
    source = without_question.claims[0].source
    assert source is not None and source.cell == 2, "an earlier question's cell before the profile"
    only_profile = ground("100% of the rows are from 2013.", SourceIndex.from_cells(cells[:1]))
    assert only_profile.claims[0].source is not None and only_profile.claims[0].source.cell == 1
