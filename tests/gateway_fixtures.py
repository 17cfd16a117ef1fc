"""A real Jupyter Kernel Gateway on 127.0.0.1 for the tests, and ``backend_manager``.

``backend_manager`` is the kernel-session suite's manager parametrised over where kernels
run: ``local`` (the ``manager`` fixture) and ``gateway`` (a manager whose backend is a
:class:`GatewayBackend` pointed at the gateway started here). Imported by conftest.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kernel_analyst.kernels import SessionManager
from kernel_analyst.kernels.launch import GatewayBackend

from .helpers import pid_alive, start_time

# Gateway settings the backend relies on (docs/gateway.md explains each):
GATEWAY_ARGS = (
    # the restarter notices a dead kernel within 1 s (default 3 s)
    "--KernelRestarter.time_to_dead=1.0",
    # the kernel caps output itself; the server's rate limit would drop messages
    "--ZMQChannelsWebsocketConnection.limit_rate=False",
    # lets the tests check that no kernel is left behind
    "--JupyterWebsocketPersonality.list_kernels=True",
)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def child_pids(pid: int) -> list[int]:
    """Direct children of ``pid`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


class GatewayProcess:
    """One ``jupyter kernelgateway`` process with a token, on 127.0.0.1."""

    def __init__(self, workdir: Path, *, port: int | None = None, extra_args: tuple[str, ...] = ()) -> None:
        self.workdir = workdir
        self.port = port or free_port()
        self.token = secrets.token_hex(16)
        self.extra_args = extra_args
        self.proc: subprocess.Popen[bytes] | None = None
        self.kernel_pids: dict[int, str] = {}
        """The gateway's kernel processes seen so far: pid -> start time (pids are reused)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _environment(self) -> dict[str, str]:
        # Kernels must run ipykernel from this interpreter, whatever else is installed.
        spec_dir = self.workdir / "jupyter" / "kernels" / "python3"
        spec_dir.mkdir(parents=True, exist_ok=True)
        (spec_dir / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (ipykernel)", "language": "python"}))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JPY_", "JUPYTER_", "KG_"))}
        env.update(JUPYTER_PATH=str(self.workdir / "jupyter"),
                   JUPYTER_RUNTIME_DIR=str(self.workdir / "runtime"),
                   JUPYTER_CONFIG_DIR=str(self.workdir / "config"),
                   KG_AUTH_TOKEN=self.token)  # in the environment, not on the command line
        return env

    def argv(self) -> list[str]:
        """The gateway's command line."""
        return [sys.executable, "-m", "kernel_gateway", "--KernelGatewayApp.ip=127.0.0.1",
                f"--KernelGatewayApp.port={self.port}", "--KernelGatewayApp.port_retries=0",
                "--log-level=WARN", *GATEWAY_ARGS, *self.extra_args]

    async def start(self, timeout: float = 60.0) -> GatewayProcess:
        """Start the gateway and return once it answers (or raise)."""
        log = open(self.workdir / f"gateway-{self.port}.log", "ab")  # noqa: SIM115
        with log:
            self.proc = subprocess.Popen(
                self.argv(), env=self._environment(), cwd=self.workdir, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not await asyncio.to_thread(self._answers):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"the gateway did not start; see {log.name}")
            await asyncio.sleep(0.1)
        return self

    def _answers(self) -> bool:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
        try:
            conn.request("GET", "/api", headers={"Authorization": f"token {self.token}"})
            return conn.getresponse().status == 200
        except OSError:
            return False
        finally:
            conn.close()

    def remember_kernels(self) -> None:
        """Note the gateway's kernel processes, so none outlives the tests."""
        if self.proc is not None and self.proc.poll() is None:
            for pid in child_pids(self.proc.pid):
                if (started := start_time(pid)) is not None:
                    self.kernel_pids.setdefault(pid, started)

    def kill(self) -> None:
        """SIGKILL the gateway at once (its kernels are orphaned, as in a crash)."""
        self.remember_kernels()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    async def stop(self) -> None:
        """Stop the gateway politely, then make sure none of its kernels is left."""
        self.remember_kernels()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 15
            while self.proc.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            self.kill()
        for pid, started in self.kernel_pids.items():
            if pid_alive(pid, started):  # not a later process given the same pid
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def kernel_ids(self) -> list[str]:
        """Ids of the kernels the gateway runs now."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("GET", "/api/kernels", headers={"Authorization": f"token {self.token}"})
            return [k["id"] for k in json.loads(conn.getresponse().read())]
        finally:
            conn.close()

    def delete_kernel(self, kernel_id: str) -> int:
        """DELETE a kernel as the gateway's culler would; return the HTTP status."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("DELETE", f"/api/kernels/{kernel_id}",
                         headers={"Authorization": f"token {self.token}"})
            return conn.getresponse().status
        finally:
            conn.close()

    def backend(self, **options: object) -> GatewayBackend:
        """A backend for this gateway (short timeouts: everything is on loopback)."""
        options.setdefault("connect_timeout_s", 5.0)
        options.setdefault("request_timeout_s", 30.0)
        return GatewayBackend(self.url, token=self.token, **options)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
async def gateway(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[GatewayProcess]:
    """A Kernel Gateway for the whole run (stopped, with its kernels, at the end)."""
    proc = await GatewayProcess(tmp_path_factory.mktemp("gateway")).start()
    try:
        yield proc
    finally:
        await proc.stop()


@pytest.fixture(scope="session")
async def gateway_manager(gateway: GatewayProcess,
                          tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SessionManager]:
    """A manager whose kernels run on the test gateway; tests take their own ids."""
    from .conftest import test_limits

    root = tmp_path_factory.mktemp("gateway-sessions")
    async with SessionManager(root, limits=test_limits(), backend=gateway.backend()) as m:
        yield m
    gateway.remember_kernels()


@pytest.fixture(scope="session", params=["local", "gateway"])
def backend_manager(request: pytest.FixtureRequest) -> SessionManager:
    """The session manager, once with local kernels and once with gateway kernels."""
    name = "manager" if request.param == "local" else "gateway_manager"
    manager: SessionManager = request.getfixturevalue(name)
    return manager
