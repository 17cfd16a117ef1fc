"""Stress benchmark of the kernel protocol (not a test): many kernels at once on a busy machine.

    python benchmarks/stress.py                        # 50 kernels, 10 rounds, none + sandbox
    python benchmarks/stress.py --kernels 20 --rounds 2 --levels none

Each round, with ``--burners`` processes spinning on the CPU beside it:

1. **ours**: ``--kernels`` sessions are created at once through a ``SessionManager``
   (the real path: start, ready loop, audit trail); each then sends a burst without
   waiting: two cells, ``variables()``, an interrupt while the first cell sleeps, and
   ten raw requests (kernel_info and silent executes) through the kernel's request path.
   Every reply must arrive: a missing one is a **lost reply**; a session that does not
   start within ``Limits.startup_timeout_s`` is a **startup timeout**.
2. **raw**: the same number of kernels started at once with jupyter_client's
   ``AsyncKernelManager`` + ``AsyncKernelClient.wait_for_ready`` (what a user would pick
   instead), each then sending the same burst through jupyter_client (the cells, a
   user-expressions request, an interrupt, the ten raw requests).

Ours and raw alternate which goes first, so load changes hit both. Reported: lost replies
and startup timeouts (goal: 0 of each), how our kernels started (``template`` or ``cold``,
from ``session.describe()``), and the p95 time to ready, ours / raw (goal at most 0.25x on
the template path, issue 18). Our kernels fork from a template process (the default); its
own start is paid once per ``SessionManager``, before the burst (one conversation opened
and closed, timed and printed apart) unless ``--template-in-window`` puts it in the timed
window; ``--cold`` starts every kernel as its own process (``LocalBackend(template=False)``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_client.manager import AsyncKernelManager

from kernel_analyst.kernels import KernelSession, KernelStartError, Limits, LocalBackend, SessionManager
from kernel_analyst.kernels.launch import Outcome, deadline_after
from kernel_analyst.kernels.testing import cpu_burners

BURST_TIMEOUT_S = 120.0
RAW_REQUESTS = 10
# The first cell says when it sleeps: both sides interrupt it then, so the interrupt lands
# in the sleep (x is set) and not before the cell's first statement, which a kernel that
# starts the cell at once (a forked one) would otherwise see as often as not.
FIRST_CELL = "import time\nx = 1\nprint('sleeping', flush=True)\ntime.sleep(2)"


@dataclass
class Tally:
    """One side's counts over a round."""

    ready_s: list[float] = field(default_factory=list)
    startup_timeouts: int = 0
    lost_replies: int = 0
    errors: list[str] = field(default_factory=list)
    starts: Counter[str] = field(default_factory=Counter)
    """How the kernels started (``template`` / ``cold``; raw: none)."""
    template_start_s: list[float] = field(default_factory=list)
    """The template's own start, once per round (outside the timed window by default)."""

    def add(self, other: Tally) -> None:
        self.ready_s += other.ready_s
        self.startup_timeouts += other.startup_timeouts
        self.lost_replies += other.lost_replies
        self.errors += other.errors
        self.starts += other.starts
        self.template_start_s += other.template_start_s


def p95(values: list[float]) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


# -- ours -----------------------------------------------------------------------------------


async def _raw_burst(session: KernelSession) -> int:
    """Ten requests through the kernel's request path at once; return how many got no reply."""
    kernel = session.kernel
    assert kernel is not None
    router = kernel.router
    requests = []
    for i in range(RAW_REQUESTS):
        if i % 2:
            requests.append(router.send("shell", "kernel_info_request", {}))
        else:
            requests.append(router.send("shell", "execute_request", {
                "code": "", "silent": True, "store_history": False, "user_expressions": {},
                "allow_stdin": False, "stop_on_error": False}))
    deadline = deadline_after(BURST_TIMEOUT_S)
    outcomes = [await router.wait(r, deadline) for r in requests]
    for r in requests:
        router.forget(r)
    return sum(o is not Outcome.REPLY for o in outcomes)


