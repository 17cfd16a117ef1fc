"""Tenants as gateway users, against a real Jupyter Enterprise Gateway 3.3 on 127.0.0.1.

Enterprise Gateway authorizes, counts and (where enabled) impersonates the user named by
``KERNEL_USERNAME`` in each start request. The gateway here runs as this test's user,
refuses ``root`` and ``mallory`` (``unauthorized_users``) and allows one kernel per user
(``max_kernels_per_user=1``), so its own accounting shows whom it saw.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from kernel_analyst.frontend import errors, flags
from kernel_analyst.frontend.errors import UsageError
from kernel_analyst.frontend.sessions import kernel_backend
from kernel_analyst.frontend.settings import KernelSettings
from kernel_analyst.kernels import GatewayError, GatewayUserError, SessionManager
from kernel_analyst.kernels.launch import GatewayBackend
from kernel_analyst.server import ServerConfig
from kernel_analyst.server.cli import add_cli, config_from_args
from kernel_analyst.server.service import SessionService

from .conftest import test_limits
from .enterprise_gateway_fixtures import EnterpriseGatewayProcess, prepare_venv
from .server_fixtures import tokens_file, wait_for

USER_OF = "import os; os.environ.get('KERNEL_USERNAME')"


@pytest.fixture(scope="module")
async def eg(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[EnterpriseGatewayProcess]:
    """The gateway for this module: this test's own user refused too (so a start that sends
    no user is refused whoever runs the tests), one kernel per user."""
    python = await asyncio.to_thread(prepare_venv)  # made once; pip must not block the loop
    proc = EnterpriseGatewayProcess(
        tmp_path_factory.mktemp("enterprise-gateway"), python=python,
        extra_args=(f"--EnterpriseGatewayApp.unauthorized_users={getpass.getuser()}",
                    "--EnterpriseGatewayApp.max_kernels_per_user=1"))
    await proc.start()
    try:
        yield proc
    finally:
        await proc.stop()


async def _user(manager: SessionManager, sid: str, owner: str | None) -> str:
    session = await manager.session(sid, owner=owner)
    ex = await session.execute(USER_OF)
    assert ex.status == "ok", ex.text
    return ex.text.strip().strip("'")


# -- the library -----------------------------------------------------------------------------


async def test_two_tenants_reach_the_gateway_as_two_users(eg: EnterpriseGatewayProcess,
                                                          tmp_path: Path) -> None:
    backend = eg.backend(usernames={"team-b": "bob"}, kernel_env={"KERNEL_SPACE": "space-{user}"})
    assert backend.kernels_per_owner
    async with SessionManager(tmp_path, limits=test_limits(), backend=backend) as manager:
        assert await _user(manager, "a-1", "alice") == "alice"      # default: the tenant's name
        assert await _user(manager, "b-1", "team-b") == "bob"       # mapped
        space = await (await manager.session("b-1")).execute("os.environ['KERNEL_SPACE']")
        assert space.text.strip() == "'space-bob'"
        # The gateway counted one kernel per user: a second one of alice's is over its
        # per-user limit, while bob's did not count against her.
        with pytest.raises(GatewayError, match=r"max kernels per user.*'alice' currently has 1"):
            await manager.session("a-2", owner="alice")
        # A restart starts the replacement kernel as the same user.
        session = manager.get("b-1")
        assert session is not None
        await session.restart()
        assert (await session.execute(USER_OF)).text.strip() == "'bob'"
    assert eg.kernel_ids() == []


async def test_unauthorized_users_are_a_clear_error(eg: EnterpriseGatewayProcess, tmp_path: Path) -> None:
    backend = eg.backend(usernames={"intruder": "mallory"})
    async with SessionManager(tmp_path, limits=test_limits(), backend=backend) as manager:
        with pytest.raises(GatewayUserError) as refused:
            await manager.session("m-1", owner="intruder")
        assert refused.value.user == "mallory"
        message = str(refused.value)
        assert "refused to start a kernel for 'intruder' as user 'mallory'" in message
        assert "User 'mallory' is not authorized" in message and "--gateway-user TENANT=USER" in message
        failure = errors.classify(refused.value)
        assert (failure.http_status, failure.exit_code) == (403, 1)
        # No owner and no KERNEL_USERNAME: the gateway takes the user it runs as, refused here.
        with pytest.raises(GatewayUserError, match="no KERNEL_USERNAME was sent"):
            await manager.session("nobody-1")
    assert eg.kernel_ids() == []


async def test_one_user_for_every_kernel_through_kernel_env(eg: EnterpriseGatewayProcess,
                                                             tmp_path: Path) -> None:
    backend = eg.backend(kernel_env={"KERNEL_USERNAME": "svc", "KERNEL_EXTRA": "x"},
                         usernames={"team-c": "carol"})
    assert backend.username_for(None) == "svc" and backend.username_for("dave") == "svc"
    async with SessionManager(tmp_path, limits=test_limits(), backend=backend) as manager:
        assert await _user(manager, "c-1", "team-c") == "carol"
        assert await _user(manager, "s-1", None) == "svc"
        extra = await (await manager.session("s-1")).execute("import os; os.environ['KERNEL_EXTRA']")
        assert extra.text.strip() == "'x'"
    assert not GatewayBackend("http://127.0.0.1:9", kernel_env={"KERNEL_USERNAME": "svc"}).kernels_per_owner


# -- flags -----------------------------------------------------------------------------------


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_cli(parser.add_subparsers())
    return parser.parse_args(argv)


def test_gateway_flags_are_one_definition_for_cli_serve_and_mcp() -> None:
    from kernel_analyst import cli

    for command in ("serve", "mcp"):
        args = _parse(command, "--gateway", "http://127.0.0.1:9", "--gateway-env", "KERNEL_NAMESPACE=ns",
                      "--gateway-env", "KERNEL_LAUNCH_TIMEOUT=60", "--gateway-user", "team-b=bob")
        config = config_from_args(args)
        assert config.gateway_env == {"KERNEL_NAMESPACE": "ns", "KERNEL_LAUNCH_TIMEOUT": "60"}
        assert config.gateway_users == {"team-b": "bob"}
        backend = kernel_backend(config.kernel_settings)
        assert isinstance(backend, GatewayBackend) and backend.usernames == {"team-b": "bob"}
        assert backend.kernel_env == {"KERNEL_NAMESPACE": "ns", "KERNEL_LAUNCH_TIMEOUT": "60"}
    parser = cli.build_parser()
    ask = parser.parse_args(["eda", "x.csv", "--gateway", "http://127.0.0.1:9",
                             "--gateway-env", "KERNEL_USERNAME=me"])
    assert flags.kernel_settings(ask).gateway_env == {"KERNEL_USERNAME": "me"}
    for bad in ("NOVALUE", "1BAD=x", "=x"):
        with pytest.raises(SystemExit):
            _parse("serve", "--gateway-env", bad)
    with pytest.raises(UsageError, match="--gateway-env and --gateway-user apply to gateway kernels"):
        kernel_backend(KernelSettings(gateway_env={"KERNEL_X": "1"}))
    settings = KernelSettings(gateway_url="http://x:1", gateway_env={"KERNEL_X": "1"},
                              gateway_users={"a": "b"})
    assert KernelSettings.from_dict(settings.to_dict()) == settings



def test_the_service_keeps_no_pool_when_tenants_are_gateway_users(tmp_path: Path) -> None:
    # Pool kernels start for nobody: none could be handed to a tenant whose kernels start
    # as its own user. With one user for every kernel the pool is kept. (Nothing is
    # contacted: the constructor starts nothing.)
    config = ServerConfig(root_dir=tmp_path, gateway_url="http://127.0.0.1:9", pool_size=2)
    assert SessionService(config).manager.pool_size == 0
    one_user = SessionService(config.with_(gateway_env={"KERNEL_USERNAME": "svc"}))
    assert one_user.manager.pool_size == 2


# -- serve --gateway, end to end ---------------------------------------------------------------


def test_serve_gateway_end_to_end(eg: EnterpriseGatewayProcess, tmp_path: Path) -> None:
    token_path, tokens = tokens_file(tmp_path, ("alice", "team-b", "intruder"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNEL_ANALYST_")}
    env["KERNEL_ANALYST_GATEWAY_TOKEN"] = eg.token
    command = [sys.executable, "-m", "kernel_analyst.cli", "serve", "--port", "0",
               "--session-dir", str(tmp_path / "sessions"), "--token-file", str(token_path),
               "--gateway", eg.url, "--gateway-user", "team-b=bob", "--gateway-user", "intruder=mallory",
               "--gateway-env", "KERNEL_TEAM_NOTE=from-serve"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=env) as proc:
        try:
            url = _serving_url(proc)
            with httpx.Client(base_url=url, timeout=60) as client:
                for tenant, user in (("alice", "alice"), ("team-b", "bob")):
                    headers = {"Authorization": f"Bearer {tokens[tenant]}"}
                    created = client.post("/sessions", json={}, headers=headers)
                    assert created.status_code == 201, created.text
                    sid = created.json()["id"]
                    ran = client.post(f"/sessions/{sid}/execute", headers=headers, json={
                        "code": "import os; (os.environ['KERNEL_USERNAME'], os.environ['KERNEL_TEAM_NOTE'])"})
                    assert ran.status_code == 200, ran.text
                    assert ran.json()["text"].strip() == f"('{user}', 'from-serve')"
                refused = client.post("/sessions", json={},
                                      headers={"Authorization": f"Bearer {tokens['intruder']}"})
                assert refused.status_code == 403, refused.text
                assert "as user 'mallory'" in refused.text and "not authorized" in refused.text
                assert len(eg.kernel_ids()) == 2
        finally:
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=60) == 0
    assert wait_for(lambda: eg.kernel_ids() == [], timeout=30, what="the gateway kernels to be deleted")


def _serving_url(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 60
    while True:
        found = re.search(r"serving on (http://127\.0\.0\.1:\d+)/", "".join(lines))
        if found:
            return found.group(1)
        assert time.monotonic() < deadline and proc.poll() is None, "".join(lines)
        lines.append(proc.stdout.readline())
