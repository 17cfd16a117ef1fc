"""Isolation levels and what the sandbox keeps in: cases 7-10 and 14 of the sandbox issue
(writes, reads and secrets, network, escape tricks, crafted output), plus how a level is
chosen and reported. Real kernels; bubblewrap cases run with ``isolation="sandbox"``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import stat
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import nbformat
import pytest

from kernel_analyst.kernels import (
    KernelEnvironment,
    KernelStartError,
    Limits,
    SandboxUnavailableError,
    SessionManager,
    VariableFetchError,
)
from kernel_analyst.kernels.launch import sandbox

from .conftest import ROOT
from .test_sandbox_support import (
    LIMITED_LEVELS,
    ManagerFactory,
    json_line,
    local_kernel,
    manager_factory,
    tracked,
)

SECRET_VAR = "KA_SANDBOX_TEST_SECRET"
SECRET = "sk-test-9f8e7d6c5b4a-never-leak"


@pytest.fixture
async def open_manager(tmp_path: Path) -> AsyncIterator[ManagerFactory]:
    async with manager_factory(tmp_path) as factory:
        yield factory


@pytest.fixture
def reprobe(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Probe bubblewrap again (for real) after a test that faked its absence."""
    yield
    monkeypatch.undo()
    sandbox.available_isolation(refresh=True)


# -- levels --------------------------------------------------------------------------


async def test_auto_is_sandbox_here_and_reported(open_manager: ManagerFactory,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    assert sandbox.available_isolation() == "sandbox", "bubblewrap works on this machine"
    caplog.set_level(logging.INFO, logger="kernel_analyst")
    m = await open_manager("auto")
    assert m.isolation == "sandbox"
    s = await tracked(m, "auto")
    assert s.session.isolation == "sandbox"
    ex = await s.run("import os; os.getcwd()")
    assert ex.text.strip() == repr(sandbox.SANDBOX_WORKDIR)
    s.check_audit()
    nb = nbformat.read(s.session.notebook_path, as_version=4)
    assert nb.metadata["kernel_analyst"]["isolation"] == "sandbox"
    assert any("isolation=sandbox" in r.getMessage() for r in caplog.records)


async def test_missing_bubblewrap_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, reprobe: None,
                                                   tmp_path: Path) -> None:
    monkeypatch.setattr(sandbox, "bwrap_path", lambda: None)
    assert sandbox.available_isolation(refresh=True) == "process"
    with pytest.raises(SandboxUnavailableError, match="apt-get install bubblewrap"):
        sandbox.resolve_isolation(Limits(isolation="sandbox"))
    assert sandbox.resolve_isolation(Limits(isolation="auto")) == "process", "auto never fails"
    with pytest.raises(SandboxUnavailableError):
        async with SessionManager(tmp_path / "m", limits=Limits(isolation="sandbox")):
            pass


async def test_unusable_bubblewrap_says_why(monkeypatch: pytest.MonkeyPatch, reprobe: None,
                                            tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(sandbox, "bwrap_path", lambda: str(fake))
    assert sandbox.available_isolation(refresh=True) == "process"
    with pytest.raises(SandboxUnavailableError, match="No permissions to create new namespace"):
        sandbox.resolve_isolation(Limits(isolation="sandbox"))


def test_sandbox_launch_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_VAR, SECRET)
    work, run = tmp_path / "work", tmp_path / "run"
    work.mkdir()
    run.mkdir()
    plan = sandbox.plan_launch(
        [sandbox.current_python(), "-m", "ipykernel_launcher"], workdir=work,
        limits=Limits(isolation="sandbox"), isolation="sandbox",
        extra_env={"JPY_PARENT_PID": "1234"}, runtime_dir=run)
    try:
        argv = plan.argv
        assert plan.interrupt_mode == "message", "a SIGINT to bwrap would kill the sandbox"
        assert "JPY_PARENT_PID" not in plan.env, "ipykernel would exit seeing ppid 1"
        assert SECRET not in json.dumps(plan.env) and plan.env["HOME"] == sandbox.SANDBOX_WORKDIR
        for flag in ("--unshare-user", "--unshare-pid", "--unshare-net", "--die-with-parent",
                     "--disable-userns"):
            assert flag in argv
        assert argv[argv.index("--cap-drop") + 1] == "ALL"
        assert ["--bind", str(work), sandbox.SANDBOX_WORKDIR] == argv[argv.index(str(work)) - 1:
                                                                     argv.index(str(work)) + 2]
        assert argv[argv.index("--ro-bind"):argv.index("--ro-bind") + 3] != ["--ro-bind", "/etc", "/etc"]
        assert not any(a in ("/etc", "/etc/shadow", "/etc/ssl") for a in argv), "never all of /etc"
        assert argv[argv.index("/proc/sys") - 1] == "--ro-bind"
        assert argv[argv.index("--") - 4:argv.index("--")] == ["--remount-ro", "/dev", "--remount-ro", "/"]
        # A tmpfs hides what was bound below it: the interpreter comes after /tmp's.
        tmpfs = argv.index("/tmp", argv.index("--tmpfs"))
        for prefix in sandbox.python_prefixes(sandbox.current_python()):
            binds = [i for i, a in enumerate(argv) if a == prefix and argv[i - 1] == "--ro-bind"]
            assert binds and all(i > tmpfs for i in binds), prefix
    finally:
        plan.release()
    with_net = sandbox.plan_launch(["python3"], workdir=work, runtime_dir=run, extra_env={},
                                   limits=Limits(isolation="sandbox", network=True), isolation="sandbox")
    with_net.release()
    assert "--unshare-net" not in with_net.argv and "/etc/resolv.conf" in with_net.argv


