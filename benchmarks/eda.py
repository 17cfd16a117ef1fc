"""The EDA report against ydata-profiling's default HTML report, side by side in one run.

    python benchmarks/eda.py [--rounds N] [--only titanic,diamonds] [--timeout SECONDS]
    python benchmarks/eda.py --sweep          # the full playbook on every shared table
    python benchmarks/eda.py --large          # out of core: 50M rows (~3 GB), and 5M rows vs pandas
    python benchmarks/eda.py --baseline DIR [--engine duckdb]   # this checkout vs an older one
    python benchmarks/eda.py --baseline DIR --cells   # the same, per playbook cell, in one kernel

Each tool runs as a whole process, the way a user runs it (``kernel-analyst eda FILE -o
... --html ...`` against a Python process that reads the CSV with pandas and writes
``ProfileReport(df).to_file(...)``), on the same files, interleaved (the order alternates
each round) so machine load falls on both alike. Peak memory is the largest sum of the
resident memory of the process tree (sampled every 50 ms: our CLI plus its kernel; the
ydata process plus any workers).

ydata-profiling refuses pandas 3, so it runs from its own virtualenv
(``benchmarks/.venv-ydata``, pandas < 3), made on first use. The files: titanic,
diamonds and taxis from ``../shared``, and a generated 1M-row table (written once to
``benchmarks/.cache``). Never a timing assert in tests: the figures go to
docs/benchmarks.md.

``--baseline DIR`` puts an older version of kernel-analyst in ydata-profiling's place: DIR
holds its ``kernel_analyst`` package (e.g. ``git archive REV kernel_analyst | tar -x -C
DIR``); both run as ``python -m kernel_analyst.cli eda`` with ``PYTHONPATH`` set to their
own tree, on the same files, interleaved. ``--engine`` is passed to both (``duckdb``: the
out-of-core path).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import psutil

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SHARED = ROOT.parent / "shared" / "datasets"
YDATA_VENV = HERE / ".venv-ydata"
CACHE = HERE / ".cache"
OURS = [str(Path(sys.executable).with_name("kernel-analyst")), "eda"]
YDATA_SCRIPT = """
import sys, warnings
warnings.filterwarnings("ignore")
import pandas as pd
from ydata_profiling import ProfileReport
df = pd.read_csv(sys.argv[1], low_memory=False)
ProfileReport(df, title=sys.argv[1], progress_bar=False).to_file(sys.argv[2])
"""


@dataclass
class Run:
    """One whole-process run."""

    tool: str
    table: str
    seconds: float
    peak_mib: float
    ok: bool


def million_rows() -> Path:
    """A generated 1M-row table: numbers (skewed, zeros, Poisson), categories with gaps, dates, a flag."""
    path = CACHE / "generated-1m.csv"
    if path.exists():
        return path
    CACHE.mkdir(exist_ok=True)
    rng = np.random.default_rng(0)
    n = 1_000_000
    pd.DataFrame({
        "id": np.arange(n),
        "when": pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 3 * 365 * 86400, n), unit="s"),
        "amount": rng.lognormal(3, 1, n).round(2),
        "quantity": rng.poisson(3, n),
        "score": rng.normal(50, 10, n).round(3),
        "discount": np.where(rng.random(n) < 0.9, 0.0, rng.random(n)).round(3),
        "category": rng.choice(list("ABCDEFGH"), n),
        "region": rng.choice(["north", "south", "east", "west", None], n),
        "flag": rng.random(n) < 0.3,
    }).to_csv(path, index=False)
    return path


def tables() -> dict[str, Path]:
    seaborn = SHARED / "csv" / "seaborn"
    return {"titanic": seaborn / "titanic.csv", "diamonds": seaborn / "diamonds.csv",
            "taxis": seaborn / "taxis.csv", "generated-1m": million_rows()}


def ensure_ydata() -> Path:
    python = YDATA_VENV / "bin" / "python"
    if not python.exists():
        print("making benchmarks/.venv-ydata (pandas < 3, ydata-profiling) ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(YDATA_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "pandas<3", "ydata-profiling>=4.10",
                        "setuptools<81"], check=True)
    return python


def measure(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> tuple[float, float, bool]:
    """Wall seconds, peak MiB of the process tree, and whether it exited 0 in time."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    root = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _tree_rss(root))
        if time.perf_counter() - start > timeout:
            proc.kill()
            proc.wait()
            return timeout, peak / 2**20, False
        time.sleep(0.05)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        print((proc.stderr.read() if proc.stderr else b"").decode()[-2000:], file=sys.stderr)
    return seconds, peak / 2**20, proc.returncode == 0


