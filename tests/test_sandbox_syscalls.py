"""The sandbox's system-call filter (issue 29): every refused call, tried from a cell through
ctypes, fails with EPERM and the kernel lives on, in a forked kernel, a cold one and a
kernel brought back from a checkpoint; the data stack still works under it; and the real
notebooks and the EDA playbook come out the same with the filter as without it."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nbformat
import pyseccomp
import pytest

from kernel_analyst.kernels import KernelSession, LocalBackend, SessionManager
from kernel_analyst.kernels.launch._seccomp import REFUSED, REFUSED_SOCKETS, syscall_filter
from kernel_analyst.kernels.verify import verify_notebook

from .conftest import NOTEBOOKS_REAL, ROOT, test_limits

SANDBOX = test_limits(isolation="sandbox")
# Arguments that make each call harmless had the filter let it through: no call below
# can change anything, filtered or not (a wrong pointer, a bad descriptor, pid -1 ...).
ARGS: dict[str, tuple[int, ...]] = {"ptrace": (16, -1), "setns": (-1, 0), "finit_module": (-1, 0, 0),
                                    "process_madvise": (-1, 0, 0, 0, 0), "pidfd_getfd": (-1, -1, 0),
                                    "io_uring_enter": (-1, 0, 0, 0, 0, 0), "io_uring_register": (-1, 0, 0, 0),
                                    "fsconfig": (-1, 0, 0, 0, 0), "fsmount": (-1, 0, 0),
                                    "quotactl_fd": (-1, 0, 0, 0), "kcmp": (-1, -1, 0, 0, 0)}
# Where the unfiltered kernel gets another answer (these reach the kernel's argument checks).
REACHED_WITHOUT_FILTER = ("keyctl", "add_key", "bpf", "perf_event_open", "io_uring_setup", "ptrace")
CLONE_NEWUSER_FS = 0x10000000 | 0x00000200  # a new user namespace with CLONE_FS: EINVAL if not refused
PROBE = """
import ctypes, errno, json, os, socket
_libc = ctypes.CDLL(None, use_errno=True)
def _errno_of(nr, args):
    ctypes.set_errno(0)
    result = _libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    code = ctypes.get_errno()
    return errno.errorcode.get(code, str(code)) if result == -1 else 'returned %d' % result
_found = {name: _errno_of(nr, args) for name, (nr, args) in json.loads(__CALLS__).items()}
for _name, _family in __SOCKETS__.items():
    try:
        socket.socket(_family, socket.SOCK_STREAM).close()
        _found[_name] = 'opened'
    except OSError as exc:
        _found[_name] = errno.errorcode.get(exc.errno, str(exc.errno))
