"""The session registry's queries, on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kernel_analyst.server.exceptions import RegistryError
from kernel_analyst.server.registry import Registry, SessionRow, database_url, safe_url

from .postgres_fixtures import PostgresServer


@pytest.fixture(params=["sqlite", "postgresql"])
async def registry(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Registry]:
    if request.param == "sqlite":
        url = database_url(None, tmp_path)
    else:
        server: PostgresServer = request.getfixturevalue("postgres")
        url = database_url(server.new_database(), tmp_path)
    async with _opened(Registry(url)) as opened:
        yield opened


class _opened:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    async def __aenter__(self) -> Registry:
        return await self.registry.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.registry.aclose()


def _row(sid: str, tenant: str = "alice", *, used: float | None = None,
         owner: str | None = None) -> SessionRow:
    now = time.time()
    return SessionRow(sid, tenant, sid, created_at=now, last_used_at=now if used is None else used,
                      owner=owner)


def test_database_urls(tmp_path: Path) -> None:
    assert database_url(None, tmp_path) == f"sqlite+aiosqlite:///{tmp_path / 'sessions.sqlite3'}"
    assert database_url("postgresql://u:pw@db/ka", tmp_path) == "postgresql+asyncpg://u:pw@db/ka"
    assert database_url("postgres://db/ka", tmp_path) == "postgresql+asyncpg://db/ka"
    assert database_url("sqlite:////var/ka.db", tmp_path) == "sqlite+aiosqlite:////var/ka.db"
    assert database_url("postgresql+psycopg://db/ka", tmp_path) == "postgresql+psycopg://db/ka"
    assert safe_url("postgresql://u:secret@db/ka") == "postgresql://u:***@db/ka"
    for bad in ("mysql://db/ka", "not a url", ""):
        with pytest.raises(ValueError, match="--database"):
            database_url(bad, tmp_path)


async def test_records_round_trip(registry: Registry) -> None:
    await registry.insert(_row("a1"))
    await registry.insert(_row("a2"))
    await registry.insert(_row("b1", "bob"))
    got = await registry.get("a1")
    assert got is not None and got.tenant == "alice" and got.open and got.owner is None
    assert await registry.get("nope") is None
    assert [r.id for r in await registry.of_tenant("alice")] == ["a2", "a1"]  # newest first
    assert await registry.open_counts("alice") == (2, 3)
    assert set(await registry.rows(["a1", "b1", "gone"])) == {"a1", "b1"}
    await registry.claim("a1", owner="replica-1", kernel_id="k-1")
    claimed = await registry.get("a1")
    assert claimed is not None and (claimed.owner, claimed.kernel_id) == ("replica-1", "k-1")
    assert await registry.delete("b1") and not await registry.delete("b1")


async def test_a_session_goes_dormant_in_two_fenced_writes_and_wakes_once(registry: Registry) -> None:
    await registry.insert(_row("s", owner="r1"))
    await registry.insert(_row("t", owner="r1"))
    at = time.time()
    assert await registry.begin_sleep("s", me="r1", reason="idle", at=at, owner="r1")
    assert not await registry.begin_sleep("s", me="r2", reason="idle", at=at, owner="r1"), "one culler"
    assert not await registry.claim("s", owner="r2", kernel_id=None), "no kernel starts while it sleeps"
    sleeping = await registry.get("s")
    assert sleeping is not None and sleeping.open and sleeping.sleeping_since == at
    assert await registry.finish_sleep("s", owner="r1", at=at + 1, disk_bytes=1234)
    dormant = await registry.get("s")
    assert dormant is not None and dormant.dormant and not dormant.open
    assert (dormant.dormant_since, dormant.dormant_reason, dormant.owner, dormant.kernel_id,
            dormant.sleeping_since, dormant.disk_bytes) == (at + 1, "idle", None, None, None, 1234)
    assert await registry.open_counts("alice") == (1, 1), "live sessions only"
    assert await registry.stored("alice") == (2, 1234), "live and dormant, with their disk use"
    assert not await registry.claim("s", owner="r2", kernel_id=None), "a dormant one is woken, not claimed"
    assert await registry.wake("s", owner="r2", at=at + 2)
    assert not await registry.wake("s", owner="r3", at=at + 2), "of two replicas waking it, one wins"
    woken = await registry.get("s")
    assert woken is not None and woken.open and (woken.owner, woken.dormant_reason) == ("r2", None)
    assert woken.last_used_at == at + 2
    assert await registry.set_kernel("s", owner="r2", kernel_id="k-2")
    assert not await registry.set_kernel("s", owner="r1", kernel_id="k-1"), "not its holder"


async def test_last_use_is_written_in_batches_and_never_moves_back(registry: Registry) -> None:
    await registry.insert(_row("t1", used=100.0))
    await registry.insert(_row("t2", used=100.0))
    await registry.touch({"t1": 200.0, "t2": 50.0})
    t1, t2 = await registry.get("t1"), await registry.get("t2")
    assert t1 is not None and t1.last_used_at == 200.0
    assert t2 is not None and t2.last_used_at == 100.0


async def test_who_may_cull_what(registry: Registry) -> None:
    """Idle sessions a replica may close: its own, unowned ones, and a dead replica's;
    never one that a live replica holds."""
    now = time.time()
    await registry.heartbeat("alive", now=now)
    await registry.heartbeat("dead", now=now - 120)
    for sid, owner in (("mine", "me"), ("free", None), ("theirs", "alive"), ("orphan", "dead"),
                       ("ghost", "never-seen")):
        await registry.insert(_row(sid, used=now - 600, owner=owner))
    await registry.insert(_row("fresh", used=now, owner="me"))
    for sid, owner in (("sleeping-here", "me"), ("sleeping-alive", "alive"), ("sleeping-dead", "dead")):
        await registry.insert(_row(sid, used=now - 600, owner=owner))
        assert await registry.begin_sleep(sid, me=owner, reason="idle", at=now - 300, owner=owner)
    await registry.insert(_row("dormant", used=now - 600, owner="me"))
    assert await registry.begin_sleep("dormant", me="me", reason="idle", at=now - 300, owner="me")
    assert await registry.finish_sleep("dormant", owner="me", at=now - 299, disk_bytes=0)
    idle = await registry.idle(now - 60, me="me", lease_cut=now - 60)
    # A sleep in progress is finished by nobody else unless its replica died in it.
    assert sorted(r.id for r in idle) == ["free", "ghost", "mine", "orphan", "sleeping-dead"]


async def test_an_orderly_stop_puts_its_sessions_to_sleep(registry: Registry) -> None:
    await registry.heartbeat("r1")
    await registry.insert(_row("held", owner="r1"))
    await registry.claim("held", owner="r1", kernel_id="k")
    await registry.insert(_row("other", owner="r2"))
    await registry.begin_sleep_all("r1", reason="shutdown", at=time.time())
    assert not await registry.claim("held", owner="r2", kernel_id=None), "fenced while it stops"
    await registry.release("r1", disk_bytes={"held": 4096})
    held, other = await registry.get("held"), await registry.get("other")
    assert held is not None and held.dormant and (held.owner, held.kernel_id) == (None, None)
    assert (held.dormant_reason, held.disk_bytes, held.sleeping_since) == ("shutdown", 4096, None)
    assert other is not None and other.open and other.owner == "r2"


async def test_a_schema_1_registry_is_upgraded_in_place(registry: Registry) -> None:
    """Closed sessions of a registry written before dormant conversations become dormant."""
    import sqlalchemy as sa

    async def downgrade(conn: Any) -> None:
        await conn.execute(sa.text("DROP TABLE ka_sessions"))
        await conn.execute(sa.text(
            "CREATE TABLE ka_sessions (id VARCHAR(64) PRIMARY KEY, tenant VARCHAR(255) NOT NULL, "
            "label VARCHAR(255) NOT NULL, directory VARCHAR(255) NOT NULL, created_at FLOAT NOT NULL, "
            "last_used_at FLOAT NOT NULL, closed_at FLOAT, closed_reason VARCHAR(32), "
            "kernel_id VARCHAR(128), owner VARCHAR(128))"))
        await conn.execute(sa.text(
            "INSERT INTO ka_sessions VALUES ('old', 'alice', '', 'old', 1.0, 2.0, 3.0, 'idle', 'k', 'r'), "
            "('live', 'alice', '', 'live', 1.0, 2.0, NULL, NULL, NULL, 'r')"))
        await conn.execute(sa.text("UPDATE ka_meta SET value = '1' WHERE key = 'schema'"))

    await registry._run(downgrade, write=True)
    async with _opened(Registry(registry.url)) as upgraded:
        old, live = await upgraded.get("old"), await upgraded.get("live")
        assert old is not None and old.dormant and (old.dormant_since, old.dormant_reason) == (3.0, "idle")
        assert (old.owner, old.kernel_id, old.disk_bytes) == (None, None, 0)
        assert live is not None and live.open and live.owner == "r"
        assert await upgraded.begin_sleep("live", me="r", reason="idle", at=5.0, owner="r")


async def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    url = database_url(None, tmp_path)
    async with _opened(Registry(url)) as registry:
        await registry._run(_set_schema, write=True)
    with pytest.raises(RegistryError, match="newer than this kernel-analyst"):
        await Registry(url).start()


async def _set_schema(conn: object) -> None:
    import sqlalchemy as sa

    await conn.execute(sa.text("UPDATE ka_meta SET value = '99' WHERE key = 'schema'"))  # type: ignore[attr-defined]


async def test_an_unreachable_database_is_one_clear_error(tmp_path: Path) -> None:
    from .gateway_fixtures import free_port

    registry = Registry(database_url(f"postgresql://nobody:pw@127.0.0.1:{free_port()}/ka", tmp_path))
    with pytest.raises(RegistryError) as caught:
        await registry.start()
    message = str(caught.value)
    assert "cannot reach the session registry" in message or "failed" in message
    assert "pw" not in message and "--database" in message
