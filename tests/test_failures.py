"""Failures told honestly: timeouts, deaths, start failures, crash loops, leftovers."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

from kernel_analyst.kernels import (
    KernelCrashLoopError,
    KernelEnvironment,
    KernelStartError,
    SessionManager,
)

from .conftest import test_limits
from .helpers import pid_alive, wait_until


async def kernel_pid(session: object) -> int:
    ex = await session.execute("import os; os.getpid()")  # type: ignore[attr-defined]
    return int(ex.text)


def audit_cells(path: Path) -> list[nbformat.NotebookNode]:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    return list(nb.cells)


async def test_timeout_interrupts_and_keeps_state(backend_manager: SessionManager) -> None:
    s = await backend_manager.session("timeout-kept")
    await s.execute("x = 5")
    ex = await s.execute("import time\nprint('before', flush=True)\ntime.sleep(100)", timeout=1)
    assert ex.status == "timeout" and ex.state == "kept"
    assert "before" in ex.text, "partial output is kept"
    assert ex.error is not None and ex.error.ename == "KeyboardInterrupt"
    # The traceback ends in the cell, as Python's own SIGINT handler leaves it (a person
    # sees it in JupyterLab): no frame of the kernel's interrupt guard.
    assert "_kernel_analyst" not in "".join(ex.error.traceback), ex.error.traceback
    assert (await s.execute("x")).text == "5\n"
    spin = await s.execute("while True: pass", timeout=1)
    assert spin.status == "timeout" and spin.state == "kept"


async def test_timeout_that_ignores_interrupt_restarts(backend_manager: SessionManager) -> None:
    s = await backend_manager.session("timeout-lost")
    await s.execute("x = 5")
    code = textwrap.dedent("""
        import time
        while True:
            try:
                time.sleep(0.05)
            except KeyboardInterrupt:
                pass
    """)
    ex = await s.execute(code, timeout=1)
    assert ex.status == "timeout" and ex.state == "lost"
    assert any("restarted" in e for e in ex.events)
    after = await s.execute("x")
    assert after.status == "error" and after.error is not None and after.error.ename == "NameError"
    ok = await s.execute("1 + 1")
    assert ok.status == "ok" and ok.state == "kept"
    cells = audit_cells(s.notebook_path)
    assert any(c.cell_type == "markdown" and "restarted" in c.source for c in cells)


async def test_sigint_ignored_in_c_level_wait_restarts(backend_manager: SessionManager) -> None:
    s = await backend_manager.session("sigint-ignored")
    ex = await s.execute("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)",
                         timeout=1)
    assert ex.status == "timeout" and ex.state == "lost"
    assert (await s.execute("'alive'")).text == "'alive'\n"


async def _interrupt_after_the_code(s: object, setup: str) -> tuple[object, float]:
    """Run a cell, and interrupt it once its code has run but while ipykernel is still
    finishing the request (a 3 s pause before the reply, ipykernel's own
    ``_execute_sleep``, stands in for flushing output on a busy machine)."""
    await s.execute(setup + "\nget_ipython().kernel._execute_sleep = 3.0\nx = 1")  # type: ignore[attr-defined]
    printed = asyncio.Event()
    cell = asyncio.ensure_future(s.execute(  # type: ignore[attr-defined]
        "y = 2\nprint('code done', flush=True)", on_output=lambda out: printed.set(), timeout=60))
    await asyncio.wait_for(printed.wait(), 30)
    await asyncio.sleep(1.0)  # the code has returned; the kernel is in its pause
    t0 = asyncio.get_running_loop().time()
    await s.interrupt()  # type: ignore[attr-defined]
    ex = await cell
    return ex, asyncio.get_running_loop().time() - t0


async def test_interrupt_after_the_code_stops_nothing(backend_manager: SessionManager) -> None:
    """ipykernel turns SIGINT into KeyboardInterrupt wherever it lands while it handles a
    request, and one that lands after the cell's code aborts the reply. Our kernels let an
    interrupt stop only the cell's code: this one is dropped and the reply still comes."""
    s = await backend_manager.session("late-interrupt")
    ex, _ = await _interrupt_after_the_code(s, "")
    assert ex.status == "ok" and ex.state == "kept", (ex.status, ex.events, ex.error)
    assert "code done" in ex.text
    assert any("after its code had finished" in e for e in ex.events), ex.events
    after = await s.execute("x + y", timeout=30)
    assert after.text == "3\n"


