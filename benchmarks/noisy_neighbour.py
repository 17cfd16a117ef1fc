"""A noisy neighbour beside a conversation, with and without a CPU share, side by side.

    python benchmarks/noisy_neighbour.py [--iterations 50] [--rounds 5] [--part both]
                                         [--isolation sandbox] [--cpus 1]

Conversation A runs a cell that keeps every core busy (a threaded BLAS product in the
kernel and a ``multiprocessing`` pool of one process per core), while conversation B
runs a trivial cell and a pandas groupby on 1M rows, ``--iterations`` times each. B's
p50 and p95 are printed for each scenario, and p95 against B alone (goal: at most 1.5x),
with the same for a fixed piece of work in this process ("host work"): outside every
kernel, as the service's event loop and a local model server are:

- part ``conversations``: B alone (A idle); no CPU share; ``--cpus`` each with
  ``cpu_policy`` ``weight``, ``quota`` and ``burst``;
- part ``tenants``: tenant X's five conversations all run A's cell while tenant Y's
  five hold B and four idle ones: B alone; no share; ``--cpus`` per conversation; and
  that with each tenant's budget (``tenant_cpus=--cpus``), under ``--policy``.

The scenarios run interleaved in one process, round by round (``--rounds``; the order
reversed every other round), so the machine's other load falls on all of them alike;
the load average is printed. So are the cores A used (its kernel's and its pool's CPU
time over the time it ran; the tenant's five together): what a share leaves the neighbour.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from kernel_analyst.kernels import KernelSession, Limits, Run, SessionManager

BURNER = """\
import multiprocessing as _mp, os as _os, resource as _resource, time as _time, numpy as _np
def _burn(stop):
    while not _os.path.exists(stop):
        for _ in range(100_000):
            pass