_status = dict(line.split(':', 1) for line in open('/proc/self/status') if line.startswith('Seccomp'))
print(json.dumps({'calls': _found, 'status': {k: v.strip() for k, v in _status.items()}}))
"""


def calls(names: list[str]) -> dict[str, tuple[int, tuple[int, ...]]]:
    found = {n: (pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, n), ARGS.get(n, (0,) * 5)) for n in names}
    return {n: v for n, v in found.items() if v[0] >= 0}


def probe_code(names: list[str], *, extra: dict[str, tuple[int, tuple[int, ...]]] | None = None,
               sockets: dict[str, int] | None = None) -> str:
    return (PROBE.replace("__CALLS__", repr(json.dumps({**calls(names), **(extra or {})})))
            .replace("__SOCKETS__", repr(sockets or {})))


async def probe(session: KernelSession, code: str) -> dict[str, Any]:
    ex = await session.execute(code)
    assert ex.status == "ok", ex.text
    return json.loads(ex.text)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
async def filtered(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SessionManager]:
    async with SessionManager(tmp_path_factory.mktemp("filtered"), limits=SANDBOX) as m:
        yield m


@pytest.fixture(scope="module")
async def forked(filtered: SessionManager) -> KernelSession:
    return await filtered.session("forked")


@pytest.fixture(scope="module", params=["forked", "cold"])
async def sandboxed(request: pytest.FixtureRequest, filtered: SessionManager,
                    tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[KernelSession]:
    """A kernel forked into its sandbox, and one bubblewrap started cold."""
    if request.param == "forked":
        yield await filtered.session("forked")
        return
    async with SessionManager(tmp_path_factory.mktemp("filtered-cold"), limits=SANDBOX,
                              backend=LocalBackend(template=False)) as m:
        yield await m.session("cold")


def test_the_filter_refuses_what_the_issue_names() -> None:
    built = syscall_filter()
    assert built.missing is None and built.bpf and len(built.bpf) % 8 == 0
    named = {"ptrace", "keyctl", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "unshare",
             "setns", "init_module", "mount", "kexec_load", "add_key", "request_key"}
    assert named <= set(built.refused)
    assert set(built.refused) == {n for group in REFUSED.values() for n in group if n in calls([n])}


async def test_every_refused_call_gets_eperm_and_the_kernel_lives(sandboxed: KernelSession) -> None:
    session = sandboxed
    assert session.describe()["kernel"]["start"]["path"] == ("template" if session.id == "forked" else "cold")
    assert session.describe()["kernel"]["enforced"]["syscalls"].startswith("seccomp: ")
    names = list(syscall_filter().refused)
    clone = {"clone with CLONE_NEWUSER": (pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, "clone"),
                                          (CLONE_NEWUSER_FS, 0, 0, 0, 0)),
             "clone3": (pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, "clone3"), (0, 0))}
    found = await probe(session, probe_code(names, extra=clone, sockets=REFUSED_SOCKETS))
    assert {n: found["calls"][n] for n in names} == dict.fromkeys(names, "EPERM")
    assert found["calls"]["clone with CLONE_NEWUSER"] == "EPERM"
    assert found["calls"]["clone3"] == "ENOSYS"  # so the C library falls back to clone, which is checked
    assert found["calls"]["AF_ALG"] == found["calls"]["AF_VSOCK"] == "EPERM"
    assert found["status"] == {"Seccomp": "2", "Seccomp_filters": "1"}
    # An ordinary Python error in the cell; the kernel, its threads and children go on.
    ex = await session.execute("import socket\nsocket.socket(socket.AF_ALG, socket.SOCK_SEQPACKET)")
    assert ex.status == "error" and ex.state == "kept" and ex.error is not None
    assert ex.error.ename == "PermissionError" and "Operation not permitted" in ex.error.evalue
    ex = await session.execute("import subprocess, threading\nt = threading.Thread(target=print)\nt.start()\n"
                               "t.join()\nprint(*subprocess.run(['grep', 'Seccomp:', '/proc/self/status'],"
                               " capture_output=True, text=True).stdout.split())")
    assert ex.status == "ok" and ex.text.split()[-2:] == ["Seccomp:", "2"], ex.text


async def test_the_same_calls_reach_the_kernel_without_a_filter(manager: SessionManager) -> None:
    # The difference is the filter's: under "process" (no filter) these calls get the
    # kernel's own answers. Only calls that cannot change anything with these arguments.
    session = await manager.session("unfiltered-probe")
    found = await probe(session, probe_code(list(REACHED_WITHOUT_FILTER)))
    assert found["status"]["Seccomp"] == "0"
    assert all(found["calls"][n] != "EPERM" for n in REACHED_WITHOUT_FILTER), found["calls"]
    await manager.close("unfiltered-probe")


async def test_a_kernel_brought_back_from_a_checkpoint_keeps_the_filter(forked: KernelSession) -> None:
    await forked.execute("x = 41")
    await forked.checkpoint()
    await forked.execute("x += 1")
    await forked.undo()
    ex = await forked.execute("print(x, open('/proc/self/status').read()"
                              ".split('Seccomp_filters:')[1].split()[0])")
    assert ex.text.split() == ["41", "1"], ex.text  # inherited from the checkpoint, not loaded twice


async def test_the_data_stack_works_under_the_filter(forked: KernelSession) -> None:
    code = """
