"""What the system-call filter and the CPU share add to a new conversation's start, side by side.

    python benchmarks/confinement_start.py [--rounds 20] [--isolation sandbox]

A new conversation (a kernel forked from the template into its own sandbox, the default
path) from ``manager.session(new_id)`` to its first result, under four sets of limits in
one process, interleaved round by round (the order reversed every other round; one
warm-up round dropped): neither (``syscall_filter=False``, no ``cpus``), the filter alone,
the CPU share alone (``cpus=1``: a cgroup in the cpu hierarchy, the move into it, the
thread pools sized for the kernel) and both. Prints the median and p90 of each, and the
difference to "neither": of the medians, and the median of the round-by-round
differences (goal: both at most 5 ms more). Then each added step alone
(``--components N``), which a loaded machine's noise does not hide.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from kernel_analyst.kernels import Limits, SessionManager

VARIANTS = {
    "neither": {"syscall_filter": False},
    "filter": {"syscall_filter": True},
    "cpu share": {"syscall_filter": False, "cpus": 1.0},
    "both": {"syscall_filter": True, "cpus": 1.0},
}


async def start_once(manager: SessionManager, conversation: str) -> float:
    """Seconds from asking for a new conversation to its first result; closes it again."""
    started = time.perf_counter()
    session = await manager.session(conversation)
    ex = await session.execute("1 + 1")
    elapsed = time.perf_counter() - started
    if ex.text.strip() != "2" or session.describe()["kernel"]["start"]["path"] != "template":
        raise RuntimeError(f"unexpected start: {ex.text!r}, {session.describe()['kernel']}")
    await manager.close(conversation)
    return elapsed


async def measure(isolation: str, rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="ka-bench-") as root:
        managers = {name: SessionManager(Path(root) / name.replace(" ", "-"),
                                         limits=Limits(isolation=isolation, **changes))  # type: ignore[arg-type]
                    for name, changes in VARIANTS.items()}
        for manager in managers.values():
            await manager.start()
        try:
            for r in range(rounds + 1):
                for name in (list(VARIANTS) if r % 2 else list(reversed(VARIANTS))):
                    elapsed = await start_once(managers[name], f"start-{r}")
                    if r:
                        times[name].append(elapsed)
        finally:
            for manager in managers.values():
                await manager.aclose()
    return times


def report(times: dict[str, list[float]]) -> None:
    """Median and p90 of each, and against "neither": the difference of the medians, and
    the median of the differences round by round (the two starts of a pair ran next to
    each other, so slow drifts of the machine's load cancel)."""
    base = times["neither"]
    print(f"{'variant':<10} {'median':>9} {'p90':>9} {'medians':>9} {'paired':>9}")
    for name, values in times.items():
        median = statistics.median(values)
        p90 = sorted(values)[max(0, int(len(values) * 0.9) - 1)]
        paired = statistics.median(v - b for v, b in zip(values, base, strict=True))
        against = median - statistics.median(base)
        print(f"{name:<10} {median * 1e3:7.1f}ms {p90 * 1e3:7.1f}ms {against * 1e3:+7.1f}ms "
              f"{paired * 1e3:+7.1f}ms")


def components(repeats: int) -> None:
    """The steps the filter and the share add, each timed alone (their medians are
    robust to a loaded machine, where a whole start's are not): planning a sandboxed
    launch (the cgroups made, the filter fetched) and removing its cgroups again; moving
    a process into its cgroups (what the host does beside a forked kernel's start); and
    loading the filter in a fresh process (what a forked kernel does, and bubblewrap for
    a cold one)."""
    import ctypes
    import subprocess

    from kernel_analyst.kernels.launch import sandbox
    from kernel_analyst.kernels.launch._cgroups import CpuShare, KernelCgroup
    from kernel_analyst.kernels.launch._inkernel._forkkernel import confine, state
    from kernel_analyst.kernels.launch._seccomp import syscall_filter

    def plan(limits: Limits) -> float:
        with tempfile.TemporaryDirectory(prefix="ka-") as runtime:
            started = time.perf_counter()
            launch = sandbox.plan_launch(["sh"], workdir=Path(runtime), limits=limits, isolation="sandbox",
                                         extra_env={}, runtime_dir=Path(runtime))
            launch.release()
            return time.perf_counter() - started

    def move(cpu: CpuShare | None) -> float:
        group = KernelCgroup.create(max_processes=64, memory_bytes=2**30, cpu=cpu)
        assert group is not None
        child = subprocess.Popen(["sleep", "60"])
        try:
            started = time.perf_counter()
            group.add(child.pid)
            return time.perf_counter() - started
        finally:
            child.kill()
            child.wait()
            group.kill_all()
            group.remove()

    def load_filter() -> float:
        bpf = syscall_filter().bpf
        state.clib()  # a kernel has the C library loaded long before (the template does)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)  # no_new_privs, as in a kernel by then
            started = time.perf_counter()
            confine.seccomp_filter(bpf)
            os.write(write, str(time.perf_counter() - started).encode())
            os._exit(0)
        os.close(write)
        elapsed = float(os.read(read, 64))
        os.close(read)
        os.waitpid(pid, 0)
        return elapsed

    base = Limits(isolation="sandbox")
    pairs = {
        "plan + release, neither / both": (lambda: plan(base.with_(syscall_filter=False)),
                                           lambda: plan(base.with_(cpus=1.0))),
        "move into the cgroups, without / with cpu": (lambda: move(None), lambda: move(CpuShare(1.0))),
        "load the filter (no filter / filter)": (lambda: 0.0, load_filter),
    }
    print(f"\n{'step':<44} {'without':>10} {'with':>10} {'added':>10}")
    for name, (without, with_) in pairs.items():
        a: list[float] = []
        b: list[float] = []
        for _ in range(repeats):
            a.append(without())
            b.append(with_())
        added = statistics.median(b) - statistics.median(a)
        print(f"{name:<44} {statistics.median(a) * 1e3:8.3f}ms {statistics.median(b) * 1e3:8.3f}ms "
              f"{added * 1e3:+8.3f}ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--isolation", default="sandbox")
    parser.add_argument("--components", type=int, default=100, metavar="N",
                        help="time each added step alone N times (0: not)")
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.rounds:
        report(asyncio.run(measure(args.isolation, args.rounds)))
    if args.components:
        components(args.components)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
