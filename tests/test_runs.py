"""Background runs in the library (issue 19, part 1): submit, status, outputs, wait,
cancel; the session's queue and the notebook. The service's endpoints, SSE resumption
and MCP are in test_runs_service.py."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import nbformat
import pytest

from kernel_analyst.kernels import SessionBusyError, SessionManager
from kernel_analyst.kernels.exceptions import RunNotFoundError

from .conftest import test_limits
from .helpers import wait_until

TICKS = ("import time\nfor i in range({n}):\n    print('tick', i, flush=True)\n    time.sleep({pause})\n"
         "result = {n}")


def stream_text(outputs: list[dict[str, object]]) -> str:
    return "".join(str(o.get("text", "")) for o in outputs if o.get("output_type") == "stream")


async def test_a_run_goes_on_while_the_caller_does_not_wait(manager: SessionManager) -> None:
    s = await manager.session("runs-basic")
    await s.execute("before = 1")
    t0 = time.monotonic()
    run = await s.submit(TICKS.format(n=6, pause=0.2))
    assert time.monotonic() - t0 < 1.0, "submit returns at once"
    assert run.status().state in ("queued", "running")
    assert await wait_until(lambda: run.status().outputs >= 2, timeout=30)
    seen = run.outputs()
    with pytest.raises(SessionBusyError, match=run.id):
        await s.variables()
    queued = asyncio.ensure_future(s.execute("after = result + 1"))  # waits its turn
    ex = await run.wait(timeout=60)
    assert ex is not None and ex.status == "ok"
    status = run.status()
    assert status.state == "finished" and status.execution is ex and status.duration_s > 0
    assert stream_text(run.outputs()) == "".join(f"tick {i}\n" for i in range(6))
    assert run.outputs(since=len(seen)) == run.outputs()[len(seen):]
    assert (await queued).status == "ok"
    assert {v.name for v in await s.variables()} >= {"before", "result", "after"}
    cells = [c for c in nbformat.read(s.notebook_path, as_version=4).cells if c.cell_type == "code"]
    assert [c.source for c in cells[-2:]] == [run.code, "after = result + 1"], "the run's cell first"
    assert cells[-2].metadata["kernel_analyst"]["background"] == {"run": run.id}
    assert s.runs.get(run.id) is run
    with pytest.raises(RunNotFoundError):
        s.runs.get("run-nope")


async def test_cancel_stops_a_run_quickly_and_keeps_state(manager: SessionManager) -> None:
    s = await manager.session("runs-cancel")
    await s.execute("kept = 41")
    run = await s.submit(TICKS.format(n=10_000, pause=0.05))
    assert await wait_until(lambda: run.status().outputs >= 1, timeout=30)
    queued = await s.submit("never = True")  # behind the first: cancelled before it starts
    assert queued.status().state == "queued"
    cancelled = await queued.cancel()
    assert cancelled.state == "cancelled" and cancelled.execution is None
    t0 = time.monotonic()
    status = await run.cancel()
    stopped_in = time.monotonic() - t0
    assert status.state == "cancelled" and stopped_in < 2.0, stopped_in
    assert status.execution is not None and status.execution.state == "kept"
    assert status.execution.error is not None and status.execution.error.ename == "KeyboardInterrupt"
    assert (await s.execute("kept + 1")).text.strip() == "42"
    assert "never" not in {v.name for v in await s.variables()}
    sources = [c.source for c in nbformat.read(s.notebook_path, as_version=4).cells if c.cell_type == "code"]
    assert run.code in sources and "never = True" not in sources


async def test_closing_the_session_stops_its_runs(tmp_path: Path) -> None:
    async with SessionManager(tmp_path / "s", limits=test_limits(), pool_size=0) as manager:
        s = await manager.session("runs-close")
        run = await s.submit("import time\ntime.sleep(600)")
        assert await wait_until(lambda: run.started, timeout=30)
        await manager.close("runs-close")
        assert run.done and run.status().state == "cancelled"