async def test_interrupt_before_the_code_stops_the_cell(backend_manager: SessionManager) -> None:
    """An interrupt that lands while the kernel prepares the cell (here: in a slow
    ``pre_run_cell`` hook, where IPython would swallow it) is held and stops the cell
    before its first statement: the cell is interrupted, not run, and the reply comes."""
    s = await backend_manager.session("early-interrupt")
    await s.execute("import time\ndef _slow(info):\n    print('preparing', flush=True)\n"
                    "    time.sleep(3)\nget_ipython().events.register('pre_run_cell', _slow)")
    printed = asyncio.Event()
    cell = asyncio.ensure_future(s.execute("x = 10\nprint('statement two')", timeout=60,
                                           on_output=lambda out: printed.set()))
    await asyncio.wait_for(printed.wait(), 30)
    await asyncio.sleep(1.0)
    await s.interrupt()
    ex = await cell
    assert ex.status == "error" and ex.state == "kept", (ex.status, ex.events)
    assert ex.error is not None and ex.error.ename == "KeyboardInterrupt"
    assert "statement two" not in ex.text
    await s.execute("get_ipython().events.unregister('pre_run_cell', _slow)")
    assert "NameError" in (await s.execute("x")).text


async def test_second_stop_while_the_error_is_reported_keeps_it(backend_manager: SessionManager) -> None:
    """Stop pressed twice (the service repeats it every 0.5 s): the second interrupt lands
    while the first one's traceback is written (made slow here, as on a busy machine).
    It must not abort that report: the cell keeps its KeyboardInterrupt output."""
    s = await backend_manager.session("double-stop")
    await s.execute("import time\nsh = get_ipython()\n_orig = sh._showtraceback\n"
                    "def _slow(*a, **k):\n    time.sleep(2)\n    return _orig(*a, **k)\n"
                    "sh._showtraceback = _slow\nx = 1")
    printed = asyncio.Event()
    cell = asyncio.ensure_future(s.execute("print('looping', flush=True)\nwhile True: pass",
                                           timeout=60, on_output=lambda out: printed.set()))
    await asyncio.wait_for(printed.wait(), 30)
    await asyncio.sleep(0.3)
    await s.interrupt()
    await asyncio.sleep(1.0)  # the first KeyboardInterrupt is being reported
    await s.interrupt()
    ex = await cell
    assert ex.status == "error" and ex.state == "kept", (ex.status, ex.events)
    assert ex.error is not None and ex.error.ename == "KeyboardInterrupt"
    assert [o["output_type"] for o in ex.outputs] == ["stream", "error"], ex.outputs
    await s.execute("sh._showtraceback = _orig")
    assert (await s.execute("x")).text == "1\n"


async def test_reply_dropped_by_the_kernel_is_known_at_once(backend_manager: SessionManager) -> None:
    """A kernel without that guard (here: ipykernel's own hook put back) drops the reply.
    The session learns it from the next shell reply instead of waiting out the timeout
    and replacing a healthy kernel: the cell is an error, the variables stay."""
    s = await backend_manager.session("dropped-reply")
    ex, waited = await _interrupt_after_the_code(
        s, "k = get_ipython().kernel\nk.pre_handler_hook = type(k).pre_handler_hook.__get__(k)")
    assert ex.status == "error" and ex.state == "kept", (ex.status, ex.events)
    assert ex.error is not None and ex.error.ename == "NoReply"
    assert "code done" in ex.text
    assert waited < 30, "known from the probe, not from the 60 s timeout"
    after = await s.execute("x + y", timeout=30)
    assert after.status == "ok" and after.text == "3\n", "same kernel, variables kept"
    cells = [c for c in audit_cells(s.notebook_path) if c.cell_type == "code"]
    assert cells[-2].metadata["kernel_analyst"]["status"] == "error"