async def _session_burst(session: KernelSession) -> tuple[int, list[str]]:
    """Cells, variables() and an interrupt at once; every one must come back."""
    errors: list[str] = []
    sleeping = asyncio.Event()
    first = asyncio.ensure_future(session.execute(FIRST_CELL, timeout=BURST_TIMEOUT_S,
                                                  on_output=lambda _: sleeping.set()))
    second = asyncio.ensure_future(session.execute("y = x + 1\ny", timeout=BURST_TIMEOUT_S))
    names = asyncio.ensure_future(session.variables())
    raw = asyncio.ensure_future(_raw_burst(session))
    await _interrupt_when_sleeping(session, first, sleeping)
    a, b, variables, lost = await asyncio.gather(first, second, names, raw)
    if a.status not in ("ok", "error") or a.state != "kept":
        errors.append(f"first cell: {a.status}/{a.state} {a.events}")
    if b.status != "ok" or b.text.strip() != "2":
        errors.append(f"second cell: {b.status} {b.text[-200:]!r} {b.events}")
    if not {"x", "y"} & {v.name for v in variables}:
        errors.append(f"variables: {[v.name for v in variables]}")
    # A reply the kernel never sent (NoReply, known at once) is still a lost reply.
    lost += sum(1 for ex in (a, b)
                if ex.status == "timeout" or (ex.error is not None and ex.error.ename == "NoReply"))
    return lost, errors


async def _interrupt_when_sleeping(session: KernelSession, cell: asyncio.Future[Any],
                                   sleeping: asyncio.Event) -> None:
    """Interrupt the first cell once it says it sleeps, as a user pressing Stop."""
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(sleeping.wait(), BURST_TIMEOUT_S)
    if not cell.done():
        await session.interrupt()


async def ours(n: int, level: str, root: Path, *, template: bool = True,
               template_in_window: bool = False) -> Tally:
    tally = Tally()
    limits = Limits(isolation=level, startup_timeout_s=60.0, timeout_s=BURST_TIMEOUT_S)  # type: ignore[arg-type]
    backend = LocalBackend(template=template)
    async with SessionManager(root, limits=limits, backend=backend) as manager:
        if template and not template_in_window:  # a long-lived manager has its template up
            t0 = time.monotonic()
            await (await manager.session("warmup")).execute("0")
            tally.template_start_s.append(time.monotonic() - t0)
            await manager.close("warmup", now=True)

        async def one(i: int) -> None:
            t0 = time.monotonic()
            try:
                session = await manager.session(f"stress-{i}")
            except KernelStartError as exc:
                tally.startup_timeouts += 1
                tally.errors.append(f"start {i}: {str(exc)[:200]}")
                return
            tally.ready_s.append(time.monotonic() - t0)
            tally.starts[str(session.describe()["kernel"]["start"].get("path"))] += 1
            lost, errors = await _session_burst(session)
            tally.lost_replies += lost
            tally.errors += [f"session {i}: {e}" for e in errors]

        await asyncio.gather(*(one(i) for i in range(n)))
    return tally


# -- raw jupyter_client ---------------------------------------------------------------------------


async def raw(n: int) -> Tally:
    tally = Tally()
    managers: list[AsyncKernelManager] = []

    async def one(i: int) -> None:
        km = AsyncKernelManager(kernel_name="python3")
        managers.append(km)
        t0 = time.monotonic()
        try:
            await km.start_kernel()
            kc = km.client()
            kc.start_channels()
            await kc.wait_for_ready(timeout=60)
        except (RuntimeError, TimeoutError) as exc:
            tally.startup_timeouts += 1
            tally.errors.append(f"raw start {i}: {exc}")
            return
        tally.ready_s.append(time.monotonic() - t0)
        try:
            tally.lost_replies += await _raw_client_burst(km, kc)
        finally:
            kc.stop_channels()

    try:
        await asyncio.gather(*(one(i) for i in range(n)))
    finally:
        await asyncio.gather(*(km.shutdown_kernel(now=True) for km in managers if km.has_kernel),
                             return_exceptions=True)
    return tally


