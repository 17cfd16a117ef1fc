"""The session registry's queries, on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

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


async def test_close_keeps_the_newest_closed(registry: Registry) -> None:
    for n in range(4):
        await registry.insert(_row(f"s{n}", owner="r"))
    base = time.time()
    for n in range(4):
        assert await registry.close(f"s{n}", reason="idle", at=base + n, keep_closed=2)
    assert not await registry.close("s3", reason="idle", at=base + 9, keep_closed=2), "closed once"
    kept = await registry.of_tenant("alice")
    assert sorted(r.id for r in kept) == ["s2", "s3"]
    assert all(r.closed_reason == "idle" and r.owner is None and not r.open for r in kept)
    assert await registry.open_counts("alice") == (0, 0)


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
    idle = await registry.idle(now - 60, me="me", lease_cut=now - 60)
    assert sorted(r.id for r in idle) == ["free", "ghost", "mine", "orphan"]


async def test_an_orderly_stop_releases_its_sessions(registry: Registry) -> None:
    await registry.heartbeat("r1")
    await registry.insert(_row("held", owner="r1"))
    await registry.claim("held", owner="r1", kernel_id="k")
    await registry.insert(_row("other", owner="r2"))
    await registry.release("r1")
    held, other = await registry.get("held"), await registry.get("other")
    assert held is not None and held.open and (held.owner, held.kernel_id) == (None, None)
    assert other is not None and other.owner == "r2"


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
