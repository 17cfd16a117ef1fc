"""Kernel-session benchmarks, as ratios against raw jupyter_client run side by side.

    python benchmarks/run.py [--quick] [--isolation none|process|sandbox]
    python benchmarks/run.py --only-conversations --conversations 100 --levels none,process,sandbox

Each figure is measured for kernel-analyst and for a plain AsyncKernelManager /
AsyncKernelClient loop with default kernel settings in the same process and run,
interleaved, so machine load affects both alike. A ratio below 1 means faster than raw.

New conversations (issue 18): create a session and run a first pandas cell, four ways
interleaved per conversation under each ``--levels`` isolation level: forked from the
template (the default), cold (``LocalBackend(template=False)``), today's warm pool of cold
kernels (``pool_size=1``, refilled between rounds, never while another way is timed), and
raw jupyter_client (start + the same cell). Reported as ComputeSDK reports hosted sandboxes:
median, p95 and p99 of create to first result.

A new conversation's first error, and its first interrupt (a sleeping cell stopped, from
the interrupt to the cell's reply), against a raw kernel's: IPython sets up its traceback
writer on the first one it formats, which our kernels' template has done before the fork.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from jupyter_client.manager import AsyncKernelManager

from kernel_analyst.kernels import Execution, Limits, LocalBackend, SessionManager
from kernel_analyst.kernels.trail import AuditTrail

PLOT = "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot(range(100))\nplt.show()"
FRAME = "import pandas as pd\npd.DataFrame({'a': range(200), 'b': range(200)}).describe()"
FIRST_CELL = "import pandas as pd\ndf = pd.DataFrame({'a': range(10), 'b': range(10)})\nprint(df['b'].sum())"
WAYS = ("template", "cold", "raw")


class RawKernel:
    """The baseline: jupyter_client as its documentation shows, default kernel settings."""

    async def start(self) -> None:
        self.km = AsyncKernelManager(kernel_name="python3")
        await self.km.start_kernel()
        self.kc = self.km.client()
        self.kc.start_channels()
        await self.kc.wait_for_ready(timeout=60)

    async def execute(self, code: str) -> dict[str, Any]:
        msg_id = self.kc.execute(code)
        reply = await self.kc._async_get_shell_msg(timeout=60)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = await self.kc._async_get_shell_msg(timeout=60)
        while True:  # drain IOPub until idle, keeping outputs as a client must
            msg = await self.kc._async_get_iopub_msg(timeout=60)
            if (msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status"
                    and msg["content"]["execution_state"] == "idle"):
                return dict(reply)

    async def stop(self) -> None:
        self.kc.stop_channels()
        await self.km.shutdown_kernel(now=True)


def p50(values: list[float]) -> float:
    return statistics.median(values)


def line(name: str, ours: float, raw: float, unit: str = "ms", goal: str = "") -> dict[str, Any]:
    ratio = ours / raw if raw else float("nan")
    print(f"{name:<44} ours {ours:9.2f} {unit}   raw {raw:9.2f} {unit}   ratio {ratio:5.2f}x  {goal}")
    return {"name": name, "ours": ours, "raw": raw, "unit": unit, "ratio": ratio, "goal": goal}


async def bench_cells(manager: SessionManager, raw: RawKernel, code: str, n: int) -> tuple[float, float]:
    s = await manager.session(f"cells-{abs(hash(code))}")
    await s.execute(code)
    await raw.execute(code)
    ours: list[float] = []
    base: list[float] = []
    for _ in range(n):
        t = time.perf_counter()
        await s.execute(code)
        ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        await raw.execute(code)
        base.append(time.perf_counter() - t)
    return p50(ours) * 1000, p50(base) * 1000


async def bench_cold_start(root: Path, limits: Limits, n: int) -> tuple[float, float]:
    ours: list[float] = []
    base: list[float] = []
    for i in range(n):
        # A cold kernel, as this figure always measured (the template path is measured
        # by bench_new_conversations).
        async with SessionManager(root / f"cold{i}", limits=limits,
                                  backend=LocalBackend(template=False)) as m:
            t = time.perf_counter()
            s = await m.session("cold")
            await s.execute("1")
            ours.append(time.perf_counter() - t)
        raw = RawKernel()
        t = time.perf_counter()
        await raw.start()
        await raw.execute("1")
        base.append(time.perf_counter() - t)
        await raw.stop()
    return p50(ours), p50(base)


async def bench_warm_pool(root: Path, limits: Limits, n: int) -> tuple[float, float]:
    times: list[float] = []
    async with SessionManager(root / "warm", limits=limits, pool_size=2,
                              backend=LocalBackend(template=False)) as m:
        for i in range(n):
            await m.wait_pool_ready(120)
            t = time.perf_counter()
            s = await m.session(f"warm-{i}")
            await s.execute("1")
            times.append(time.perf_counter() - t)
            await m.close(f"warm-{i}")
    return p50(times) * 1000, max(times) * 1000


ERROR_CELL = "def f():\n    return 1 / 0\nf()"
SLEEP_CELL = "import time\nprint('sleeping', flush=True)\ntime.sleep(30)"


async def _raw_interrupted(raw: RawKernel) -> float:
    """Run SLEEP_CELL on the raw kernel, interrupt it once it says it sleeps; the seconds
    from the interrupt to its reply."""
    msg_id = raw.kc.execute(SLEEP_CELL)
    while True:
        msg = await raw.kc._async_get_iopub_msg(timeout=60)
        if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream":
            break
    t = time.perf_counter()
    await raw.km.interrupt_kernel()
    reply = await raw.kc._async_get_shell_msg(timeout=60)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = await raw.kc._async_get_shell_msg(timeout=60)
    took = time.perf_counter() - t
    while True:  # drain to idle, as a client must
        msg = await raw.kc._async_get_iopub_msg(timeout=60)
        if (msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status"
                and msg["content"]["execution_state"] == "idle"):
            return took


async def _our_first_error(m: SessionManager, i: int, times: dict[str, list[float]]) -> None:
    s = await m.session(f"e{i}")
    await s.execute("1")
    t = time.perf_counter()
    ex = await s.execute(ERROR_CELL)
    times["error"].append(time.perf_counter() - t)
    assert ex.status == "error", ex.status
    s = await m.session(f"i{i}")
    await s.execute("1")
    slept = asyncio.Event()
    task = asyncio.ensure_future(s.execute(SLEEP_CELL, on_output=lambda _: slept.set()))
    await asyncio.wait_for(slept.wait(), 60)
    t = time.perf_counter()
    await s.interrupt()
    ex = await task
    times["interrupt"].append(time.perf_counter() - t)
    assert ex.status == "error" and ex.state == "kept", (ex.status, ex.events)
    await m.close(f"e{i}", now=True)
    await m.close(f"i{i}", now=True)


async def _raw_first_error(times: dict[str, list[float]]) -> None:
    raw = RawKernel()
    await raw.start()
    await raw.execute("1")
    t = time.perf_counter()
    reply = await raw.execute(ERROR_CELL)
    times["raw error"].append(time.perf_counter() - t)
    assert reply["content"]["status"] == "error", reply["content"]
    await raw.stop()
    raw = RawKernel()
    await raw.start()
    await raw.execute("1")
    times["raw interrupt"].append(await _raw_interrupted(raw))
    await raw.stop()


async def bench_first_error(root: Path, limits: Limits, n: int) -> dict[str, tuple[float, float]]:
    """A new conversation's first error, and its first interrupt (from the interrupt to the
    cell's reply), ours from the template against raw jupyter_client, interleaved (ms, p50).
    Both pay IPython's first traceback there, unless it was paid before the fork."""
    times: dict[str, list[float]] = {k: [] for k in ("error", "raw error", "interrupt", "raw interrupt")}
    async with SessionManager(root / "first-error", limits=limits) as m:
        await m.session("warmup")
        await m.close("warmup", now=True)
        for i in range(n):
            if i % 2 == 0:
                await _our_first_error(m, i, times)
                await _raw_first_error(times)
            else:
                await _raw_first_error(times)
                await _our_first_error(m, i, times)
    return {"error": (p50(times["error"]) * 1000, p50(times["raw error"]) * 1000),
            "interrupt": (p50(times["interrupt"]) * 1000, p50(times["raw interrupt"]) * 1000)}


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (p99 of 100 values is the 99th smallest)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


