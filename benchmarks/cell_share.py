"""The kernel's share of a turn: a trivial cell through KernelSession beside raw jupyter_client.

    python benchmarks/cell_share.py [--rounds 40 --cells 25] [--isolation none|process|sandbox]
    python benchmarks/cell_share.py --tree now=. --tree before=/tmp/ka-before [--rounds 40]
    python benchmarks/cell_share.py --tree plain=. --tree share=.:cpus=1 --isolation sandbox

One worker process per checkout (``--tree NAME=PATH``, its package on ``PYTHONPATH``,
checked; default: this checkout alone) holds one conversation (``SessionManager`` +
``KernelSession.execute``, the public API every checkout has) and one raw kernel
(``AsyncKernelManager`` + ``AsyncKernelClient`` with default settings, draining IOPub to
its idle as a client must, as ``run.py``'s baseline). Each round, every worker in turn
(the order rotating) runs ``--cells`` pairs of the trivial cell, ours and raw
alternating which goes first; one worker runs at a time, so load on a shared machine
falls on all alike. ``--limits KEY=VALUE`` sets a ``Limits`` field for every worker
(``cpus=1``, ``syscall_filter=false``); ``--tree NAME=PATH:KEY=VALUE,...`` for one (one
checkout may be given twice with different limits); ``watch=1`` there attaches a
watcher to the conversation (``KernelSession.watch``, as a JupyterLab client does).

``--growth 10,300,1000,3000`` instead measures, for each checkout in turn, what the
conversation's bookkeeping costs its kernel after that many trivial cells (IPython adds
names to the namespace with every cell): the session's own user expression evaluated
500 times inside the kernel, its thread's CPU per call.

Reported per worker: the median of ours and of raw over all cells and their ratio; the
spread of the ratio over rounds (each round's median ours / median raw: median,
quartiles, extremes); with two workers or more, each one's cells against the first's
(ours / ours, per round). Wall time on a shared machine is mostly waiting for a core,
so the CPU each side spends per cell is reported too, read from ``/proc`` (nanoseconds,
every thread): this process (the client) and the kernel, and what lies on a cell's path
(the client and the kernel's main thread, where ipykernel runs the cell; raw's kernel
writes its history from another thread). ``--json`` writes the figures.
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
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
CELLS = {
    "trivial": "x = 1\nx + 1",
    "plot": "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot(range(100))\nplt.show()",
    "frame": "import pandas as pd\npd.DataFrame({'a': range(200), 'b': range(200)}).describe()",
}
"""The cells of ``run.py``: ``--cell`` picks one."""
SIDES = ("ours", "raw")
COUNTERS = ("host_cpu", "kernel_cpu", "kernel_main_cpu", "host_switches", "kernel_switches")


# -- the worker: one checkout's conversation and a raw kernel ---------------------------


class _Raw:
    """jupyter_client as its documentation shows, default kernel settings."""

    async def start(self) -> None:
        from jupyter_client.manager import AsyncKernelManager

        self.km = AsyncKernelManager(kernel_name="python3")
        await self.km.start_kernel()
        self.kc = self.km.client()
        self.kc.start_channels()
        await self.kc.wait_for_ready(timeout=60)

    @property
    def pid(self) -> int | None:
        process = getattr(self.km.provisioner, "process", None)
        return getattr(process, "pid", None)

    async def execute(self, code: str) -> None:
        msg_id = self.kc.execute(code)
        reply = await self.kc._async_get_shell_msg(timeout=60)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = await self.kc._async_get_shell_msg(timeout=60)
        while True:  # drain IOPub until idle, keeping outputs as a client must
            msg = await self.kc._async_get_iopub_msg(timeout=60)
            if (msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status"
                    and msg["content"]["execution_state"] == "idle"):
                return

    async def stop(self) -> None:
        self.kc.stop_channels()
        await self.km.shutdown_kernel(now=True)


def _threads(pid: int | None) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/task") if pid is not None else []
    except OSError:
        return []


def _counters(pid: int | None) -> tuple[float, float, int]:
    """CPU seconds of every thread of ``pid``, of its main thread, and its context switches."""
    cpu = main = 0.0
    switches = 0
    for task in _threads(pid):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                ns = int(f.read().split()[0])
            with open(f"/proc/{pid}/task/{task}/status") as f:
                switches += sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
        except (OSError, ValueError, IndexError):
            continue
        cpu += ns / 1e9
        main += ns / 1e9 if task == str(pid) else 0.0
    return cpu, main, switches


def _limits(pairs: list[str], isolation: str) -> Any:
    from kernel_analyst.kernels import Limits

    fields: dict[str, Any] = {"isolation": isolation}
    for pair in pairs:
        key, _, text = pair.partition("=")
        value: Any = {"true": True, "false": False, "none": None}.get(text.lower(), text)
        if isinstance(value, str):
            try:
                value = float(text) if "." in text else int(text)
            except ValueError:
                pass
        fields[key] = value
    return Limits(**fields)


async def _timed(client: Any, pid: int | None, counts: dict[str, float], code: str) -> float:
    """One cell through ``client``; its wall time, and its CPU added to ``counts``."""
    kernel0, host_switches0 = _counters(pid), _counters(os.getpid())[2]
    host0 = time.process_time()
    started = time.perf_counter()
    ex = await client.execute(code)
    wall = time.perf_counter() - started
    counts["host_cpu"] += time.process_time() - host0
    kernel1 = _counters(pid)
    counts["kernel_cpu"] += kernel1[0] - kernel0[0]
    counts["kernel_main_cpu"] += kernel1[1] - kernel0[1]
    counts["kernel_switches"] += kernel1[2] - kernel0[2]
    counts["host_switches"] += _counters(os.getpid())[2] - host_switches0
    if ex is not None and ex.status != "ok":
        raise SystemExit(f"the cell failed: {ex.status} {ex.error}")
    return wall


async def _worker(isolation: str, pairs: list[str], code: str) -> int:
    from kernel_analyst.kernels import SessionManager

    watch = "watch=1" in pairs
    raw = _Raw()
    await raw.start()
    loop = asyncio.get_running_loop()
    limits = _limits([p for p in pairs if not p.startswith("watch=")], isolation)
    with tempfile.TemporaryDirectory() as tmp:
        async with SessionManager(Path(tmp), limits=limits) as manager:
            session = await manager.session("cells")
            seen: list[str] = []
            if watch:
                session.watch(lambda channel, msg: seen.append(channel))
            clients = {"ours": (session, (session.describe().get("kernel") or {}).get("pid")),
                       "raw": (raw, raw.pid)}
            for _ in range(3):
                await session.execute(code)
                await raw.execute(code)
            print(json.dumps({"ready": True}), flush=True)
            while line := (await loop.run_in_executor(None, sys.stdin.readline)).strip():
                walls: dict[str, list[float]] = {side: [] for side in SIDES}
                counts = {side: dict.fromkeys(COUNTERS, 0.0) for side in SIDES}
                for i in range(int(line)):
                    for side in SIDES[:: 1 if i % 2 == 0 else -1]:
                        walls[side].append(await _timed(*clients[side], counts[side], code))
                seen.clear()
                print(json.dumps({"walls": walls, "counts": counts}), flush=True)
    await raw.stop()
    return 0


_GROWTH_PROBE = """
import time as _ka_t
_ka_sh = get_ipython()
_ka_s = _ka_t.thread_time()
for _ka_i in range(500):
    _ka_sh.user_expressions({"_kernel_analyst_step": "_kernel_analyst.step()"})
