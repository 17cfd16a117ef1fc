"""The request path and the timeout policy, on scripted kernels (no processes).

Every case here also runs against real kernels elsewhere (test_failures.py,
test_session.py); these pin down the exact behaviour, fast and every time.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from kernel_analyst.kernels import KernelSession, Limits
from kernel_analyst.kernels.launch import Outcome, Settled, deadline_after
from kernel_analyst.kernels.testing import FakeBackend, FakeKernel

LIMITS = Limits(isolation="none", timeout_s=5.0, interrupt_grace_s=0.3, max_disk_mb=None)


async def _session(tmp_path: Path, limits: Limits = LIMITS) -> tuple[KernelSession, FakeBackend]:
    backend = FakeBackend()
    session = KernelSession("s", directory=tmp_path / "s", backend=backend, limits=limits)
    await session.start()
    return session, backend


def _cells(session: KernelSession) -> list[dict]:
    return json.loads(session.notebook_path.read_text())["cells"]


# -- the router --------------------------------------------------------------------------


async def test_reply_and_iopub_are_routed_by_parent() -> None:
    kernel = FakeKernel()
    seen: list[str] = []
    request = kernel.router.send("shell", "execute_request", {"code": "print:hi"},
                                 on_iopub=lambda t, c: seen.append(t))
    assert await kernel.router.wait(request, deadline_after(2)) is Outcome.REPLY
    assert await kernel.router.settle(request, deadline_after(2)) is Settled.IDLE
    assert seen == ["execute_input", "stream"]


async def test_unknown_parents_are_counted() -> None:
    kernel = FakeKernel()
    kernel.publish("somebody-else", "stream", {"name": "stdout", "text": "x"})
    kernel.publish("somebody-else", "execute_reply", {"status": "ok"}, channel="shell")
    assert kernel.router.unknown_parents == 2


async def test_idle_without_a_reply_is_proven_by_a_later_reply() -> None:
    kernel = FakeKernel()
    request = kernel.router.send("shell", "execute_request", {"code": "print:x;no-reply"})
    t0 = time.monotonic()
    assert await kernel.router.wait(request, deadline_after(10)) is Outcome.NO_REPLY
    assert time.monotonic() - t0 < 2
    assert [t for _, t, _ in kernel.sent] == ["execute_request", "kernel_info_request"]
    assert kernel.router.pending == 1, "the probe is forgotten; the caller forgets its request"


async def test_reply_after_its_idle_needs_no_probe() -> None:
    kernel = FakeKernel()
    request = kernel.router.send("shell", "execute_request", {"code": "no-reply"})
    asyncio.get_running_loop().call_later(0.05, lambda: kernel.publish(
        request.msg_id, "execute_reply", {"status": "ok"}, channel="shell"))
    assert await kernel.router.wait(request, deadline_after(5)) is Outcome.REPLY
    assert [t for _, t, _ in kernel.sent] == ["execute_request"]


async def test_death_ends_the_wait_at_once() -> None:
    kernel = FakeKernel()
    request = kernel.router.send("shell", "execute_request", {"code": "hang"})
    asyncio.get_running_loop().call_later(0.05, kernel.die)
    t0 = time.monotonic()
    assert await kernel.router.wait(request, deadline_after(10)) is Outcome.DIED
    assert time.monotonic() - t0 < 2


async def test_a_broken_connection_fails_pending_requests_at_once() -> None:
    kernel = FakeKernel()
    request = kernel.router.send("shell", "execute_request", {"code": "hang"})
    asyncio.get_running_loop().call_later(0.05, kernel.break_connection)
    t0 = time.monotonic()
    assert await kernel.router.wait(request, None) is Outcome.FAILED
    assert time.monotonic() - t0 < 2
    with pytest.raises(Exception, match="connection to the kernel failed"):
        kernel.router.send("shell", "kernel_info_request", {})


async def test_a_lost_idle_is_proven_by_a_probe() -> None:
    kernel = FakeKernel()
    request = kernel.router.send("shell", "execute_request", {"code": "no-idle"})
    assert await kernel.router.wait(request, deadline_after(2)) is Outcome.REPLY
    assert await kernel.router.settle(request, deadline_after(5)) is Settled.CAUGHT_UP
    assert [m for _, m, _ in kernel.sent].count("kernel_info_request") >= 1


async def test_a_late_idle_is_waited_for_however_quiet_iopub_is() -> None:
    """Silence proves nothing on a busy machine: the late idle is awaited."""
    kernel = FakeKernel()
    request = kernel.router.send("shell", "execute_request", {"code": "idle-after:1.5"})
    assert await kernel.router.wait(request, deadline_after(2)) is Outcome.REPLY
    assert await kernel.router.settle(request, None) is Settled.IDLE


# -- the session's policy ------------------------------------------------------------------


async def test_output_that_lags_the_reply_is_kept(tmp_path: Path) -> None:
    session, _ = await _session(tmp_path)
    ex = await session.execute("print:a;late-output:0.5:b")
    assert ex.status == "ok" and ex.text == "a\nb\n"
    await session.close()


async def test_timeout_interrupts_and_keeps_state(tmp_path: Path) -> None:
    session, backend = await _session(tmp_path)
    ex = await session.execute("sleep:30", timeout=0.2)
    assert (ex.status, ex.state) == ("timeout", "kept")
    assert backend.started[0].interrupts == 1 and len(backend.started) == 1
    assert ex.events[0].startswith("timed out after 0.2 s")
    await session.close()


async def test_ignored_interrupt_restarts_the_kernel(tmp_path: Path) -> None:
    session, backend = await _session(tmp_path)
    ex = await session.execute("hang", timeout=0.2)
    assert (ex.status, ex.state) == ("timeout", "lost")
    assert len(backend.started) == 2 and backend.started[0].shutdowns == 1
    assert any("restarted" in c["source"] for c in _cells(session) if c["cell_type"] == "markdown")
    assert (await session.execute("print:after")).text == "after\n"
    await session.close()


async def test_death_mid_cell_is_reported_and_the_next_call_restarts(tmp_path: Path) -> None:
    session, backend = await _session(tmp_path)
    ex = await session.execute("print:x;die")
    assert (ex.status, ex.state) == ("died", "lost") and ex.text == "x\n"
    nxt = await session.execute("print:y")
    assert (nxt.status, nxt.state) == ("ok", "kept") and len(backend.started) == 2
    await session.close()


async def test_cancellation_interrupts_records_and_propagates(tmp_path: Path) -> None:
    session, backend = await _session(tmp_path)
    task = asyncio.create_task(session.execute("print:started;sleep:30"))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert backend.started[0].interrupts == 1
    recorded = [c for c in _cells(session) if c["cell_type"] == "code"]
    assert recorded[-1]["metadata"]["kernel_analyst"]["status"] == "error"
    assert (await session.execute("print:next")).state == "kept"
    await session.close()


async def test_cancelled_cell_that_ignores_the_interrupt_gets_a_new_kernel(tmp_path: Path) -> None:
    session, backend = await _session(tmp_path)
    task = asyncio.create_task(session.execute("hang"))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(backend.started) == 2
    code = [c for c in _cells(session) if c["cell_type"] == "code"][-1]
    assert code["metadata"]["kernel_analyst"]["state"] == "lost"
    await session.close()


async def test_a_broken_connection_mid_cell_replaces_the_kernel(tmp_path: Path) -> None:
    session, backend = await _session(tmp_path)
    asyncio.get_running_loop().call_later(0.1, backend.started[0].break_connection)
    t0 = time.monotonic()
    ex = await session.execute("hang", timeout=None)
    assert time.monotonic() - t0 < 2
    assert (ex.status, ex.state) == ("died", "lost")
    assert any("connection to the kernel failed" in e for e in ex.events)
    assert len(backend.started) == 2
    await session.close()


async def test_timeout_counts_from_the_call_not_from_the_turn(tmp_path: Path) -> None:
    session, _ = await _session(tmp_path)
    busy = asyncio.create_task(session.execute("sleep:1.5", timeout=10))
    await asyncio.sleep(0.05)
    t0 = time.monotonic()
    queued = await session.execute("print:never", timeout=0.3)
    assert time.monotonic() - t0 < 1.0
    assert queued.status == "timeout" and queued.outputs == [] and "did not run" in str(queued.error)
    assert (await busy).status == "ok"
    assert "print:never" not in [c["source"] for c in _cells(session)]
    await session.close()


async def test_time_spent_queued_is_said_in_the_result(tmp_path: Path) -> None:
    session, _ = await _session(tmp_path)
    busy = asyncio.create_task(session.execute("sleep:0.5", timeout=10))
    await asyncio.sleep(0.05)
    ex = await session.execute("sleep:30", timeout=1.0)
    assert ex.status == "timeout"
    assert any(e.startswith("waited") for e in ex.events)
    await busy
    await session.close()


async def test_missing_idle_is_marked_in_the_events(tmp_path: Path) -> None:
    session, _ = await _session(tmp_path)
    ex = await session.execute("print:x;no-idle")
    assert ex.status == "ok" and ex.text == "x\n"
    assert any("without its idle status" in e for e in ex.events)
    await session.close()


async def test_output_after_the_deadline_is_added_to_the_recorded_cell(tmp_path: Path) -> None:
    session, _ = await _session(tmp_path)
    # Reply at once; the output comes after the (short) deadline; no probe can prove
    # IOPub complete before it, because the kernel answers the probe only after its idle.
    ex = await session.execute("late-output:0.6:late;idle-after:0.1", timeout=0.3)
    assert ex.status == "ok"
    assert any("still arriving" in e for e in ex.events)

    def recorded_outputs() -> str:
        return json.dumps([c.get("outputs", []) for c in _cells(session)])

    deadline = time.monotonic() + 5
    while "late" not in recorded_outputs() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert "late\n" in ex.text
    assert "late" in recorded_outputs()
    await session.close()


async def test_stop_before_the_cell_starts_waits_for_it(tmp_path: Path) -> None:
    """An interrupt sent before the kernel begins a cell would hit the kernel's own
    request handling; the session holds it until the cell runs."""
    session, backend = await _session(tmp_path)
    task = asyncio.create_task(session.execute("delay-start:0.3;sleep:30"))
    deadline = time.monotonic() + 5
    while session._cells.running is None and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    await session.interrupt()
    assert backend.started[0].interrupts == 0, "not before the cell starts"
    ex = await asyncio.wait_for(task, 5)
    assert backend.started[0].interrupts == 1
    assert ex.status == "error" and ex.error is not None and ex.error.ename == "KeyboardInterrupt"
    await session.interrupt()  # no cell running: nothing happens
    assert backend.started[0].interrupts == 1
    await session.close()


async def test_calls_run_in_arrival_order(tmp_path: Path) -> None:
    """A cell with a timeout queued before variables() runs before it (FIFO)."""
    session, backend = await _session(tmp_path)
    busy = asyncio.create_task(session.execute("sleep:0.2", timeout=10))
    await asyncio.sleep(0.05)
    first = asyncio.create_task(session.execute("print:first", timeout=10))
    names = asyncio.create_task(session.variables())
    await asyncio.gather(busy, first, names)
    kinds = [content.get("code") for _, msg_type, content in backend.started[0].sent
             if msg_type == "execute_request"]
    assert kinds.index("print:first") < kinds.index(""), kinds
    await session.close()


async def test_cell_without_a_reply_is_an_error_and_keeps_the_kernel(tmp_path: Path) -> None:
    session, backend = await _session(tmp_path)
    t0 = time.monotonic()
    ex = await session.execute("print:half;no-reply", timeout=5)
    assert time.monotonic() - t0 < 2, "no waiting for the timeout"
    assert ex.status == "error" and ex.state == "kept"
    assert ex.error is not None and ex.error.ename == "NoReply"
    assert ex.text == "half\n"
    assert (await session.execute("print:next")).status == "ok"
    assert len(backend.started) == 1, "the kernel was not replaced"
    await session.close()