async def _first_result(manager: SessionManager, sid: str, times: dict[str, list[float]], way: str) -> str:
    """Create a session and run the first pandas cell; record both times; say how it started."""
    t = time.perf_counter()
    s = await manager.session(sid)
    created = time.perf_counter() - t
    ex = await s.execute(FIRST_CELL)
    times[way].append(time.perf_counter() - t)
    times[f"{way} create"].append(created)
    if ex.text.strip() != "45":
        raise RuntimeError(f"{way}: unexpected first result {ex.status} {ex.text!r} {ex.events}")
    return str(s.describe()["kernel"]["start"].get("path"))


async def _raw_first_result(times: dict[str, list[float]]) -> None:
    raw = RawKernel()
    t = time.perf_counter()
    await raw.start()
    reply = await raw.execute(FIRST_CELL)
    times["raw"].append(time.perf_counter() - t)
    await raw.stop()
    if reply["content"]["status"] != "ok":
        raise RuntimeError(f"raw: {reply['content']}")


async def bench_new_conversations(root: Path, level: str, n: int) -> dict[str, Any]:
    """New conversation to a first pandas result, four ways interleaved (seconds)."""
    limits = Limits(isolation=level)  # type: ignore[arg-type]
    times: dict[str, list[float]] = {k: [] for w in (*WAYS, "warm pool") for k in (w, f"{w} create")}
    starts: dict[str, set[str]] = {"template": set(), "cold": set(), "warm pool": set()}
    cold_backend, warm_backend = LocalBackend(template=False), LocalBackend(template=False)
    async with contextlib.AsyncExitStack() as stack:
        tpl = await stack.enter_async_context(SessionManager(root / f"tpl-{level}", limits=limits))
        cold = await stack.enter_async_context(
            SessionManager(root / f"cold-{level}", limits=limits, backend=cold_backend))
        warm = await stack.enter_async_context(
            SessionManager(root / f"warm-{level}", limits=limits, backend=warm_backend, pool_size=1))
        managers = {"template": tpl, "cold": cold, "warm pool": warm}
        t = time.perf_counter()  # the template process's own start, once per manager
        await _first_result(tpl, "warmup", {"template": [], "template create": []}, "template")
        template_start = time.perf_counter() - t
        await tpl.close("warmup", now=True)
        for i in range(n):
            # The pool refills a cold kernel in the background: wait until it is full, so no
            # refill runs while a way is timed, and time the pool last in each round.
            if await warm.wait_pool_ready(120) < 1:
                raise RuntimeError("the warm pool did not fill within 120 s")
            order = WAYS[i % 3:] + WAYS[:i % 3]
            for way in (*order, "warm pool"):
                if way == "raw":
                    await _raw_first_result(times)
                else:
                    starts[way].add(await _first_result(managers[way], f"c{i}", times, way))
                    await managers[way].close(f"c{i}", now=True)
    return {"times": times, "starts": {k: sorted(v) for k, v in starts.items()},
            "template_start_s": template_start}


