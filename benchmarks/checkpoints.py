"""Checkpoints and undo on a large namespace (issue 18).

    python benchmarks/checkpoints.py                       # 1 GiB array, 3 tries per dirty fraction
    python benchmarks/checkpoints.py --gib 0.25 --repeats 2 --isolation process

One conversation forked from the template holds a numpy array of ``--gib`` GiB (every page
written); another holds almost nothing (the baseline). Each try, in each conversation:

1. ``await session.checkpoint()`` (timed from the caller, and the ``take_s`` it reports);
2. a cell dirties a fraction of the array in place (0%, 1%, 10%: ``a[:k] += 1``);
3. the memory the checkpoint holds now (``session.checkpoints()[-1].memory_bytes``: the
   copy's unique set size, i.e. the pages the kernel changed since, which the copy keeps);
4. ``await session.undo()`` (timed), then a cell checks the array is as before the dirtying
   cell (its first element is 1 again) and times that first cell after the undo.

Goals: ``checkpoint()`` at most 10 ms and ``undo()`` at most 50 ms on the 1 GiB namespace;
the memory a checkpoint holds grows with what the next cell dirties, not with the namespace.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kernel_analyst.kernels import KernelSession, Limits, SessionManager

MIB = 1024 * 1024
FRACTIONS = (0.0, 0.01, 0.10)


async def tries(manager: SessionManager, name: str, elements: int, repeats: int) -> list[dict[str, Any]]:
    """``repeats`` tries per dirty fraction, each in a new conversation holding the array:
    checkpoint, dirty, measure, undo, check; then a second checkpoint and undo in the same
    conversation (timed apart: its kernel now comes from the first checkpoint)."""
    rows = []
    for j in range(repeats):
        for fraction in FRACTIONS:
            s, _ = await conversation(manager, f"{name}-{j}-{fraction}", elements)
            k = int(elements * fraction)
            row: dict[str, Any] = {"fraction": fraction, "dirtied_mib": k * 8 / MIB,
                                   "kernel_uss_mib": kernel_uss_mib(s)}
            t = time.perf_counter()
            info = await s.checkpoint()
            row["checkpoint_ms"] = (time.perf_counter() - t) * 1000
            row["take_ms"] = info.take_s * 1000
            await _run(s, f"a[:{k}] += 1\nfloat(a[0])", "")
            row["held_mib"] = s.checkpoints()[-1].memory_bytes / MIB
            row["undo_ms"], row["next_cell_ms"] = await _undo(s)
            t = time.perf_counter()
            await s.checkpoint()
            row["checkpoint2_ms"] = (time.perf_counter() - t) * 1000
            await _run(s, "a[:1] += 1", "")
            row["undo2_ms"], _ = await _undo(s)
            rows.append(row)
            await manager.close(s.id, now=True)
    return rows


async def _run(s: KernelSession, code: str, expect: str) -> None:
    ex = await s.execute(code)
    if ex.status != "ok" or not ex.text.startswith(expect):
        raise RuntimeError(f"{code!r}: {ex.status} {ex.text[-300:]!r} {ex.events}")


async def _undo(s: KernelSession) -> tuple[float, float]:
    """Undo (timed), then check the array is back (its first element is 1; timed)."""
    t = time.perf_counter()
    await s.undo()
    undo_ms = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    await _run(s, "float(a[0]), a.nbytes", "(1.0,")
    return undo_ms, (time.perf_counter() - t) * 1000


async def conversation(manager: SessionManager, sid: str, elements: int) -> tuple[KernelSession, float]:
    """A conversation holding an array of ``elements`` float64 ones (every page written)."""
    s = await manager.session(sid)
    t = time.perf_counter()
    await _run(s, f"import numpy as np\na = np.ones({elements}, dtype=np.float64)\na.nbytes", "")
    kernel = s.describe()["kernel"]
    if kernel["start"].get("path") != "template":
        raise RuntimeError(f"the kernel started {kernel['start']}: checkpoints need the template path")
    return s, time.perf_counter() - t


def kernel_uss_mib(s: KernelSession) -> float:
    total = 0
    with open(f"/proc/{int(s.describe()['kernel']['pid'])}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Private_"):
                total += int(line.split()[1]) * 1024
    return total / MIB


def summarise(name: str, namespace_mib: float, rows: list[dict[str, Any]]) -> dict[str, Any]:
    med = statistics.median
    out: dict[str, Any] = {"name": name, "namespace_mib": namespace_mib, "tries": len(rows),
                           "checkpoint_ms_median": med(r["checkpoint_ms"] for r in rows),
                           "checkpoint_ms_max": max(r["checkpoint_ms"] for r in rows),
                           "take_ms_median": med(r["take_ms"] for r in rows),
                           "undo_ms_median": med(r["undo_ms"] for r in rows),
                           "undo_ms_max": max(r["undo_ms"] for r in rows),
                           "checkpoint2_ms_median": med(r["checkpoint2_ms"] for r in rows),
                           "undo2_ms_median": med(r["undo2_ms"] for r in rows),
                           "kernel_uss_mib_median": med(r["kernel_uss_mib"] for r in rows),
                           "next_cell_ms_median": med(r["next_cell_ms"] for r in rows),
                           "held_mib_by_fraction": {}, "rows": rows}
    uss = out["kernel_uss_mib_median"]
    print(f"\n{name}: array {namespace_mib:.1f} MiB, kernel USS {uss:.0f} MiB, {len(rows)} tries "
          "(one new conversation each)")
    print(f"  checkpoint(): median {out['checkpoint_ms_median']:.1f} ms, "
          f"max {out['checkpoint_ms_max']:.1f} ms "
          f"(take_s it reports: median {out['take_ms_median']:.1f} ms)   goal <= 10 ms")
    print(f"  undo():       median {out['undo_ms_median']:.1f} ms, "
          f"max {out['undo_ms_max']:.1f} ms   goal <= 50 ms; "
          f"first cell after it: median {out['next_cell_ms_median']:.1f} ms")
    print(f"  again in the same conversation (its kernel forked from the first checkpoint): checkpoint() "
          f"median {out['checkpoint2_ms_median']:.1f} ms, undo() median {out['undo2_ms_median']:.1f} ms")
    for fraction in FRACTIONS:
        picked = [r for r in rows if r["fraction"] == fraction]
        held = med(r["held_mib"] for r in picked)
        out["held_mib_by_fraction"][str(fraction)] = held
        print(f"  next cell dirties {fraction:4.0%} ({picked[0]['dirtied_mib']:7.1f} MiB): "
              "the checkpoint holds "
              f"{held:7.1f} MiB ({held / uss:.1%} of the kernel's USS)")
    return out


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=1.0, help="size of the large array")
    parser.add_argument("--repeats", type=int, default=3, help="tries per dirty fraction")
    parser.add_argument("--isolation", default="process", choices=["none", "process", "sandbox"])
    parser.add_argument("--memory-mb", type=int, default=8192, help="Limits.memory_mb of each conversation")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    elements = int(args.gib * 1024**3) // 8
    limits = Limits(isolation=args.isolation, memory_mb=args.memory_mb)
    print(f"checkpoints (isolation={args.isolation}, memory_mb={args.memory_mb}, python "
          f"{sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f})")
    results = []
    with tempfile.TemporaryDirectory(prefix="ka-checkpoints-") as tmp:
        async with SessionManager(Path(tmp), limits=limits) as manager:
            results.append(summarise("small namespace (a 1000-element array)", 0.0,
                                     await tries(manager, "small", 1000, args.repeats)))
            results.append(summarise(f"{args.gib:g} GiB array", elements * 8 / MIB,
                                     await tries(manager, "large", elements, args.repeats)))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
