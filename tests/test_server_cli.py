"""``serve`` as a real subprocess (the generated token is printed once and works), the
argument parsing, token files, and tokens never reaching a log line."""

from __future__ import annotations

import argparse
import io
import logging
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from kernel_analyst import cli
from kernel_analyst.server import ServerConfig, TokenTable, add_cli
from kernel_analyst.server.cli import config_from_args
from kernel_analyst.server.config import environment_overrides, read_tokens_file
from kernel_analyst.server.runner import ensure_token

from .conftest import TEST_ISOLATION
from .server_fixtures import (  # noqa: F401
    RunningServer,
    create_session,
    mcp_http_client,
    server,
    start_server,
    wait_for,
)


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_cli(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(list(argv))


def test_cli_registers_serve_and_mcp(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("# tenant token\nteam-a  " + "a" * 20 + "\nteam-b " + "b" * 20 + "  # second\n")
    args = _parse("serve", "--port", "0", "--token-file", str(tokens), "--max-sessions", "3",
                  "--idle-timeout", "0", "--isolation", "process", "--max-upload-mb", "2")
    assert args.func.__name__ == "run_serve"
    config = config_from_args(args)
    assert config.tokens.tenant("a" * 20) == "team-a" and config.tokens.tenant("b" * 20) == "team-b"
    assert config.idle_timeout_s is None and config.max_sessions == 3
    assert config.max_upload_bytes == 2 * 1024 * 1024 and config.limits.isolation == "process"
    assert "a" * 20 not in repr(config.tokens)
    assert _parse("mcp").transport == "stdio" and _parse("mcp").func.__name__ == "run_mcp"
    with pytest.raises(ValueError, match="loopback"):
        config_from_args(_parse("serve", "--no-auth", "--host", "0.0.0.0"))


def test_database_and_recovery_flags() -> None:
    default = config_from_args(_parse("serve"))
    assert default.database_url is None and default.recovery == "replay"
    for command in ("serve", "mcp"):
        given = config_from_args(_parse(command, "--database", "postgresql://ka@db/ka", "--recovery", "none"))
        assert given.database_url == "postgresql://ka@db/ka" and given.recovery == "none"
    with pytest.raises(cli.UsageError, match="--database: use a sqlite"):
        config_from_args(_parse("serve", "--database", "mysql://db/ka"))
    with pytest.raises(SystemExit):
        _parse("serve", "--recovery", "sometimes")


def test_a_model_that_cannot_load_is_one_clear_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code = cli.main(["serve", "--model", "openai:gpt-4o-mini", "--session-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("kernel-analyst: error: ") and "OPENAI_API_KEY" in err
    assert err.count("\n") == 1, err


def test_tokens_from_the_environment(tmp_path: Path) -> None:
    (tmp_path / "t").write_text("ops " + "o" * 24 + "\n")
    table = environment_overrides({"KERNEL_ANALYST_TOKEN": "s" * 16,
                                   "KERNEL_ANALYST_TOKENS_FILE": str(tmp_path / "t")})
    assert table.tenant("s" * 16) == "default" and table.tenant("o" * 24) == "ops" and len(table) == 2
    with pytest.raises(ValueError, match="at least 16"):
        TokenTable({"short": "x"})
    (tmp_path / "bad").write_text("only-one-field\n")
    with pytest.raises(ValueError, match="TENANT TOKEN"):
        read_tokens_file(tmp_path / "bad")


def test_a_generated_token_is_printed_once() -> None:
    out = io.StringIO()
    config = ensure_token(ServerConfig(), out=out)
    token = re.search(r"^    (\S+)$", out.getvalue(), re.MULTILINE)
    assert token and config.tokens.tenant(token.group(1)) == "default"
    again = io.StringIO()
    assert ensure_token(config, out=again) is config and again.getvalue() == ""
    assert ensure_token(ServerConfig(auth=False), out=again).tokens.tenant(token.group(1)) is None


async def test_tokens_never_reach_the_logs(server: RunningServer,  # noqa: F811
                                           caplog: pytest.LogCaptureFixture) -> None:
    wrong = "wrong-" + secrets.token_urlsafe(16)
    access = logging.getLogger("uvicorn.access")
    access.addHandler(caplog.handler)  # uvicorn's loggers do not propagate to the root
    caplog.set_level(logging.DEBUG)
    access.setLevel(logging.INFO)
    try:
        async with server.client("alice") as alice:
            sid = await create_session(alice, "logs")
            await alice.post(f"/sessions/{sid}/execute", json={"code": "1/0"})
            await alice.get(f"/sessions/{sid}/notebook")
            await alice.delete(f"/sessions/{sid}")
        wrong_header = {"Authorization": f"Bearer {wrong}"}
        async with httpx.AsyncClient(base_url=server.url, headers=wrong_header) as bad:
            assert (await bad.get("/sessions")).status_code == 401
            assert (await bad.post("/mcp", json={})).status_code == 401
        async with mcp_http_client(server.url, server.tokens["bob"]) as client:
            await client.list_tools()
    finally:
        access.removeHandler(caplog.handler)
    assert caplog.records, "nothing was logged at all"
    for token in (wrong, *server.tokens.values()):
        assert token not in caplog.text


async def test_without_auth_only_loopback_hosts_are_served(tmp_path: Path) -> None:
    running = start_server(tmp_path / "noauth", auth=False, pool_size=0)
    try:
        async with httpx.AsyncClient(base_url=running.url) as client:
            assert (await client.get("/sessions")).json() == {"sessions": []}
            rebound = await client.get("/sessions", headers={"Host": "attacker.example:8000"})
            assert rebound.status_code == 400
    finally:
        running.stop()


def test_serve_subprocess_prints_a_working_token(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNEL_ANALYST_TOKEN")}
    command = [sys.executable, "-m", "kernel_analyst.cli", "serve", "--port", "0", "--pool-size", "0",
               "--session-dir", str(tmp_path / "sessions"), "--isolation", TEST_ISOLATION]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=env) as proc:
        try:
            text = _read_until(proc, "serving on")
            token = re.search(r"^    (\S+)$", text, re.MULTILINE)
            url = re.search(r"serving on (http://127\.0\.0\.1:\d+)/", text)
            assert token and url, text
            wait_for(lambda: _healthy(url.group(1)), timeout=30, what="the server to answer")
            with httpx.Client(base_url=url.group(1)) as client:
                assert client.get("/sessions").status_code == 401
                ok = client.get("/sessions", headers={"Authorization": f"Bearer {token.group(1)}"})
                assert ok.status_code == 200 and ok.json() == {"sessions": []}
        finally:
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=30) == 0


async def test_mcp_streamable_http_subprocess(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNEL_ANALYST_TOKEN")}
    command = [sys.executable, "-m", "kernel_analyst.cli", "mcp", "--transport", "streamable-http",
               "--port", "0", "--pool-size", "0", "--session-dir", str(tmp_path / "sessions"),
               "--isolation", TEST_ISOLATION]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=env) as proc:
        try:
            text = _read_until(proc, "MCP (streamable HTTP) on")
            token = re.search(r"^    (\S+)$", text, re.MULTILINE)
            url = re.search(r"on (http://127\.0\.0\.1:\d+)/mcp", text)
            assert token and url, text
            wait_for(lambda: _healthy(url.group(1), "/mcp", frozenset({401})), timeout=30,
                     what="MCP to answer")
            async with mcp_http_client(url.group(1), token.group(1)) as client:
                result = await client.call_tool("execute", {"code": "6 * 7"})
                assert result.structured_content["status"] == "ok"
        finally:
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=30) == 0


def _read_until(proc: subprocess.Popen[str], marker: str) -> str:
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 60
    while not any(marker in line for line in lines):
        assert time.monotonic() < deadline and proc.poll() is None, "".join(lines)
        lines.append(proc.stdout.readline())
    return "".join(lines)


def _healthy(url: str, path: str = "/healthz", statuses: frozenset[int] = frozenset({200})) -> bool:
    try:
        return httpx.get(f"{url}{path}", timeout=2).status_code in statuses
    except httpx.HTTPError:
        return False


def test_serve_can_run_kernels_on_a_gateway(tmp_path: Path) -> None:
    from kernel_analyst.kernels.launch import GatewayBackend, LocalBackend
    from kernel_analyst.server.service import SessionService

    config = config_from_args(_parse("serve", "--gateway", "http://127.0.0.1:9", "--session-dir",
                                     str(tmp_path)))
    assert config.gateway_url == "http://127.0.0.1:9"
    backend = SessionService(config).manager.backend
    assert isinstance(backend, GatewayBackend) and backend.url == "http://127.0.0.1:9"
    local = SessionService(config.with_(gateway_url=None)).manager.backend
    assert isinstance(local, LocalBackend)