print(len(_ka_sh.user_ns), (_ka_t.thread_time() - _ka_s) / 500 * 1e6)
del _ka_t, _ka_sh, _ka_s, _ka_i
"""


async def _growth(isolation: str, counts: list[int]) -> int:
    """Print, after each count of trivial cells, the namespace's size and what the step's
    user expression costs the kernel (us of its thread's CPU per call)."""
    from kernel_analyst.kernels import SessionManager

    with tempfile.TemporaryDirectory() as tmp:
        async with SessionManager(Path(tmp), limits=_limits([], isolation)) as manager:
            session = await manager.session("growth")
            done = 0
            for count in counts:
                while done < count:
                    await session.execute(CELLS["trivial"])
                    done += 1
                names, us = (await session.execute(_GROWTH_PROBE)).text.split()
                done += 1
                print(json.dumps({"cells": count, "names": int(names), "step_us": float(us)}), flush=True)
    return 0


def growth(trees: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for name, _, path in (t.partition("=") for t in trees):
        env = {**os.environ, "PYTHONPATH": str(Path(path).resolve())}
        command = [sys.executable, str(HERE), "--worker", "--growth", args.growth,
                   "--isolation", args.isolation]
        out = subprocess.run(command, env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True,
                             check=True).stdout
        for line in out.splitlines():
            row = {"name": name, **json.loads(line)}
            print(f"{name:<12} after {row['cells']:>6} cells: {row['names']:>6} names in the namespace, "
                  f"the step's expression {row['step_us']:8.1f} us of kernel CPU")
            rows.append(row)
    return rows


# -- the driver --------------------------------------------------------------------------


class Worker:
    """One checkout's worker process and what it measured, round by round."""

    def __init__(self, name: str, spec: str, args: argparse.Namespace) -> None:
        path, _, own = spec.partition(":")
        self.name, self.tree = name, Path(path).resolve()
        self.limits = [*args.limits, *filter(None, own.split(","))]
        env = {**os.environ, "PYTHONPATH": str(self.tree)}
        probe = "import kernel_analyst; print(kernel_analyst.__file__)"
        found = subprocess.run([sys.executable, "-c", probe], env=env, cwd=tempfile.gettempdir(),
                               capture_output=True, text=True, check=True).stdout.strip()
        if not Path(found).resolve().is_relative_to(self.tree):
            raise SystemExit(f"{self.tree}: kernel_analyst is imported from {found}, not from this checkout")
        command = [sys.executable, str(HERE), "--worker", "--isolation", args.isolation, "--cell", args.cell]
        for pair in self.limits:
            command += ["--limits", pair]
        self.proc = subprocess.Popen(command, env=env, cwd=tempfile.gettempdir(), text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.rounds: list[dict[str, Any]] = []

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"{self.name}: the worker ended (exit {self.proc.wait()})")
        got: dict[str, Any] = json.loads(line)
        return got

    def run(self, cells: int) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{cells}\n")
        self.proc.stdin.flush()
        self.rounds.append(self.read())

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)

    def walls(self, side: str) -> list[float]:
        return [t for r in self.rounds for t in r["walls"][side]]

    def round_medians(self, side: str) -> list[float]:
        return [statistics.median(r["walls"][side]) for r in self.rounds]


def _spread(values: list[float]) -> dict[str, float]:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return {"median": statistics.median(values), "q1": q[0], "q3": q[2],
            "min": min(values), "max": max(values)}


def summary(worker: Worker, first: Worker) -> dict[str, Any]:
    """One worker's figures (times in ms; CPU in ms and context switches per cell)."""
    ours, raw = worker.walls("ours"), worker.walls("raw")
    ratios = [o / r for o, r in zip(worker.round_medians("ours"), worker.round_medians("raw"), strict=True)]
    row: dict[str, Any] = {
        "name": worker.name, "tree": str(worker.tree), "limits": worker.limits, "cells": len(ours),
        "ours_ms": statistics.median(ours) * 1000, "raw_ms": statistics.median(raw) * 1000,
        "ratio": statistics.median(ours) / statistics.median(raw), "round_ratio": _spread(ratios),
    }
    for side in SIDES:
        for counter in COUNTERS:
            total = sum(r["counts"][side][counter] for r in worker.rounds) / len(ours)
            row[f"{side}_{counter}"] = total * 1000 if counter.endswith("cpu") else total
        row[f"{side}_path_cpu"] = row[f"{side}_host_cpu"] + row[f"{side}_kernel_main_cpu"]
    row["path_cpu_ratio"] = row["ours_path_cpu"] / row["raw_path_cpu"]
    if worker is not first:
        row["vs_first"] = _spread([a / b for a, b in zip(worker.round_medians("ours"),
                                                         first.round_medians("ours"), strict=True)])
    return row


def report(rows: list[dict[str, Any]]) -> None:
    print(f"{'worker':<12} {'cells':>6} {'ours p50':>9} {'raw p50':>9} {'ratio':>6}   "
          "per-round ratio: median [q1-q3] (min-max)")
    for row in rows:
        s = row["round_ratio"]
        print(f"{row['name']:<12} {row['cells']:>6} {row['ours_ms']:>7.2f}ms {row['raw_ms']:>7.2f}ms "
              f"{row['ratio']:>5.2f}x   {s['median']:.2f}x [{s['q1']:.2f}-{s['q3']:.2f}] "
              f"({s['min']:.2f}-{s['max']:.2f})")
    print(f"\n{'CPU, ms/cell':<12} {'client':>7} {'kernel':>7} {'main':>6} {'path':>6}   "
          f"{'raw: client':>11} {'kernel':>7} {'main':>6} {'path':>6}   path ours/raw   switches ours | raw")
    for row in rows:
        o, r = ({k: row[f"{side}_{k}"] for k in (*COUNTERS, "path_cpu")} for side in SIDES)
        print(f"{row['name']:<12} {o['host_cpu']:>7.2f} {o['kernel_cpu']:>7.2f} {o['kernel_main_cpu']:>6.2f} "
              f"{o['path_cpu']:>6.2f}   {r['host_cpu']:>11.2f} {r['kernel_cpu']:>7.2f} "
              f"{r['kernel_main_cpu']:>6.2f} {r['path_cpu']:>6.2f}   {row['path_cpu_ratio']:>13.3f}   "
              f"{o['host_switches']:.0f}+{o['kernel_switches']:.0f} | {r['host_switches']:.0f}+"
              f"{r['kernel_switches']:.0f}")
    for row in rows[1:]:
        s = row["vs_first"]
        print(f"{row['name']} / {rows[0]['name']} (ours, per round): median {s['median']:.3f} "
              f"[{s['q1']:.3f}-{s['q3']:.3f}]")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", default=[],
                        help="NAME=PATH[:KEY=VALUE,...] of a checkout (repeatable)")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--cells", type=int, default=25, help="pairs of cells per worker and round")
    parser.add_argument("--isolation", default="none", choices=["none", "process", "sandbox"])
    parser.add_argument("--cell", default="trivial", choices=list(CELLS), help="the cell (run.py's)")
    parser.add_argument("--limits", action="append", default=[], help="a Limits field, KEY=VALUE")
    parser.add_argument("--growth", help="cell counts (10,300,1000): the bookkeeping's cost as cells add up")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker and args.growth:
        return asyncio.run(_growth(args.isolation, [int(n) for n in args.growth.split(",")]))
    if args.worker:
        return asyncio.run(_worker(args.isolation, args.limits, CELLS[args.cell]))
    trees = args.tree or [f"this={HERE.parent.parent}"]
    if args.growth:
        found = growth(trees, args)
        if args.json:
            Path(args.json).write_text(json.dumps(found, indent=1))
        return 0
    workers = [Worker(name, spec, args) for name, _, spec in (t.partition("=") for t in trees)]
    load = [os.getloadavg()[0]]
    try:
        for worker in workers:
            worker.read()
        for r in range(args.rounds):
            for worker in workers[r % len(workers):] + workers[:r % len(workers)]:
                worker.run(args.cells)
            load.append(os.getloadavg()[0])
    finally:
        for worker in workers:
            worker.close()
    rows = [summary(worker, workers[0]) for worker in workers]
    print(f"{args.cell} cell {CELLS[args.cell]!r}, isolation {args.isolation}, {args.rounds} rounds x "
          f"{args.cells} pairs per worker; load average (1 min) {min(load):.2f}-{max(load):.2f}, median "
          f"{statistics.median(load):.2f}, {os.cpu_count()} cores\n")
    report(rows)
    if args.json:
        Path(args.json).write_text(json.dumps({"load": load, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