def report_new_conversations(level: str, n: int, got: dict[str, Any]) -> list[dict[str, Any]]:
    """Print median / p95 / p99 per way and the ratios to raw; return the rows."""
    times: dict[str, list[float]] = got["times"]
    raw = times["raw"]
    print(f"\nnew conversation to a first pandas result, isolation={level}, {n} conversations "
          f"(template process start, once: {got['template_start_s']:.2f} s; started as {got['starts']})")
    print(f"{'way':<12} {'median':>9} {'p95':>9} {'p99':>9}   {'create p50':>10}   "
          "ratio to raw (p50 / p95 / p99)")
    rows = []
    for way in ("template", "cold", "warm pool", "raw"):
        values = times[way]
        figures = [percentile(values, q) * 1000 for q in (50, 95, 99)]
        ratios = [percentile(values, q) / percentile(raw, q) for q in (50, 95, 99)]
        create = percentile(times[f"{way} create"], 50) * 1000 if times[f"{way} create"] else float("nan")
        print(f"{way:<12} {figures[0]:7.1f}ms {figures[1]:7.1f}ms {figures[2]:7.1f}ms   {create:8.1f}ms   "
              f"{ratios[0]:.3f}x / {ratios[1]:.3f}x / {ratios[2]:.3f}x")
        rows.append({"name": f"new conversation ({level}): {way}", "median_ms": figures[0],
                     "p95_ms": figures[1], "p99_ms": figures[2], "create_p50_ms": create,
                     "ratio_p50": ratios[0], "ratio_p95": ratios[1], "ratio_p99": ratios[2],
                     "n": len(values)})
    print("goal: template p50 <= 15 ms and <= 0.05x raw", flush=True)
    return rows


async def bench_concurrent(root: Path, limits: Limits, sessions: int, cells: int) -> dict[str, float]:
    async with SessionManager(root / "conc", limits=limits) as m:
        ss = await asyncio.gather(*(m.session(f"c{i}") for i in range(sessions)))
        await asyncio.gather(*(s.execute("0") for s in ss))
        cpu, t = time.process_time(), time.perf_counter()
        await asyncio.gather(*(_run_many(s.execute, cells) for s in ss))
        ours_wall, ours_cpu = time.perf_counter() - t, time.process_time() - cpu
    raws = [RawKernel() for _ in range(sessions)]
    await asyncio.gather(*(r.start() for r in raws))
    await asyncio.gather(*(r.execute("0") for r in raws))
    cpu, t = time.process_time(), time.perf_counter()
    await asyncio.gather(*(_run_many(r.execute, cells) for r in raws))
    raw_wall, raw_cpu = time.perf_counter() - t, time.process_time() - cpu
    await asyncio.gather(*(r.stop() for r in raws))
    total = sessions * cells
    return {"ours_tput": total / ours_wall, "raw_tput": total / raw_wall,
            "ours_cpu_ms": ours_cpu / total * 1000, "raw_cpu_ms": raw_cpu / total * 1000}


