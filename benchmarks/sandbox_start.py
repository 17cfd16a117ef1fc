"""Session start time under ``sandbox`` against ``none``, measured side by side.

    python benchmarks/sandbox_start.py [--rounds N] [--levels none,process,sandbox]

One round starts a fresh session under each level in turn (cold start, no warm pool:
``manager.session(new_id)`` plus a first trivial execute, i.e. the time until the first
result), so machine load affects every level alike. Prints the median and p90 per level
and each level's ratio to ``none`` (goal for ``sandbox``: at most 1.1x).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from kernel_analyst.kernels import Limits, SessionManager


async def start_once(manager: SessionManager, conversation: str) -> float:
    """Seconds from asking for a new session to its first result; closes it again."""
    t0 = time.perf_counter()
    session = await manager.session(conversation)
    ex = await session.execute("1 + 1")
    elapsed = time.perf_counter() - t0
    if ex.text.strip() != "2":
        raise RuntimeError(f"unexpected first result under {session.isolation}: {ex.text!r}")
    await manager.close(conversation)
    return elapsed


async def measure(levels: list[str], rounds: int) -> dict[str, list[float]]:
    """Start times per level, interleaved round by round (one warm-up round dropped)."""
    times: dict[str, list[float]] = {level: [] for level in levels}
    with tempfile.TemporaryDirectory(prefix="ka-bench-") as root:
        managers = {level: SessionManager(Path(root) / level, limits=Limits(isolation=level))  # type: ignore[arg-type]
                    for level in levels}
        for m in managers.values():
            await m.start()
        try:
            for r in range(rounds + 1):
                for level in (levels if r % 2 else list(reversed(levels))):
                    elapsed = await start_once(managers[level], f"start-{r}")
                    if r:
                        times[level].append(elapsed)
        finally:
            for m in managers.values():
                await m.aclose()
    return times


def report(times: dict[str, list[float]]) -> None:
    """Print median, p90 and the ratio of medians to ``none``."""
    base = statistics.median(times["none"]) if "none" in times else None
    print(f"{'level':<9} {'median':>9} {'p90':>9} {'ratio':>7}")
    for level, values in times.items():
        med = statistics.median(values)
        p90 = sorted(values)[max(0, int(len(values) * 0.9) - 1)]
        ratio = f"{med / base:.3f}" if base else "-"
        print(f"{level:<9} {med * 1000:8.1f}ms {p90 * 1000:8.1f}ms {ratio:>7}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--levels", default="none,sandbox")
    args = parser.parse_args()
    levels = [s.strip() for s in args.levels.split(",") if s.strip()]
    report(asyncio.run(measure(levels, args.rounds)))


if __name__ == "__main__":
    main()
