"""Durable conversations through the library: a lost namespace comes back.

Real kernels: a host process killed with SIGKILL, ``os._exit`` in a cell, a timeout
whose cell ignored the interrupt, an idle cull (snapshot); plus the refusals: a changed
input, the time budget, a cell marked no-replay. The trail stays one notebook.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest

from kernel_analyst.kernels import KernelSession, Limits, RecoveryPolicy, SessionManager
from kernel_analyst.kernels.trail import cells_to_restore, replayable

from .conftest import ROOT, test_limits
from .helpers import pid_alive, wait_until

PENGUINS = ROOT / "examples" / "data" / "penguins.csv"
CONVERSATION = [
    "import pandas as pd\ndf = pd.read_csv('penguins.csv')",
    "heavy = df[df.body_mass_g > 4500]\nby_species = heavy.groupby('species').size()",
    "ratio = round(len(heavy) / len(df), 4)\nratio",
    "import matplotlib.pyplot as plt\nax = df.body_mass_g.plot.hist()\nplt.show()",
]
CHECK = "print(ratio, dict(by_species))"


def _expected() -> str:
    import pandas as pd

    df = pd.read_csv(PENGUINS)
    heavy = df[df.body_mass_g > 4500]
    return f"{round(len(heavy) / len(df), 4)} {dict(heavy.groupby('species').size())}"


async def _converse(session: KernelSession) -> None:
    await session.upload(PENGUINS)
    for code in CONVERSATION:
        ex = await session.execute(code)
        assert ex.status == "ok", ex.text


def _cells(session: KernelSession) -> list[dict[str, Any]]:
    return json.loads(session.notebook_path.read_text())["cells"]


def _markers(session: KernelSession) -> list[str]:
    return [c["metadata"]["kernel_analyst"]["marker"] for c in _cells(session)
            if c["cell_type"] == "markdown" and "marker" in c["metadata"].get("kernel_analyst", {})]


def _check_trail(session: KernelSession) -> None:
    """One continuous, valid notebook; recorded cells are never duplicated by a replay."""
    nb = nbformat.read(session.notebook_path, as_version=4)
    nbformat.validate(nb)
    sources = [c.source for c in nb.cells if c.cell_type == "code"]
    for code in CONVERSATION:
        assert sources.count(code) == 1, code


def _limits(**changes: Any) -> Limits:
    return test_limits(timeout_s=60.0, **changes)


# -- where the namespace comes back from ---------------------------------------------------


async def test_os_exit_in_a_cell_is_recovered_by_replay(tmp_path: Path) -> None:
    async with SessionManager(tmp_path, limits=_limits(), recovery="replay") as m:
        s = await m.session("exit")
        await _converse(s)
        died = await s.execute("import os; os._exit(3)")
        assert (died.status, died.state) == ("died", "lost")
        ex = await s.execute(CHECK)
        assert ex.status == "ok" and ex.text.strip() == _expected()
        assert ex.recovery is not None and ex.recovery.method == "replay" and ex.recovery.complete
        assert len(ex.recovery.replayed) == len(CONVERSATION) and not ex.recovery.differing
        assert {"df", "heavy", "by_species", "ratio"} <= set(ex.recovery.variables)
        assert _markers(s) == ["died", "resumed"]
        replays = [c["metadata"]["kernel_analyst"].get("replays") for c in _cells(s)
                   if c["cell_type"] == "code" and c["source"] in CONVERSATION]
        assert all(r and r[-1]["reproduced"] for r in replays), replays
        _check_trail(s)


async def test_a_cell_that_ignored_its_interrupt_is_recovered(tmp_path: Path) -> None:
    limits = _limits(interrupt_grace_s=0.5)
    async with SessionManager(tmp_path, limits=limits, recovery="replay") as m:
        s = await m.session("stubborn")
        await _converse(s)
        code = ("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                "while True:\n    time.sleep(0.1)")
        stuck = await s.execute(code, timeout=1)
        assert (stuck.status, stuck.state) == ("timeout", "lost")
        ex = await s.execute(CHECK)
        assert ex.text.strip() == _expected() and ex.recovery is not None and ex.recovery.complete
        _check_trail(s)


async def test_a_new_manager_after_the_host_was_killed_replays(tmp_path: Path) -> None:
    """The host process dies with SIGKILL (no snapshot); a new manager on the same
    directory continues the same notebook and rebuilds the variables."""
    script = textwrap.dedent(f"""
        import asyncio, sys
        from kernel_analyst.kernels import Limits, SessionManager
        sys.path.insert(0, {str(ROOT)!r})
        from tests.test_recovery import CONVERSATION, PENGUINS
        async def main():
            m = await SessionManager({str(tmp_path)!r}, limits=Limits(isolation="process"),
                                     recovery="replay").start()
            s = await m.session("killed")
            await s.upload(PENGUINS)
            for code in CONVERSATION:
                assert (await s.execute(code)).status == "ok"
            print(s.kernel.proc.pid, flush=True)
            await asyncio.sleep(600)
        asyncio.run(main())
    """)
    host = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert host.stdout is not None
        kernel_pid = int(host.stdout.readline())
        host.send_signal(signal.SIGKILL)
        host.wait(30)
    finally:
        if host.poll() is None:
            host.kill()
        host.wait()
        if host.stdout is not None:
            host.stdout.close()
    assert await wait_until(lambda: not pid_alive(kernel_pid), timeout=15)
    async with SessionManager(tmp_path, limits=_limits(), recovery="replay") as m:
        assert [c.id for c in m.conversations()] == ["killed"]
        s = await m.session("killed")
        ex = await s.execute(CHECK)
        assert ex.text.strip() == _expected()
        assert ex.recovery is not None and ex.recovery.reason == "conversation reopened"
        assert _markers(s) == ["resumed"]
        _check_trail(s)


async def test_an_idle_cull_snapshots_and_resume_loads(tmp_path: Path) -> None:
    async with SessionManager(tmp_path, limits=_limits(), recovery="replay", idle_timeout_s=0.5) as m:
        s = await m.session("culled")
        await _converse(s)
        await s.execute("def bigger(x):\n    return x * 2")
        assert await wait_until(lambda: "snapshot" in _markers(s), timeout=30), "culled, saved"
        assert "culled" not in m and s.closed
        again = await m.session("culled")
        ex = await again.execute(CHECK + "\nprint(bigger(21))")
        assert ex.text.split("\n")[:2] == [_expected(), "42"]
        report = ex.recovery
        assert report is not None and report.method == "snapshot" and report.complete
        assert {"df", "heavy", "by_species", "ratio"} <= set(report.restored_variables)
        assert "bigger" in report.unsaved, "a function defined in a cell is replayed, not pickled"
        replayed_sources = {c["source"] for c in _cells(again) if c.get("id") in
                            {r.cell_id for r in report.replayed}}
        assert replayed_sources == {"def bigger(x):\n    return x * 2"}
        _check_trail(again)


async def test_an_orderly_close_then_a_new_manager_loads_the_snapshot(tmp_path: Path) -> None:
    async with SessionManager(tmp_path, limits=_limits(), recovery="replay") as m:
        s = await m.session("closed")
        await _converse(s)
        await s.execute("import numpy as np\nvalues = np.arange(1000.0)")
    async with SessionManager(tmp_path, limits=_limits(), recovery="replay") as m:
        s = await m.session("closed")
        ex = await s.execute(CHECK)
        assert ex.text.strip() == _expected()
        assert ex.recovery is not None and ex.recovery.method == "snapshot" and not ex.recovery.replayed
        assert _markers(s) == ["snapshot", "resumed"]
        # An array comes back mapped from its file, copy-on-write: a plain, writable array.
        changed = await s.execute("values[0] = 7.0\nprint(values[:2], values.sum(), type(values).__name__)")
        assert changed.text.strip() == "[7. 1.] 499507.0 ndarray", changed.text


async def test_recovery_off_keeps_the_trail_and_says_so(tmp_path: Path) -> None:
    async with SessionManager(tmp_path, limits=_limits()) as m:
        await _converse(await m.session("plain"))
    async with SessionManager(tmp_path, limits=_limits()) as m:
        s = await m.session("plain")
        ex = await s.execute("'ratio' in dir()")
        assert ex.text.strip() == "False" and ex.recovery is None
        assert _markers(s) == ["reopened"]
        _check_trail(s)


# -- what stops or limits a replay -------------------------------------------------------


async def test_a_changed_input_stops_the_replay_and_names_it(tmp_path: Path) -> None:
    async with SessionManager(tmp_path, limits=_limits(), recovery="replay") as m:
        s = await m.session("changed")
        await _converse(s)
        (s.workdir / "penguins.csv").write_text("species,body_mass_g\nAdelie,1\n")
        await s.execute("import os; os._exit(1)")
        ex = await s.execute("'df' in dir()")
        assert ex.text.strip() == "False"
        report = ex.recovery
        assert report is not None and report.stopped is not None and not report.replayed
        assert "penguins.csv" in report.stopped and "changed" in report.stopped
        assert "df" in report.missing_variables and not report.complete


async def test_a_replay_over_its_budget_stops_with_what_it_restored(tmp_path: Path) -> None:
    policy = RecoveryPolicy(mode="replay", time_budget_s=2.0)
    async with SessionManager(tmp_path, limits=_limits(), recovery=policy) as m:
        s = await m.session("budget")
        await s.execute("a = 1")
        await s.execute("import time\ntime.sleep(3)\nb = 2")
        await s.execute("c = 3")
        await s.execute("import os; os._exit(1)")
        t0 = time.monotonic()
        ex = await s.execute("print(sorted(k for k in ('a', 'b', 'c') if k in globals()))")
        assert time.monotonic() - t0 < 15
        report = ex.recovery
        assert report is not None and report.stopped is not None and "time budget" in report.stopped
        assert ex.text.strip() == "['a']", "restored up to the budget, nothing after"
        assert [c.status for c in report.replayed] == ["ok", "timeout"]
        assert list(report.skipped.values()) == ["over the time budget"]
        assert set(report.missing_variables) == {"b", "c"}


async def test_a_cell_marked_no_replay_is_skipped_and_named(tmp_path: Path) -> None:
    async with SessionManager(tmp_path, limits=_limits(), recovery="replay") as m:
        s = await m.session("side-effects")
        await s.execute("sent = []")
        mail = ("# kernel-analyst: no-replay\nsent.append('mail to the board')\n"
                "open('outbox.txt', 'a').write('x')")
        await s.execute(mail)
        await s.execute("import os; os._exit(1)")
        ex = await s.execute("print(sent, open('outbox.txt').read())")
        assert ex.text.strip() == "[] x", "the mail cell did not run twice"
        report = ex.recovery
        assert report is not None
        skipped_ids = list(report.skipped)
        assert [c["source"] for c in _cells(s) if c.get("id") in skipped_ids] == [mail]
        assert "marked no-replay" in report.describe()


# -- the trail arithmetic, without kernels ---------------------------------------------------


def _code(cid: str, status: str = "ok", state: str = "kept") -> dict[str, Any]:
    return {"cell_type": "code", "id": cid, "source": cid, "outputs": [],
            "metadata": {"kernel_analyst": {"status": status, "state": state}}}


def _marker(kind: str, **meta: Any) -> dict[str, Any]:
    return {"cell_type": "markdown", "id": f"m-{kind}", "source": "",
            "metadata": {"kernel_analyst": {"marker": kind, **meta}}}


@pytest.mark.parametrize(("cells", "expected"), [
    ([_code("a"), _code("b", "error"), _code("c")], ["a", "c"]),
    ([_code("a"), _code("x", "died", "lost"), _marker("died")], ["a"]),
    ([_code("a"), _code("x", "died", "lost"), _marker("died"), _code("b")], ["b"]),
    ([_code("a"), _marker("restart_requested")], []),
    ([_code("a"), _marker("died"), _marker("resumed", restored_cells=["a"]), _code("b")], ["a", "b"]),
    ([_code("a"), _marker("died"), _marker("resumed", restored_cells=["a"]), _code("b"),
      _code("y", "timeout", "lost"), _marker("restarted")], ["a", "b"]),
    ([_code("a"), _marker("snapshot"), _marker("reopened")], ["a"]),
])
def test_cells_to_restore(cells: list[dict[str, Any]], expected: list[str]) -> None:
    assert [c["id"] for c in cells_to_restore(cells)] == expected


def test_the_no_replay_marker() -> None:
    assert not replayable({"source": "# kernel-analyst: no-replay\nsend()"})
    assert not replayable({"source": "x = 1\n  #kernel-analyst:no-replay"})
    assert replayable({"source": "print('# kernel-analyst: no-replay')"})
    assert not replayable({"source": "x", "metadata": {"kernel_analyst": {"replay": False}}})


async def test_recovery_happens_before_variables_too(tmp_path: Path) -> None:
    async with SessionManager(tmp_path, limits=_limits(), recovery="replay") as m:
        s = await m.session("vars")
        await s.execute("x = 41")
        await s.execute("import os; os._exit(1)")
        await s.execute("pass")  # restarts and restores
        names = [v.name for v in await s.variables()]
        assert "x" in names
        assert os.path.exists(s.notebook_path)
        assert await asyncio.wait_for(s.fetch("x"), 30) == 41


async def test_an_upload_after_a_loss_waits_for_the_recovery(tmp_path: Path) -> None:
    """A new version of an input uploaded after a loss must not feed the replay of cells
    that read the old one: the upload first brings the namespace back."""
    async with SessionManager(tmp_path, limits=_limits(), recovery="replay") as m:
        s = await m.session("reupload")
        await _converse(s)
        await s.execute("import os; os._exit(1)")
        await s.upload(b"species,body_mass_g\nAdelie,1\n", name="penguins.csv")
        assert s.last_recovery is not None and s.last_recovery.complete
        ex = await s.execute("print(len(df), len(pd.read_csv('penguins.csv')))")
        assert ex.text.split() == ["344", "1"], ex.text


async def test_verify_reproduces_a_trail_with_a_recovery(tmp_path: Path) -> None:
    from kernel_analyst.kernels.verify import verify_notebook

    async with SessionManager(tmp_path / "run", limits=_limits(), recovery="replay") as m:
        s = await m.session("verified")
        await _converse(s)
        await s.execute("import os; os._exit(1)")
        assert (await s.execute(CHECK)).recovery is not None
        notebook = s.notebook_path
    async with SessionManager(tmp_path / "verify", limits=_limits()) as m:
        report = await verify_notebook(notebook, m)
    assert report.reproduced, [c.describe() for c in report.failures]
