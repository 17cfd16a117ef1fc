"""Connection failures between the host and a real Kernel Gateway: a dropped websocket
(a proxy in between restarts), and the gateway itself killed and started again."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kernel_analyst.kernels import KernelStartError, SessionManager
from kernel_analyst.kernels.launch import GatewayBackend, GatewayKernel

from .conftest import test_limits
from .gateway_fixtures import GatewayProcess
from .helpers import wait_until


class TcpProxy:
    """A loopback TCP proxy that can drop every connection and stop listening, as a
    restarting reverse proxy or load balancer in front of a gateway does."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self._writers |= {writer, up_writer}
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
            self._writers.discard(writer)

    async def stop(self) -> None:
        """Stop listening and cut every connection."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()


@pytest.fixture
async def proxied(gateway: GatewayProcess, tmp_path: Path) -> AsyncIterator[tuple[SessionManager, TcpProxy]]:
    proxy = TcpProxy(gateway.port)
    await proxy.start()
    backend = GatewayBackend(proxy.url, token=gateway.token)
    try:
        async with SessionManager(tmp_path / "s", limits=test_limits(), backend=backend) as m:
            yield m, proxy
    finally:
        await proxy.stop()


async def test_dropped_websocket_reconnects_and_keeps_state(
        proxied: tuple[SessionManager, TcpProxy]) -> None:
    manager, proxy = proxied
    s = await manager.session("blip")
    await s.execute("x = 41")
    kernel = s.kernel
    assert isinstance(kernel, GatewayKernel)
    await proxy.stop()
    assert await wait_until(lambda: not kernel.channels.connected)
    await proxy.start()  # the proxy is back on the same port
    ex = await s.execute("x + 1")
    assert ex.status == "ok" and ex.state == "kept" and ex.text == "42\n"
    assert kernel.channels.reconnects == 1 and kernel.is_alive()


async def test_output_while_disconnected_is_replayed(proxied: tuple[SessionManager, TcpProxy]) -> None:
    manager, proxy = proxied
    s = await manager.session("blip-mid-cell")
    # The gateway runs on this machine, so its kernel sees these host paths.
    go, finished = s.directory / "go", s.directory / "finished"
    printed = asyncio.Event()
    task = asyncio.ensure_future(s.execute(
        f"import os, time\nprint('a', flush=True)\nwhile not os.path.exists({str(go)!r}): time.sleep(0.01)\n"
        f"print('b', flush=True)\nopen({str(finished)!r}, 'w').close()\n'done'",
        on_output=lambda out: printed.set(), timeout=60))
    await asyncio.wait_for(printed.wait(), 30)
    kernel = s.kernel
    assert isinstance(kernel, GatewayKernel)
    await proxy.stop()
    assert await wait_until(lambda: not kernel.channels.connected)
    go.touch()  # the cell prints while nobody is connected; the server buffers
    assert await wait_until(finished.exists)
    await proxy.start()
    ex = await asyncio.wait_for(task, 30)
    assert ex.status == "ok" and ex.state == "kept"
    assert ex.text == "a\nb\n'done'\n"


async def test_gateway_killed_and_restarted(tmp_path: Path) -> None:
    gateway = await GatewayProcess(tmp_path).start()
    try:
        backend = gateway.backend(reconnect_window_s=60.0)
        async with SessionManager(tmp_path / "s", limits=test_limits(), backend=backend) as m:
            s = await m.session("gateway-restart")
            await s.execute("x = 1")
            running = asyncio.Event()
            task = asyncio.ensure_future(s.execute(
                "import time\nprint('running', flush=True)\ntime.sleep(60)",
                on_output=lambda out: running.set(), timeout=None))
            await asyncio.wait_for(running.wait(), 30)
            gateway.kill()  # its kernels are orphaned: the new gateway does not know them
            await gateway.start()
            ex = await asyncio.wait_for(task, 60)
            assert ex.status == "died" and ex.state == "lost" and "running" in ex.text
            after = await s.execute("x")
            assert after.status == "error" and after.error is not None and after.error.ename == "NameError"
            assert (await s.execute("'fresh'")).text == "'fresh'\n"
    finally:
        with contextlib.suppress(Exception):
            await gateway.stop()


_DIES_FIRST = """\
import os, sys
marker, deaths = sys.argv[1], int(sys.argv[2])
argv = [sys.executable, "-m", "ipykernel_launcher", "-f", sys.argv[3]]
done = len(os.listdir(marker))
if done < deaths:  # this launch answers kernel_info, then dies at its first execute
    open(os.path.join(marker, str(done)), "w").close()
    argv.append("--IPKernelApp.exec_lines=get_ipython().events.register("
                "'pre_execute', lambda: __import__('os')._exit(1))")
os.execv(sys.executable, argv)
"""


def _kernelspec_dying_first(gateway: GatewayProcess, name: str, deaths: int) -> Path:
    """A kernelspec whose first ``deaths`` launches die once asked to run code, as a
    kernel killed while it starts; returns the folder where those launches are counted."""
    script = gateway.workdir / "dies_first.py"
    script.write_text(_DIES_FIRST)
    counted = gateway.workdir / f"{name}-deaths"
    counted.mkdir()
    spec = gateway.workdir / "jupyter" / "kernels" / name
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, str(script), str(counted), str(deaths), "{connection_file}"],
        "display_name": name, "language": "python"}))
    return counted


async def test_a_kernel_that_dies_while_starting_is_replaced(tmp_path: Path) -> None:
    """The gateway restarts a kernel whose process died while it started; the start goes
    on with a new kernel instead of failing, and a kernelspec that keeps dying ends in a
    clear error after a bounded number of kernels, none left behind."""
    gateway = GatewayProcess(tmp_path)
    once = _kernelspec_dying_first(gateway, "dies-once", 1)
    always = _kernelspec_dying_first(gateway, "dies-always", 1000)
    await gateway.start()
    try:
        async with SessionManager(tmp_path / "s", limits=test_limits(),
                                  backend=gateway.backend(kernel_name="dies-once")) as m:
            s = await m.session("dies-once")
            assert (await s.execute("x = 41\nx + 1")).text == "42\n"
            assert len(list(once.iterdir())) == 1  # one launch died; the kernel in use is another
            assert len(gateway.kernel_ids()) == 1  # the restarted one was deleted
        backend = gateway.backend(kernel_name="dies-always")
        async with SessionManager(tmp_path / "t", limits=test_limits(), backend=backend) as m:
            with pytest.raises(KernelStartError, match=r"died while starting, 3 time\(s\)"):
                await m.session("dies-always")
        assert 3 <= len(list(always.iterdir())) < 1000
        assert await wait_until(lambda: not gateway.kernel_ids(), timeout=30)
    finally:
        await gateway.stop()
