"""The EDA report against ydata-profiling's default HTML report, side by side in one run.

    python benchmarks/eda.py [--rounds N] [--only titanic,diamonds] [--timeout SECONDS]
    python benchmarks/eda.py --sweep          # the full playbook on every shared table

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
"""

from __future__ import annotations

import argparse
import asyncio
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


def measure(argv: list[str], timeout: float) -> tuple[float, float, bool]:
    """Wall seconds, peak MiB of the process tree, and whether it exited 0 in time."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
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


def compare(rounds: int, only: list[str] | None, timeout: float) -> list[Run]:
    ydata = ensure_ydata()
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="eda-bench-") as tmp:
        out = Path(tmp)
        for round_index in range(rounds):
            for name, path in tables().items():
                if only and name not in only:
                    continue
                commands = {
                    "kernel-analyst": [*OURS, str(path), "-o", str(out / f"{name}.ipynb"),
                                       "--html", str(out / f"{name}.html"), "--isolation", "process"],
                    "ydata-profiling": [str(ydata), "-c", YDATA_SCRIPT, str(path),
                                        str(out / f"{name}-ydata.html")],
                }
                order = list(commands) if round_index % 2 == 0 else list(commands)[::-1]
                for tool in order:
                    seconds, peak, ok = measure(commands[tool], timeout)
                    runs.append(Run(tool, name, seconds, peak, ok))
                    print(f"round {round_index + 1} {name:<13} {tool:<16} {seconds:7.1f} s "
                          f"{peak:7.0f} MiB {'ok' if ok else 'FAILED/TIMEOUT'}", file=sys.stderr, flush=True)
    return runs


def report(runs: list[Run]) -> str:
    lines = ["| table | kernel-analyst | ydata-profiling | time ratio | peak memory (ours / ydata) |",
             "|---|---|---|---|---|"]
    totals = {"kernel-analyst": 0.0, "ydata-profiling": 0.0}
    for name in dict.fromkeys(r.table for r in runs):
        ours = [r for r in runs if r.table == name and r.tool == "kernel-analyst"]
        theirs = [r for r in runs if r.table == name and r.tool == "ydata-profiling"]
        a, b = statistics.median(r.seconds for r in ours), statistics.median(r.seconds for r in theirs)
        totals["kernel-analyst"] += a
        totals["ydata-profiling"] += b
        failed = "" if all(r.ok for r in theirs) else " (did not finish)"
        lines.append(f"| {name} | {a:.1f} s | {b:.1f} s{failed} | {a / b:.2f}x | "
                     f"{max(r.peak_mib for r in ours):,.0f} / {max(r.peak_mib for r in theirs):,.0f} MiB |")
    ratio = totals["kernel-analyst"] / totals["ydata-profiling"]
    lines.append(f"| **total** | {totals['kernel-analyst']:.1f} s | {totals['ydata-profiling']:.1f} s | "
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--only", help="comma-separated table names")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    parser.add_argument("--sweep", action="store_true", help="the full playbook on every shared table")
    args = parser.parse_args()
    if args.sweep:
        return asyncio.run(sweep())
    runs = compare(args.rounds, args.only.split(",") if args.only else None, args.timeout)
    print(report(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
