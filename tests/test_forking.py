"""A forked process becomes a kernel (kernels/_forkkernel.py, backends/_template.py):
what a child of the template gets of its own, what it cannot reach of its siblings, and
what checkpoints carry and do not carry. Real template processes and kernels under
``process`` and ``sandbox`` (docs/forking.md)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kernel_analyst.kernels import LocalBackend, SessionManager

from .conftest import SEABORN, test_limits
from .helpers import wait_until

LEVELS = ["process", "sandbox"]


@pytest.fixture(scope="module", params=LEVELS)
async def forked(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                 ) -> AsyncIterator[SessionManager]:
    """A manager per isolation level whose kernels are forked from its template."""
    root = tmp_path_factory.mktemp(f"forked-{request.param}")
    async with SessionManager(root, limits=test_limits(isolation=request.param, memory_mb=2048)) as m:
        yield m


def started_from_template(session: object) -> bool:
    return bool(session.describe()["kernel"]["start"]["path"] == "template")  # type: ignore[attr-defined]


async def json_of(session: object, code: str) -> dict[str, object]:
    ex = await session.execute(code)  # type: ignore[attr-defined]
    assert ex.status == "ok", (ex.text, ex.error)
    return dict(json.loads(ex.text.strip().splitlines()[-1]))


# -- what each child gets of its own ----------------------------------------------------

SELF = """
import json, os, random, threading, asyncio, signal
import numpy as np
print(json.dumps({
    "random": random.random(), "numpy": float(np.random.rand()),
    "files": sorted(os.listdir(".")), "pid": os.getpid(), "pgid": os.getpgid(0), "sid": os.getsid(0),
    "threads": sorted(t.name for t in threading.enumerate()),
    "sigint": str(signal.getsignal(signal.SIGINT)),
    "guard": get_ipython().run_code.__qualname__,
}))
"""


async def test_children_get_their_own_seeds_directory_and_process_group(forked: SessionManager) -> None:
    a, b = await forked.session("seed-a"), await forked.session("seed-b")
    await a.upload(b"1\n", name="a.csv")
    await b.upload(b"2\n", name="b.csv")
    assert started_from_template(a) and started_from_template(b), a.describe()
    ra, rb = await json_of(a, SELF), await json_of(b, SELF)
    assert ra["random"] != rb["random"] and ra["numpy"] != rb["numpy"], "re-seeded at fork"
    assert "a.csv" in ra["files"] and "b.csv" not in ra["files"], ra["files"]  # its own directory
    assert "b.csv" in rb["files"] and "a.csv" not in rb["files"], rb["files"]
    # Each kernel leads its own session and process group (interrupts reach its tree only).
    assert ra["pid"] == ra["pgid"] == ra["sid"] and rb["pid"] == rb["pgid"] == rb["sid"]
    # The template had no threads; the kernel runs ipykernel's own, nothing inherited.
    assert "MainThread" in ra["threads"] and ra["threads"] == rb["threads"], ra["threads"]
    # Our startup file's interrupt handling is in place, as in a cold kernel.
    # (while user code runs, Python's own handler: the traceback ends in the user's frame).
    assert "_kernel_analyst_safe_interrupts" in ra["guard"], ra["guard"]
    assert ra["sigint"] == "<built-in function default_int_handler>", ra["sigint"]


async def test_interrupts_signals_and_the_event_loop_work_in_a_forked_kernel(forked: SessionManager) -> None:
    s = await forked.session("loop")
    await s.execute("x = 41")
    stopped = await s.execute("while True: pass", timeout=0.5)
    assert stopped.status == "timeout" and stopped.state == "kept", stopped.events
    # Top-level await runs on the kernel's event loop, which the fork bound afresh.
    ex = await s.execute("import asyncio\nawait asyncio.sleep(0.01)\nx + 1")
    assert ex.status == "ok" and ex.text.strip() == "42", (ex.text, ex.error)
    # A thread started by user code runs, and output from it reaches the cell.
    ex = await s.execute("import threading\nt = threading.Thread(target=print, args=('from a thread',))\n"
                         "t.start(); t.join()")
    assert "from a thread" in ex.text
    # A plot renders to PNG as in a cold kernel.
    ex = await s.execute("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3]); plt.show()")
    assert any("image/png" in o.get("data", {}) for o in ex.outputs), ex.outputs


WRITER = """
import json, sys
print(json.dumps({"modules": sorted(m for m in ("stack_data", "executing", "pygments.lexers.python",
                                                "pygments.formatters.terminal256") if m in sys.modules),
                  "kept": getattr(get_ipython().InteractiveTB, "tb", None) is not None}))
