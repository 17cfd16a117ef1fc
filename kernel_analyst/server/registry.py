"""The session registry: the service's session records in a real database.

SQLite in the session directory by default (``sessions.sqlite3``; nothing to install),
or PostgreSQL by URL (``--database postgresql://...``) so that several API replicas
share one registry. SQLAlchemy 2's asyncio layer gives one code path over both, with
their async drivers (aiosqlite, asyncpg). This module owns the schema and every query;
:class:`~kernel_analyst.server.service.SessionService` is its only user.

Schema (version 2)::

    ka_sessions   id PK, tenant, label, directory (its name under the session root),
                  created_at, last_used_at (epoch seconds), dormant_since, dormant_reason
                  (NULL dormant_since = live: its kernel runs, or starts at its next use),
                  sleeping_since (set while its owner saves the namespace and stops the
                  kernel; nobody else starts one meanwhile), disk_bytes (its directory's
                  size when it last went dormant), kernel_id (a gateway kernel's id, else
                  NULL), owner (the replica holding the live session, else NULL)
    ka_replicas   id PK, host, started_at, seen_at (a heartbeat: an owner whose seen_at is
                  older than the lease is taken for dead)
    ka_meta       key PK, value (``schema`` = the schema version)

Version 1 (closed_at and closed_reason, no sleeping_since or disk_bytes) is upgraded in
place at start: its closed sessions become dormant ones.

**Going dormant** is two writes, so that no replica starts a kernel on a conversation
whose namespace is still being saved: :meth:`Registry.begin_sleep` (compare-and-set on
owner and sleeping_since as the culler read them), the snapshot and the kernel's stop,
then :meth:`Registry.finish_sleep`. :meth:`Registry.wake` turns a dormant row live again
for one replica (compare-and-set too: of two replicas waking it at once, one wins).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from .exceptions import RegistryError

log = logging.getLogger(__name__)

T = TypeVar("T")

SCHEMA_VERSION = 2
SQLITE_FILE = "sessions.sqlite3"
"""The default registry's file name, in the session root."""
_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg",
            "postgres": "postgresql+asyncpg"}
_SCHEMA_LOCK = 0x6B61_7265  # a PostgreSQL advisory lock: replicas starting at once create the schema once
_REPLICA_FORGET_S = 7 * 24 * 3600.0  # a replica row unseen this long is removed
_ASYNCPG_DEADLINES = {"timeout": 10.0, "command_timeout": 30.0}  # connect, each statement (s)

_metadata = sa.MetaData()

sessions_table = sa.Table(
    "ka_sessions", _metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("tenant", sa.String(200), nullable=False, index=True),
    sa.Column("label", sa.String(400), nullable=False, default=""),
    sa.Column("directory", sa.String(255), nullable=False),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("last_used_at", sa.Double, nullable=False),
    sa.Column("dormant_since", sa.Double, nullable=True, index=True),
    sa.Column("dormant_reason", sa.String(32), nullable=True),
    sa.Column("kernel_id", sa.String(128), nullable=True),
    sa.Column("owner", sa.String(128), nullable=True),
    sa.Column("sleeping_since", sa.Double, nullable=True),
    sa.Column("disk_bytes", sa.BigInteger, nullable=False, default=0),
)

replicas_table = sa.Table(
    "ka_replicas", _metadata,
    sa.Column("id", sa.String(128), primary_key=True),
    sa.Column("host", sa.String(255), nullable=False, default=""),
    sa.Column("started_at", sa.Double, nullable=False),
    sa.Column("seen_at", sa.Double, nullable=False),
)

meta_table = sa.Table(
    "ka_meta", _metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.String(200), nullable=False),
)

_S = sessions_table.c
_BY_ID = sa.select(sessions_table).where(_S.id == sa.bindparam("sid"))


