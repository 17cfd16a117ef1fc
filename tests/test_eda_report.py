"""The report's numbers are right: counts, missing shares, quantiles and associations computed
in the kernel equal pandas / scipy computed here, independently, on every seaborn dataset and
a generated one; alerts fire on crafted columns and only there; the target mode ranks
features; the report-first notebook still reproduces; models get a compact profile."""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.stats.contingency import association

from kernel_analyst.agent import Analyst
from kernel_analyst.agent.testing import ScriptedChatModel, tool_call
from kernel_analyst.eda import PlaybookOptions, detect, run_playbook, write_notebook
from kernel_analyst.eda.profile import profile, profile_file
from kernel_analyst.kernels import KernelSession, SessionManager
from kernel_analyst.kernels.verify import verify_notebook

from .conftest import SEABORN

CHECKED = PlaybookOptions(steps=("alerts", "missing", "numeric", "associations"))
TOL = {"rel": 1e-7, "abs": 1e-9}


@pytest.fixture(scope="module")
async def session(manager: SessionManager) -> AsyncIterator[KernelSession]:
    cid = f"eda-check-{uuid.uuid4().hex[:8]}"
    yield await manager.session(cid)
    await manager.close(cid)


def generated(path: Path, rows: int = 400) -> Path:
    """A held-out-style table: clean columns of each kind, and one crafted column per alert."""
    rng = np.random.default_rng(7)
    zeros = np.zeros(rows)
    zeros[rng.choice(rows, rows // 20, replace=False)] = rng.gamma(2.0, 10.0, rows // 20).round(2) + 1
    # exactly 95% zeros
    mostly_missing = np.full(rows, np.nan)
    mostly_missing[[3, 50, 120, 300]] = [1.5, 2.5, 3.5, 4.5]  # 99% missing
    words = ["about 5", "see note", "twelve", "n.k.", "approx. 3"]
    mixed = [str(round(v, 1)) if i % 10 < 7 else words[i % 5] for i, v in enumerate(rng.normal(20, 5, rows))]
    table = pd.DataFrame({
        "height": rng.normal(170, 9, rows).round(1),
        "group": rng.choice(["a", "b", "c", "d"], rows),
        "visits": rng.poisson(5, rows),
        "when": pd.date_range("2023-01-01", periods=rows, freq="D").strftime("%Y-%m-%d"),
        "member": rng.random(rows) < 0.4,
        "constant": 7,
        "user_id": [f"user-{i:05d}" for i in rng.permutation(rows)],
        "mostly_zero": zeros,
        "mostly_missing": mostly_missing,
        "mixed": mixed,
    })
    table.loc[rng.choice(rows, 30, replace=False), "height"] = np.nan
    table.loc[rng.choice(rows, 12, replace=False), "group"] = None
    table["weight"] = (table["height"] * 0.4 + rng.normal(0, 4, rows)).round(1)
    table.to_csv(path, index=False)
    return path


CRAFTED = {"constant": "constant", "user_id": "unique (ID-like)", "mostly_zero": "mostly zeros",
           "mostly_missing": "mostly missing", "mixed": "mixed types"}
CLEAN = ["height", "group", "visits", "when", "member", "weight"]


def _read(path: Path) -> pd.DataFrame:
    namespace: dict[str, Any] = {"pd": pd}
    exec(detect(path).code(path=str(path)), namespace)  # read as the notebook reads it
    return namespace["df"]


def _finite(values: pd.Series) -> pd.Series:
    return values.astype("float64").replace([np.inf, -np.inf], np.nan)


def _eta(categories: pd.Series, values: pd.Series) -> tuple[float, int]:
    both = pd.DataFrame({"c": categories, "v": values}).dropna()
    y = both["v"].to_numpy(float)
    total = float(((y - y.mean()) ** 2).sum())
    between = sum(len(g) * (g.mean() - y.mean()) ** 2
                  for _, g in both.groupby("c", observed=True)["v"])
    return math.sqrt(between / total), len(both)


def _independent(df: pd.DataFrame, a: str, b: str, measure: str) -> tuple[float, int]:
    if measure in ("Pearson r", "Spearman ρ"):
        both = pd.DataFrame({"x": _finite(df[a]), "y": _finite(df[b])}).dropna()
        test = stats.pearsonr if measure == "Pearson r" else stats.spearmanr
        return float(test(both["x"], both["y"]).statistic), len(both)
    if measure == "Cramér's V":
        table = pd.crosstab(df[a], df[b])
        return float(association(table.to_numpy(), method="cramer")), int(table.to_numpy().sum())
    return _eta(df[a], _finite(df[b]))


async def _check_numbers(session: KernelSession, path: Path) -> dict[str, Any]:
    report = await run_playbook(session, path, options=CHECKED)
    assert report.ok, report.steps
    df = _read(path)
    rows, cols = df.shape
    f = report.findings
    assert f["shape"] == [rows, cols] and f["columns"] == [str(c) for c in df.columns]
    assert f["missing_cells"] == int(df.isna().sum().sum())
    assert f["missing_share"] == pytest.approx(df.isna().sum().sum() / (rows * cols), **TOL)
    overview = await session.fetch("overview")
    for col, row in zip(df.columns, overview, strict=True):
        assert row["present"] == int(df[col].notna().sum()), col
        assert row["missing"] == rows - int(df[col].notna().sum()), col
        assert row["distinct"] == int(df[col].nunique()), col
    numeric = df.select_dtypes("number").select_dtypes(exclude="bool")
    summary = await session.fetch("numeric_summary")
    assert len(summary) == numeric.shape[1]
    for col, row in zip(numeric.columns, summary, strict=True):
        values = _finite(numeric[col]).dropna().to_numpy()
        assert row["count"] == len(values)
        if not len(values):
            continue
        for q, key in zip((5, 25, 50, 75, 95), ("5%", "25%", "50%", "75%", "95%"), strict=True):
            assert row[key] == pytest.approx(np.percentile(values, q), **TOL), (col, key)
        assert row["mean"] == pytest.approx(values.mean(), **TOL)
        assert (row["min"], row["max"]) == (pytest.approx(values.min()), pytest.approx(values.max()))
    pairs = await session.fetch("associations")
    for pair in pairs:
        value, n = _independent(df, pair["a"], pair["b"], pair["measure"])
        assert pair["value"] == pytest.approx(value, **TOL), pair
        assert pair["n"] == n, pair
        assert (pair["caveat"] != "") == (n < 30 or pair["caveat"].startswith("few rows per cell")), pair
    varying = [c for c in numeric.columns[:20] if numeric[c].nunique() > 1]
    assert len({(p["a"], p["b"]) for p in pairs if p["measure"] == "Pearson r"}) <= len(varying) ** 2
    return {"findings": f, "pairs": pairs}


@pytest.mark.parametrize("path", sorted(SEABORN.glob("*.csv")), ids=lambda p: p.stem)
async def test_numbers_match_pandas_and_scipy_on_seaborn(session: KernelSession, path: Path) -> None:
    await _check_numbers(session, path)


async def test_numbers_and_alerts_on_a_generated_table(session: KernelSession, tmp_path: Path) -> None:
    checked = await _check_numbers(session, generated(tmp_path / "held_out.csv"))
    measures = {p["measure"] for p in checked["pairs"]}
    assert measures == {"Pearson r", "Spearman ρ", "Cramér's V", "correlation ratio η"}
    alerts = checked["findings"]["alerts"]
    fired = {(column, name) for _, column, name, _ in alerts}
    for column, name in CRAFTED.items():
        assert (column, name) in fired, (column, alerts)
    assert not [a for a in alerts if a[1] in CLEAN], alerts
    severity = [a[0] for a in alerts]
    assert severity == sorted(severity, reverse=True)
    missing_alert = next(a for a in alerts if a[1] == "mostly_missing")
    assert missing_alert[0] == 3 and "99.0% missing (rule: at least 50%)" in missing_alert[3]
    zeros_alert = next(a for a in alerts if a[1] == "mostly_zero" and a[2] == "mostly zeros")
    assert "95.0% of present values are 0" in zeros_alert[3]
    reliable = checked["findings"]["associations"][0]
    assert reliable[4] >= 30, "pairs from few rows rank after every reliable one"


async def test_small_samples_get_a_caveat(session: KernelSession, tmp_path: Path) -> None:
    path = tmp_path / "tiny.csv"
    pd.DataFrame({"x": [1.0, 2.0, None, None], "y": [2.0, 4.5, 7.0, None], "z": [5, 3, 2, 8]}).to_csv(path,
                                                                                                     index=False)
    report = await run_playbook(session, path, options=CHECKED)
    assert report.ok
    pairs = {(p["a"], p["b"], p["measure"]): p for p in await session.fetch("associations")}
    two_rows = pairs[("x", "y", "Pearson r")]
    assert two_rows["n"] == 2 and abs(two_rows["value"]) == pytest.approx(1.0)
    assert two_rows["caveat"] == "only 2 rows: unreliable"
    assert "(n = " in report.summary_markdown and "unreliable" in report.summary_markdown


async def test_target_mode_ranks_features_and_the_notebook_reproduces(
        manager: SessionManager, session: KernelSession, tmp_path: Path) -> None:
    path = SEABORN / "titanic.csv"
    options = PlaybookOptions(target="survived", steps=("target",))
    report = await run_playbook(session, path, options=options)
    assert report.ok, report.steps
    target = report.findings["target"]
    assert target["column"] == "survived" and target["classes"] is True
    df = _read(path)
    ranked = await session.fetch("target_associations")
    values = [r["value"] for r in ranked]
    assert values == sorted(values, key=abs, reverse=True)
    for row in ranked:
        if row["measure"] == "Cramér's V":
            expected, n = _independent(df, row["feature"], "survived", "Cramér's V")
        else:
            expected, n = _eta(df["survived"], _finite(df[row["feature"]]))
        assert row["value"] == pytest.approx(expected, **TOL) and row["n"] == n, row
    assert ranked[0]["feature"] in ("sex", "adult_male", "who", "alive")
    assert "**Target `survived`:**" in report.summary_markdown

    fresh = await manager.session(f"eda-verify-{uuid.uuid4().hex[:8]}")
    full = await run_playbook(fresh, path, options=PlaybookOptions(target="survived"))
    assert full.ok, full.steps
    notebook = await write_notebook(fresh, tmp_path / "titanic-eda.ipynb")
    cells = json.loads(notebook.read_text())["cells"]
    assert cells[1]["source"].startswith("## Summary of findings")
    plain = await fresh.export(tmp_path / "plain.ipynb")
    assert notebook.stat().st_mode == plain.stat().st_mode  # moving the summary keeps permissions
    verified = await verify_notebook(notebook, manager, data_dirs=[SEABORN])
    assert verified.reproduced, [c.describe() for c in verified.failures]
    await manager.close(fresh.id)


async def test_unknown_target_is_a_message_not_an_error_cell(session: KernelSession) -> None:
    report = await run_playbook(session, SEABORN / "iris.csv",
                                options=PlaybookOptions(target="nope", steps=("target",)))
    assert report.error is not None and "no column named 'nope'" in report.error
    assert all(s.ok for s in report.steps) and "target" not in [s.name for s in report.steps]


async def test_edge_tables_and_targets_profile_without_error_cells(session: KernelSession,
                                                                   tmp_path: Path) -> None:
    tables = {"header_only.csv": "a,b,c\n", "one_row.csv": "a,b\n1,x\n",
              "text_only.csv": "n,c\nann,oslo\nbob,lima\n", "all_missing.csv": "a,b\n,\n,\n",
              "infinite.csv": "x,y\ninf,1\n-inf,2\n3,3\n4,4\n"}
    for name, text in tables.items():
        (tmp_path / name).write_text(text)
        report = await run_playbook(session, tmp_path / name)
        assert report.ok, (name, [s for s in report.steps if not s.ok])
    dated = await run_playbook(session, generated(tmp_path / "dated.csv"),
                               options=PlaybookOptions(target="when", steps=("target",)))
    assert dated.ok and dated.findings["target"]["ranked"] == []


async def test_compressed_and_binary_formats_in_a_kernel(session: KernelSession, tmp_path: Path) -> None:
    import gzip
    import zipfile

    table = pd.read_csv(SEABORN / "tips.csv")
    (tmp_path / "tips.csv.gz").write_bytes(gzip.compress((SEABORN / "tips.csv").read_bytes()))
    table.to_parquet(tmp_path / "tips.parquet")
    with zipfile.ZipFile(tmp_path / "tips.zip", "w") as archive:
        archive.writestr("tips.jsonl", table.to_json(orient="records", lines=True))
    for name in ("tips.csv.gz", "tips.parquet", "tips.zip"):
        report = await run_playbook(session, tmp_path / name, options=CHECKED)
        assert report.ok, (name, report.steps)
        assert report.findings["shape"] == [244, 7] and report.findings["duplicates"] == 1, name


async def test_profile_in_the_kernel_matches_the_host(session: KernelSession) -> None:
    path = SEABORN / "titanic.csv"
    await session.upload(path)
    profiled = await profile_file(session, path, budget=1500)
    assert profiled.ok and profiled.variable == "titanic"
    assert profiled.text == profile(path, name="titanic", budget=1500)
    assert profiled.text.startswith("titanic: 891 rows x 15 columns") and len(profiled.text) <= 1500
    assert "- age: float64, 177 missing (20%)" in profiled.text
    short = profile(path, name="titanic", budget=400)
    assert len(short) <= 400 and "more column(s)" in short


async def test_the_agent_gets_profiles_before_its_first_step(manager: SessionManager) -> None:
    # The profile describes, cells compute (issue 34): an answer read off the profile goes
    # back once to be computed in a cell; a number no cell shows (a guess) goes back too.
    model = ScriptedChatModel(script=["There are 891 passengers.", tool_call("len(df)"), "891 passengers."])
    analyst = Analyst(model, manager, profile_files=True)
    cid = f"eda-agent-{uuid.uuid4().hex[:8]}"
    answer = await analyst.ask(cid, "How many passengers?", files=[SEABORN / "titanic.csv"])
    assert "These numbers are in the table's profile" in model.calls[1].messages[-1].text
    assert answer.stop_reason == "answered" and [s.code for s in answer.steps] == ["len(df)"]
    assert answer.claims is not None and answer.claims.claims[0].source is not None
    assert answer.claims.claims[0].source.cell == 2, "cited: the cell that computed it, not the profile"
    question = model.calls[0].messages[-1].text
    assert "`titanic.csv` is already loaded as the DataFrame `df`" in question
    assert "df: 891 rows x 15 columns" in question and "- sex: str, no missing, 2 distinct" in question
    session = await manager.session(cid)
    assert {v.name for v in await session.variables()} == {"df"}  # the profile's helpers are gone
    guessing = ScriptedChatModel(script=["About 900 passengers.", "Still 900.", "Really 900."])
    await manager.close(cid)
    answer = await Analyst(guessing, manager, profile_files=True, attempts_on_doubt=1).ask(
        f"{cid}-guess", "How many passengers?", files=[SEABORN / "titanic.csv"])
    assert "not accepted yet" in guessing.calls[1].messages[-1].text
    assert "again no code of yours computed it" in guessing.calls[2].messages[-1].text
    assert answer.stop_reason == "answered" and answer.text == "Really 900."  # sent back twice
    await manager.close(f"{cid}-guess")