import multiprocessing, threading, duckdb, numpy as np, pandas as pd, pyarrow as pa, pyarrow.parquet as pq
import matplotlib.pyplot as plt
from sklearn.ensemble import RandomForestClassifier
rng = np.random.default_rng(0)
a = rng.random((300, 300))
df = pd.DataFrame({'k': rng.integers(0, 5, 10_000), 'v': rng.random(10_000)})
pq.write_table(pa.Table.from_pandas(df), 'frame.parquet')
back = pq.read_table('frame.parquet').to_pandas()
total = duckdb.connect().execute("select count(*) from 'frame.parquet'").fetchone()[0]
model = RandomForestClassifier(n_estimators=20, n_jobs=2, random_state=0).fit(df[['v']], df['k'])
with multiprocessing.Pool(2) as pool:
    squares = pool.map(abs, [-1, -2, -3])
plt.plot(back.groupby('k')['v'].mean())
plt.show()
print(round(float((a @ a.T).trace()), 3) > 0, len(back), total, squares, model.n_estimators)
"""
    ex = await forked.execute(code, timeout=120)
    assert ex.status == "ok", ex.text
    assert ex.text.split()[-7:] == ["True", "10000", "10000", "[1,", "2,", "3]", "20"] and len(ex.images) == 1


_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def comparable(outputs: list[dict[str, Any]]) -> list[Any]:
    """What must be the same with and without the filter: streams and text exactly (object
    addresses aside), errors by name and message, images by their MIME types (a plot of
    unseeded random data differs from run to run anyway)."""
    found: list[Any] = []
    for out in outputs:
        if out["output_type"] == "stream":
            found.append((out["name"], _ADDRESS.sub("", "".join(out["text"]))))
        elif out["output_type"] == "error":
            found.append((out["ename"], out["evalue"]))
        else:
            data = out["data"].items()
            found.append(sorted((k, _ADDRESS.sub("", "".join(v)) if k.startswith("text/") else "")
                                for k, v in data))
    return found


REAL = sorted(p for p in NOTEBOOKS_REAL.glob("*/*.ipynb")
              if p.name not in ("JupyterWidgets.ipynb", "notebook_inject_DO_NOT_EXECUTE.ipynb"))


async def run_all(session: KernelSession) -> list[list[Any]]:
    for extra in NOTEBOOKS_REAL.glob("*/*.png"):
        await session.upload(extra)
    found = []
    for path in REAL:
        seeded = await session.execute("import numpy; numpy.random.seed(0)")  # notebook2 plots randn
        assert seeded.status == "ok", seeded.text
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":  # Interrupt.ipynb's endless loop: stopped by a timeout
                ex = await session.execute(cell.source, timeout=1 if "while True" in cell.source else 60)
                found.append([path.name, ex.status, *comparable(ex.outputs)])
    return found


async def test_real_notebooks_and_the_playbook_run_the_same_with_the_filter(
        filtered: SessionManager, tmp_path: Path) -> None:
    async with SessionManager(tmp_path / "unfiltered", limits=SANDBOX.with_(syscall_filter=False)) as plain:
        unfiltered = await plain.session("real")
        assert unfiltered.describe()["kernel"]["enforced"]["syscalls"].startswith("NOT FILTERED")
        assert len(REAL) == 13
        theirs, ours = await run_all(unfiltered), await run_all(await filtered.session("real"))
        assert ours == theirs
        assert {c[1] for c in ours} == {"ok", "error", "timeout", "died"}  # Autokill, Interrupt ...
    # The EDA playbook's bundled notebook (what `kernel-analyst eda` makes) reproduces cell
    # for cell in a filtered sandbox.
    report = await verify_notebook(ROOT / "notebooks" / "penguins-eda.ipynb", filtered,
                                   data_dirs=[ROOT / "examples" / "data"])
    assert report.reproduced and len(report.cells) == 14, [c.describe() for c in report.failures]