"""


async def test_a_forked_kernels_first_error_finds_the_traceback_writer_ready(forked: SessionManager) -> None:
    # The template formatted one traceback (template.py, _warm_traceback): a conversation's
    # first error, and its first interrupt, do not import and set up the writer themselves.
    s = await forked.session("first-error")
    assert started_from_template(s), s.describe()["kernel"]["start"]
    before = await json_of(s, WRITER)
    assert before == {"modules": ["executing", "pygments.formatters.terminal256", "pygments.lexers.python",
                                  "stack_data"], "kept": False}, before
    ex = await s.execute("def f():\n    return 1 / 0\nf()")
    assert ex.status == "error" and ex.error.ename == "ZeroDivisionError", ex.error
    shown = "\n".join(ex.error.traceback)
    assert "return 1 / 0" in shown and "kernel-analyst warm" not in shown, shown
    assert "_ka_warm" not in (await s.execute("print(sorted(globals()))")).text


PEEK = """
import json, os
result = {}
try:
    os.kill(PID, signal_number)
    result["kill"] = "sent"
except OSError as exc:
    result["kill"] = type(exc).__name__
for name in NAMES:
    try:
        with open(f"/proc/{PID}/{name}", "rb") as f:
            f.read(1)
        result[name] = "read"
    except OSError as exc:
        result[name] = type(exc).__name__
try:
    open(FILE).read()
    result["file"] = "read"
except OSError as exc:
    result["file"] = type(exc).__name__