def _tree_rss(root: psutil.Process) -> int:
    total = 0
    try:
        for p in [root, *root.children(recursive=True)]:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
    except psutil.Error:
        pass
    return total


def _eda_argv(ours: list[str], path: Path, out: Path, name: str, engine: str | None) -> list[str]:
    argv = [*ours, str(path), "-o", str(out / f"{name}.ipynb"), "--html", str(out / f"{name}.html"),
            "--isolation", "process"]
    return [*argv, "--engine", engine] if engine else argv


def _commands(path: Path, out: Path, name: str, baseline: Path | None,
              engine: str | None) -> dict[str, tuple[list[str], dict[str, str] | None]]:
    """What runs on one table: our CLI, and ydata-profiling or the baseline's CLI."""
    if baseline is None:
        ydata = [str(ensure_ydata()), "-c", YDATA_SCRIPT, str(path), str(out / f"{name}-ydata.html")]
        return {"kernel-analyst": (_eda_argv(OURS, path, out, name, engine), None),
                "ydata-profiling": (ydata, None)}
    cli = [sys.executable, "-m", "kernel_analyst.cli", "eda"]
    return {"kernel-analyst": (_eda_argv(cli, path, out, name, engine),
                               {**os.environ, "PYTHONPATH": str(ROOT)}),
            "baseline": (_eda_argv(cli, path, out, f"{name}-baseline", engine),
                         {**os.environ, "PYTHONPATH": str(baseline.resolve())})}


def compare(rounds: int, only: list[str] | None, timeout: float, *, baseline: Path | None = None,
            engine: str | None = None) -> list[Run]:
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="eda-bench-") as tmp:
        out = Path(tmp)
        for round_index in range(rounds):
            for name, path in tables().items():
                if only and name not in only:
                    continue
                commands = _commands(path, out, name, baseline, engine)
                order = list(commands) if round_index % 2 == 0 else list(commands)[::-1]
                for tool in order:
                    argv, env = commands[tool]
                    seconds, peak, ok = measure(argv, timeout, env)
                    runs.append(Run(tool, name, seconds, peak, ok))
                    print(f"round {round_index + 1} {name:<13} {tool:<16} {seconds:7.1f} s "
                          f"{peak:7.0f} MiB {'ok' if ok else 'FAILED/TIMEOUT'}", file=sys.stderr, flush=True)
    return runs


def report(runs: list[Run], other: str = "ydata-profiling") -> str:
    lines = [f"| table | kernel-analyst | {other} | time ratio | peak memory (ours / {other}) |",
             "|---|---|---|---|---|"]
    totals = {"kernel-analyst": 0.0, other: 0.0}
    for name in dict.fromkeys(r.table for r in runs):
        ours = [r for r in runs if r.table == name and r.tool == "kernel-analyst"]
        theirs = [r for r in runs if r.table == name and r.tool == other]
        a, b = statistics.median(r.seconds for r in ours), statistics.median(r.seconds for r in theirs)
        totals["kernel-analyst"] += a
        totals[other] += b
        failed = "" if all(r.ok for r in theirs) else " (did not finish)"
        lines.append(f"| {name} | {a:.1f} s | {b:.1f} s{failed} | {a / b:.2f}x | "
                     f"{max(r.peak_mib for r in ours):,.0f} / {max(r.peak_mib for r in theirs):,.0f} MiB |")
    ratio = totals["kernel-analyst"] / totals[other]
    lines.append(f"| **total** | {totals['kernel-analyst']:.1f} s | {totals[other]:.1f} s | "
                 f"**{ratio:.2f}x** | |")
    return "\n".join(lines)


async def sweep() -> int:
    """The full playbook on every shared table, in one kernel; prints what failed."""
    from kernel_analyst.eda import run_playbook
    from kernel_analyst.kernels import Limits, SessionManager

    files = sorted([*(SHARED / "csv").rglob("*.csv"), *(SHARED / "dabench" / "da-dev-tables").glob("*.csv")])
    failed: list[str] = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as root:
        async with SessionManager(root, limits=Limits(isolation="process")) as manager:
            session = await manager.session("sweep")
            for path in files:
                began = time.perf_counter()
                report = await run_playbook(session, path)
                bad = [f"{s.name}: {s.error}" for s in report.steps if not s.ok]
                if report.error or bad:
                    failed.append(f"{path.name}: {report.error or ''} {bad}")
                print(f"{time.perf_counter() - began:6.1f} s {'ok' if not bad else 'ERROR'} {path.name}",
                      file=sys.stderr, flush=True)
    print(f"{len(files)} files, {len(failed)} with an error cell or no report, "
          f"{time.perf_counter() - start:.0f} s in all")
    for line in failed:
        print(f"  {line}")
    return 1 if failed else 0


