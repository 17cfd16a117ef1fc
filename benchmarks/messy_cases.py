"""The questions of ``benchmarks/messy.py``: two per file of ``../shared/datasets/csv/messy``,
with answers established by hand.

Each answer was worked out from the raw bytes with the standard library's ``csv`` module
and the encoding, delimiter and number style read off the file by eye (not with the
project's loader), and checked against the file in a text editor. Conventions:

- a line that holds only delimiters (``,,,,``) is not a row; a note under the table
  (``"Note: State statistics may include ..."``) is not a row either;
- a row with fewer fields than the header has missing values for the rest; a row with more
  keeps its extra values.

The first question of each file asks for the row count and one aggregate (it shows whether
the file was read right); the second is a follow-up on the same conversation.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Expected:
    """One value an answer must state: a number (within half of its last decimal) or a text."""

    value: float | str
    """The value."""
    decimals: int = 0
    """Decimals the question asks for (a number within half a unit of the last one is right)."""


@dataclass(frozen=True)
class Case:
    """A file, its two questions and their answers."""

    file: str
    """The file's name in ``datasets/csv/messy``."""
    rows: int
    """Data rows, by hand."""
    first: str
    """The first question."""
    first_answers: tuple[Expected, ...]
    """What the first answer must state (the row count first)."""
    follow_up: str
    """The second question, in the same conversation."""
    follow_up_answers: tuple[Expected, ...]
    """What the second answer must state."""
    numeric: str | None = None
    """A column the first question aggregates, which a right reading makes numeric."""


def _n(value: float, decimals: int = 0) -> Expected:
    return Expected(value, decimals)