@dataclass(frozen=True)
class SessionRow:
    """One session as the registry keeps it."""

    id: str
    """Public id (also the conversation id in the session manager)."""
    tenant: str
    """The tenant that owns it."""
    directory: str
    """Its directory's name under the session root."""
    created_at: float
    """Creation time, seconds since the epoch."""
    last_used_at: float
    """Last use as last written (the live replica keeps a fresher value in memory)."""
    label: str = ""
    """The label given at creation."""
    dormant_since: float | None = None
    """When its kernel was let go of while the conversation was kept; None while live."""
    dormant_reason: str | None = None
    """Why: ``idle``, ``shutdown`` (an orderly stop of its replica); None while live. Set
    from :meth:`Registry.begin_sleep` on."""
    kernel_id: str | None = None
    """The gateway kernel it last ran in (a replica can reattach to it), else None."""
    owner: str | None = None
    """The replica holding its live session, else None."""
    sleeping_since: float | None = None
    """Set while its owner saves the namespace and stops the kernel (it is still live)."""
    disk_bytes: int = 0
    """Its directory's size in bytes when it last went dormant (0 before)."""

    @property
    def open(self) -> bool:
        """True while the conversation is live (not dormant)."""
        return self.dormant_since is None

    @property
    def dormant(self) -> bool:
        """True once its kernel was let go of (it wakes at its next use)."""
        return self.dormant_since is not None

    def with_(self, **changes: Any) -> SessionRow:
        """A copy with some fields changed."""
        return replace(self, **changes)

    @classmethod
    def from_mapping(cls, row: Mapping[Any, Any]) -> SessionRow:
        """From a result row's mapping."""
        return cls(**{name: row[name] for name in _ROW_FIELDS})


_ROW_FIELDS = tuple(c.name for c in sessions_table.columns)


def database_url(url: str | None, root_dir: Path) -> str:
    """The SQLAlchemy URL for ``--database``: None is SQLite in ``root_dir``; plain
    ``sqlite://`` and ``postgresql://`` URLs get their async driver. Raises ValueError
    for anything else."""
    if url is None:
        return f"sqlite+aiosqlite:///{(Path(root_dir) / SQLITE_FILE).absolute()}"
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ValueError(f"--database: not a database URL: {safe_url(url)!r}") from exc
    backend, _, driver = parsed.drivername.partition("+")
    if backend not in _DRIVERS:
        raise ValueError(f"--database: use a sqlite:///PATH or postgresql://USER@HOST/DB URL; "
                         f"got {parsed.drivername}://")
    if not driver:
        parsed = parsed.set(drivername=_DRIVERS[backend])
    return parsed.render_as_string(hide_password=False)