mine = []
for fd in os.listdir("/proc/self/fd"):
    try:
        mine.append(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        pass
result["descriptors"] = mine
print(json.dumps(result))
"""


async def test_a_child_cannot_reach_a_siblings_processes_descriptors_or_files(forked: SessionManager) -> None:
    victim, reader = await forked.session("victim"), await forked.session("peeker")
    await victim.upload(b"name,salary\nalice,100\n", name="private.csv")
    await victim.execute("f = open('private.csv')")  # an open user file in the victim
    pid = victim.describe()["kernel"]["pid"]
    level = forked.limits.isolation
    # Its memory, descriptors and working directory through /proc; under sandbox also its
    # environment and memory map (under process, as for a cold kernel, those two stay
    # readable: Landlock scopes signals and tracing, not every /proc file; docs/forking.md).
    names = ["mem", "fd/0", "fd/1", "fd/3", "cwd/private.csv", "root/etc/hostname"]
    if level == "sandbox":
        names += ["environ", "maps"]
    code = (f"PID = {pid}\nsignal_number = 15\nFILE = {str(victim.workdir / 'private.csv')!r}\n"
            f"NAMES = {names!r}\n" + PEEK)
    seen = await json_of(reader, code)
    assert seen["kill"] in {"PermissionError", "ProcessLookupError"}, seen
    for name in names:
        assert seen[name] in {"PermissionError", "FileNotFoundError"}, (name, seen)
    if level == "sandbox":  # its own filesystem view: the sibling's directory is not there
        assert seen["file"] == "FileNotFoundError", seen
    descriptors = [str(d) for d in seen["descriptors"]]  # type: ignore[union-attr]
    assert not any(str(victim.workdir) in d or victim.workdir.name in d for d in descriptors), descriptors
    assert (await victim.execute("f.read()")).status == "ok", "the victim was not touched"


# -- checkpoints: what a fork carries and what it does not ------------------------------

async def test_undo_after_an_inplace_dropna_gives_the_original_frame_back(forked: SessionManager) -> None:
    s = await forked.session("dropna")
    await s.upload(SEABORN / "titanic.csv")
    await s.execute("import pandas as pd\ndf = pd.read_csv('titanic.csv')")
    before = (await s.execute("print(len(df), int(df['age'].isna().sum()))")).text
    await s.checkpoint()
    await s.execute("df.dropna(inplace=True)")
    assert (await s.execute("print(len(df))")).text.split()[0] != before.split()[0]
    report = await s.undo(to=None)
    assert report.undone_cells, report
    assert (await s.execute("print(len(df), int(df['age'].isna().sum()))")).text == before
    assert before.split() == ["891", "177"]


async def test_a_user_thread_running_at_a_checkpoint_is_reported_as_not_carried_over(
        forked: SessionManager) -> None:
    s = await forked.session("threads")
    await s.execute("import threading, time\nstop = threading.Event()\n"
                    "poller = threading.Thread(target=stop.wait, name='poller', daemon=True)\npoller.start()")
    info = await s.checkpoint()
    assert info.lost_threads == ["poller"], info
    await s.execute("stop.set(); poller.join(); x = 1")
    report = await s.undo()
    assert report.lost_threads == ["poller"] and "poller" in report.describe()
    # The namespace is back (the thread object too), the thread itself is not running.
    ex = await s.execute("print(poller.name, poller.is_alive() and poller in threading.enumerate())")
    assert ex.text.strip() == "poller False", ex.text


async def test_a_fork_diverges_from_its_parent(forked: SessionManager) -> None:
    parent = await forked.session("parent")
    await parent.execute("import numpy as np\nv = np.arange(5)\nopen('notes.txt', 'w').write('p')")
    child = await forked.fork("parent", "child")
    assert started_from_template(child) or child.describe()["kernel"]["start"]["path"] == "cold"
    await child.execute("v[0] = 100\nopen('notes.txt', 'w').write('c')")
    await parent.execute("v[1] = -1")
    assert (await parent.execute("print(v.tolist())")).text.strip() == "[0, -1, 2, 3, 4]"
    assert (await child.execute("print(v.tolist())")).text.strip() == "[100, 1, 2, 3, 4]"
    assert (parent.workdir / "notes.txt").read_text() == "p"
    assert (child.workdir / "notes.txt").read_text() == "c"
    cells = json.loads(child.notebook_path.read_text())["cells"]
    assert "parent" in "".join(cells[0]["source"]), cells[0]


# -- the template: replaced when it dies, nobody notices --------------------------------

async def test_a_killed_template_is_replaced_and_no_conversation_notices(tmp_path: Path) -> None:
    backend = LocalBackend()
    async with SessionManager(tmp_path / "s", limits=test_limits(), backend=backend) as m:
        before = await m.session("before")
        await before.execute("x = 1")
        templates = backend.templates.describe()
        assert len(templates) == 1 and templates[0]["alive"], templates
        os.killpg(int(templates[0]["pid"]), signal.SIGKILL)
        await wait_until(lambda: not backend.templates.describe()[0]["alive"], timeout=10)
        # Conversations started before and after the death, and several at once.
        after = await asyncio.gather(*(m.session(f"after-{i}") for i in range(3)))
        assert all(started_from_template(s) for s in after)
        assert [(await s.execute("1 + 1")).text.strip() for s in after] == ["2"] * 3
        assert (await before.execute("x + 1")).text.strip() == "2", "the running kernel was untouched"
        assert backend.templates.restarts == 1
        assert backend.templates.describe()[0]["pid"] != templates[0]["pid"]


@pytest.mark.parametrize("level", LEVELS)
async def test_the_memory_limit_holds_across_checkpoints(level: str, tmp_path: Path) -> None:
    """Checkpoints are counted with the kernel against its memory limit: every cell
    rewrites a 150 MB array (each copy holds the old pages), and instead of the kernel
    being killed at 512 MB the oldest copies are dropped, saying so."""
    limits = test_limits(isolation=level, memory_mb=512, checkpoints=4)
    async with SessionManager(tmp_path / "s", limits=limits) as m:
        s = await m.session("grows")
        await s.execute("import numpy as np\na = np.ones(150 * 2**20, dtype='u1')")
        runs = [await s.execute("a += 1") for _ in range(4)]
        assert [r.status for r in runs] == ["ok"] * 4, [(r.status, r.ending) for r in runs]
        events = [e for r in runs for e in r.events]
        assert any(e.startswith("dropped the checkpoint before cell") for e in events), events
        held = s.describe()["checkpoints"]
        assert held["count"] >= 1 and held["memory_bytes"] > 100 * 2**20, held
        report = await s.undo()
        assert report.restored_to == 5
        assert (await s.execute("print(int(a[0]))")).text.strip() == "4"


async def test_verify_and_replay_follow_the_trail_as_it_stands_after_an_undo(tmp_path: Path) -> None:
    """The undone cell stays in the notebook, marked; ``verify`` re-runs the trail without
    it (every cell reproduces), and so does the replay after the kernel is lost."""
    from kernel_analyst.kernels.verify import verify_notebook

    limits = test_limits(checkpoints=2)
    async with SessionManager(tmp_path / "s", limits=limits, recovery="replay") as m:
        s = await m.session("trail")
        await s.upload(SEABORN / "titanic.csv")
        await s.execute("import pandas as pd\ndf = pd.read_csv('titanic.csv')")
        await s.execute("df.dropna(inplace=True)")
        await s.undo()
        assert (await s.execute("print(len(df))")).text.strip() == "891"
        cells = [c for c in json.loads(s.notebook_path.read_text())["cells"] if c["cell_type"] == "code"]
        marked = [c for c in cells if c["metadata"].get("kernel_analyst", {}).get("undone")]
        assert ["dropna" in "".join(c["source"]) for c in marked] == [True], cells
        report = await verify_notebook(s.notebook_path, m, data_dirs=[SEABORN])
        assert report.reproduced, report.to_dict()
        assert report.cells and not any("dropna" in c.source for c in report.cells)
        # The kernel is lost: the replay rebuilds df without the undone cell.
        os.killpg(int(s.describe()["kernel"]["pid"]), signal.SIGKILL)
        await wait_until(lambda: not s.kernel.is_alive(), timeout=10)  # type: ignore[union-attr]
        again = await s.execute("print(len(df))")
        assert again.text.strip().splitlines()[-1] == "891", (again.text, again.events)


async def test_a_kernel_brought_back_by_undo_says_how_it_ended(forked: SessionManager) -> None:
    """Its parent is the checkpoint it came from, kept while it runs: undo after undo
    works, and a death afterwards is reported with its real exit code."""
    from kernel_analyst.kernels.endings import EndCause

    s = await forked.session("undo-twice")
    await s.execute("x = 1")
    for value in (2, 3):
        await s.checkpoint()
        await s.execute(f"x = {value}")
        await s.undo()
        assert (await s.execute("x")).text.strip() == "1"
    assert s.describe()["checkpoints"]["undo_parent_bytes"] > 0
    ended = await s.execute("import os\nos._exit(3)")
    assert ended.status == "died" and ended.ending is not None, ended.events
    assert ended.ending.cause is EndCause.EXIT and ended.ending.exit_code == 3, ended.ending


async def test_a_host_with_descriptors_past_1023_still_forks_and_checkpoints(tmp_path: Path) -> None:
    """A service holding many kernels numbers its descriptors past 1023, and the template
    and checkpoints get their control socket under the host's number: they must not wait on
    it with ``select``, which refuses such numbers (the template then ended at the first
    fork request)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 1200
    assert hard == resource.RLIM_INFINITY or hard >= wanted, f"this machine allows {hard} descriptors"
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    fillers: list[int] = []
    try:
        while not fillers or fillers[-1] < 1030:
            fillers.append(os.open(os.devnull, os.O_RDONLY))
        async with SessionManager(tmp_path, limits=test_limits(isolation="process")) as m:
            s = await m.session("many-fds")
            assert (await s.execute("x = 41\nx + 1")).text.strip() == "42"
            assert started_from_template(s), s.describe()["kernel"]["start"]
            await s.checkpoint()
            await s.execute("x = 0")
            await s.undo()
            assert (await s.execute("x")).text.strip() == "41"
    finally:
        for fd in fillers:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
