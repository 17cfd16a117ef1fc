"""Recovery benchmarks (not a test): how fast a lost namespace comes back.

    python benchmarks/recovery.py                 # both parts, isolation none
    python benchmarks/recovery.py --part replay --rounds 3
    python benchmarks/recovery.py --part snapshot --gb 1 --isolation sandbox

**replay**: a 30-cell EDA conversation on a real dataset (loading, cleaning, group-bys,
plots), then ``os._exit`` in a cell; the next cell triggers the replay. Reported: the
replay's wall time over the sum of the recorded durations of the cells it re-ran (goal
at most 1.2x), and the same cells re-run by hand as plain executions in a fresh session
(what rebuilding by hand would cost), side by side.

**snapshot**: a namespace of ``--gb`` GB of DataFrames and arrays, saved by an orderly
close; a new manager on the same directory resumes the conversation. Reported: the time
to load it (the ``resumed`` report), goal within 2 s for 1 GB, and the time to save it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kernel_analyst.kernels import Limits, SessionManager

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "datasets" / "csv" / "seaborn" / "diamonds.csv"
PLOT = "import matplotlib.pyplot as plt\n{body}\nplt.show()"

CONVERSATION = [
    "import pandas as pd\nimport numpy as np",
    "df = pd.read_csv('diamonds.csv')\ndf.shape",
    "df.head()",
    "df.dtypes",
    "df.isna().sum()",
    "df.describe()",
    "df['cut'] = df['cut'].astype('category')\ndf['color'] = df['color'].astype('category')",
    "df['clarity'] = df['clarity'].astype('category')\ndf.dtypes.value_counts()",
    "df = df[(df.x > 0) & (df.y > 0) & (df.z > 0)].copy()\nlen(df)",
    "df['volume'] = df.x * df.y * df.z\ndf['volume'].describe()",
    "df['price_per_carat'] = df.price / df.carat\ndf['price_per_carat'].median()",
    "by_cut = df.groupby('cut', observed=True).price.agg(['count', 'mean', 'median'])\nby_cut",
    "by_color = df.groupby('color', observed=True).price.mean().sort_values()\nby_color",
    "by_clarity = df.groupby('clarity', observed=True).price_per_carat.median()\nby_clarity",
    "pivot = df.pivot_table(index='cut', columns='color', values='price', aggfunc='mean', observed=True)\n"
    "pivot.round(0)",
    "corr = df.select_dtypes('number').corr()\ncorr.round(2)",
    PLOT.format(body="df.price.plot.hist(bins=50)"),
    PLOT.format(body="df.plot.scatter(x='carat', y='price', s=1, alpha=0.2)"),
    PLOT.format(body="by_cut['mean'].plot.bar()"),
    "q = df.price.quantile([0.25, 0.5, 0.75])\nq",
    "iqr = q[0.75] - q[0.25]\noutliers = df[df.price > q[0.75] + 1.5 * iqr]\nlen(outliers)",
    "big = df[df.carat >= 2]\nbig.groupby('cut', observed=True).price.mean()",
    "df['log_price'] = np.log(df.price)\ndf['log_price'].describe()",
    "slope, intercept = np.polyfit(np.log(df.carat), df.log_price, 1)\nround(slope, 3), round(intercept, 3)",
    "df['predicted'] = np.exp(intercept + slope * np.log(df.carat))\n"
    "(df.price - df.predicted).abs().median()",
    PLOT.format(body="(df.price - df.predicted).plot.hist(bins=60)"),
    "top = df.nlargest(10, 'price')[['carat', 'cut', 'color', 'clarity', 'price']]\ntop",
    "share = df.cut.value_counts(normalize=True).round(3)\nshare",
    "summary = {'rows': len(df), 'median_price': float(df.price.median()),\n"
    "           'slope': round(slope, 3)}\nsummary",
    "print(f\"{summary['rows']:,} diamonds; median price ${summary['median_price']:,.0f}\")",
]


async def replay_round(root: Path, limits: Limits) -> tuple[float, float, float]:
    """(replay wall time, sum of recorded durations, by-hand re-run time) for one round."""
    async with SessionManager(root, limits=limits, recovery="replay") as manager:
        session = await manager.session("eda")
        await session.upload(DATA)
        for code in CONVERSATION:
            ex = await session.execute(code)
            assert ex.status == "ok", (code, ex.text[-500:])
        await session.execute("import os; os._exit(1)")
        ex = await session.execute("summary")
        report = ex.recovery
        assert report is not None and report.complete, report and report.describe()
        recorded = {c.get("id"): c["metadata"]["kernel_analyst"]["duration_s"]
                    for c in session.audit.cells if c.get("cell_type") == "code"}
        total = sum(recorded[r.cell_id] for r in report.replayed)
        again = await manager.session("by-hand")
        await again.upload(DATA)
        t0 = time.perf_counter()
        for code in CONVERSATION:
            await again.execute(code)
        by_hand = time.perf_counter() - t0
        return report.duration_s, total, by_hand


async def snapshot_round(root: Path, limits: Limits, gb: float) -> tuple[float, float, int, list[str]]:
    """(save time, load time, bytes saved, formats) for one round."""
    rows = int(gb * 2**30 / 8 / 16)  # 16 float64 columns, plus an array of the same size
    build = (f"import numpy as np, pandas as pd\nrng = np.random.default_rng(0)\n"
             f"frame = pd.DataFrame(rng.random(({rows // 2}, 16)), columns=[f'c{{i}}' for i in range(16)])\n"
             f"frame['label'] = pd.Categorical(rng.integers(0, 5, {rows // 2}).astype(str))\n"
             f"matrix = rng.random(({rows // 2}, 16))\ntotal = float(frame.c0.sum() + matrix.sum())\ntotal")
    async with SessionManager(root, limits=limits, recovery="replay") as manager:
        session = await manager.session("big")
        expected = (await session.execute(build)).text.strip()
        t0 = time.perf_counter()
    save_s = time.perf_counter() - t0  # the close: snapshot + kernel shutdown
    marker = next(c for c in reversed(session.audit.cells) if c["metadata"].get("kernel_analyst", {})
                  .get("marker") == "snapshot")["metadata"]["kernel_analyst"]
    async with SessionManager(root, limits=limits, recovery="replay") as manager:
        session = await manager.session("big")
        ex = await session.execute("float(frame.c0.sum() + matrix.sum())")
        assert ex.text.strip() == expected, (ex.text, expected)
        report = ex.recovery
        assert report is not None and report.method == "snapshot" and report.complete
        formats = sorted({str(v) for v in marker.get("formats", [])}) or ["see manifest"]
        return save_s, report.duration_s, int(marker.get("bytes", 0)), formats


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("replay", "snapshot", "both"), default="both")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--isolation", default="none", choices=("none", "process", "sandbox"))
    args = parser.parse_args()
    limits = Limits(isolation=args.isolation, timeout_s=600, memory_mb=16384,  # type: ignore[arg-type]
                    max_disk_mb=16384, max_file_size_mb=8192)
    with tempfile.TemporaryDirectory(prefix="ka-recovery-bench-") as tmp:
        if args.part in ("replay", "both"):
            rounds = [await replay_round(Path(tmp) / f"replay-{i}", limits) for i in range(args.rounds)]
            ratios = [replay / recorded for replay, recorded, _ in rounds]
            hand = [replay / by_hand for replay, _, by_hand in rounds]
            median = statistics.median(ratios)
            print(f"replay of a {len(CONVERSATION)}-cell EDA conversation (isolation={args.isolation}):")
            for replay, recorded, by_hand in rounds:
                print(f"  replay {replay:6.2f} s   recorded {recorded:6.2f} s   by hand {by_hand:6.2f} s")
            print(f"  replay / recorded durations: median {median:.2f}x (goal <= 1.2x); "
                  f"replay / re-running by hand: median {statistics.median(hand):.2f}x")
        if args.part in ("snapshot", "both"):
            results = [await snapshot_round(Path(tmp) / f"snap-{i}", limits, args.gb)
                       for i in range(args.rounds)]
            print(f"snapshot of a {args.gb:g} GB namespace (isolation={args.isolation}):")
            for save_s, load_s, size, _ in results:
                print(f"  save {save_s:6.2f} s   load {load_s:6.2f} s   {size / 2**30:5.2f} GiB on disk")
            load = statistics.median(r[1] for r in results)
            print(f"  resume from the snapshot: median {load:.2f} s (goal <= 2 s for 1 GB)")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
