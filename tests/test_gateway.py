"""The gateway backend against a real Jupyter Kernel Gateway on 127.0.0.1.

The kernel-session behaviour suite runs over both backends through ``backend_manager``;
this file covers what only a gateway has: configuration, connection errors, files moved
through the kernel, and kernels that die, are culled or are interrupted remotely.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import nbformat
import pytest

from kernel_analyst.kernels import (
    FileTooLargeError,
    GatewayError,
    KernelEnvironment,
    KernelStartError,
    SessionManager,
)
from kernel_analyst.kernels.launch import GatewayBackend, GatewayKernel

from .conftest import test_limits
from .gateway_fixtures import GatewayProcess, free_port
from .helpers import wait_until


@pytest.fixture
async def own_manager(gateway: GatewayProcess, tmp_path: Path) -> AsyncIterator[SessionManager]:
    """A gateway manager of the test's own (failure tests need a clean slate)."""
    async with SessionManager(tmp_path / "s", limits=test_limits(), backend=gateway.backend()) as m:
        yield m


# -- configuration -------------------------------------------------------------------------


def test_from_env_reads_url_and_token_in_one_place() -> None:
    env = {"KERNEL_ANALYST_GATEWAY_URL": "https://eg.example.org/gw/",
           "KERNEL_ANALYST_GATEWAY_TOKEN": "s3cr3t"}
    backend = GatewayBackend.from_env(environ=env)
    assert backend is not None and backend.url == "https://eg.example.org/gw"
    assert "s3cr3t" not in repr(backend)
    override = GatewayBackend.from_env("http://127.0.0.1:9", environ=env)
    assert override is not None and override.url == "http://127.0.0.1:9"
    assert GatewayBackend.from_env(environ={}) is None


@pytest.mark.parametrize("url", ["ftp://x", "http://u:p@host", "http://host/?token=abc", "host:8888"])
def test_bad_urls_are_refused(url: str) -> None:
    with pytest.raises(GatewayError, match=r"gateway URL|without credentials"):
        GatewayBackend(url)


# -- connection errors ---------------------------------------------------------------------


async def test_wrong_token_is_a_clear_error(gateway: GatewayProcess, tmp_path: Path) -> None:
    backend = GatewayBackend(gateway.url, token="not-the-token")
    async with SessionManager(tmp_path, limits=test_limits(), backend=backend) as m:
        with pytest.raises(GatewayError, match="refused the token") as info:
            await m.session("wrong-token")
    assert "not-the-token" not in str(info.value)


async def test_unreachable_gateway_fails_within_connect_timeout(tmp_path: Path) -> None:
    backend = GatewayBackend(f"http://127.0.0.1:{free_port()}", token="t", connect_timeout_s=2.0)
    started = time.monotonic()
    async with SessionManager(tmp_path, limits=test_limits(), backend=backend) as m:
        with pytest.raises(GatewayError, match="cannot reach the gateway"):
            await m.session("nobody-home")
    assert time.monotonic() - started < 2.0


async def test_silent_gateway_fails_within_request_timeout(tmp_path: Path) -> None:
    # Accepts connections (through the listen backlog) but never answers.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        backend = GatewayBackend(url, token="t", connect_timeout_s=1.0, request_timeout_s=1.0)
        started = time.monotonic()
        with pytest.raises(GatewayError, match="did not answer"):
            await backend.check()
        assert time.monotonic() - started < 3.0
        await backend.aclose()


async def test_check_and_unknown_kernelspec(gateway: GatewayProcess, tmp_path: Path) -> None:
    backend = gateway.backend()
    info = await backend.check()
    assert "python3" in info["kernelspecs"]
    async with SessionManager(tmp_path, limits=test_limits(), backend=backend,
                              environment=KernelEnvironment(kernelspec="no-such-spec")) as m:
        with pytest.raises(KernelStartError, match="no kernelspec 'no-such-spec'"):
            await m.session("spec")


# -- files through the kernel ----------------------------------------------------------------