def safe_url(url: str) -> str:
    """``url`` with its password hidden, for messages and logs."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparsable URL>"


class Registry:
    """Session records and replica heartbeats in one database.

    Nothing connects in the constructor: :meth:`start` creates the engine and the schema,
    :meth:`aclose` disposes of it. Database failures raise :class:`RegistryError` (503).
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.dialect = make_url(url).get_backend_name()
        """``sqlite`` or ``postgresql``."""
        self._engine: AsyncEngine | None = None

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> Registry:
        """Connect and create the schema if it is missing."""
        if self._engine is not None:
            return self
        if self.dialect == "sqlite":
            database = make_url(self.url).database
            if database and database != ":memory:":
                Path(database).parent.mkdir(parents=True, exist_ok=True)
            engine = create_async_engine(self.url)
            event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        else:
            # pre-ping: a restarted database leaves dead pooled connections behind. Every
            # wait has a deadline: connecting, each statement, and waiting for a pooled
            # connection.
            deadlines = _ASYNCPG_DEADLINES if make_url(self.url).get_driver_name() == "asyncpg" else {}
            engine = create_async_engine(self.url, pool_pre_ping=True, pool_size=5, max_overflow=10,
                                         pool_timeout=30, connect_args=deadlines)
        self._engine = engine
        try:
            await self._run(self._create_schema, write=True)
        except BaseException:
            await self.aclose()
            raise
        log.info("session registry at %s", safe_url(self.url))
        return self

    async def aclose(self) -> None:
        """Close every connection."""
        engine, self._engine = self._engine, None
        if engine is not None:
            await engine.dispose()

    async def _create_schema(self, conn: AsyncConnection) -> None:
        if self.dialect == "postgresql":
            await conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _SCHEMA_LOCK})
        await conn.run_sync(_metadata.create_all)
        version = sa.select(meta_table.c.value).where(meta_table.c.key == "schema")
        found = (await conn.execute(version)).scalar()
        if found is None:
            await conn.execute(meta_table.insert().values(key="schema", value=str(SCHEMA_VERSION)))
        elif int(found) > SCHEMA_VERSION:
            raise RegistryError(f"the session registry at {safe_url(self.url)} has schema version {found}, "
                                f"newer than this kernel-analyst's ({SCHEMA_VERSION}); upgrade it")
        elif int(found) == 1:
            await _upgrade_from_1(conn)
            log.info("session registry upgraded from schema 1 to %d (closed sessions are dormant now)",
                     SCHEMA_VERSION)

    async def _run(self, work: Callable[[AsyncConnection], Awaitable[T]], *, write: bool = False) -> T:
        """``work`` on a connection (in a transaction when it writes); a database failure
        becomes a RegistryError that says where and what."""
        engine = self._engine
        if engine is None:
            raise RegistryError("the session registry is not open")
        try:
            if write:
                async with engine.begin() as conn:
                    return await work(conn)
            async with engine.connect() as conn:
                return await work(conn)
        except DBAPIError as exc:
            reason = " ".join(str(exc.orig or exc).split())[:300]
            raise RegistryError(f"the session registry at {safe_url(self.url)} failed: {reason}; "
                                "check that the database is up (--database)") from exc
        except (OSError, asyncio.TimeoutError) as exc:  # the server could not be reached at all
            raise RegistryError(f"cannot reach the session registry at {safe_url(self.url)}: {exc}; "
                                "check --database") from exc

    # -- sessions -------------------------------------------------------------------------

    async def insert(self, row: SessionRow) -> None:
        """Record a new session."""
        values = {name: getattr(row, name) for name in _ROW_FIELDS}

        async def work(conn: AsyncConnection) -> None:
            await conn.execute(sessions_table.insert().values(**values))

        await self._run(work, write=True)

    async def get(self, sid: str) -> SessionRow | None:
        """The session ``sid``, or None (one primary-key lookup)."""

        async def work(conn: AsyncConnection) -> SessionRow | None:
            found = (await conn.execute(_BY_ID, {"sid": sid})).mappings().first()
            return SessionRow.from_mapping(found) if found is not None else None

        return await self._run(work)

    async def rows(self, ids: Iterable[str]) -> dict[str, SessionRow]:
        """The sessions among ``ids`` that exist, by id."""
        wanted = list(ids)
        if not wanted:
            return {}

        async def work(conn: AsyncConnection) -> dict[str, SessionRow]:
            result = await conn.execute(sa.select(sessions_table).where(_S.id.in_(wanted)))
            return {r["id"]: SessionRow.from_mapping(r) for r in result.mappings()}

        return await self._run(work)

    async def of_tenant(self, tenant: str) -> list[SessionRow]:
        """The tenant's sessions, live and dormant, newest first."""
        query = sa.select(sessions_table).where(_S.tenant == tenant).order_by(_S.created_at.desc())
        return await self._select(query)

    async def open_rows(self, tenant: str | None = None) -> list[SessionRow]:
        """Live sessions (of one tenant, or of all)."""
        query = sa.select(sessions_table).where(_S.dormant_since.is_(None))
        if tenant is not None:
            query = query.where(_S.tenant == tenant)
        return await self._select(query)

    async def open_counts(self, tenant: str) -> tuple[int, int]:
        """(live sessions of ``tenant``, live sessions in all): what the session limits count."""
        mine = sa.func.coalesce(sa.func.sum(sa.case((_S.tenant == tenant, 1), else_=0)), 0)
        query = sa.select(mine, sa.func.count()).select_from(sessions_table).where(_S.dormant_since.is_(None))

        async def work(conn: AsyncConnection) -> tuple[int, int]:
            found = (await conn.execute(query)).one()
            return int(found[0]), int(found[1])

        return await self._run(work)

    async def stored(self, tenant: str) -> tuple[int, int]:
        """(conversations ``tenant`` keeps, live and dormant, their disk bytes as last measured)."""
        query = (sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(_S.disk_bytes), 0))
                 .select_from(sessions_table).where(_S.tenant == tenant))

        async def work(conn: AsyncConnection) -> tuple[int, int]:
            found = (await conn.execute(query)).one()
            return int(found[0]), int(found[1])

        return await self._run(work)

    async def idle(self, before: float, *, me: str, lease_cut: float) -> list[SessionRow]:
        """Live sessions last used before ``before`` that this replica may put to sleep:
        its own, unowned ones, and those of replicas not seen since ``lease_cut`` (taken
        for dead; a dead replica's unfinished sleep included)."""
        seen = replicas_table.c.seen_at
        dead = sa.or_(seen.is_(None), seen < lease_cut)
        query = (sa.select(sessions_table)
                 .select_from(sessions_table.outerjoin(replicas_table, replicas_table.c.id == _S.owner))
                 .where(_S.dormant_since.is_(None), _S.last_used_at < before,
                        sa.or_(_S.owner.is_(None), _S.owner == me, dead),
                        sa.or_(_S.sleeping_since.is_(None), sa.and_(_S.owner != me, dead))))
        return await self._select(query)

    async def alive(self, replica: str, *, lease_cut: float) -> bool:
        """True when ``replica`` was seen since ``lease_cut``."""
        query = sa.select(replicas_table.c.seen_at).where(replicas_table.c.id == replica)

        async def work(conn: AsyncConnection) -> bool:
            seen = (await conn.execute(query)).scalar()
            return seen is not None and float(seen) >= lease_cut

        return await self._run(work)

    async def _select(self, query: sa.Select[Any]) -> list[SessionRow]:
        async def work(conn: AsyncConnection) -> list[SessionRow]:
            return [SessionRow.from_mapping(r) for r in (await conn.execute(query)).mappings()]

        return await self._run(work)

    async def claim(self, sid: str, *, owner: str, kernel_id: str | None) -> bool:
        """Record that ``owner`` now holds the live session (in kernel ``kernel_id``);
        False when it is dormant, going dormant or gone."""
        statement = (sa.update(sessions_table)
                     .where(_S.id == sid, _S.dormant_since.is_(None), _S.sleeping_since.is_(None))
                     .values(owner=owner, kernel_id=kernel_id))
        return await self._update(statement) > 0

    async def set_kernel(self, sid: str, *, owner: str, kernel_id: str | None) -> bool:
        """Record the kernel ``owner`` started for a session it holds; False when it no
        longer does (taken over, going dormant or gone meanwhile)."""
        statement = (sa.update(sessions_table)
                     .where(_S.id == sid, _S.owner == owner, _S.dormant_since.is_(None),
                            _S.sleeping_since.is_(None))
                     .values(kernel_id=kernel_id))
        return await self._update(statement) > 0

    async def begin_sleep(self, sid: str, *, me: str, reason: str, at: float, owner: str | None,
                          sleeping_since: float | None = None) -> bool:
        """Start putting a live session to sleep (``me`` becomes its owner until
        :meth:`finish_sleep`); False unless its owner and sleeping_since are still the
        ones read (``owner``, ``sleeping_since``): a request, a takeover or another
        culler got there first."""
        statement = (sa.update(sessions_table)
                     .where(_S.id == sid, _S.dormant_since.is_(None),
                            _S.owner.is_not_distinct_from(owner),
                            _S.sleeping_since.is_not_distinct_from(sleeping_since))
                     .values(sleeping_since=at, dormant_reason=reason, owner=me))
        return await self._update(statement) > 0

    async def finish_sleep(self, sid: str, *, owner: str, at: float, disk_bytes: int | None) -> bool:
        """The session ``owner`` was putting to sleep is dormant from ``at`` (its kernel
        stopped; ``disk_bytes`` as measured now, None keeps the last figure); False when
        it is gone."""
        values: dict[str, Any] = {"dormant_since": at, "sleeping_since": None, "owner": None,
                                  "kernel_id": None}
        if disk_bytes is not None:
            values["disk_bytes"] = disk_bytes
        statement = (sa.update(sessions_table)
                     .where(_S.id == sid, _S.owner == owner, _S.sleeping_since.is_not(None))
                     .values(**values))
        return await self._update(statement) > 0

    async def wake(self, sid: str, *, owner: str, at: float) -> bool:
        """A dormant session is live again, held by ``owner`` (its kernel about to start)
        and used at ``at``; False when it was not dormant (woken by someone else) or is gone."""
        statement = (sa.update(sessions_table).where(_S.id == sid, _S.dormant_since.is_not(None))
                     .values(dormant_since=None, dormant_reason=None, owner=owner, kernel_id=None,
                             last_used_at=at))
        return await self._update(statement) > 0

    async def delete(self, sid: str) -> bool:
        """Forget a session; False if there was none."""
        return await self._update(sa.delete(sessions_table).where(_S.id == sid)) > 0

    async def touch(self, used: Mapping[str, float]) -> None:
        """Write last-use times in one batch (``{id: epoch seconds}``); never moves one back."""
        if not used:
            return
        statement = (sa.update(sessions_table)
                     .where(_S.id == sa.bindparam("sid"), _S.last_used_at < sa.bindparam("at"))
                     .values(last_used_at=sa.bindparam("at")))
        params = [{"sid": sid, "at": at} for sid, at in used.items()]

        async def work(conn: AsyncConnection) -> None:
            await conn.execute(statement, params)

        await self._run(work, write=True)

    async def begin_sleep_all(self, owner: str, *, reason: str, at: float) -> None:
        """An orderly stop of replica ``owner``: every live session it holds starts going
        dormant (:meth:`begin_sleep` for them all)."""
        statement = (sa.update(sessions_table)
                     .where(_S.owner == owner, _S.dormant_since.is_(None), _S.sleeping_since.is_(None))
                     .values(sleeping_since=at, dormant_reason=reason))
        await self._update(statement)

    async def release(self, owner: str, *, at: float | None = None,
                      disk_bytes: Mapping[str, int] | None = None) -> None:
        """The end of an orderly stop of replica ``owner``: the sessions it was putting to
        sleep are dormant (with their measured ``disk_bytes``, by id), and its heartbeat
        row goes."""
        at = time.time() if at is None else at
        sizes = [{"sid": sid, "size": size} for sid, size in (disk_bytes or {}).items()]
        sleeping = sa.and_(_S.owner == owner, _S.sleeping_since.is_not(None))

        async def work(conn: AsyncConnection) -> None:
            if sizes:
                await conn.execute(sa.update(sessions_table).where(sleeping, _S.id == sa.bindparam("sid"))
                                   .values(disk_bytes=sa.bindparam("size")), sizes)
            await conn.execute(sa.update(sessions_table).where(sleeping).values(
                dormant_since=at, sleeping_since=None, owner=None, kernel_id=None))
            await conn.execute(sa.delete(replicas_table).where(replicas_table.c.id == owner))

        await self._run(work, write=True)

    async def _update(self, statement: sa.Executable) -> int:
        async def work(conn: AsyncConnection) -> int:
            return int((await conn.execute(statement)).rowcount)

        return await self._run(work, write=True)

    # -- replicas -------------------------------------------------------------------------

    async def heartbeat(self, replica: str, *, now: float | None = None) -> None:
        """Record that ``replica`` is alive now; forget replicas unseen for a week."""
        now = time.time() if now is None else now
        insert = _insert_for(self.dialect)
        statement = insert(replicas_table).values(id=replica, host=socket.gethostname(), started_at=now,
                                                  seen_at=now)
        upsert = statement.on_conflict_do_update(index_elements=[replicas_table.c.id],
                                                 set_={"seen_at": now})

        async def work(conn: AsyncConnection) -> None:
            await conn.execute(upsert)
            forgotten = replicas_table.c.seen_at < now - _REPLICA_FORGET_S
            await conn.execute(sa.delete(replicas_table).where(forgotten))

        await self._run(work, write=True)


