"""The EDA loader's detection, on real messy files and small made-up ones (no kernel)."""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from kernel_analyst.eda import _values
from kernel_analyst.eda.exceptions import UnreadableFileError
from kernel_analyst.eda.loader import LoadPlan, detect

from .conftest import MESSY, SHARED

DABENCH = SHARED / "datasets" / "dabench" / "da-dev-tables"


def _read(plan: LoadPlan, path: Path) -> pd.DataFrame:
    return pd.read_csv(path, **plan.read_csv_kwargs())


# file -> options the plan must contain (a subset of read_csv_kwargs())
EXPECTED: dict[str, dict[str, Any]] = {
    "csvkit_test_latin1.csv": {"encoding": "cp1252"},
    "csvkit_test_utf16_little.csv": {"encoding": "utf-16"},
    "csvkit_test_utf8_bom.csv": {"encoding": "utf-8-sig"},
    "frictionless_issue-647_latin1_semicolon.csv": {"encoding": "cp1252", "sep": ";"},
    "frictionless_table-with-accents_latin1_semicolon_decimalcomma.csv": {
        "encoding": "cp1252", "sep": ";", "decimal": ",", "date_format": {"Date": "%d-%m-%y"}},
    "readr_norway_decimal_comma.csv": {"decimal": ",", "thousands": "."},
    "csvkit_test_locale.csv": {"decimal": ",", "thousands": "."},
    "csvkit_realdata_FY09_EDU_Recipients_by_State.csv": {"thousands": ",", "dtype": {"Code": "str"}},
    "csvkit_realdata_Datagov_FY10_EDU_recp_by_State.csv": {"skiprows": 2, "thousands": ","},
    "csvkit_test_skip_lines.csv": {"skiprows": 3},
    "seaborn_raw_planets_commented.csv": {"skiprows": 10},
    "frictionless_skip-rows-before-headers.csv": {"skiprows": 1},
    "frictionless_table-infer-missing-values_dash.csv": {"na_values": {"id": ["-"]}},
    "csvkit_realdata_ks_1033_data.csv": {"date_format": {"ship_date": "%m/%d/%Y %H:%M:%S"}},
    "csvkit_test_date_format.csv": {"date_format": {"a": "%d/%m/%Y"}},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_messy_file_options(name: str) -> None:
    plan = detect(MESSY / name)
    kwargs = plan.read_csv_kwargs()
    for key, value in EXPECTED[name].items():
        assert kwargs.get(key) == value, (key, kwargs)
    _read(plan, MESSY / name)  # and the options work


def test_latin1_accents_decode_correctly() -> None:
    df = _read(detect(MESSY / "frictionless_table-with-accents_latin1_semicolon_decimalcomma.csv"),
               MESSY / "frictionless_table-with-accents_latin1_semicolon_decimalcomma.csv")
    assert "Année" in df.columns
    assert df["Occupancy rate"].dtype == "float64"
    assert str(df["Date"].dtype).startswith("datetime64")


def test_european_numbers_become_numbers() -> None:
    df = _read(detect(MESSY / "csvkit_test_locale.csv"), MESSY / "csvkit_test_locale.csv")
    assert df.loc[0, "a"] == pytest.approx(1.7)
    assert df.loc[0, "b"] == 200_000_000


def test_ragged_rows_are_kept_and_reported() -> None:
    path = MESSY / "frictionless_structure-errors.csv"
    plan = detect(path)
    assert plan.ragged is not None and plan.ragged.longer == 1 and plan.ragged.examples == ((5, 6),)
    df = _read(plan, path)
    assert list(df.columns) == ["id", "name", "age", "extra_1", "extra_2", "extra_3"]
    assert df["extra_3"].dropna().tolist() == [6]
    assert any("line 5 (6 fields)" in note for note in plan.notes)


def test_short_and_long_rows_in_one_file() -> None:
    plan = detect(MESSY / "csvkit_bad.csv")
    assert plan.ragged is not None and (plan.ragged.longer, plan.ragged.shorter) == (1, 1)
    df = _read(plan, MESSY / "csvkit_bad.csv")
    assert df.shape == (3, 4) and df.loc[0, "extra_1"] == "I'm too long!"


def test_mixed_utc_offsets_convert_to_utc() -> None:
    path = MESSY / "frictionless_issue-1105-timezone_semicolon.csv"
    plan = detect(path)
    assert plan.utc_dates == {"timestamp": "ISO8601"}
    assert "utc=True" in plan.code()
    namespace: dict[str, Any] = {"pd": pd}
    exec(plan.code(path=str(path)), namespace)
    assert str(namespace["df"]["timestamp"].dtype).endswith(", UTC]")


def test_hash_in_header_is_not_a_comment() -> None:
    plan = detect(DABENCH / "imp.score.ldlr.metabolome.csv")
    assert plan.skiprows == 0 and plan.comment is None
    assert _read(plan, DABENCH / "imp.score.ldlr.metabolome.csv").columns[0] == "#featureID"


def test_title_row_above_header() -> None:
    plan = detect(DABENCH / "Current_Logan.csv")
    assert (plan.encoding, plan.skiprows) == ("utf-8-sig", 1)
    assert _read(plan, DABENCH / "Current_Logan.csv").columns[0] == "Wins"


def test_unnamed_row_number_becomes_index() -> None:
    plan = detect(DABENCH / "Credit.csv")
    assert plan.index_col == 0
    assert _read(plan, DABENCH / "Credit.csv").columns[0] == "Income"


def test_loading_code_is_a_plain_call_with_every_option(tmp_path: Path) -> None:
    path = tmp_path / "semi.csv"
    path.write_bytes("name;value\nCafé;1,5\nThé;2,25\n".encode("cp1252"))
    plan = detect(path)
    code = plan.code()
    assert code.startswith("df = pd.read_csv(\n    'semi.csv',")
    for option in ("encoding='cp1252'", "sep=';'", "decimal=','"):
        assert option in code
    namespace: dict[str, Any] = {"pd": pd}
    exec(plan.code(path=str(path)), namespace)
    assert namespace["df"]["value"].tolist() == [1.5, 2.25]


def test_utf16_without_bom_and_tabs(tmp_path: Path) -> None:
    path = tmp_path / "tabs.tsv"
    path.write_bytes("a\tb\n1\tx\n2\ty\n".encode("utf-16-le"))
    plan = detect(path)
    assert plan.sep == "\t" and plan.encoding.startswith("utf-16")
    assert _read(plan, path).shape == (2, 2)


def test_no_header_row(tmp_path: Path) -> None:
    path = tmp_path / "numbers.csv"
    path.write_text("1,2,3\n4,5,6\n")
    plan = detect(path)
    assert plan.header is None and plan.names == ("col_1", "col_2", "col_3")
    assert _read(plan, path).shape == (2, 3)


@pytest.mark.parametrize(("content", "reason"), [
    (b"", "empty"),
    (b"PK\x03\x04" + bytes(200), "ZIP"),
    (bytes(range(1, 32)) * 50, "binary"),
])
def test_unreadable_files_get_a_clear_message(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_bytes(content)
    with pytest.raises(UnreadableFileError, match=reason):
        detect(path)


def test_missing_file_is_unreadable(tmp_path: Path) -> None:
    with pytest.raises(UnreadableFileError, match="no such file"):
        detect(tmp_path / "nope.csv")


def test_cp1252_preferred_over_other_latin_code_pages(tmp_path: Path) -> None:
    path = tmp_path / "fr.csv"
    path.write_bytes(codecs.encode("ville,année\nGenève,2013\nSète,2014\n", "latin-1"))
    assert detect(path).encoding == "cp1252"


@pytest.mark.parametrize(("cells", "decimal", "thousands"), [
    (["1,5", "2,25"], ",", None),
    (["1.234.567", "2,5"], ",", "."),
    (["1,234,567", "2.5"], ".", ","),
    (["6,718", "26,822"], ".", ","),
    (["0.5", "1.75"], ".", None),
    (["1,234", "0,5"], ",", None),
])
def test_number_style(cells: list[str], decimal: str, thousands: str | None) -> None:
    style = _values.number_style(cells)
    assert (style.decimal, style.thousands) == (decimal, thousands)


@pytest.mark.parametrize(("cells", "fmt"), [
    (["2020-01-05", "2021-12-31"], "ISO8601"),
    (["05/01/2020", "31/12/2020"], "%d/%m/%Y"),
    (["01/05/2020", "12/31/2020"], "%m/%d/%Y"),
    (["5/19/2006 0:00:00"], "%m/%d/%Y %H:%M:%S"),
    (["2020/12/15"], "%Y/%m/%d"),
    (["Jan 05, 2020", "Dec 31, 2020"], "%b %d, %Y"),
    (["2013", "2014"], None),
    (["hello", "2020-01-01"], None),
])
def test_date_format(cells: list[str], fmt: str | None) -> None:
    guess = _values.date_format(cells)
    assert (guess.format if guess else None) == fmt


# Rows counted by hand from the raw bytes (benchmarks/messy_cases.py): a line of only
# delimiters and a note under the table are not rows.
ROWS_BY_HAND = {
    "csvkit_realdata_Datagov_FY10_EDU_recp_by_State.csv": 53,  # two "Note: ..." lines under the table
    "csvkit_realdata_FY09_EDU_Recipients_by_State.csv": 52,  # a last line of only commas
    "csvkit_test_empty_columns.csv": 2,
    "frictionless_structure-errors.csv": 3,  # ",," inside the table
    "csvkit_blanks.csv": 1,  # a row of missing-value markers is a row
    "frictionless_issue-647_latin1_semicolon.csv": 882,
    "frictionless_issue-811_latin1_semicolon_multiline_header.csv": 7904,
    "seaborn_raw_planets_commented.csv": 1035,
    "csvkit_mac_newlines.csv": 2,
}


@pytest.mark.parametrize("name", sorted(ROWS_BY_HAND))
def test_rows_read_and_counted_as_by_hand(name: str) -> None:
    plan = detect(MESSY / name)
    namespace: dict[str, Any] = {"pd": pd}
    exec(plan.code(var="df", path=str(MESSY / name)), namespace)
    assert len(namespace["df"]) == ROWS_BY_HAND[name]
    assert plan.shape is not None and plan.shape.rows == ROWS_BY_HAND[name]
    assert [c for c, _ in plan.shape.columns] == [str(c) for c in namespace["df"].columns]


def test_notes_under_a_table_are_left_out_and_its_numbers_stay_numbers() -> None:
    plan = detect(MESSY / "csvkit_realdata_Datagov_FY10_EDU_recp_by_State.csv")
    assert plan.read_csv_kwargs()["nrows"] == 53
    assert "nrows=53,  # the table's rows; the lines under it are notes or empty" in plan.code()
    assert any("not rows of the table" in note for note in plan.notes)
    assert plan.shape is not None and dict(plan.shape.columns)["TOTAL"] == "int64"


def test_the_compact_call_reads_the_same_table() -> None:
    path = MESSY / "frictionless_table-with-accents_latin1_semicolon_decimalcomma.csv"
    plan = detect(path)
    compact = plan.code(var="df", path=str(path), compact=True)
    assert "#" not in compact and compact.count("\n") == 0
    assert "sep=';'" in compact and "decimal=','" in compact and "encoding='cp1252'" in compact
    full: dict[str, Any] = {"pd": pd}
    short: dict[str, Any] = {"pd": pd}
    exec(plan.code(var="df", path=str(path)), full)
    exec(compact, short)
    pd.testing.assert_frame_equal(full["df"], short["df"])


def test_a_data_row_after_a_note_keeps_the_note_as_a_row(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("a,b,c\n1,2,3\nonly text,,\n4,5,6\n,,\n", encoding="utf-8")
    plan = detect(path)
    assert plan.shape is not None and plan.shape.rows == 3 and plan.read_csv_kwargs()["nrows"] == 3
