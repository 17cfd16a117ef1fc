"""Density: how many idle conversations fit on one host (issue 18).

    python benchmarks/density.py                                  # 200 template, 50 cold, sandbox
    python benchmarks/density.py --conversations 20 --cold-conversations 5 --isolation none

Each conversation is created through a ``SessionManager`` and runs one cell that imports
pandas and builds a 10,000-row DataFrame, then stays open and idle. Two sides, one after the
other in one run: kernels forked from the template (the default, ``LocalBackend()``) and
kernels started cold (``LocalBackend(template=False)``, today's start). Cold conversations
take about 100 MiB each, so that side runs fewer of them by default (``--cold-conversations``).

Reported per side:

- **USS per conversation**: the memory only that conversation holds, the sum of
  ``Private_*`` in ``/proc/PID/smaps_rollup`` over its processes (the kernel pid from
  ``session.describe()["kernel"]["pid"]``, every descendant, and every process of its
  per-conversation cgroup: bubblewrap's helpers, which for a forked sandboxed kernel are not
  its ancestors, and anything the kernel started). Median and mean; PSS and RSS beside.
- the template process's own USS, once for all conversations (and per conversation when
  shared among them);
- the host's ``MemAvailable`` before the manager starts and with every conversation open,
  the difference per conversation (everything: kernel page tables, sockets, page cache of
  the notebooks; other work on the machine moves it too);
- the time to create them one after the other (create + the cell), and the template start.

Goal: USS per conversation at most 25 MiB on the template path (today 98 MiB cold).
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

from kernel_analyst.kernels import KernelSession, Limits, LocalBackend, SessionManager

CELL = ("import pandas as pd\nimport numpy as np\n"
        "rng = np.random.default_rng()\n"
        "df = pd.DataFrame({'id': np.arange(10_000), 'x': rng.random(10_000),\n"
        "                   'city': np.array(['Oslo', 'Lima', 'Pune', 'Kyiv'])[np.arange(10_000) % 4]})\n"
        "print(len(df))")
MIB = 1024 * 1024
SETTLE_S = 3.0


def rollup(pid: int) -> dict[str, int]:
    """USS (all ``Private_*``), PSS and RSS of one process, in bytes (zeros if it is gone)."""
    found = {"uss": 0, "pss": 0, "rss": 0}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key.startswith("Private_"):
                    found["uss"] += int(rest.split()[0]) * 1024
                elif key == "Pss":
                    found["pss"] += int(rest.split()[0]) * 1024
                elif key == "Rss":
                    found["rss"] += int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return found


def processes() -> tuple[dict[int, list[int]], dict[str, list[int]]]:
    """Parent pid -> child pids, and per-kernel cgroup -> pids, for every process shown."""
    children: dict[int, list[int]] = {}
    groups: dict[str, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            group = _kernel_cgroup(int(name))
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(name))
        if group:
            groups.setdefault(group, []).append(int(name))
    return children, groups


def _kernel_cgroup(pid: int) -> str:
    """The per-conversation cgroup ``pid`` is in (kernel-analyst makes one per kernel
    under ``process`` and ``sandbox``), or "" when it is in none."""
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            path = line.strip().split(":", 2)[-1]
            if "kernel-analyst-" in path:
                return path
    return ""


def conversation_pids(pid: int, children: dict[int, list[int]], groups: dict[str, list[int]]) -> list[int]:
    """``pid``, its descendants, and every process of its per-conversation cgroup (the
    bubblewrap holder of a forked sandboxed kernel is not its descendant)."""
    tree, todo = {pid}, [pid]
    while todo:
        current = todo.pop()
        for child in children.get(current, []):
            if child not in tree:
                tree.add(child)
                todo.append(child)
    try:
        tree |= set(groups.get(_kernel_cgroup(pid), []))
    except OSError:
        pass
    return sorted(tree)


def mem_available() -> int:
    """The host's MemAvailable, in bytes."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no MemAvailable in /proc/meminfo")


def conversation_memory(sessions: list[KernelSession]) -> tuple[list[dict[str, int]], list[int]]:
    """Each conversation's summed USS/PSS/RSS and process count."""
    children, groups = processes()
    memory, counts = [], []
    for s in sessions:
        pids = conversation_pids(int(s.describe()["kernel"]["pid"]), children, groups)
        total = {"uss": 0, "pss": 0, "rss": 0}
        for pid in pids:
            for key, value in rollup(pid).items():
                total[key] += value
        memory.append(total)
        counts.append(len(pids))
    return memory, counts


