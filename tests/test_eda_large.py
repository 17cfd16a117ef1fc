"""Files bigger than memory, CI-sized: the out-of-core path (forced with a low threshold) states
the same exact numbers as the pandas path on the same file, labels what it samples, re-runs
under ``verify``; a malformed file fails the loading cell with one clear line and the CLI
writes nothing; the one upload limit (``--max-upload-mb``) works on eda, ask, chat, serve
and mcp; the model is told to query a file too large for pandas."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from kernel_analyst.agent.briefing import describe_files
from kernel_analyst.eda import EdaReport, PlaybookOptions, run_playbook
from kernel_analyst.eda._outofcore import choose_engine
from kernel_analyst.eda.loader import detect
from kernel_analyst.frontend.settings import KernelSettings
from kernel_analyst.kernels import KernelSession, Limits, SessionManager
from kernel_analyst.kernels.files import FileInfo

from .conftest import SHARED
from .test_eda_report import generated

FORCED = PlaybookOptions(out_of_core_bytes=1)  # every file is "large": the out-of-core path
EXACT = {"rel": 1e-9, "abs": 1e-9}
DABENCH = SHARED / "datasets" / "dabench" / "da-dev-tables"


@pytest.fixture(scope="module")
async def session(manager: SessionManager) -> AsyncIterator[KernelSession]:
    cid = f"eda-large-{uuid.uuid4().hex[:8]}"
    yield await manager.session(cid)
    await manager.close(cid)


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The crafted table of the report tests, longer, with duplicate rows and a date column."""
    path = generated(tmp_path_factory.mktemp("large") / "orders.csv", rows=3000)
    frame = pd.read_csv(path)
    pd.concat([frame, frame.iloc[[5, 17, 17]]]).to_csv(path, index=False)
    return path


async def _tables(session: KernelSession) -> dict[str, pd.DataFrame]:
    found = {}
    for name in ("overview", "numeric_summary", "outlier_table"):
        found[name] = pd.DataFrame(await session.fetch(name))
    return found


Both = tuple[EdaReport, dict[str, Any], EdaReport, dict[str, Any]]


async def _both(session: KernelSession, path: Path) -> Both:
    duck = await run_playbook(session, path, options=FORCED)
    duck_tables = await _tables(session)
    plain = await run_playbook(session, path, options=PlaybookOptions(engine="pandas"))
    return duck, duck_tables, plain, await _tables(session)


async def test_out_of_core_states_pandas_exact_numbers_and_labels_the_sample(session: KernelSession,
                                                                              table: Path) -> None:
    duck, ours, plain, theirs = await _both(session, table)
    assert duck.engine == "duckdb" and plain.engine == "pandas"
    assert duck.ok, [s for s in duck.steps if not s.ok]
    assert [s.name for s in duck.steps] == [s.name for s in plain.steps]  # the same sections
    # Counts, missing values and distinct values: equal, column by column.
    for column in ("present", "missing", "distinct"):
        assert ours["overview"][column].to_dict() == theirs["overview"][column].to_dict(), column
    # The numeric summary: every statistic within floating-point rounding.
    a, b = ours["numeric_summary"], theirs["numeric_summary"]
    assert sorted(a.index) == sorted(b.index)
    for stat in b.columns:
        for col in b.index:
            x, y = float(a.loc[col, stat]), float(b.loc[col, stat])
            assert (np.isnan(x) and np.isnan(y)) or x == pytest.approx(y, **EXACT), (col, stat, x, y)
    assert ours["outlier_table"]["outliers"].to_dict() == theirs["outlier_table"]["outliers"].to_dict()
    assert duck.findings["duplicates"] == plain.findings["duplicates"] == 3
    assert duck.findings["top_values"] == plain.findings["top_values"]
    assert sorted(map(tuple, duck.findings["alerts"])) == sorted(map(tuple, plain.findings["alerts"]))
    # What is sampled, and what is exact, is said in the summary and in the cells.
    summary = duck.summary_markdown
    assert "From a fixed sample of" in summary and "exact over all rows" in summary
    assert "profiled out of core" in summary
    text = session.notebook_path.read_text(encoding="utf-8")
    assert "Out of core" in text and "the other measures over the sample of" in text


async def test_a_malformed_large_csv_fails_loading_in_one_line(session: KernelSession,
                                                               tmp_path: Path) -> None:
    path = _malformed(tmp_path / "broken.csv")
    report = await run_playbook(session, path, options=FORCED)
    load = next(s for s in report.steps if s.name == "load")
    assert not load.ok and report.error is not None
    assert "broken.csv: cannot be read as a table" in (load.error or "")
    assert "Line: 50001" in (load.error or "") and "\n" not in (load.error or "")