async def test_death_mid_cell_is_detected_without_timeout(backend_manager: SessionManager) -> None:
    s = await backend_manager.session("exit")
    await s.execute("x = 1")
    ex = await s.execute("import os\nprint('bye', flush=True)\nos._exit(3)", timeout=None)
    assert ex.status == "died" and ex.state == "lost"
    assert ex.duration_s < 5, "liveness is watched beside the wait"
    nxt = await s.execute("'fresh'")
    assert nxt.status == "ok" and nxt.text == "'fresh'\n"
    assert (await s.execute("x")).error is not None
    cells = audit_cells(s.notebook_path)
    assert [c.metadata.get("kernel_analyst", {}).get("status") for c in cells if c.cell_type == "code"][:2] \
        == ["ok", "died"]
    assert any(c.cell_type == "markdown" and "died" in c.source for c in cells)


async def test_sigkill_from_outside_mid_cell(backend_manager: SessionManager) -> None:
    s = await backend_manager.session("sigkill")
    pid = await kernel_pid(s)
    started = asyncio.Event()
    task = asyncio.ensure_future(s.execute(
        "import time\nprint('running', flush=True)\ntime.sleep(60)",
        on_output=lambda out: started.set(), timeout=None))
    await asyncio.wait_for(started.wait(), 30)
    os.kill(pid, signal.SIGKILL)
    ex = await asyncio.wait_for(task, 10)
    assert ex.status == "died" and ex.state == "lost" and "running" in ex.text
    assert (await s.execute("2")).text == "2\n"


async def test_idle_death_is_reported_on_next_execute(backend_manager: SessionManager) -> None:
    s = await backend_manager.session("idle-death")
    await s.execute("x = 1")
    pid = await kernel_pid(s)
    os.kill(pid, signal.SIGKILL)
    assert await wait_until(lambda: s.kernel is not None and not s.kernel.is_alive())
    ex = await s.execute("'after'")
    assert ex.status == "ok" and ex.state == "lost" and ex.text == "'after'\n"
    assert any("idle" in e for e in ex.events)
    later = await s.execute("1")
    assert later.state == "kept"


async def test_autokill_notebook_cell(backend_manager: SessionManager) -> None:
    s = await backend_manager.session("autokill")
    ex = await s.execute("import os\nimport signal\n\npid = os.getpid()\nos.kill(pid, signal.SIGTERM)")
    assert ex.status == "died" and ex.state == "lost"