_stop = _os.path.abspath('stop')
def _children():  # the CPU of every child reaped so far in this kernel (earlier rounds' too)
    usage = _resource.getrusage(_resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
_before, _t0, _c0 = _children(), _time.perf_counter(), _time.process_time()
_pool = _mp.Pool(_os.cpu_count())
_jobs = _pool.map_async(_burn, [_stop] * _os.cpu_count())
_a = _np.random.default_rng(0).random((1000, 1000))
open('busy', 'w').close()
while not _os.path.exists(_stop):
    _a @ _a
_pool.terminate(); _pool.join(); _os.remove('busy')
print((_time.process_time() - _c0 + _children() - _before) / (_time.perf_counter() - _t0))
"""
B_SETUP = ("import numpy as np, pandas as pd\n"
           "rng = np.random.default_rng(0)\n"
           "df = pd.DataFrame({'k': rng.integers(0, 10_000, 1_000_000), 'v': rng.random(1_000_000)})")
TRIVIAL = "1 + 1"
GROUPBY = "g = df.groupby('k')['v'].mean()"


@dataclass
class Scenario:
    """One arrangement of kernels and limits, and what B saw under it."""

    name: str
    limits: Limits
    noisy: bool = True
    trivial: list[float] = field(default_factory=list)
    groupby: list[float] = field(default_factory=list)
    host: list[float] = field(default_factory=list)
    neighbour_cores: list[float] = field(default_factory=list)
    manager: SessionManager | None = None
    b: KernelSession | None = None
    neighbours: list[KernelSession] = field(default_factory=list)


async def setup(scenario: Scenario, root: Path, neighbours: int, idle: int, tenants: bool) -> None:
    """The scenario's manager, B (with its frame) and the neighbours (and idle ones)."""
    manager = SessionManager(root / scenario.name.replace(" ", "-"), limits=scenario.limits)
    await manager.start()
    scenario.manager = manager
    x, y = ("x", "y") if tenants else (None, None)
    scenario.b = await manager.session("b", owner=y)
    ex = await scenario.b.execute(B_SETUP)
    assert ex.status == "ok", ex.text
    for i in range(idle):
        await (await manager.session(f"idle-{i}", owner=y)).execute("1")
    for i in range(neighbours if scenario.noisy else 0):
        scenario.neighbours.append(await manager.session(f"a-{i}", owner=x))


async def start_noise(scenario: Scenario) -> list[Run]:
    """Every neighbour's burner, once each is busy."""
    runs = [await a.submit(BURNER, timeout=3600) for a in scenario.neighbours]
    deadline = time.monotonic() + 120
    while not all((a.workdir / "busy").exists() for a in scenario.neighbours):
        states = [r.status().state for r in runs]
        if time.monotonic() > deadline or any(state not in ("queued", "running") for state in states):
            raise RuntimeError(f"the neighbours did not get busy: {states}")
        await asyncio.sleep(0.05)
    return runs


async def stop_noise(scenario: Scenario, runs: list[Run]) -> None:
    for a in scenario.neighbours:
        (a.workdir / "stop").touch()
    for run in runs:
        ex = await run.wait(120)
        if ex is None or ex.status != "ok":
            raise RuntimeError(f"{scenario.name}: a neighbour's run ended so: {run.status()}, "
                               f"{ex.text if ex is not None else ''}")
        scenario.neighbour_cores.append(float(ex.text.split()[-1]))
    for a in scenario.neighbours:
        (a.workdir / "stop").unlink()


async def measure(scenario: Scenario, iterations: int) -> None:
    """B's cells beside the noise (if any)."""
    assert scenario.b is not None
    runs = await start_noise(scenario) if scenario.noisy else []
    try:
        for _ in range(iterations):
            for code, into in ((TRIVIAL, scenario.trivial), (GROUPBY, scenario.groupby)):
                started = time.perf_counter()
                ex = await scenario.b.execute(code)
                into.append(time.perf_counter() - started)
                assert ex.status == "ok", ex.text
            scenario.host.append(host_work())
    finally:
        if runs:
            await stop_noise(scenario, runs)


def host_work() -> float:
    """Seconds this process (outside every kernel, as the service and a local model
    server are) takes for a fixed piece of pure-Python work (about 5 ms when idle)."""
    started = time.perf_counter()
    total = 0
    for i in range(100_000):
        total += i * i
    return time.perf_counter() - started


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def report(title: str, scenarios: list[Scenario]) -> None:
    alone = next(s for s in scenarios if not s.noisy)
    print(f"\n{title}")
    print(f"{'scenario':<36}" + "".join(f"{what + ' p50':>13} {'p95':>7} {'x alone':>7}"
                                         for what in ("trivial", "groupby", "host work")) + "  A cores")
    for s in scenarios:
        row = f"{s.name:<36}"
        for values, base in ((s.trivial, alone.trivial), (s.groupby, alone.groupby), (s.host, alone.host)):
            p95 = percentile(values, 0.95)
            row += (f"{statistics.median(values) * 1e3:11.1f}ms {p95 * 1e3:5.0f}ms "
                    f"{p95 / percentile(base, 0.95):6.2f}x")
        # Tenants: the five neighbours' cores added up, per round.
        per_round = [sum(s.neighbour_cores[i:i + len(s.neighbours)])
                     for i in range(0, len(s.neighbour_cores), max(1, len(s.neighbours)))]
        cores = f"{statistics.median(per_round):.2f}" if per_round else "-"
        print(f"{row} {cores:>8}")


async def run_part(title: str, scenarios: list[Scenario], *, neighbours: int, idle: int, tenants: bool,
                   iterations: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="ka-noisy-") as root:
        try:
            for s in scenarios:
                await setup(s, Path(root), neighbours, idle, tenants)
            per_round = max(1, iterations // rounds)
            for r in range(rounds):
                for s in scenarios if r % 2 == 0 else list(reversed(scenarios)):
                    await measure(s, per_round)
        finally:
            for s in scenarios:
                if s.manager is not None:
                    await s.manager.aclose()
    report(title, scenarios)


def conversation_scenarios(base: Limits, cpus: float) -> list[Scenario]:
    return [Scenario("B alone", base, noisy=False), Scenario("no CPU share", base),
            *(Scenario(f"{cpus:g} cpu each, {p}", base.with_(cpus=cpus, cpu_policy=p))
              for p in ("weight", "quota", "burst"))]


def tenant_scenarios(base: Limits, cpus: float, policy: str) -> list[Scenario]:
    share = base.with_(cpus=cpus, cpu_policy=policy)
    return [Scenario("B alone", share, noisy=False), Scenario("no CPU share", base),
            Scenario(f"{cpus:g} cpu each, {policy}", share),
            Scenario(f"{cpus:g} cpu each + tenant {cpus:g}, {policy}", share.with_(tenant_cpus=cpus))]


async def main(args: argparse.Namespace) -> None:
    base = Limits(isolation=args.isolation, timeout_s=600.0)
    print(f"cores: {os.cpu_count()}, load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.part in ("conversations", "both"):
        await run_part("A noisy conversation beside B", conversation_scenarios(base, args.cpus),
                       neighbours=1, idle=0, tenants=False, iterations=args.iterations, rounds=args.rounds)
    if args.part in ("tenants", "both"):
        await run_part("Tenant X: five noisy conversations; tenant Y: B and four idle ones",
                       tenant_scenarios(base, args.cpus, args.policy), neighbours=5, idle=4, tenants=True,
                       iterations=args.iterations, rounds=args.rounds)
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--part", choices=("conversations", "tenants", "both"), default="both")
    parser.add_argument("--isolation", default="sandbox")
    parser.add_argument("--cpus", type=float, default=1.0)
    parser.add_argument("--policy", default="quota", help="the tenants part's cpu_policy (default quota)")
    asyncio.run(main(parser.parse_args()))
