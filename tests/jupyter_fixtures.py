"""Jupyter clients for the tests of the service's Jupyter kernel API.

- :class:`KernelSocket`: a kernel channels websocket client with no jupyter_client in it
  (the ``websockets`` library and the JSON of Jupyter's messaging spec, as VS Code's
  Jupyter extension is one): it sends requests and collects what comes back for them;
- :class:`LabProcess`: a stock ``jupyter lab`` (jupyter_server 2 with JupyterLab) started
  with ``--gateway-url`` at a service, the service's token as its gateway token (in the
  environment, not on the command line).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import websockets

from kernel_analyst.kernels.launch.wsframes import V1_PROTOCOL, decode_v1, encode_v1

from .gateway_fixtures import free_port
from .server_fixtures import wait_for


def message(msg_type: str, content: dict[str, Any], *, session: str = "test-client") -> dict[str, Any]:
    """A Jupyter message as a client makes one."""
    return {"header": {"msg_id": uuid.uuid4().hex, "msg_type": msg_type, "session": session,
                       "username": "person", "date": "2026-11-26T00:00:00.000000Z", "version": "5.3"},
            "parent_header": {}, "metadata": {}, "content": content}


def execute_request(code: str, **content: Any) -> dict[str, Any]:
    """An execute request as JupyterLab sends a cell."""
    return message("execute_request", {"code": code, "silent": False, "store_history": True,
                                       "user_expressions": {}, "allow_stdin": True, "stop_on_error": True,
                                       **content})


@dataclass
class Reply:
    """What came back for one request."""

    reply: dict[str, Any] | None = None
    iopub: list[dict[str, Any]] = field(default_factory=list)

    @property
    def text(self) -> str:
        """Streams and text/plain results, in order."""
        out = []
        for msg in self.iopub:
            content = msg["content"]
            if msg["msg_type"] == "stream":
                out.append(content["text"])
            elif msg["msg_type"] in ("execute_result", "display_data"):
                out.append(content["data"].get("text/plain", ""))
        return "".join(out)

    def of_type(self, msg_type: str) -> list[dict[str, Any]]:
        return [m for m in self.iopub if m["msg_type"] == msg_type]


class KernelSocket:
    """One client's channels websocket (legacy JSON, or the v1 binary protocol)."""

    def __init__(self, ws: Any, *, v1: bool) -> None:
        self.ws = ws
        self.v1 = v1
        self.seen: list[tuple[str, dict[str, Any]]] = []
        """Every (channel, message) received, in order."""
        self._waiting: dict[str, Reply] = {}
        self._done: dict[str, asyncio.Event] = {}
        self.reader = asyncio.create_task(self._read())
        """Reads until the socket closes."""

    async def send(self, msg: dict[str, Any], channel: str = "shell") -> None:
        """Send ``msg`` and start collecting what comes back for it."""
        msg_id = msg["header"]["msg_id"]
        self._waiting[msg_id] = Reply()
        self._done[msg_id] = asyncio.Event()
        if self.v1:
            await self.ws.send(encode_v1(channel, {**msg, "buffers": []}))
        else:
            await self.ws.send(json.dumps({**msg, "channel": channel}))

    async def wait(self, msg: dict[str, Any], timeout: float = 60.0) -> Reply:
        """What came back for ``msg`` once its reply (if it has one) and idle arrived."""
        msg_id = msg["header"]["msg_id"]
        await asyncio.wait_for(self._done[msg_id].wait(), timeout)
        return self._waiting[msg_id]

    async def request(self, msg: dict[str, Any], channel: str = "shell", timeout: float = 60.0) -> Reply:
        await self.send(msg, channel)
        return await self.wait(msg, timeout)

    async def _read(self) -> None:
        async for frame in self.ws:
            if self.v1:
                assert isinstance(frame, bytes), "v1 frames are binary"
                channel, msg = decode_v1(frame)
                msg["msg_type"] = msg["header"]["msg_type"]
            else:
                msg = json.loads(frame)
                channel = msg["channel"]
            self.seen.append((channel, msg))
            parent = (msg.get("parent_header") or {}).get("msg_id")
            found = self._waiting.get(parent)
            if found is None:
                continue
            if channel == "iopub":
                found.iopub.append(msg)
            else:
                found.reply = msg
            expects_reply = msg["parent_header"].get("msg_type", "").endswith("_request")
            idle = any(m["msg_type"] == "status" and m["content"]["execution_state"] == "idle"
                       for m in found.iopub)
            if idle and (found.reply is not None or not expects_reply):
                self._done[parent].set()

    async def close(self) -> None:
        await self.ws.close()
        self.reader.cancel()


@asynccontextmanager
async def kernel_socket(base_url: str, kernel_id: str, token: str, *, v1: bool = False,
                        in_query: bool = False) -> AsyncIterator[KernelSocket]:
    """A :class:`KernelSocket` on ``kernel_id``; the token in the Authorization header (as
    jupyter_server's gateway client sends it) or in the URL (as VS Code does)."""
    url = f"{base_url.replace('http', 'ws', 1)}/api/kernels/{kernel_id}/channels?session_id={uuid.uuid4()}"
    headers = {} if in_query else {"Authorization": f"token {token}"}
    if in_query:
        url += f"&token={token}"
    protocols = [V1_PROTOCOL] if v1 else None
    async with websockets.connect(url, additional_headers=headers, subprotocols=protocols,  # type: ignore[arg-type]
                                  max_size=64 * 2**20) as ws:
        sock = KernelSocket(ws, v1=v1)
        try:
            yield sock
        finally:
            sock.reader.cancel()


class LabProcess:
    """``jupyter lab --gateway-url URL`` on 127.0.0.1, stock and unmodified."""

    def __init__(self, workdir: Path, gateway_url: str, gateway_token: str) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.log_path = workdir / "lab.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JPY_", "JUPYTER_"))}
        env.update(JUPYTER_CONFIG_DIR=str(workdir / "config"), JUPYTER_DATA_DIR=str(workdir / "data"),
                   JUPYTER_RUNTIME_DIR=str(workdir / "runtime"), JUPYTER_GATEWAY_AUTH_TOKEN=gateway_token,
                   JUPYTER_TOKEN=self.token)
        (workdir / "notebooks").mkdir(parents=True, exist_ok=True)
        # No "get notified about Jupyter news?" toast over the notebook.
        settings = workdir / "settings" / "@jupyterlab" / "apputils-extension"
        settings.mkdir(parents=True, exist_ok=True)
        (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
        env["JUPYTERLAB_SETTINGS_DIR"] = str(workdir / "settings")
        argv = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
                f"--ServerApp.root_dir={workdir / 'notebooks'}", f"--gateway-url={gateway_url}",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                "--LabApp.news_url=None", "--ServerApp.allow_root=True", "--log-level=WARN"]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(argv, env=env, cwd=workdir, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT)
        wait_for(self._ready, timeout=90, interval=0.1, what="jupyter lab to answer")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}"}

    def _ready(self) -> bool:
        assert self.proc.poll() is None, self.log_path.read_text(errors="replace")
        try:
            return httpx.get(f"{self.url}/api/status", headers=self.headers, timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        """SIGTERM (jupyter_server's orderly stop: it deletes the kernels it started on the
        gateway, which the service takes as letting go), then make sure it is gone."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 20
            while self.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