async def _upgrade_from_1(conn: AsyncConnection) -> None:
    """Schema 1 -> 2 in place (under the schema lock on PostgreSQL): closed sessions become
    dormant ones, and the columns for going dormant and disk use are added."""
    def sql(type_: Any) -> str:
        return str(type_.compile(dialect=conn.dialect))

    for statement in (
        "ALTER TABLE ka_sessions RENAME COLUMN closed_at TO dormant_since",
        "ALTER TABLE ka_sessions RENAME COLUMN closed_reason TO dormant_reason",
        f"ALTER TABLE ka_sessions ADD COLUMN sleeping_since {sql(sa.Double())}",
        f"ALTER TABLE ka_sessions ADD COLUMN disk_bytes {sql(sa.BigInteger())} NOT NULL DEFAULT 0",
        "UPDATE ka_sessions SET owner = NULL, kernel_id = NULL WHERE dormant_since IS NOT NULL",
    ):
        await conn.execute(sa.text(statement))
    version = meta_table.update().where(meta_table.c.key == "schema")
    await conn.execute(version.values(value=str(SCHEMA_VERSION)))


def _insert_for(dialect: str) -> Any:
    """The dialect's INSERT with ``on_conflict_do_update`` (SQLite and PostgreSQL share it)."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    """WAL: readers never wait for the writer; NORMAL sync is safe with WAL and spares an
    fsync per write; a busy writer is waited for instead of failing at once."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=10000")
    finally:
        cursor.close()


__all__ = ["SCHEMA_VERSION", "SQLITE_FILE", "Registry", "SessionRow", "database_url", "safe_url"]