async def test_files_move_through_the_kernel_in_checked_chunks(gateway_manager: SessionManager,
                                                               tmp_path: Path) -> None:
    s = await gateway_manager.session("gw-files")
    start = s.describe()["kernel"]["start"]  # started as today, and saying so
    assert start["path"] == "cold" and "gateway" in start["reason"], start
    payload = os.urandom(1_300_000)  # three chunks
    src = tmp_path / "blob.bin"
    src.write_bytes(payload)
    info = await s.upload(src, name="data/blob.bin")
    assert info.size == len(payload) and info.sha256 == hashlib.sha256(payload).hexdigest()
    ex = await s.execute("import hashlib\nhashlib.sha256(open('data/blob.bin','rb').read()).hexdigest()")
    assert ex.text.strip().strip("'") == info.sha256, "the kernel sees the file in its cwd"
    assert await s.download("data/blob.bin") == payload
    await s.execute("open('made_by_kernel.txt', 'w').write('hello')")
    assert await s.download("made_by_kernel.txt") == b"hello"
    assert [(f.name, f.size) for f in await s.files()] == [
        ("made_by_kernel.txt", 5), ("data/blob.bin", len(payload))], "same order as local listings"
    assert not list(s.workdir.glob("*.bin")), "nothing lands in the host's copy of the workdir"


async def test_missing_and_oversized_files_remotely(gateway_manager: SessionManager) -> None:
    # Unsafe names and planted symlinks: test_session.py runs those on both backends.
    s = await gateway_manager.session("gw-names")
    with pytest.raises(FileNotFoundError):
        await s.download("missing.csv")
    await s.execute("open('big.bin', 'wb').write(b'0' * 2_000_000)")
    s.limits = s.limits.with_(max_upload_mb=1)
    with pytest.raises(FileTooLargeError):
        await s.download("big.bin")
    with pytest.raises(FileTooLargeError):
        await s.upload(b"0" * 2_000_000, name="too-big.bin")


async def test_uploads_are_restored_into_a_replacement_kernel(gateway_manager: SessionManager) -> None:
    s = await gateway_manager.session("gw-restore")
    await s.upload(b"a,b\n1,2\n", name="t.csv")
    await s.restart()
    ex = await s.execute("import pandas as pd\nint(pd.read_csv('t.csv').b.sum())")
    assert ex.status == "ok" and ex.text == "2\n"


# -- timeouts and deaths -------------------------------------------------------------------------


async def test_timeout_interrupts_through_the_gateway(gateway_manager: SessionManager) -> None:
    s = await gateway_manager.session("gw-timeout")
    await s.execute("x = 5")
    ex = await s.execute("import time\nprint('start', flush=True)\ntime.sleep(30)", timeout=1.0)
    assert ex.status == "timeout" and ex.state == "kept" and "start" in ex.text
    assert (await s.execute("x")).text == "5\n"


async def test_kernel_killed_on_the_gateway_is_seen_within_two_seconds(
        gateway_manager: SessionManager) -> None:
    s = await gateway_manager.session("gw-kill")
    await s.execute("x = 1")
    pid = int((await s.execute("import os; os.getpid()")).text)
    running = asyncio.Event()
    task = asyncio.ensure_future(s.execute("import time\nprint('running', flush=True)\ntime.sleep(60)",
                                           on_output=lambda out: running.set(), timeout=None))
    await asyncio.wait_for(running.wait(), 30)
    killed = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    ex = await asyncio.wait_for(task, 10)
    assert time.monotonic() - killed < 2.0
    assert ex.status == "died" and ex.state == "lost" and "running" in ex.text
    after = await s.execute("x")
    assert after.status == "error" and after.error is not None and after.error.ename == "NameError"


