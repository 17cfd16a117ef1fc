"""One EDA cell per section for both engines, checked without a kernel: the template fills
blocks at their indentation, both engines fill the same holes, every planned cell is valid
Python for both engines, and each engine's cells name only what that engine has (pandas
never reads DuckDB's passes; out of core, nothing touches a loaded table ``df``)."""

from __future__ import annotations

import ast

import pytest

from kernel_analyst.eda import STEPS, PlaybookOptions, detect, plan_cells
from kernel_analyst.eda._outofcore import EngineChoice
from kernel_analyst.eda._template import Cell, fill

from .conftest import SEABORN

DUCKDB = EngineChoice("duckdb", "asked for")
ALL_STEPS = PlaybookOptions(target="survived")
# Names only the DuckDB passes define (setup and loading cells of the out-of-core path).
DUCK_ONLY = {"con", "stats", "exact", "value_counts", "distinct_exact", "quantiles", "fences", "counted",
             "skews", "pearson_r", "plans", "quantile_rows", "missing_pass", "hash_of"}


def test_a_block_takes_the_indentation_of_its_placeholder_and_an_empty_one_goes() -> None:
    template = "if x:\n    $body\n    done = $value\n$tail\nend"
    filled = fill(template, body="a = 1\n\nb = 2", value=3, tail="")
    assert filled == "if x:\n    a = 1\n\n    b = 2\n    done = 3\nend"
    assert fill("$block", block="y = $n", n=5) == "y = 5", "a block's own placeholders are filled too"
    with pytest.raises(KeyError):
        fill("print($missing)")


def test_both_engines_fill_the_same_holes() -> None:
    with pytest.raises(ValueError, match="only one fills \\['note'\\]"):
        Cell("$note", pandas={"note": ""})
    cell = Cell("x = $what", pandas={"what": "df"}, duckdb={"what": "sample"})
    assert (cell.code("pandas"), cell.code("duckdb")) == ("x = df", "x = sample")
    with pytest.raises(ValueError, match="engine must be one of pandas, duckdb"):
        cell.code("polars")


@pytest.mark.parametrize("name", ["titanic", "taxis"])
def test_every_cell_is_python_for_both_engines(name: str) -> None:
    plan = detect(SEABORN / f"{name}.csv")
    pandas = plan_cells(plan, ALL_STEPS)
    duck = plan_cells(plan, ALL_STEPS, engine=DUCKDB, names=None)
    assert [c.step for c in pandas] == [c.step for c in duck] == ["setup", "load", *STEPS]
    assert [(c.title, c.intro) for c in pandas[2:]] == [(c.title, c.intro) for c in duck[2:]]
    for plain, out_of_core in zip(pandas[2:], duck[2:], strict=True):
        assert "df" not in _names(out_of_core.code), f"{out_of_core.step}: out of core there is no df"
        assert not _names(plain.code) & DUCK_ONLY, f"{plain.step}: {_names(plain.code) & DUCK_ONLY}"
    for cell in (pandas[0], duck[0], duck[1]):
        assert _names(cell.code)  # setup and loading: valid Python too


def _names(code: str) -> set[str]:
    """The names a cell reads or writes (a SyntaxError names the line)."""
    return {node.id for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Name)}