async def test_a_year_month_column_out_of_core_is_dated_as_pandas_dates_it(session: KernelSession,
                                                                          tmp_path: Path) -> None:
    """DABench's Zillow table: ``Month`` holds ``1996-04``, ISO 8601 to pandas; DuckDB's cast
    refused it, and its retry named the column twice (the load failed)."""
    path = tmp_path / "zillow.csv"
    path.write_bytes((DABENCH / "Zip_MedianSoldPricePerSqft_AllHomes.csv").read_bytes())
    options = PlaybookOptions(out_of_core_bytes=1, steps=("overview",))
    report = await run_playbook(session, path, options=options)
    assert report.engine == "duckdb" and report.ok, report.error
    months = await session.execute("print(con.execute('SELECT min(\"Month\"), count(\"Month\"), "
                                   "count(*) FROM data').fetchone())")
    assert months.text.strip() == "(datetime.datetime(1996, 4, 1, 0, 0), 5124, 5124)", months.text


def _malformed(path: Path) -> Path:
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"a": rng.normal(size=60_000).round(3), "b": rng.choice(list("xyz"), 60_000),
                          "c": rng.integers(0, 100, 60_000)})
    lines = frame.to_csv(index=False).splitlines()
    lines[50_000] = '1.5,"x broken,7'  # an unterminated quote past the host's sample
    path.write_text("\n".join(lines) + "\n")
    return path


def _cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernel_analyst.cli", *argv], text=True, capture_output=True,
                          cwd=cwd, timeout=120, check=False)


def test_cli_writes_nothing_for_a_malformed_large_csv(tmp_path: Path) -> None:
    path = _malformed(tmp_path / "broken.csv")
    done = _cli("eda", str(path), "--engine", "duckdb", "--isolation", "none", "--html", "out.html",
                cwd=tmp_path)
    assert done.returncode == 1
    error = done.stderr.strip().splitlines()[-1]
    assert "cannot be read as a table" in error and "Line: 50001" in error
    assert not (tmp_path / "broken-eda.ipynb").exists() and not (tmp_path / "out.html").exists()


@pytest.mark.parametrize("command", [["eda"], ["ask", "--model", "openai:none"], ["chat"]])
def test_the_upload_limit_flag_refuses_a_larger_file_before_a_kernel_starts(tmp_path: Path,
                                                                           command: list[str]) -> None:
    data = tmp_path / "wide.csv"
    data.write_text("a,b\n" + "1,2\n" * 400_000)  # 1.5 MiB
    extra = ["what is the mean of a?"] if command[0] == "ask" else []
    done = _cli(command[0], str(data), *extra, *command[1:], "--max-upload-mb", "1", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "the upload limit is 1 MiB: raise it with --max-upload-mb 2" in done.stderr
    assert not list(tmp_path.glob("*.ipynb"))


@pytest.mark.parametrize("command", ["serve", "mcp"])
def test_the_service_takes_the_same_upload_flag(command: str) -> None:
    from kernel_analyst.cli import build_parser
    from kernel_analyst.server.cli import config_from_args

    args = build_parser().parse_args([command, "--max-upload-mb", "3000", "--isolation", "process"])
    config = config_from_args(args)
    assert config.max_upload_bytes == 3000 * 2**20 and config.limits.max_upload_mb == 3000
    assert config.limits.max_disk_mb == 6000 and (config.limits.max_file_size_mb or 0) >= 3000
    default = config_from_args(build_parser().parse_args([command]))
    assert default.max_upload_bytes == 2048 * 2**20 == Limits().max_upload_mb * 2**20


def test_the_upload_limit_raises_disk_and_file_limits_with_it() -> None:
    limits = KernelSettings(max_upload_mb=5000).limits()
    assert (limits.max_upload_mb, limits.max_disk_mb, limits.max_file_size_mb) == (5000, 10000, 5000)
    small = KernelSettings(max_upload_mb=10).limits()
    assert (small.max_upload_mb, small.max_disk_mb) == (10, Limits().max_disk_mb)
    with pytest.raises(ValueError, match="at least 1 MiB"):
        KernelSettings(max_upload_mb=0)


def test_the_engine_follows_the_kernels_memory(table: Path) -> None:
    plan = detect(table)
    assert choose_engine(plan, path=table, memory_mb=4096).engine == "pandas"
    large = choose_engine(plan, path=table, memory_mb=4096, threshold_bytes=1000)
    assert large.engine == "duckdb" and large.duckdb_memory_mb == 2048 and "Out of core" in large.reason
    assert choose_engine(plan, path=table, memory_mb=4096, engine="duckdb").engine == "duckdb"


def test_the_model_is_told_to_query_a_file_too_large_for_pandas() -> None:
    files = [FileInfo("orders.csv", 900 * 2**20), FileInfo("small.csv", 2000)]
    note = describe_files(files, memory_mb=4096)
    assert "orders.csv is too large to load with pandas" in note and "duckdb" in note
    assert "small.csv is too large" not in note
    assert "too large" not in describe_files(files)  # no limit known: no hint