async def test_culled_kernel_is_reported_on_the_next_execute(own_manager: SessionManager,
                                                             gateway: GatewayProcess) -> None:
    s = await own_manager.session("gw-culled")
    await s.execute("x = 1")
    kernel = s.kernel
    assert isinstance(kernel, GatewayKernel)
    # What the gateway's idle culler does: shut the kernel down behind our back.
    assert await asyncio.to_thread(gateway.delete_kernel, kernel.kernel_id) == 204
    assert await wait_until(lambda: not kernel.is_alive())
    ex = await s.execute("'after'")
    assert ex.status == "ok" and ex.state == "lost" and ex.text == "'after'\n"
    assert any("idle" in e for e in ex.events)


async def test_close_leaves_no_kernel_on_the_gateway(gateway: GatewayProcess, tmp_path: Path) -> None:
    backend = gateway.backend()
    async with SessionManager(tmp_path, limits=test_limits(), backend=backend, pool_size=1) as m:
        s = await m.session("gw-close")
        await s.execute("1")
        await m.wait_pool_ready(30)
        ids = {s.kernel.kernel_id, *(k.kernel_id for k, _ in m._pool)}  # type: ignore[union-attr, attr-defined]
        assert ids <= set(await asyncio.to_thread(gateway.kernel_ids))
    assert not ids & set(await asyncio.to_thread(gateway.kernel_ids))


# -- the same session behaviour on both backends ---------------------------------------------


async def test_backend_manager_gives_the_same_session(backend_manager: SessionManager) -> None:
    s = await backend_manager.session("same-on-both")
    await s.upload(b"a,b\n1,2\n3,4\n", name="t.csv")
    ex = await s.execute("import pandas as pd\ndf = pd.read_csv('t.csv')\ndf.plot()\ndf")
    assert ex.status == "ok" and ex.state == "kept", ex.text
    result = next(o for o in ex.outputs if o["output_type"] == "execute_result")
    assert len(ex.images) == 1 and "<table" in result["data"]["text/html"]
    assert [(v.name, v.shape) for v in ex.variables.created] == [("df", [2, 2])]
    assert (await s.execute("int(df.b.sum())")).text == "6\n"
    meta = s.audit.metadata["kernel_analyst"]
    assert meta["backend"] == backend_manager.backend.name and meta["isolation"] == s.isolation
    assert [f["name"] for f in meta["files"]] == ["t.csv"]


# -- another process takes a conversation over --------------------------------------------------


async def test_a_second_manager_reattaches_to_the_running_kernel(gateway: GatewayProcess,
                                                                  tmp_path: Path) -> None:
    """Two API replicas on one directory: the second continues the conversation in the
    kernel the first started (variables intact, no replay), and a kernel that is gone
    falls back to a fresh one plus replay."""
    async with SessionManager(tmp_path, limits=test_limits(), backend=gateway.backend(),
                              recovery="replay") as first:
        s1 = await first.session("shared")
        assert (await s1.execute("x = 41")).status == "ok"
        kernel_id = s1.kernel_id
        assert kernel_id in gateway.kernel_ids()
        async with SessionManager(tmp_path, limits=test_limits(), backend=gateway.backend(),
                                  recovery="replay") as second:
            s2 = await second.session("shared", attach=kernel_id)
            ex = await s2.execute("x + 1")
            assert ex.text.strip() == "42" and ex.recovery is None
            assert s2.kernel_id == kernel_id and s2.kernel is not None and s2.kernel.reattached
            await first.detach("shared")
            assert kernel_id in gateway.kernel_ids(), "detaching leaves the kernel running"
            assert (await s2.execute("x = x + 1; x")).text.strip() == "42"
            markers = [c.metadata["kernel_analyst"].get("marker") for c in
                       nbformat.read(s2.notebook_path, as_version=4).cells if c.cell_type == "markdown"]
            assert markers == ["reattached"]
            await second.close("shared", reason=None)
        assert kernel_id not in gateway.kernel_ids()
        async with SessionManager(tmp_path, limits=test_limits(), backend=gateway.backend(),
                                  recovery="replay") as third:
            s3 = await third.session("shared", attach=kernel_id)  # gone: a fresh kernel, replayed
            ex = await s3.execute("x")
            assert ex.text.strip() == "42" and ex.recovery is not None
