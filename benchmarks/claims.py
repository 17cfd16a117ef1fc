#!/usr/bin/env python
"""What grounding an answer costs the host: a 30-cell conversation of real pandas outputs.

The conversation is built from real outputs (``describe()`` of a 10-column table,
``value_counts(normalize=True)``, ``corr()``, group means, a t-test's result), each cell
as the audit notebook records it; the answer states 12 numbers (some restated, one
derived, two invented). Timed: indexing the cells and grounding the answer, together, as
the agent does once per answer (no kernel round trip: the variables the cells recorded are
in their metadata). The figure to compare with is the model call the answer already cost
(seconds), and the goal of at most 50 ms.

    python benchmarks/claims.py [--rounds 50]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
import pandas as pd

from kernel_analyst.claims import SourceIndex, ground


def conversation(cells: int = 30) -> list[dict[str, Any]]:
    """``cells`` code cells with real outputs, as the audit notebook records them."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.normal(50, 12, size=(2000, 10)), columns=[f"col{i}" for i in range(10)])
    df["group"] = rng.choice(list("abcde"), size=len(df))
    outputs = [
        df.describe().to_string(),
        df["group"].value_counts(normalize=True).to_string(),
        df.drop(columns="group").corr().round(4).to_string(),
        df.groupby("group").mean().to_string(),
        "TtestResult(statistic=2.0712, pvalue=0.03847, df=1998.0)",
    ]
    result = []
    for i in range(cells):
        text = outputs[i % len(outputs)]
        result.append({"cell_type": "code", "id": f"cell{i:04d}", "execution_count": i + 1,
                       "source": f"print(step_{i})", "metadata": {},
                       "outputs": [{"output_type": "stream", "name": "stdout", "text": text + "\n"}]})
    return result


ANSWER = ("The mean of col0 is 50.2 (std 11.9), group a holds 20.3% of the rows, col1 and col2 "
          "correlate at -0.0123, the t-test gives p = 0.038 (t = 2.07), col3's median is 50.1, "
          "its 75th percentile 58.2; group b's mean col4 is 49.8, 1.2 below group c; 2,000 rows "
          "in all, 7 of which were dropped, and 13.5% are outliers.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args(argv)
    cells = conversation()
    times = []
    grounding = None
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        grounding = ground(ANSWER, SourceIndex.from_cells(cells), question="What do the data show?")
        times.append((time.perf_counter() - t0) * 1000)
    assert grounding is not None
    times.sort()
    p95 = times[int(0.95 * (len(times) - 1))]
    print(f"30 cells, {len(grounding.claims)} numbers in the answer: {grounding.summary()}")
    print(f"grounding time: median {statistics.median(times):.1f} ms, p95 {p95:.1f} ms, "
          f"max {times[-1]:.1f} ms over {args.rounds} rounds (goal: at most 50 ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