async def test_start_failure_is_clear_and_leaves_nothing(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    fake = tmp_path / "python"
    # A "python" that records its pid and then never answers: startup must time out.
    fake.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 1000\n")
    fake.chmod(0o755)
    limits = test_limits(startup_timeout_s=2.0)
    async with SessionManager(tmp_path / "s", limits=limits,
                              environment=KernelEnvironment(python=str(fake))) as m:
        with pytest.raises(KernelStartError, match="did not become ready"):
            await m.session("never-ready")
    pid = int(pidfile.read_text())
    assert await wait_until(lambda: not pid_alive(pid))


async def test_kernel_that_exits_at_start(tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'kernel blew up on purpose' >&2\nexit 7\n")
    fake.chmod(0o755)
    async with SessionManager(tmp_path / "s", limits=test_limits(),
                              environment=KernelEnvironment(python=str(fake))) as m:
        with pytest.raises(KernelStartError, match="blew up on purpose"):
            await m.session("exits")
    with pytest.raises(KernelStartError, match="no Python interpreter"):
        async with SessionManager(tmp_path / "t", limits=test_limits(),
                                  environment=KernelEnvironment(python=str(tmp_path / "nope"))) as m:
            await m.session("missing")


async def test_crash_loop_is_bounded(tmp_path: Path) -> None:
    async with SessionManager(tmp_path, limits=test_limits(max_restarts=2)) as m:
        s = await m.session("loop")
        for _ in range(2):
            assert (await s.execute("import os; os._exit(1)")).status == "died"
        await s.execute("import os; os._exit(1)")  # third death: the restart budget is spent
        with pytest.raises(KernelCrashLoopError, match="giving up"):
            await s.execute("1")


async def test_no_kernel_left_after_close_all(tmp_path: Path) -> None:
    async with SessionManager(tmp_path, limits=test_limits(), pool_size=1) as m:
        a = await m.session("a")
        b = await m.session("b")
        pids = [await kernel_pid(a), await kernel_pid(b)]
        await a.execute("import subprocess; p = subprocess.Popen(['sleep', '1000']); p.pid")
        child = int((await a.execute("p.pid")).text)
        await m.wait_pool_ready(30)
        await m.close_all()
        assert m.list() == []
    for pid in [*pids, child]:
        assert await wait_until(lambda pid=pid: not pid_alive(pid)), f"process {pid} left behind"


async def test_kernel_exits_when_host_process_is_killed(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import asyncio, sys
        from kernel_analyst.kernels import SessionManager, Limits
        async def main():
            async with SessionManager({str(tmp_path)!r}, limits=Limits(isolation="process")) as m:
                s = await m.session("orphan")
                ex = await s.execute("import os; os.getpid()")
                print(ex.text.strip(), flush=True)
                await asyncio.sleep(1000)
        asyncio.run(main())
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 60)
        kernel = int(line)
        assert pid_alive(kernel)
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert await wait_until(lambda: not pid_alive(kernel), timeout=15), "orphaned kernel kept running"


async def test_venv_environment_is_used_and_recorded(tmp_path: Path) -> None:
    import site
    import venv

    env_dir = tmp_path / "env"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    site_dir = next(env_dir.glob("lib/python*/site-packages"))
    # The venv sees this project's packages through a .pth, plus one module of its own.
    (site_dir / "host.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    (site_dir / "only_in_this_env.py").write_text("MARK = 'venv-package'\n")
    async with SessionManager(tmp_path / "s", limits=test_limits(),
                              environment=KernelEnvironment(venv=str(env_dir))) as m:
        s = await m.session("venv")
        ex = await s.execute("import only_in_this_env, sys\nprint(only_in_this_env.MARK, sys.prefix)")
        assert ex.status == "ok", ex.text
        mark, prefix = ex.text.split()
        assert mark == "venv-package" and Path(prefix).resolve() == env_dir.resolve()
        meta = s.audit.metadata["kernel_analyst"]["environment"]
        assert meta == {"kind": "venv", "path": str(env_dir)}


async def test_no_kernel_left_when_program_exits_without_closing(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import asyncio
        from kernel_analyst.kernels import SessionManager, Limits
        async def main():
            m = await SessionManager({str(tmp_path)!r}, limits=Limits(isolation="process")).start()
            s = await m.session("forgotten")
            print((await s.execute("import os; os.getpid()")).text.strip())
        asyncio.run(main())  # never closes the manager
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    kernel = int(done.stdout.split()[0])
    assert await wait_until(lambda: not pid_alive(kernel), timeout=10)


async def test_cancelled_execute_stops_the_cell_and_records_it(backend_manager: SessionManager) -> None:
    s = await backend_manager.session("cancelled")
    started = asyncio.Event()
    task = asyncio.ensure_future(s.execute(
        "import time\nx = 1\nprint('running', flush=True)\ntime.sleep(60)",
        on_output=lambda out: started.set(), timeout=None))
    await asyncio.wait_for(started.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    after = await s.execute("x", timeout=30)
    cells = [c for c in audit_cells(s.notebook_path) if c.cell_type == "code"]
    meta = cells[-2].metadata["kernel_analyst"]
    # what the cell after a cancelled one met, and what the cancelled one recorded (a fresh
    # clone once saw this cell come back "error"; the message says which)
    seen = f"{after.status} {after.error} {after.text!r}; the cancelled cell: {meta.get('events')}"
    assert after.status == "ok" and after.text == "1\n", f"interrupted, not restarted: state kept ({seen})"
    assert meta["status"] == "error" and any("cancelled" in e for e in meta["events"])
    assert "running" in cells[-2].outputs[0]["text"]