# -- --cells --baseline: the playbook's cells against an older version's, in one kernel ---------

_PLANNED = """
import json, sys
from pathlib import Path
from kernel_analyst.eda import PlaybookOptions, detect, plan_cells
from kernel_analyst.eda.playbook import _engine
path, opts = Path(sys.argv[1]), PlaybookOptions(engine=sys.argv[2])
plan = detect(path)
choice, names = _engine(path, plan, opts, 4096)
print(json.dumps([[c.step, c.code] for c in plan_cells(plan, opts, engine=choice, names=names)]))
"""


def _planned(tree: Path, path: Path, engine: str) -> list[tuple[str, str]]:
    """The cells the kernel_analyst package in ``tree`` plans for ``path`` (steps and code)."""
    done = subprocess.run([sys.executable, "-c", _PLANNED, str(path), engine], capture_output=True, text=True,
                          check=True, env={**os.environ, "PYTHONPATH": str(tree.resolve())})
    return [(step, code) for step, code in json.loads(done.stdout)]


async def cells_against(baseline: Path, rounds: int, only: list[str] | None, engine: str) -> str:
    """Seconds per step of this checkout's cells and the baseline's, run in turn (the order
    alternating each round) in one kernel on each table; medians over the rounds."""
    from kernel_analyst.kernels import Limits, SessionManager

    seconds: dict[tuple[str, str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="eda-cells-") as root:
        async with SessionManager(root, limits=Limits(isolation="process", timeout_s=600)) as manager:
            for name, path in tables().items():
                if only and name not in only:
                    continue
                versions = {"ours": _planned(ROOT, path, engine),
                            "baseline": _planned(baseline, path, engine)}
                session = await manager.session(f"cells-{name}")
                await session.upload(path)
                for round_index in range(rounds):
                    for version in list(versions)[:: 1 if round_index % 2 == 0 else -1]:
                        for step, code in versions[version]:
                            ex = await session.execute(code)
                            if not ex.ok:
                                raise RuntimeError(f"{version} {name} {step}: {ex.error or ex.status}")
                            seconds.setdefault((name, step, version), []).append(ex.duration_s)
                await manager.close(f"cells-{name}")
    steps = dict.fromkeys(step for _, step, _ in seconds)
    lines = [f"| step ({engine}) | ours | baseline | ratio |", "|---|---|---|---|"]
    totals = {"ours": 0.0, "baseline": 0.0}
    for step in steps:
        a, b = (sum(statistics.median(v) for (_, s, w), v in seconds.items() if s == step and w == version)
                for version in ("ours", "baseline"))
        totals["ours"] += a
        totals["baseline"] += b
        lines.append(f"| {step} | {a:.3f} s | {b:.3f} s | {a / b:.2f}x |")
    lines.append(f"| **all cells** | {totals['ours']:.2f} s | {totals['baseline']:.2f} s | "
                 f"**{totals['ours'] / totals['baseline']:.2f}x** |")
    return "\n".join(lines)


# -- --large: files bigger than a kernel's memory ------------------------------------------------

LARGE_CACHE = Path(os.environ.get("KA_BENCH_CACHE", Path.home() / ".cache" / "kernel-analyst-bench"))
_U = "((hash(i * 16 + {k}) % 1000000007) / 1000000007.0)"
_GENERATED = """
COPY (SELECT i AS id,
  TIMESTAMP '2020-01-01' + to_seconds(CAST(floor({u1} * 94608000) AS BIGINT)) AS "when",
  round(exp(3 + sqrt(-2 * ln({u2} + 1e-12)) * cos(2 * pi() * {u3})), 2) AS amount,
  CAST(floor(-ln(1 - {u4}) * 3) AS BIGINT) AS quantity,
  CASE WHEN {u5} < 0.05 THEN NULL
    ELSE round(50 + 10 * sqrt(-2 * ln({u6} + 1e-12)) * sin(2 * pi() * {u3}), 3) END AS score,
  CASE WHEN {u7} < 0.9 THEN 0.0 ELSE round({u8}, 3) END AS discount,
  chr(65 + CAST(floor({u9} * 8) AS INTEGER)) AS category,
  CASE CAST(floor({u10} * 5) AS INTEGER) WHEN 0 THEN 'north' WHEN 1 THEN 'south' WHEN 2 THEN 'east'
    WHEN 3 THEN 'west' ELSE NULL END AS region,
  'c' || CAST(CAST(floor({u11} * 200000) AS BIGINT) AS VARCHAR) AS customer,
  {u12} < 0.3 AS flag
FROM range({n}) t(i)) TO '{path}' (HEADER, DELIMITER ',')
"""


def generated(rows: int) -> Path:
    """A generated CSV of ``rows`` rows (numbers skewed, zeros, whole numbers, 5% missing; dates;
    categories with 20% missing; a high-cardinality text column; a flag), made once with DuckDB:
    deterministic (values are hashes of the row number, whatever the thread count), ~65 bytes a row."""
    import duckdb

    path = LARGE_CACHE / f"generated-{rows // 1_000_000}m.csv"
    if path.exists():
        return path
    LARGE_CACHE.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    units = {f"u{k}": _U.format(k=k) for k in range(1, 13)}
    duckdb.connect().execute(_GENERATED.format(n=rows, path=partial, **units))
    partial.rename(path)
    return path


@dataclass
class LargeRun:
    """One in-process playbook run on a large file."""

    engine: str
    seconds: float
    peak_mib: float
    steps: dict[str, str]
    tables: dict[str, pd.DataFrame]
    findings: dict[str, object]


async def _profile(path: Path, engine: str, out: Path | None) -> LargeRun:
    """The playbook on ``path`` in a default kernel (4 GiB), peak memory of the kernel's process tree."""
    from kernel_analyst.eda import PlaybookOptions, run_playbook, write_html, write_notebook
    from kernel_analyst.kernels import Limits, SessionManager

    peak = [0]
    stop = asyncio.Event()

    async def sample() -> None:
        me = psutil.Process()
        while not stop.is_set():
            peak[0] = max(peak[0], sum(_tree_rss(p) for p in me.children()))
            await asyncio.sleep(0.2)

    size = path.stat().st_size // 2**20 + 1
    limits = Limits(isolation="process", timeout_s=3600, max_upload_mb=size, max_disk_mb=3 * size,
                    max_file_size_mb=2 * size)
    with tempfile.TemporaryDirectory(prefix="eda-large-") as root:
        async with SessionManager(root, limits=limits) as manager:
            session = await manager.session(f"large-{engine}")
            watcher = asyncio.create_task(sample())
            began = time.perf_counter()
            report = await run_playbook(session, path, options=PlaybookOptions(engine=engine),
                                        on_progress=_progress)
            seconds = time.perf_counter() - began
            stop.set()
            await watcher
            tables = {}
            for name in ("overview", "numeric_summary", "outlier_table"):
                try:
                    tables[name] = pd.DataFrame(await session.fetch(name, max_bytes=50_000_000))
                except Exception as exc:  # a step that failed leaves no table: reported as missing
                    print(f"  {engine}: no {name} ({exc})", file=sys.stderr)
            if out is not None:
                notebook = await write_notebook(session, out / f"{path.stem}-{engine}.ipynb")
                write_html(notebook, out / f"{path.stem}-{engine}.html")
    return LargeRun(report.engine, seconds, peak[0] / 2**20, {s.name: s.status for s in report.steps}, tables,
                    report.findings)


def _progress(progress: object) -> None:
    result = getattr(progress, "result", None)
    if result is not None:
        print(f"  {result.title:<20} {result.status:<6} {result.duration_s:7.1f} s", file=sys.stderr,
              flush=True)


def _differences(ours: LargeRun, theirs: LargeRun) -> list[tuple[str, str, float, str]]:
    """(table, statistic, largest relative difference, label) for every statistic both runs state."""
    labels = {"numeric_summary": "exact", "overview": "exact", "outlier_table": "exact"}
    rows: list[tuple[str, str, float, str]] = []
    for table, label in labels.items():
        a, b = ours.tables.get(table), theirs.tables.get(table)
        if a is None or b is None:
            continue
        for column in [c for c in a.columns if c in b.columns]:
            x = pd.to_numeric(a[column], errors="coerce").to_numpy(dtype=float)
            y = pd.to_numeric(b[column], errors="coerce").to_numpy(dtype=float)
            if len(x) != len(y) or np.isnan(x).all():
                continue
            scale = np.maximum(np.abs(y), 1e-12)
            diff = np.nanmax(np.where(np.isnan(x) & np.isnan(y), 0.0, np.abs(x - y) / scale))
            rows.append((table, str(column), float(diff), label))
    for name in ("duplicates",):
        x, y = ours.findings.get(name), theirs.findings.get(name)
        if isinstance(x, int) and isinstance(y, int):
            rows.append(("findings", name, float(abs(x - y) / max(abs(y), 1)), "exact (64-bit row hashes)"))
    top_a, top_b = ours.findings.get("top_values", {}), theirs.findings.get("top_values", {})
    if isinstance(top_a, dict) and isinstance(top_b, dict):
        shares = [abs(top_a[c][1] - top_b[c][1]) for c in top_a if c in top_b]
        rows.append(("findings", "top value share", float(max(shares, default=0.0)), "exact"))
    return rows


async def large(timeout: float, ydata: bool) -> int:
    """``--large``: 50M rows out of core; 5M rows out of core vs the pandas path (and ydata-profiling)."""
    LARGE_CACHE.mkdir(parents=True, exist_ok=True)
    print(f"disk free: {psutil.disk_usage(str(LARGE_CACHE)).free / 2**30:,.0f} GiB", file=sys.stderr)
    big, medium = generated(50_000_000), generated(5_000_000)
    out = HERE / ".cache" / "large-reports"
    out.mkdir(parents=True, exist_ok=True)
    lines = ["| file | engine | time | peak memory (kernel tree) | sections ok |", "|---|---|---|---|---|"]
    print(f"50M rows: {big} ({big.stat().st_size / 2**30:.2f} GiB)", file=sys.stderr)
    run = await _profile(big, "auto", out)
    ok = sum(v == "ok" for v in run.steps.values())
    lines.append(f"| 50M rows ({big.stat().st_size / 2**30:.2f} GiB) | {run.engine} (auto) | "
                 f"{run.seconds:.0f} s | {run.peak_mib:,.0f} MiB | {ok} of {len(run.steps)} |")
    print(f"5M rows: {medium}", file=sys.stderr)
    duck = await _profile(medium, "duckdb", out)
    pandas_run = await _profile(medium, "pandas", None)
    for r in (duck, pandas_run):
        ok = sum(v == "ok" for v in r.steps.values())
        lines.append(f"| 5M rows | {r.engine} | {r.seconds:.0f} s | {r.peak_mib:,.0f} MiB | "
                     f"{ok} of {len(r.steps)} |")
    if ydata:
        seconds, peak, finished = measure([str(ensure_ydata()), "-c", YDATA_SCRIPT, str(medium),
                                           str(out / "ydata-5m.html")], timeout)
        state = "" if finished else f" (did not finish in {timeout:.0f} s)"
        lines.append(f"| 5M rows | ydata-profiling | {seconds:.0f} s{state} | {peak:,.0f} MiB | |")
    lines += ["", f"5M rows, time ratio out of core / pandas: {duck.seconds / pandas_run.seconds:.2f}x", "",
              "| table | statistic | largest relative difference (duckdb vs pandas) | stated as |",
              "|---|---|---|---|"]
    worst = 0.0
    for table, stat, diff, label in _differences(duck, pandas_run):
        lines.append(f"| {table} | {stat} | {diff:.2e} | {label} |")
        worst = max(worst, diff) if label.startswith("exact") else worst
    lines.append(f"\nLargest difference in a statistic stated as exact: {worst:.2e} "
                 f"({'within' if worst <= 1e-9 else 'OVER'} floating-point rounding, 1e-9)")
    print("\n".join(lines))
    return 0 if worst <= 1e-9 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--only", help="comma-separated table names")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    parser.add_argument("--sweep", action="store_true", help="the full playbook on every shared table")
    parser.add_argument("--large", action="store_true", help="out of core: 50M rows, and 5M rows vs pandas")
    parser.add_argument("--no-ydata", action="store_true", help="with --large: skip ydata-profiling")
    parser.add_argument("--baseline", type=Path, metavar="DIR",
                        help="compare with the kernel_analyst package in DIR instead of ydata-profiling")
    parser.add_argument("--engine", choices=["auto", "pandas", "duckdb"], help="passed to kernel-analyst eda")
    parser.add_argument("--cells", action="store_true",
                        help="with --baseline: seconds per playbook cell, both versions in one kernel")
    args = parser.parse_args()
    if args.large:
        return asyncio.run(large(args.timeout, not args.no_ydata))
    if args.sweep:
        return asyncio.run(sweep())
    only = args.only.split(",") if args.only else None
    if args.cells:
        if args.baseline is None:
            parser.error("--cells compares with --baseline DIR")
        print(asyncio.run(cells_against(args.baseline, args.rounds, only, args.engine or "pandas")))
        return 0
    runs = compare(args.rounds, only, args.timeout, baseline=args.baseline, engine=args.engine)
    print(report(runs, "baseline" if args.baseline else "ydata-profiling"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