async def _run_many(execute: Any, cells: int) -> None:
    for i in range(cells):
        await execute(f"x = {i}\nx + 1")


def bench_audit(root: Path, cells: int) -> dict[str, float]:
    text = "y" * 2500  # ~3 MB for 1000 cells, as measured for real sessions
    trail = AuditTrail.create(root / "audit.ipynb", {"kernel_analyst": {"session_id": "bench"}})
    costs: list[float] = []
    for i in range(cells):
        ex = Execution(code=f"print({i})", execution_count=i + 1,
                       outputs=[{"output_type": "stream", "name": "stdout", "text": text}])
        t = time.perf_counter()
        trail.append_execution(ex)
        costs.append(time.perf_counter() - t)
    # The first export imports nbformat (seconds where jsonschema's format extras are
    # installed) and compiles the schema: a one-time cost, measured apart from the figure.
    t = time.perf_counter()
    trail.export(root / "warmup.ipynb")
    first_ms = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    trail.export(root / "export.ipynb")
    export_ms = (time.perf_counter() - t) * 1000
    early = p50(costs[5:15]) * 1000
    late = p50(costs[-10:]) * 1000
    return {"export_ms": export_ms, "first_export_ms": first_ms,
            "append_ms_at_10": early, "append_ms_at_1000": late,
            "size_mb": (root / "export.ipynb").stat().st_size / 1e6}


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--isolation", default="none", choices=["none", "process", "sandbox"])
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--conversations", type=int, default=None,
                        help="new conversations per way and level (default 100; 20 with --quick)")
    parser.add_argument("--levels", default="none,process,sandbox",
                        help="isolation levels of the new-conversation figure")
    parser.add_argument("--only-conversations", action="store_true",
                        help="only the new-conversation figure")
    args = parser.parse_args()
    n = 60 if args.quick else 300
    conversations = args.conversations or (20 if args.quick else 100)
    limits = Limits(isolation=args.isolation)
    results: list[dict[str, Any]] = []
    print(f"kernel-analyst benchmarks (isolation={args.isolation}, python {sys.version.split()[0]})")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for level in args.levels.split(","):
            got = await bench_new_conversations(root, level, conversations)
            results += report_new_conversations(level, conversations, got)
        if args.only_conversations:
            if args.json:
                Path(args.json).write_text(json.dumps(results, indent=1))
            return 0
        raw = RawKernel()
        await raw.start()
        async with SessionManager(root / "cells", limits=limits) as manager:
            ours, base = await bench_cells(manager, raw, "x = 1\nx + 1", n)
            results.append(line("trivial cell round trip (p50)", ours, base, goal="goal <= 0.85x"))
            ours, base = await bench_cells(manager, raw, PLOT, n // 5)
            results.append(line("plot cell (p50)", ours, base, goal="goal <= 1.05x"))
            ours, base = await bench_cells(manager, raw, FRAME, n // 5)
            results.append(line("DataFrame cell (p50)", ours, base, goal="goal <= 1.05x"))
        await raw.stop()
        ours, base = await bench_cold_start(root, limits, 3 if args.quick else 7)
        results.append(line("cold start to first result (p50)", ours, base, "s", "goal <= 0.65x"))
        first = await bench_first_error(root, limits, 5 if args.quick else 15)
        results.append(line("new conversation: first error (p50)", *first["error"]))
        results.append(line("new conversation: first interrupt to reply (p50)", *first["interrupt"]))
        warm, worst = await bench_warm_pool(root, limits, 5 if args.quick else 15)
        print(f"{'warm pool: session + first execute':<44} p50 {warm:7.1f} ms  max {worst:7.1f} ms"
              "   goal p50 <= 30 ms")
        results.append({"name": "warm pool p50", "ours": warm, "unit": "ms", "goal": "<= 30 ms"})
        conc = await bench_concurrent(root, limits, 20, 20)
        results.append(line("20 sessions x 20 cells: throughput", conc["ours_tput"], conc["raw_tput"],
                            "cells/s", "goal >= 1.0x"))
        results.append(line("20 sessions x 20 cells: client CPU per cell", conc["ours_cpu_ms"],
                            conc["raw_cpu_ms"], "ms", "goal ours <= 1.7 ms"))
        audit = bench_audit(root, 1000)
        print(f"{'audit: export of a 1000-cell session':<44} {audit['export_ms']:7.1f} ms "
              f"({audit['size_mb']:.1f} MB)   goal <= 250 ms  (first export, with imports: "
              f"{audit['first_export_ms']:.0f} ms)")
        print(f"{'audit: append cost at cell 10 / cell 1000':<44} {audit['append_ms_at_10']:.3f} ms / "
              f"{audit['append_ms_at_1000']:.3f} ms   goal flat")
        results.append({"name": "audit", **audit})
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