CASES: tuple[Case, ...] = (
    Case(
        "csvkit_bad.csv",
        3,
        "How many data rows does this file have, and what is the sum of column_a?",
        (_n(3), _n(1)),
        "How many rows have a value in column_c?",
        (_n(1),),
        "column_a",
    ),
    Case(
        "csvkit_blanks.csv",
        1,
        "How many data rows does this file have, and how many of its cells are missing "
        "or blank (NA, N/A, NONE, NULL, '.' and empty all count)?",
        (_n(1), _n(6)),
        "How many columns does it have?",
        (_n(6),),
    ),
    Case(
        "csvkit_mac_newlines.csv",
        2,
        "How many data rows does this file have, and what is the sum of column b?",
        (_n(2), _n(7)),
        "And the sum of column c?",
        (_n(9),),
        "b",
    ),
    Case(
        "csvkit_null_byte.csv",
        1,
        "How many data rows does this file have, and what is the value of column c?",
        (_n(1), _n(3)),
        "And the value of column b?",
        (_n(2),),
        "c",
    ),
    Case(
        "csvkit_realdata_Datagov_FY10_EDU_recp_by_State.csv",
        53,
        "How many states and territories does this table list, and what is the sum of its TOTAL column?",
        (_n(53), _n(800074)),
        "Which state has the largest TOTAL, and what is it?",
        (Expected("CALIFORNIA"), _n(76639)),
        "TOTAL",
    ),
    Case(
        "csvkit_realdata_FY09_EDU_Recipients_by_State.csv",
        52,
        "How many states and territories does this table list, and what is the sum of its TOTAL column?",
        (_n(52), _n(506914)),
        "What is the mean of TOTAL, rounded to 2 decimals?",
        (_n(9748.35, 2),),
        "TOTAL",
    ),
    Case(
        "csvkit_realdata_ks_1033_data.csv",
        1575,
        "How many rows does this table have, and what is the sum of total_cost, rounded to 2 decimals?",
        (_n(1575), _n(4126824.62, 2)),
        "What is the total quantity (sum of quantity)?",
        (_n(1988),),
        "total_cost",
    ),
    Case(
        "csvkit_test_date_format.csv",
        2,
        "How many rows does this file have, and what is the latest date in column a "
        "(write it as YYYY-MM-DD)? "
        "The dates are written day/month/year.",
        (_n(2), Expected("2014-01-02")),
        "How many days lie between the two dates?",
        (_n(367),),
    ),
    Case(
        "csvkit_test_empty_columns.csv",
        2,
        "How many data rows does this file have, and how many of its cells hold a value?",
        (_n(2), _n(2)),
        "How many columns have at least one value?",
        (_n(2),),
    ),
    Case(
        "csvkit_test_latin1.csv",
        2,
        "How many rows does this file have, and what is the sum of column a?",
        (_n(2), _n(5)),
        "What is the value of column c in the last row?",
        (Expected("©"),),
        "a",
    ),
    Case(
        "csvkit_test_locale.csv",
        1,
        "How many rows does this file have, and what is the value of column a? (Numbers are written the "
        "German way.)",
        (_n(1), _n(1.7, 1)),
        "And the value of column b?",
        (_n(200000000),),
        "a",
    ),
    Case(
        "csvkit_test_skip_lines.csv",
        1,
        "How many data rows does this file have, and what is the sum of a, b and c in it?",
        (_n(1), _n(6)),
        "What is the value of c?",
        (_n(3),),
        "a",
    ),
    Case(
        "csvkit_test_utf16_little.csv",
        2,
        "How many rows does this file have, and what is the sum of column a?",
        (_n(2), _n(5)),
        "And the sum of column b?",
        (_n(7),),
        "a",
    ),
    Case(
        "csvkit_test_utf8_bom.csv",
        2,
        "How many rows does this file have, and what is the sum of column foo?",
        (_n(2), _n(5)),
        "And the sum of column bar?",
        (_n(7),),
        "foo",
    ),
    Case(
        "frictionless_issue-1105-timezone_semicolon.csv",
        2,
        "How many rows does this file have, and how many hours apart are its two timestamps?",
        (_n(2), _n(3)),
        "Which id has the earlier instant?",
        (_n(1),),
    ),
    Case(
        "frictionless_issue-647_latin1_semicolon.csv",
        882,
        "How many charging points (rows) does this file list, and what is the sum of nbre_pdc?",
        (_n(882), _n(6288)),
        "What is the mean of puiss_max, rounded to 2 decimals?",
        (_n(20.60, 2),),
        "nbre_pdc",
    ),
    Case(
        "frictionless_issue-811_latin1_semicolon_multiline_header.csv",
        7904,
        "How many municipalities (rows) does this file list, and how many distinct regions "
        "(Denominazione Regione)?",
        (_n(7904), _n(20)),
        "How many municipalities are in Lombardia?",
        (_n(1506),),
    ),
    Case(
        "frictionless_skip-rows-before-headers.csv",
        2,
        "How many data rows does this file have, and what is the name for id 2?",
        (_n(2), Expected("中国人")),
        "What is the sum of id?",
        (_n(3),),
    ),
    Case(
        "frictionless_structure-errors.csv",
        3,
        "How many data rows does this file have, and what is the sum of age?",
        (_n(3), _n(59)),
        "What is the largest id?",
        (_n(1102),),
        "age",
    ),
    Case(
        "frictionless_table-infer-iso-8859-7.csv",
        4,
        "How many people does this file list, and what is their mean age, rounded to 1 decimal?",
        (_n(4), _n(31.5, 1)),
        "What is the name of the oldest person?",
        (Expected("Λεωνιδας"),),
        "age",
    ),
    Case(
        "frictionless_table-infer-missing-values_dash.csv",
        7,
        "How many rows does this file have, and how many of them have no id?",
        (_n(7), _n(3)),
        "What is the mean age, rounded to 2 decimals?",
        (_n(28.71, 2),),
        "age",
    ),
    Case(
        "frictionless_table-with-accents_latin1_semicolon_decimalcomma.csv",
        638,
        "How many rows does this file have, and what is the mean of the Occupancy rate, "
        "rounded to 4 decimals?",
        (_n(638), _n(0.6871, 4)),
        "What is the mean Average Price, rounded to 2 decimals?",
        (_n(107.83, 2),),
        "Occupancy rate",
    ),
    Case(
        "readr_norway_decimal_comma.csv",
        24,
        "How many rows does this file have, and what is the sum of value, rounded to 2 decimals? (Numbers "
        "are written the Norwegian way.)",
        (_n(24), _n(452405.29, 2)),
        "What is the largest value?",
        (_n(322222.21, 2),),
        "value",
    ),
    Case(
        "seaborn_raw_exercise_cr_lineendings.csv",
        90,
        "How many rows does this file have, and what is the mean pulse, rounded to 1 decimal?",
        (_n(90), _n(99.7, 1)),
        "What is the highest pulse?",
        (_n(150),),
        "pulse",
    ),
    Case(
        "seaborn_raw_planets_commented.csv",
        1035,
        "How many planets (rows) does this file list, and how many were found by Radial Velocity?",
        (_n(1035), _n(553)),
        "What is the median orbital period (pl_orbper), rounded to 4 decimals?",
        (_n(39.9795, 4),),
    ),
    Case(
        "seaborn_raw_seaice_bom_wide.csv",
        366,
        "How many rows does this file have, and what is the mean of the column 2000, rounded to 2 decimals?",
        (_n(366), _n(11.51, 2)),
        "What is the smallest value of the column 2000?",
        (_n(5.943, 3),),
        "2000",
    ),
    Case(
        "seaborn_raw_titanic.csv",
        891,
        "How many passengers does this file list, and how many survived?",
        (_n(891), _n(342)),
        "What is the mean fare, rounded to 2 decimals?",
        (_n(32.20, 2),),
        "survived",
    ),
)
