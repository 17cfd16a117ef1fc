"""The EDA playbook in real kernels: every shared table loads and profiles without an error
cell (the quick steps on all ~97 files, the full playbook on a representative subset)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from kernel_analyst.eda import STEPS, PlaybookOptions, Progress, detect, plan_cells, run_playbook
from kernel_analyst.kernels import KernelSession, SessionManager

from .conftest import MESSY, ROOT, SEABORN, SHARED

DABENCH = SHARED / "datasets" / "dabench" / "da-dev-tables"
ALL_TABLES = sorted([*SEABORN.glob("*.csv"), *MESSY.glob("*.csv"), *DABENCH.glob("*.csv")])
# The steps without figures: cheap enough to run on every shared table in the suite. The
# full playbook (every figure too) runs below on files chosen for what they exercise; the
# full sweep over all files is `python benchmarks/eda.py --sweep` (see docs/benchmarks.md).
QUICK = PlaybookOptions(steps=("alerts", "duplicates", "numeric", "outliers"))
REPRESENTATIVE = [
    SEABORN / "taxis.csv",  # dates, skewed money columns
    SEABORN / "flights.csv",  # a month name column, a trend
    MESSY / "csvkit_bad.csv",  # ragged rows
    MESSY / "frictionless_issue-1105-timezone_semicolon.csv",  # mixed UTC offsets
    MESSY / "seaborn_raw_seaice_bom_wide.csv",  # a BOM, many columns
    MESSY / "csvkit_test_empty_columns.csv",  # empty columns
    DABENCH / "Credit.csv",  # an unnamed row-number column
]
NOTEBOOKS = ROOT / "notebooks"
EXAMPLE_DATA = ROOT / "examples" / "data"


def _cid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
async def shared_session(manager: SessionManager) -> AsyncIterator[KernelSession]:
    """One kernel loads every table in turn (loading is what this module checks per file)."""
    cid = _cid("eda-all")
    yield await manager.session(cid)
    await manager.close(cid)


def _cells(session: KernelSession) -> list[dict[str, Any]]:
    return json.loads(session.notebook_path.read_text())["cells"]  # type: ignore[no-any-return]


def test_the_shared_tables_are_there() -> None:
    assert len(ALL_TABLES) >= 90, "the shared datasets are missing"


@pytest.mark.parametrize("path", ALL_TABLES, ids=lambda p: f"{p.parent.name}/{p.name}")
async def test_every_table_profiles_without_an_error_cell(shared_session: KernelSession, path: Path) -> None:
    report = await run_playbook(shared_session, path, options=QUICK)
    assert report.error is None, report.error
    assert [s.name for s in report.steps] == ["setup", "load", "overview", "alerts", "duplicates", "numeric",
                                              "outliers"]
    assert all(s.ok for s in report.steps), report.steps
    assert report.plan is not None and report.plan.file == path.name
    assert report.findings["shape"][1] > 0 and "alerts" in report.findings


@pytest.mark.parametrize("path", REPRESENTATIVE, ids=lambda p: p.name)
async def test_full_playbook_on_representative_tables(shared_session: KernelSession, path: Path) -> None:
    report = await run_playbook(shared_session, path)
    assert report.ok, [s for s in report.steps if not s.ok]
    assert [s.name for s in report.steps] == ["setup", "load", *[s for s in STEPS if s != "target"]]


@pytest.mark.parametrize("name", ["penguins", "tips"])
def test_bundled_notebooks_are_current(name: str) -> None:
    """notebooks/*.ipynb hold exactly the cells today's playbook runs (else: make notebooks);
    test_cli checks that they reproduce, so together they cover a full run."""
    notebook = json.loads((NOTEBOOKS / f"{name}-eda.ipynb").read_text())
    recorded = [c["source"] for c in notebook["cells"] if c["cell_type"] == "code"]
    planned = [c.code for c in plan_cells(detect(EXAMPLE_DATA / f"{name}.csv"))]
    assert recorded == planned, "the playbook changed: run `make notebooks`"


def test_penguins_notebook_content() -> None:
    cells = json.loads((NOTEBOOKS / "penguins-eda.ipynb").read_text())["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert len(code) == len(STEPS) + 1  # setup, load, every step but target
    assert all(c["metadata"]["kernel_analyst"]["status"] == "ok" for c in code)
    assert not [o for c in code for o in c["outputs"] if o.get("name") == "stderr"]
    images = [o for c in code for o in c["outputs"] if "image/png" in o.get("data", {})]
    assert len(images) == 5  # missing matrix, histograms, top values, association matrices, scatter plots
    headings = [c["source"].splitlines()[0] for c in cells if c["cell_type"] == "markdown"]
    assert headings[0].startswith("# Exploratory analysis of `penguins.csv`")
    assert headings[1] == "## Summary of findings: `penguins.csv`"  # report first
    assert "## Missing values" in headings and "## Associations" in headings
    summary = cells[1]["source"]
    assert "344 rows x 7 columns" in summary and "19 cells (0.8% of all cells) in 5 column(s)" in summary
    assert "`flipper_length_mm` ~ `body_mass_g` Pearson r = +0.87 (n = 342)" in summary


async def test_messy_files_reduced_playbook(manager: SessionManager) -> None:
    session = await manager.session(_cid("eda-messy"))
    missing_only = PlaybookOptions(steps=("missing",))
    ragged = await run_playbook(session, MESSY / "csvkit_bad.csv", options=missing_only)
    assert ragged.ok and "ragged row(s) kept" in ragged.summary_markdown
    loading = next(c for c in _cells(session) if c["source"].startswith("## Loading"))
    assert "line 2 (4 fields)" in loading["source"] and "line 3 (2 fields)" in loading["source"]
    european = await run_playbook(
        session, MESSY / "frictionless_table-with-accents_latin1_semicolon_decimalcomma.csv",
        options=PlaybookOptions(steps=("numeric", "dates")))
    assert european.ok
    assert "decimal comma" in european.summary_markdown
    assert "`Date` from 2013-01-01" in european.summary_markdown


async def test_wide_and_long_tables_are_capped_and_say_so(manager: SessionManager, tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    table = pd.DataFrame(rng.normal(size=(3000, 40)), columns=[f"m{i}" for i in range(40)])
    table["group"] = rng.choice(["a", "b", "c"], size=3000)
    table["user"] = [f"u{i}" for i in range(3000)]
    table.to_csv(tmp_path / "wide.csv", index=False)
    caps = PlaybookOptions(sample_rows=1000, max_hist_columns=4, max_corr_columns=5, max_table_rows=5,
                           steps=("numeric", "histograms", "categories", "correlations"))  # old names too
    session = await manager.session(_cid("eda-caps"))
    seen: list[Progress] = []
    report = await run_playbook(session, tmp_path / "wide.csv", options=caps, on_progress=seen.append)
    assert report.ok, report.steps
    assert [s.name for s in report.steps] == ["setup", "load", "overview", "numeric", "distributions",
                                              "categories", "associations"]
    assert len(seen) == 2 * len(report.steps) and seen[0].result is None and seen[-1].result is not None
    assert report.findings["shape"] == [3000, 42] and report.summary_markdown.startswith("## Summary")
    text = "\n".join(str(o.get("text", "")) for c in _cells(session) if c["cell_type"] == "code"
                     for o in c["outputs"])
    assert "random sample of 1,000 rows" in text
    assert "Histograms of the first 4 of 40 numeric columns" in text
    assert "Using the first 5 numeric and 15 categorical columns (of 40 and 1)" in text
    assert "the first 5 of 40 numeric columns" in text
    assert "more than 50 distinct values" in text and "user" in text


async def test_unreadable_file_is_a_message_not_an_error_cell(manager: SessionManager,
                                                             tmp_path: Path) -> None:
    (tmp_path / "sheet.csv").write_bytes(b"PK\x03\x04" + bytes(300))
    session = await manager.session(_cid("eda-bad"))
    report = await run_playbook(session, tmp_path / "sheet.csv")
    assert not report.ok and report.plan is None
    assert report.error is not None and "ZIP archive" in report.error
    cells = _cells(session)
    assert not [c for c in cells if c["cell_type"] == "code"]
    assert "Could not read `sheet.csv` as a table" in cells[-1]["source"]


async def test_unknown_step_is_refused_before_anything_runs(shared_session: KernelSession) -> None:
    before = len(_cells(shared_session))
    with pytest.raises(ValueError, match="unknown playbook steps"):
        await run_playbook(shared_session, SEABORN / "iris.csv", options=PlaybookOptions(steps=("nope",)))
    assert len(_cells(shared_session)) == before