async def test_interpreter_under_tmp_runs_in_the_sandbox(tmp_path: Path) -> None:
    """A checkout (and its virtualenv) under /tmp: the sandbox's private /tmp must not
    hide the interpreter (bwrap applies mounts in order)."""
    import site
    import venv

    assert str(tmp_path).startswith("/tmp/"), "pytest's tmp_path is under /tmp here"
    env_dir = tmp_path / "venv"
    # Symlinked to this interpreter, whose packages the .pth below makes visible.
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env_dir)
    site_dir = next(env_dir.glob("lib/python*/site-packages"))
    (site_dir / "host.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    (site_dir / "only_in_tmp_env.py").write_text("MARK = 'tmp-venv'\n")
    limits = Limits(isolation="sandbox", startup_timeout_s=60.0, timeout_s=60.0)
    async with SessionManager(tmp_path / "s", limits=limits,
                              environment=KernelEnvironment(venv=str(env_dir))) as m:
        s = await m.session("tmp-venv")
        ex = await s.execute("import only_in_tmp_env, sys\nprint(only_in_tmp_env.MARK, sys.prefix)")
        assert ex.status == "ok", ex.text
        assert ex.text.split() == ["tmp-venv", str(env_dir)]
        assert s.isolation == "sandbox"


async def test_a_sandboxed_kernel_that_cannot_start_says_what_it_missed(tmp_path: Path) -> None:
    import venv

    env_dir = tmp_path / "bare"
    venv.EnvBuilder(with_pip=False).create(env_dir)  # no ipykernel in it
    limits = Limits(isolation="sandbox", startup_timeout_s=60.0)
    async with SessionManager(tmp_path / "s", limits=limits,
                              environment=KernelEnvironment(venv=str(env_dir))) as m:
        with pytest.raises(KernelStartError) as caught:
            await m.session("bare")
    message = str(caught.value)
    assert "could not see ipykernel_launcher" in message or "could not see ipykernel" in message
    assert "--isolation process" in message


def test_network_off_needs_a_namespace() -> None:
    with pytest.raises(SandboxUnavailableError, match="network=False"):
        sandbox.resolve_isolation(Limits(isolation="none", network=False))
    assert sandbox.resolve_isolation(Limits(isolation="process", network=False)) == "process"


# -- case 7: writes outside the working directory --------------------------------------

WRITE_PROBE = """
import errno, json
result = {}
for path in PATHS:
    try:
        with open(path, "w") as f:
            f.write("x")
        result[path] = "written"
    except OSError as exc:
        result[path] = errno.errorcode.get(exc.errno, str(exc.errno))
print(json.dumps(result))
"""


async def test_writes_outside_workdir_are_denied(open_manager: ManagerFactory, tmp_path: Path) -> None:
    m = await open_manager("sandbox")
    other = await tracked(m, "other")
    await other.run("open('mine.txt', 'w').write('other session')")
    s = await tracked(m, "writer")
    hostname = socket.gethostname()
    targets = [
        "/usr/ka-probe", "/etc/ka-probe", "/etc/passwd", "/ka-probe", "/dev/ka-probe",
        str(Path.home() / "ka-probe"), str(ROOT / "ka-probe"), str(ROOT / "README.md"),
        str(other.session.workdir / "mine.txt"), str(other.session.workdir / "ka-probe"),
        str(s.session.notebook_path), str(local_kernel(s.session).runtime_dir / "ka-probe"),
        "/proc/sys/kernel/hostname", str(tmp_path / "ka-probe"),
    ]
    readme = (ROOT / "README.md").read_bytes()
    ex = await s.run(f"PATHS = {targets!r}\n" + WRITE_PROBE)
    result = json_line(ex.text)
    # Paths under /tmp (a checkout there, pytest's tmp_path) exist in the sandbox only on
    # its private tmpfs: a write there may succeed and must not reach the host.
    host_paths = {t: v for t, v in result.items() if not t.startswith("/tmp/")}
    assert all(v != "written" for v in host_paths.values()), result
    read_only = ("/usr/ka-probe", "/etc/ka-probe", "/proc/sys/kernel/hostname")
    assert {result[p] for p in read_only} == {"EROFS"}
    assert not any(os.path.exists(t) for t in targets if "ka-probe" in t)
    assert (ROOT / "README.md").read_bytes() == readme
    assert (other.session.workdir / "mine.txt").read_text() == "other session"
    assert socket.gethostname() == hostname
    ok = await s.run("open('inside.txt', 'w').write('fine')")
    assert ok.status == "ok" and (s.session.workdir / "inside.txt").read_text() == "fine"
    s.check_audit()
    other.check_audit()


# -- case 8: reads of other sessions and host secrets -----------------------------------

ENV_PROBE = """
import glob, json, os
hits, readable = [], 0
for path in glob.glob('/proc/[0-9]*/environ'):
    try:
        data = open(path, 'rb').read()
    except OSError:
        continue
    readable += 1
    if SECRET.encode() in data:
        hits.append(path)
try:
    host = b"PATH=" in open(f"/proc/{HOST_PID}/environ", "rb").read()
except OSError:
    host = False
print(json.dumps({"in_os_environ": SECRET in repr(dict(os.environ)), "proc_hits": hits,
                  "readable": readable, "host_environ_readable": host}))
"""


@pytest.mark.parametrize("level", LIMITED_LEVELS)
async def test_secret_not_in_kernel_environment(level: str, open_manager: ManagerFactory,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_VAR, SECRET)
    m = await open_manager(level)
    s = await tracked(m, "env")
    ex = await s.run(f"SECRET = {SECRET!r}\nHOST_PID = {os.getpid()}\n" + ENV_PROBE)
    found = json_line(ex.text)
    assert found["in_os_environ"] is False and found["proc_hits"] == [], found
    if level == "sandbox":
        # bwrap itself started with the clean environment: /proc/1/environ is clean too.
        assert found["readable"] >= 2 and found["host_environ_readable"] is False, found
    else:
        # "process" shares the host's PID namespace and runs as the same user: the
        # manager's /proc/<pid>/environ (its environment at exec time) is readable.
        # Only "sandbox" closes this.
        assert found["host_environ_readable"] is True
    s.check_audit()


READ_PROBE = """
import errno, json
result = {}
for path in PATHS:
    try:
        result[path] = open(path, 'rb').read(64).decode(errors='replace')
    except OSError as exc:
        result[path] = errno.errorcode.get(exc.errno, str(exc.errno))
print(json.dumps(result))
"""


async def test_other_sessions_and_host_files_unreadable(open_manager: ManagerFactory,
                                                        tmp_path: Path) -> None:
    m = await open_manager("sandbox")
    other = await tracked(m, "victim")
    await other.session.upload(b"name,salary\nalice,100\n", name="private.csv")
    host_secret = tmp_path / "host-secret.txt"
    host_secret.write_text(SECRET)
    s = await tracked(m, "reader")
    paths = [str(other.session.workdir / "private.csv"), str(other.session.notebook_path),
             str(host_secret), "/etc/shadow", "/etc/ssl/private", str(Path.home() / ".bashrc"),
             str(ROOT / "pyproject.toml"), f"/proc/{os.getpid()}/environ"]
    ex = await s.run(f"PATHS = {paths!r}\n" + READ_PROBE)
    result = json_line(ex.text)
    assert set(result.values()) == {"ENOENT"}, result
    s.check_audit()


# -- case 9: network ---------------------------------------------------------------

NET_PROBE = """
import json, socket
result = {}
for name, addr in TARGETS:
    try:
        socket.create_connection(tuple(addr), timeout=3).close()
        result[name] = "connected"
    except OSError as exc:
        result[name] = type(exc).__name__
if DNS:
    try:
        socket.getaddrinfo("example.com", 80)
        result["dns"] = "resolved"
    except OSError as exc:
        result["dns"] = type(exc).__name__
print(json.dumps(result))
"""


class Listener:
    """A TCP service on the host's 127.0.0.1 that counts connections."""

    def __init__(self) -> None:
        self.accepted = 0
        self.port = 0
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> Listener:
        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.accepted += 1
            writer.close()

        self.server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


async def test_network_is_off_in_sandbox(open_manager: ManagerFactory) -> None:
    m = await open_manager("sandbox")
    s = await tracked(m, "net")
    async with Listener() as host:
        targets = [("host_loopback", ["127.0.0.1", host.port]), ("outbound", ["192.0.2.1", 80]),
                   ("dns_server", ["8.8.8.8", 53])]
        ex = await s.run(f"TARGETS = {targets!r}\nDNS = True\n" + NET_PROBE)
        result = json_line(ex.text)
        assert result["host_loopback"] == "ConnectionRefusedError", "its own loopback, not the host's"
        assert result["outbound"] == "OSError" and result["dns_server"] == "OSError", result
        assert result["dns"] == "gaierror"
        assert host.accepted == 0
    s.check_audit()


@pytest.mark.parametrize(("level", "network", "reachable"), [
    ("sandbox", True, True),     # Limits.network=True opts back in
    ("process", False, False),   # a network namespace made at launch (root only)
    ("process", None, True),     # the default outside the sandbox
])
async def test_network_limit_is_honoured(level: str, network: bool | None, reachable: bool,
                                         open_manager: ManagerFactory) -> None:
    m = await open_manager(level, network=network)
    s = await tracked(m, "net")
    async with Listener() as host:
        ex = await s.run(f"TARGETS = [('host', ['127.0.0.1', {host.port}])]\nDNS = False\n" + NET_PROBE)
        connected = json_line(ex.text)["host"] == "connected"
        assert connected is reachable
        assert await _accepted(host, 1 if reachable else 0)
    s.check_audit()


async def _accepted(host: Listener, expected: int) -> bool:
    for _ in range(100):  # the accept callback may run a moment after connect returned
        if host.accepted == expected:
            return True
        await asyncio.sleep(0.01)
    return host.accepted == expected


# -- case 10: escape tricks -------------------------------------------------------------

ESCAPE = """
import ctypes, json, os, subprocess
out = {}
popen = [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == "Popen"][0]
p = popen(["sh", "-c", f"echo pwned > {MARKER}; grep -E 'CapEff|NoNewPrivs' /proc/self/status; "
           "ls /proc | grep -c '^[0-9]'"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
out["popen"] = p.communicate()[0].decode()
libc = ctypes.CDLL(None)
out["system"] = libc.system(f"echo pwned > {MARKER}".encode())
out["unshare_user"] = libc.unshare(0x10000000)
out["setns_mount"] = libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)
try:
    os.kill(HOST_PID, 0)
    out["host_pid"] = "visible"
except OSError as exc:
    out["host_pid"] = type(exc).__name__
print(json.dumps(out))
"""


async def test_escape_tricks_stay_inside(open_manager: ManagerFactory, tmp_path: Path) -> None:
    m = await open_manager("sandbox")
    s = await tracked(m, "escape")
    marker = tmp_path / "escaped"
    ex = await s.run(f"MARKER = {str(marker)!r}\nHOST_PID = {os.getpid()}\n" + ESCAPE)
    out = json_line(ex.text)
    assert not marker.exists(), "nothing written outside the sandbox"
    assert "CapEff:\t0000000000000000" in out["popen"] and "NoNewPrivs:\t1" in out["popen"]
    processes = int(out["popen"].strip().splitlines()[-1])
    assert processes < 10, "only the sandbox's own processes are visible"
    assert out["system"] != 0 and out["unshare_user"] == -1 and out["setns_mount"] == -1
    assert out["host_pid"] == "ProcessLookupError"
    s.check_audit()


# -- case 14: crafted output is data ---------------------------------------------------

CRAFTED = """
import base64, pickle
class Evil:
    def __reduce__(self):
        import os
        return (os.system, ("touch " + MARKER,))
class Shout:
    def __repr__(self):
        return "__import__('os').system('touch " + MARKER + "')"
    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": repr(self),
                "application/vnd.python.pickle": base64.b64encode(pickle.dumps(Evil())).decode(),
                "application/json": {"__class__": "os.system", "args": ["touch " + MARKER]}}
print("```python\\nimport os; os.system('touch " + MARKER + "')\\n```")
display({"application/x-python-pickle": base64.b64encode(pickle.dumps(Evil())).decode(),
         "text/plain": "cos\\nsystem\\n(S'touch " + MARKER + "'\\ntR."}, raw=True)
Shout()
"""


async def test_crafted_output_is_only_data(open_manager: ManagerFactory, tmp_path: Path) -> None:
    m = await open_manager("sandbox")
    s = await tracked(m, "crafted")
    marker = tmp_path / "executed-on-host"
    ex = await s.run(f"MARKER = {str(marker)!r}\n" + CRAFTED)
    assert ex.status == "ok"
    kinds = {k for out in ex.outputs for k in out.get("data", {})}
    assert {"application/x-python-pickle", "application/vnd.python.pickle"} <= kinds
    assert "os.system('touch" in ex.text
    # The helper the host reads variables through, replaced by code that returns code:
    tamper = await s.run("x = 1\n_kernel_analyst.step = lambda: Shout()\n"
                         "_kernel_analyst.fetch = lambda *a: Shout()")
    assert tamper.status == "ok" and tamper.variables is not None
    with pytest.raises(VariableFetchError):
        await s.session.fetch("x")
    await s.session.export(tmp_path / "export.ipynb")
    assert not marker.exists(), "no output was ever executed or unpickled on the host"
    s.check_audit()


# -- pool kernels under the sandbox ----------------------------------------------------


async def test_pool_kernel_keeps_working_after_rename(open_manager: ManagerFactory) -> None:
    m = await open_manager("sandbox", pool_size=1)
    assert await m.wait_pool_ready(60) == 1
    s = await tracked(m, "pooled")
    await s.session.upload(b"a,b\n1,2\n", name="data.csv")
    ex = await s.run("import os, pandas as pd\nprint(os.getcwd(), len(pd.read_csv('data.csv')))\n"
                     "_ = open('out.txt', 'w').write('from the kernel')")
    assert ex.text.split() == [sandbox.SANDBOX_WORKDIR, "1"]
    assert (s.session.workdir / "out.txt").read_text() == "from the kernel"
    assert ".pool" not in str(s.session.workdir)
    s.check_audit()


def test_cgroup_v2_needs_delegated_controllers(tmp_path: Path) -> None:
    # This machine has cgroup v1; v2 is checked on its parsing and delegation rule.
    from kernel_analyst.kernels.launch import _cgroups

    (tmp_path / "app").mkdir()
    mountinfo = [f"41 31 0:38 / {tmp_path} rw,relatime - cgroup2 cgroup2 rw"]
    own = ["0::/app"]
    assert _cgroups._v2_parent(mountinfo, own, ["pids"]) is None, "no subtree_control"
    (tmp_path / "app" / "cgroup.subtree_control").write_text("cpu memory pids\n")
    assert _cgroups._v2_parent(mountinfo, own, ["pids", "memory"]) == tmp_path / "app"
    (tmp_path / "app" / "cgroup.subtree_control").write_text("cpu\n")
    assert _cgroups._v2_parent(mountinfo, own, ["pids"]) is None, "controllers not delegated"


def test_cgroup_v1_here_limits_the_tree() -> None:
    from kernel_analyst.kernels.launch._cgroups import KernelCgroup

    group = KernelCgroup.create(max_processes=10, memory_bytes=256 * 2**20)
    assert group is not None and group.version == 1 and group.limits_memory
    try:
        pids_dir = next(d for d in group.dirs if "pids" in d.parts)
        assert (pids_dir / "pids.max").read_text().strip() == "10"
        assert group.pids() == set()
    finally:
        group.remove()
    assert not any(d.exists() for d in group.dirs)