async def _raw_client_burst(km: AsyncKernelManager, kc: Any) -> int:
    """The same burst through jupyter_client: two cells, a variables request (user
    expressions), an interrupt once the first cell runs, and the ten raw requests."""
    first = kc.execute(FIRST_CELL)
    names = "sorted(k for k in globals() if not k.startswith('_'))"
    ids = {first, kc.execute("y = x + 1\ny"), kc.execute("", silent=True, user_expressions={"v": names})}
    ids |= {kc.kernel_info() if j % 2 else kc.execute("", silent=True) for j in range(RAW_REQUESTS)}
    deadline = time.monotonic() + BURST_TIMEOUT_S
    while time.monotonic() < deadline:  # wait for the first cell to sleep, then interrupt
        msg = await kc._async_get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        if msg["parent_header"].get("msg_id") == first and msg["msg_type"] == "stream":
            await km.interrupt_kernel()
            break
    pending = set(ids)
    while pending and time.monotonic() < deadline:
        try:
            msg = await kc._async_get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
        except Exception:
            break
        pending.discard(msg["parent_header"].get("msg_id"))
    return len(pending)


# -- the run ---------------------------------------------------------------------------------------


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--burners", type=int, default=2)
    parser.add_argument("--levels", default="none,sandbox")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--cold", action="store_true", help="start our kernels cold, not from a template")
    parser.add_argument("--template-in-window", action="store_true",
                        help="start the template inside the timed window (once per round)")
    args = parser.parse_args()
    levels = args.levels.split(",")
    totals = {level: Tally() for level in levels}
    baseline = Tally()
    with tempfile.TemporaryDirectory(prefix="ka-stress-") as tmp, cpu_burners(args.burners):
        for r in range(args.rounds):
            for level in levels:
                order = ("ours", "raw") if (r % 2 == 0) else ("raw", "ours")
                for side in order:
                    t0 = time.monotonic()
                    if side == "ours":
                        got = await ours(args.kernels, level, Path(tmp) / f"r{r}-{level}",
                                         template=not args.cold, template_in_window=args.template_in_window)
                        totals[level].add(got)
                    else:
                        got = await raw(args.kernels)
                        baseline.add(got)
                    print(f"round {r + 1} {level:8} {side:4}: {len(got.ready_s)} ready, "
                          f"{got.startup_timeouts} startup timeouts, {got.lost_replies} lost replies, "
                          f"p95 ready {p95(got.ready_s):.1f} s, {time.monotonic() - t0:.0f} s"
                          + (f", started {dict(got.starts)}" if got.starts else "")
                          + (f", template start {got.template_start_s[0]:.1f} s (not timed)"
                             if got.template_start_s else ""),
                          flush=True)
                    for error in got.errors[:5]:
                        print("   ", error)
    report: dict[str, Any] = {"kernels": args.kernels, "rounds": args.rounds, "burners": args.burners,
                              "template": not args.cold, "template_in_window": args.template_in_window}
    print(f"\n{args.kernels} kernels x {args.rounds} rounds, {args.burners} CPU burners")
    raw_p95 = p95(baseline.ready_s)
    raw_median = statistics.median(baseline.ready_s or [0])
    print(f"raw jupyter_client: {baseline.startup_timeouts} startup timeouts, {baseline.lost_replies} "
          f"lost replies, p95 ready {raw_p95:.2f} s, median {raw_median:.2f} s")
    for level, tally in totals.items():
        ratio = p95(tally.ready_s) / raw_p95 if raw_p95 else float("nan")
        print(f"ours ({level}): {tally.startup_timeouts} startup timeouts, {tally.lost_replies} lost "
              f"replies, {len(tally.errors)} errors, p95 ready {p95(tally.ready_s):.2f} s "
              f"({ratio:.2f}x raw; goal <= 0.25x on the template path), median "
              f"{statistics.median(tally.ready_s or [0]):.2f} s; started {dict(tally.starts)}"
              + (f"; template start median {statistics.median(tally.template_start_s):.2f} s, not timed"
                 if tally.template_start_s else ""))
        report[level] = {"startup_timeouts": tally.startup_timeouts, "lost_replies": tally.lost_replies,
                         "errors": len(tally.errors), "p95_ready_s": p95(tally.ready_s), "ratio": ratio,
                         "median_ready_s": statistics.median(tally.ready_s or [0]),
                         "starts": dict(tally.starts), "template_start_s": tally.template_start_s}
    report["raw"] = {"startup_timeouts": baseline.startup_timeouts, "lost_replies": baseline.lost_replies,
                     "p95_ready_s": raw_p95}
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    failed = any(t.startup_timeouts or t.lost_replies or t.errors for t in totals.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