async def side(root: Path, level: str, n: int, *, template: bool) -> dict[str, Any]:
    """Open ``n`` conversations on one side, measure them idle, close them."""
    limits = Limits(isolation=level)  # type: ignore[arg-type]
    available_before = mem_available()
    started = time.perf_counter()
    sessions: list[KernelSession] = []
    first_s = 0.0
    backend = LocalBackend(template=template)
    async with SessionManager(root, limits=limits, backend=backend) as manager:
        for i in range(n):
            t = time.perf_counter()
            s = await manager.session(f"d{i}")
            ex = await s.execute(CELL)
            if ex.text.strip() != "10000":
                raise RuntimeError(f"conversation {i}: {ex.status} {ex.text[-300:]!r} {ex.events}")
            sessions.append(s)
            if i == 0:
                first_s = time.perf_counter() - t
            if (i + 1) % 50 == 0:
                print(f"  {i + 1} open, {time.perf_counter() - started:.1f} s", flush=True)
        create_s = time.perf_counter() - started
        await asyncio.sleep(SETTLE_S)  # let background imports and the allocator settle
        memory, counts = conversation_memory(sessions)
        templates = backend.templates.describe()
        template_uss = sum(rollup(int(t["pid"]))["uss"] for t in templates if t.get("pid"))
        available_open = mem_available()
        starts = sorted({str(s.describe()["kernel"]["start"].get("path")) for s in sessions})
        t = time.perf_counter()
    close_s = time.perf_counter() - t
    uss = [m["uss"] / MIB for m in memory]
    return {
        "way": "template" if template else "cold", "isolation": level, "conversations": n,
        "started_as": starts, "processes_per_conversation": statistics.median(counts),
        "uss_median_mib": statistics.median(uss), "uss_mean_mib": statistics.fmean(uss),
        "uss_max_mib": max(uss),
        "pss_mean_mib": statistics.fmean(m["pss"] / MIB for m in memory),
        "rss_mean_mib": statistics.fmean(m["rss"] / MIB for m in memory),
        "template_uss_mib": template_uss / MIB,
        "uss_mean_with_template_share_mib": statistics.fmean(uss) + template_uss / MIB / n,
        "mem_available_before_mib": available_before / MIB, "mem_available_open_mib": available_open / MIB,
        "host_mib_per_conversation": (available_before - available_open) / MIB / n,
        "create_s": create_s, "create_per_conversation_ms": create_s / n * 1000,
        "first_conversation_s": first_s, "close_s": close_s,
    }


def report(got: dict[str, Any]) -> None:
    print(f"\n{got['way']} ({got['isolation']}), {got['conversations']} idle conversations, started as "
          f"{got['started_as']}, {got['processes_per_conversation']:g} process(es) each:")
    print(f"  USS per conversation: median {got['uss_median_mib']:.1f} MiB, "
          f"mean {got['uss_mean_mib']:.1f} MiB, max {got['uss_max_mib']:.1f} MiB   "
          f"(PSS mean {got['pss_mean_mib']:.1f}, RSS mean "
          f"{got['rss_mean_mib']:.1f} MiB)")
    if got["template_uss_mib"]:
        print(f"  template process: USS {got['template_uss_mib']:.1f} MiB once; mean USS with its share "
              f"{got['uss_mean_with_template_share_mib']:.1f} MiB per conversation")
    print(f"  host MemAvailable: {got['mem_available_before_mib']:.0f} MiB before, "
          f"{got['mem_available_open_mib']:.0f} MiB with all open: "
          f"{got['host_mib_per_conversation']:.1f} MiB per conversation")
    first = " with the template's start" if got["way"] == "template" else ""
    print(f"  created in {got['create_s']:.1f} s ({got['create_per_conversation_ms']:.0f} ms each, the first "
          f"{got['first_conversation_s']:.2f} s{first}); closed in {got['close_s']:.1f} s", flush=True)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=200, help="template-path conversations")
    parser.add_argument("--cold-conversations", type=int, default=50,
                        help="cold conversations (about 100 MiB each; 0 skips the cold side)")
    parser.add_argument("--isolation", default="sandbox", choices=["none", "process", "sandbox"])
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    print(f"density (isolation={args.isolation}, python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f})")
    results = []
    with tempfile.TemporaryDirectory(prefix="ka-density-") as tmp:
        for template, n in ((True, args.conversations), (False, args.cold_conversations)):
            if n <= 0:
                continue
            got = await side(Path(tmp) / ("template" if template else "cold"), args.isolation, n,
                             template=template)
            report(got)
            results.append(got)
    print("goal: USS per conversation <= 25 MiB on the template path")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
