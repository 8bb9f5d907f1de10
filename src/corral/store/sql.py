"""Runs, events, handoffs, leases and sessions in SQLite (WAL) or PostgreSQL (SQLAlchemy Core).

Every write is one transaction that takes the write lock up front: ``BEGIN IMMEDIATE`` on
SQLite, a row lock (``SELECT ... FOR UPDATE``) on the run's lease on PostgreSQL. That is
what makes a fenced save atomic: the lease is checked and the events appended under the
same lock, so two processes can never both append to one run.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
import threading
import time
import urllib.parse
import weakref
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError
from sqlalchemy import (
    Column,
    CompoundSelect,
    Connection,
    DateTime,
    Engine,
    Float,
    Integer,
    MetaData,
    RootTransaction,
    String,
    Table,
    Text,
    Update,
    bindparam,
    create_engine,
    delete,
    event,
    insert,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.engine import URL
from sqlalchemy.exc import IntegrityError
from sqlalchemy.pool import NullPool, QueuePool, StaticPool
from sqlalchemy.sql.elements import ColumnElement

from corral.contracts import HandoffPacket
from corral.errors import (
    EventConflictError,
    LeaseLostError,
    MessageRepeatedError,
    RunBusyError,
    StoreCorruptError,
    StoreReadOnlyError,
    StoreUnavailableError,
)
from corral.events import Event, message_ids
from corral.files import private_dir
from corral.json_values import dumps
from corral.store import driver, projection, schema
from corral.store.base import (
    TERMINAL_STATUSES,
    Lease,
    LeaseHolder,
    RunRecord,
    SaveWouldWait,
    SessionMerge,
    SessionRecord,
    SessionUpdate,
)
from corral.store.codec import (
    RowEncoder,
    StoredRow,
    claimed_events,
    decode_rows,
    pack_summary,
    unpack_summary,
)
from corral.store.facts import aware as _aware
from corral.store.facts import folded
from corral.store.faults import store_faults
from corral.store.figures import Figures, ToolLatency, aggregate, latencies
from corral.store.in_place import InPlaceWrites
from corral.store.instant import Instant, read_instant
from corral.validation import validation_problems

metadata = MetaData()

runs = Table(
    "corral_runs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("trace_id", String(64), nullable=False),
    Column("agent", String(128), nullable=False),
    Column("session_id", String(128), index=True),
    Column("status", String(32), nullable=False, index=True),
    Column("created_at", DateTime(timezone=True), nullable=False, index=True),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("summary", Text, nullable=False),
    Column("handoff", Text),
)

events = Table(
    "corral_events",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("ts", Instant, nullable=False),
    Column("type", String(48), nullable=False),
    Column("stage", String(48), nullable=False),
    Column("data", Text, nullable=False),
)

plans = Table(
    "corral_plans",
    metadata,
    Column("hash", String(64), primary_key=True),
    Column("body", Text, nullable=False),
)
"""Plan steps by the hash of their JSON (format 2): stored once, however many runs use
them. Never deleted by ``purge``: a body is small, and shared by runs of any age."""

leases = Table(
    "corral_leases",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("owner", String(128), nullable=False),
    Column("expires_at", Float, nullable=False),
)
"""One row per run being driven; ``expires_at`` is Unix time. A separate table (not
columns of ``corral_runs``) so that homes created before leases existed gain it by
``create_all`` alone."""

sessions = Table(
    "corral_sessions",
    metadata,
    Column("session_id", String(128), primary_key=True),
    Column("agent", String(128), nullable=False),
    Column("data", Text, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False, index=True),
)


messages = Table(
    "corral_messages",
    metadata,
    Column("agent", String(128), primary_key=True),
    Column("session_key", String(128), primary_key=True),
    Column("message_id", String(128), primary_key=True),
    Column("run_id", String(64), nullable=False, index=True),
    Column("seq", Integer, nullable=False),
)
"""Each session's message ids, once (``MessageLog``): ``session_key`` is the session id,
or "" for the agent's runs without one. Deleted with their run by ``purge``."""


def _message_key(agent: str, session_id: str | None, message_id: str) -> dict[str, str]:
    """The key of a message id's row in ``corral_messages``."""
    return {"agent": agent, "session_key": session_id or "", "message_id": message_id}


def _event_rows(new_events: Sequence[Event], bodies: dict[str, str]) -> list[dict[str, Any]]:
    """The rows of ``new_events`` in the stored format; plan bodies go into ``bodies``."""
    encoder = RowEncoder(bodies)
    rows = []
    for e in new_events:
        kind, stage, data = encoder.columns(e)
        rows.append(
            {
                "run_id": e.run_id,
                "seq": e.seq,
                "ts": e.ts,
                "type": kind,
                "stage": stage,
                "data": data,
            }
        )
    return rows


_INSERT_EVENTS = insert(events)
"""Built once: a save only binds its rows (building a statement costs more than running it)."""
_INSERT_RUN = insert(runs)
_RUN_FIELDS = ("trace_id", "agent", "session_id", "status", "updated_at", "summary")


def _run_update(fields: tuple[str, ...]) -> Update:
    """``UPDATE corral_runs SET fields... WHERE run_id = :b_run_id``, bound by name."""
    values: dict[str, Any] = {name: bindparam(f"b_{name}") for name in fields}
    return update(runs).where(runs.c.run_id == bindparam("b_run_id")).values(values)


_LEASE = select(leases).where(leases.c.run_id == bindparam("b_run_id"))
_LEASE_FOR_UPDATE = _LEASE.with_for_update()
_INSERT_LEASE = insert(leases)
_RENEW_LEASE = (
    update(leases)
    .where(leases.c.run_id == bindparam("b_run_id"))
    .values(owner=bindparam("b_owner"), expires_at=bindparam("b_expires_at"))
)
_UPDATE_RUN = _run_update(_RUN_FIELDS)
_DELETE_LEASE = delete(leases).where(leases.c.run_id == bindparam("b_run_id"))
_UPDATE_RUN_HANDOFF = _run_update((*_RUN_FIELDS, "handoff"))
_PREVIOUS_EVENT = projection.previous_event(events)
_RUN_EXISTS = select(runs.c.run_id).where(runs.c.run_id == bindparam("b_run_id"))
_MESSAGE = select(messages.c.run_id, messages.c.seq).where(
    messages.c.agent == bindparam("b_agent"),
    messages.c.session_key == bindparam("b_session_key"),
    messages.c.message_id == bindparam("b_message_id"),
)
_INSERT_MESSAGE = insert(messages)
_RUN_ROW = select(runs).where(runs.c.run_id == bindparam("b_run_id"))
_EVENTS_OF_RUN = (
    select(events).where(events.c.run_id == bindparam("b_run_id")).order_by(events.c.seq)
)
_EVENTS_OF_RUN_UP_TO = _EVENTS_OF_RUN.limit(bindparam("b_most"))
_RUN_SUMMARY = select(runs.c.summary).where(runs.c.run_id == bindparam("b_run_id"))
_SESSION = select(sessions).where(sessions.c.session_id == bindparam("b_session_id"))
_SESSION_FOR_UPDATE = _SESSION.with_for_update()
_UPDATE_SESSION = (
    update(sessions)
    .where(sessions.c.session_id == bindparam("b_session_id"))
    .values(
        agent=bindparam("b_agent"),
        data=bindparam("b_data"),
        updated_at=bindparam("b_updated_at"),
        expires_at=bindparam("b_expires_at"),
    )
)
_INSERT_SESSION = insert(sessions)


_BUSY_MS = 10_000
"""How long a SQLite connection waits for another process's lock."""


def _use_wal(cursor: Any) -> None:
    """Put the file in WAL mode, once, whichever of many new processes comes first.

    The mode is the file's: it stays once set. Setting it needs the file to itself, and
    SQLite answers "database is locked" at once instead of waiting for the busy timeout,
    so sixteen processes opening a new home together failed now and then: wait here.
    """
    deadline = time.monotonic() + _BUSY_MS / 1000
    while cursor.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError as exc:
            if "readonly" in str(exc):  # opened read-only (``mode=ro``): read it as it is
                return  # (a backup by VACUUM INTO, a restored dump: not WAL yet)
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)
        else:  # WAL now, or a database that has no WAL (in memory): it keeps its mode
            return


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    """Per connection: wait for locks, WAL, and let ``_sqlite_begin`` issue BEGIN itself."""
    dbapi_connection.isolation_level = None  # the driver's own lazy BEGIN is not IMMEDIATE
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={_BUSY_MS}")  # first: a concurrent first open waits
    if cursor.execute("PRAGMA query_only").fetchone()[0] == 0:
        _use_wal(cursor)
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _lock_timeout_sql(ms: int) -> str:
    """The statement that bounds a transaction's lock waits at ``ms`` (``_bound_lock_waits``)."""
    return (
        f"SELECT set_config('lock_timeout', '{int(ms)}', true) "
        "WHERE (SELECT source FROM pg_settings WHERE name = 'lock_timeout') = 'default'"
    )


_LOCK_TIMEOUT = _lock_timeout_sql(_BUSY_MS)


def _bound_lock_waits(conn: Connection) -> None:
    """PostgreSQL: this write transaction waits at most ``_BUSY_MS`` for a lock.

    PostgreSQL waits for a lock for ever by default: a save behind a row another session
    holds (a console left in a transaction, a stuck process) would hold its run, and a
    stopping ``corral serve``, for as long. Past the timeout the statement fails with
    ``lock_not_available``, and corral reports ``STORE_UNAVAILABLE`` as it does for a
    SQLite file that stays locked.

    For this transaction only (``set_config(..., true)``, as ``SET LOCAL``): behind a
    pooler in transaction mode (PgBouncer) each transaction may run on another server
    connection, and a session-wide setting would reach one of them and stay there for the
    pooler's other clients. A ``lock_timeout`` that is not PostgreSQL's default (the
    URL's ``options=-c lock_timeout=...``, the role's, the database's, the server's
    configuration; 0 included) is kept, looked at in the same statement each time.
    Reads are not bounded: they wait, as PostgreSQL's default has them, for a migration
    holding a table to end.
    """
    driver.run(conn, _LOCK_TIMEOUT).close()


_WRITE = "corral_write"
"""The key, in a pooled connection's ``info``, by which a write asks for BEGIN IMMEDIATE."""


def _sqlite_begin(conn: Connection) -> None:
    """Writes take the write lock at BEGIN (IMMEDIATE), so check-then-write is atomic.

    ``SqlStore._write`` asks for it in the connection's ``info`` just before it begins;
    the request is used up here, so that connection's next transaction (a read) begins
    deferred as before.
    """
    immediate = conn.info.pop(_WRITE, False)
    driver.run(conn, "BEGIN IMMEDIATE" if immediate else "BEGIN").close()


def sqlite_url(path: Path) -> URL:
    """The SQLAlchemy URL of a SQLite file (its folder is created 0700, the file made 0600).

    Made from its parts, not pasted into text: a ``?``, ``#`` or ``%`` in a folder's name
    is the file's, not a URL's query, fragment or escape.
    """
    private_dir(path.parent)  # docs/store.md: "created 0600, its folder too" (it was 0755)
    if not path.exists():
        # SQLite gives its -wal and -shm files the database file's mode: create it private.
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    return URL.create("sqlite", database=str(path))


def _read_only_url(path: Path) -> URL:
    """A URL that opens an existing SQLite file without writing anything next to it.

    ``immutable=1`` is needed when the folder is read-only: a WAL database cannot even be
    read with ``mode=ro`` if its ``-shm`` file cannot be created. The path is escaped for
    SQLite's ``file:`` URI: a ``#`` in it used to end the path there, and ``mode=ro``
    with it (a read made a new, empty database beside the real one).
    """
    mode = {"mode": "ro"} if os.access(path.parent, os.W_OK) else {"immutable": "1"}
    database = "file:" + urllib.parse.quote(str(path.resolve()))
    return URL.create("sqlite", database=database, query={**mode, "uri": "true"})


def _check_writable(path: Path) -> None:
    """Refuse up front, with the right code, to write a store that cannot be written."""
    folder = path.parent
    blocked = folder if folder.exists() and not os.access(folder, os.W_OK) else None
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        blocked = path
    if blocked is not None:
        raise StoreReadOnlyError(
            f"{blocked} cannot be written",
            hint="fix its permissions; `corral runs`, `show` and `traces` still read it",
        )


def _readable_copy(path: Path) -> tuple[Path, Path | None]:
    """The file to open read-only, and the private temporary folder of a copy, if made.

    In a folder we cannot write, SQLite can read a WAL database only as ``immutable``,
    which ignores the ``-wal`` file: a run's latest events (after a crash, before a
    checkpoint) would be missing. Then the database and its WAL are read from a copy.
    """
    wal = path.with_name(path.name + "-wal")
    if os.access(path.parent, os.W_OK) or not wal.exists() or wal.stat().st_size == 0:
        return path, None
    copy = Path(tempfile.mkdtemp(prefix="corral-ro-"))
    shutil.copyfile(path, copy / path.name)
    shutil.copyfile(wal, copy / wal.name)
    return copy / path.name, copy


def _create_all(conn: Connection) -> None:
    """The whole schema of a new database, as this code's tables declare it."""
    metadata.create_all(conn)
    projection.metadata.create_all(conn)


def _migrate(conn: Connection) -> None:
    """Run the package's migrations (imports Alembic: only an older store gets here)."""
    from corral.store import migrate

    migrate.upgrade(conn)


def schema_state(target: str | Path) -> schema.SchemaState:
    """The schema revision of the store ``target`` names, read without opening it as one.

    So ``corral db current`` shows a newer or older schema instead of refusing it; a
    SQLite file is read in read-only mode, and a missing one is empty (none is made).
    """
    text_target = str(target)
    if "://" in text_target:
        engine = create_engine(text_target)
    else:
        path = Path(text_target)
        if not path.exists():
            return schema.SchemaState(None, empty=True)
        engine = create_engine(_read_only_url(path))
    try:
        with store_faults(action="reading the schema revision"), engine.connect() as conn:
            return schema.state(conn)
    finally:
        engine.dispose()


IN_PLACE_CALLS = (
    "get_session",
    "get_run",
    "load_events",
    "tool_latency",
    "lease_holder",
    "run_of_message",
    "acquire_lease",
    "renew_lease",
    "release_lease",
)
"""The calls ``SqlStore.in_place`` makes without waiting: a run's start, resume and lease.

Every store call the runtime makes in place (``Runtime._here``) must be one of these: any
other opens a pooled connection, and may wait for it, or for SQLite's busy timeout."""


IN_PLACE_MAX_EVENTS = 500
"""The most events ``load_events`` reads and decodes inside ``in_place`` (a few ms)."""


def _now() -> float:
    """Lease clock: Unix time. Leases are infrastructure, not part of a run's log."""
    return time.time()


class SqlStore:
    """The default store. ``SqlStore.open(".corral/corral.db")`` or any SQLAlchemy URL."""

    blocking = True

    def __init__(
        self,
        engine: Engine,
        *,
        path: Path | None = None,
        read_only: bool = False,
        upgrade: bool | None = None,
    ) -> None:
        """``upgrade``: migrate an older schema on open (default: SQLite yes, others no)."""
        self.engine = engine
        self.path = path
        """The SQLite file, watched so that a database deleted mid-run is detected."""
        self.read_only = read_only
        self._identity = self._file_identity()
        self._driver = driver.Driver(engine)
        """Runs the statements every save runs on the driver's cursor (``driver``)."""
        self._latency_queries: dict[projection.LatencyShape, CompoundSelect[Any]] = {}
        """The observed-latency query of each shape asked so far (``tool_latency``)."""
        self._has_projection = False
        """The stats projection's tables were found (``has_stats_projection``)."""
        self._facts_whole = False
        """``ensure_facts`` found every run projected: each save of this corral projects
        its run, so none needs a backfill from then on (no scan of the runs per listing)."""
        self._plans_stored: dict[str, str] = {}
        """Plan bodies by hash that this store object has written or read: a save skips a
        lookup, a read skips a query. Content-addressed (a hash names one body for good),
        and only templates' steps are stored so (config: a few per agent)."""
        self._sqlite = engine.dialect.name == "sqlite"
        # a file's pool: one connection of its own is one more (a memory database's static
        # or per-thread pool would share it with everyone, or be another database)
        pooled = isinstance(engine.pool, (QueuePool, NullPool))
        self._in_place = (
            InPlaceWrites(engine, self._begin_write, self._still_ours)
            if self._sqlite and pooled
            else None
        )
        """The connection kept for saves made on the caller's thread (``in_place``)."""
        self._in_place_allowed = True
        self._here = threading.local()
        """``active`` on a thread inside ``in_place``: its calls may not wait."""
        self._own_calls = not _overrides(type(self))
        """No subclass overrides a method, which a call in place may use (``calls_in_place``)."""
        if self._sqlite:
            event.listen(engine, "connect", _sqlite_connect)
            event.listen(engine, "begin", _sqlite_begin)
        if not read_only:
            with self._faults(action="creating the schema"):
                self._create_schema(upgrade)
        elif self.path is None or self.path.exists():
            with self._faults(action="reading the schema revision"), engine.connect() as conn:
                schema.refuse_newer(schema.state(conn), self.where())

    @property
    def saves_in_place(self) -> bool:
        """Whether the runtime tries a save on its own thread first (``SavesInPlace``).

        True for a writable SQLite file; set it to False to make every save in a thread.
        """
        in_place = self._in_place
        return (
            in_place is not None
            and in_place.usable
            and self._in_place_allowed
            and not self.read_only
        )

    @saves_in_place.setter
    def saves_in_place(self, allowed: bool) -> None:
        self._in_place_allowed = allowed

    @property
    def calls_in_place(self) -> bool:
        """Whether the runtime tries its reads and lease calls on its own thread first.

        As ``saves_in_place`` (a writable SQLite file in WAL mode), for the calls that
        ``in_place`` covers, unless a subclass overrides a method of this class, or one is
        replaced on the store itself (a wrapper that times or slows a call): a call in place
        uses helpers as well as the calls, and the other code may wait.
        """
        return (
            self._own_calls
            and self.saves_in_place
            and not (self.__dict__.keys() & _METHODS)  # a dict of a dozen names
        )

    @contextmanager
    def in_place(self) -> Iterator[None]:
        """For the block, this thread's calls of ``IN_PLACE_CALLS`` never wait.

        Each is made at once on the connection kept for saves (``InPlaceWrites``), or
        raises ``SaveWouldWait`` having done nothing: the kept connection is in use, not
        opened yet, or SQLite answers busy. The runtime then makes it in a store thread.
        A read of a run's start or resume in a thread costs more than the read on a
        2-core machine (``docs/performance.md``, "A conversation's turns on SQLite").
        """
        here = self._here
        if getattr(here, "active", False):  # nested: the outer block says so already
            yield
            return
        here.active = True
        try:
            yield
        finally:
            here.active = False

    def _here_now(self) -> InPlaceWrites | None:
        """The kept connection's keeper when this thread is inside ``in_place``."""
        return self._kept() if getattr(self._here, "active", False) else None

    def _kept(self) -> InPlaceWrites:
        """The kept connection's keeper, or ``SaveWouldWait``: this store makes nothing in place."""
        if self._in_place is None or not self.saves_in_place:
            raise SaveWouldWait("this store makes nothing in place")
        return self._in_place

    @contextmanager
    def _reading(self) -> Iterator[Connection]:
        """A connection to read on: the pool's, or inside ``in_place`` the kept one."""
        here = self._here_now()
        if here is None:
            with self.engine.connect() as conn:
                yield conn
        else:
            with here.reading() as conn:
                yield conn

    @property
    def saves_sessions(self) -> bool:
        """Whether a run's last save may update its session too (``SavesSessions``).

        On a writable SQLite file: the save holds the write lock, so the session's
        statements wait for nobody. Not on PostgreSQL, where a session row another
        transaction holds would keep the run's own save waiting, and fail it; nor for a
        subclass with an ``update_session`` of its own, which expects to be called.
        """
        return (
            self._sqlite
            and not self.read_only
            and type(self).update_session is SqlStore.update_session
        )

    @classmethod
    def open(
        cls, target: str | Path, *, read_only: bool = False, upgrade: bool | None = None
    ) -> SqlStore:
        """A store on a URL (``postgresql+psycopg://...``) or a SQLite file path.

        ``read_only`` opens an existing SQLite file without writing (for ``runs``,
        ``show``, ``traces`` on a read-only home); a missing file reads as empty.
        ``upgrade`` says whether an older schema is migrated on open (``schema``).
        """
        text_target = str(target)
        if "://" in text_target:
            # pre-ping: after a server restart every pooled connection is dead, and a save
            # on one would fail the run's drive (STORE_UNAVAILABLE); a ping per checkout
            # (~0.05 ms here) reconnects instead (docs/fleet.md, "A PostgreSQL restart")
            engine = create_engine(text_target, pool_pre_ping=True)
            return cls(engine, read_only=read_only, upgrade=upgrade)
        path = Path(text_target)
        with store_faults(action=f"opening {path}", folder=path.parent):
            if not read_only:
                _check_writable(path)
                return cls(create_engine(sqlite_url(path)), path=path, upgrade=upgrade)
            if not path.exists() or path.stat().st_size == 0:  # 0 bytes: SQLite's empty file
                empty = cls(create_engine("sqlite://", poolclass=StaticPool))
                empty.read_only = True
                return empty
            readable, copy = _readable_copy(path)
            store = cls(create_engine(_read_only_url(readable)), path=path, read_only=True)
            if copy is not None:
                weakref.finalize(store, shutil.rmtree, copy, True)
            return store

    def _create_schema(self, upgrade: bool | None) -> None:
        """Bring the schema to this code's revision, or refuse (``corral.store.schema``).

        A store at this revision (the usual case) is only read: no write lock, no advisory
        lock, so processes opening a busy store wait for nobody. Otherwise the look is
        repeated under the write lock (SQLite) or an advisory lock (PostgreSQL), so any
        number of processes opening a new or older store create or migrate it once.
        """
        with self.engine.connect() as conn:
            if schema.state(conn).label == "current":
                return
        with self._write() as conn:
            if not self._sqlite:
                # another process creating or migrating the store: wait for it to end,
                # however long a migration takes; then its own statements wait for locks
                # as any write's do (``_bound_lock_waits``)
                bound = conn.execute(text("SELECT current_setting('lock_timeout')")).scalar()
                conn.execute(text("SET LOCAL lock_timeout = 0"))
                conn.execute(text("SELECT pg_advisory_xact_lock(7715021)"))
                conn.execute(
                    text("SELECT set_config('lock_timeout', :bound, true)"), {"bound": bound}
                )
            schema.prepare(
                conn,
                self.where(),
                create=_create_all,
                upgrade=_migrate if (self._sqlite if upgrade is None else upgrade) else None,
            )

    def where(self) -> str:
        """The store, named for an error: its file, or its URL without the password."""
        if self.path is not None:
            return str(self.path)
        return self.engine.url.render_as_string(hide_password=True)

    def _faults(self, run_id: str | None = None, action: str = "store access") -> Any:
        """``store_faults`` for this store: a SQLite file's folder tells a full disk."""
        return store_faults(run_id, action, self.path.parent if self.path else None)

    def _file_identity(self) -> tuple[int, int] | None:
        if self.path is None:
            return None
        try:
            stat = self.path.stat()
        except OSError:
            return None
        return stat.st_dev, stat.st_ino

    def _still_ours(self) -> bool:
        """Whether the file at ``path`` is the one this store opened."""
        return self._file_identity() == self._identity

    def _check_file(self, run_id: str | None) -> None:
        """A SQLite file deleted or replaced while open would swallow writes: refuse."""
        if self.path is not None and not self._still_ours():
            raise StoreUnavailableError(
                f"the database {self.path} was removed or replaced while in use",
                run_id=run_id,
                hint="restore the file; nothing more was written to the old one",
            )

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """A write transaction holding the write lock from its first statement.

        On SQLite the request for BEGIN IMMEDIATE goes in the connection's ``info``
        (``_sqlite_begin``): an engine with execution options would cost ~20k instructions
        per write more, joining the engine's events anew for every connection. A BEGIN
        that fails leaves no request behind for the connection's next user.
        """
        here = self._here_now()
        if here is not None:  # inside ``in_place``: at once, or ``SaveWouldWait``
            with here.transaction() as conn:
                yield conn
            return
        with self.engine.connect() as conn, self._begin_write(conn):
            if not self._sqlite:  # PostgreSQL, the other dialect a store opens
                _bound_lock_waits(conn)
            yield conn

    def _begin_write(self, conn: Connection) -> RootTransaction:
        """Begin ``conn``'s write transaction (``BEGIN IMMEDIATE`` on SQLite)."""
        info = conn.info
        if self._sqlite:
            info[_WRITE] = True
        try:
            return conn.begin()
        except BaseException:
            info.pop(_WRITE, None)
            raise

    @contextmanager
    def _write_now(self, wait: bool) -> Iterator[Connection]:
        """``_write``, or (``wait=False``) one on the kept connection that cannot wait."""
        if wait:
            with self._write() as conn:
                yield conn
        else:
            with self._kept().transaction() as conn:
                yield conn

    # ------------------------------------------------------------------ leases

    def _locked_lease(self, conn: Connection, run_id: str) -> Any:
        locked = self.engine.dialect.name == "postgresql"
        query = _LEASE_FOR_UPDATE if locked else _LEASE
        return self._driver.first(conn, query, {"b_run_id": run_id})

    def _take(self, conn: Connection, lease: Lease, row: Any) -> None:
        values = {"owner": lease.owner, "expires_at": _now() + lease.ttl_s}
        if row is None:
            self._driver.execute(conn, _INSERT_LEASE, {"run_id": lease.run_id, **values})
        else:
            bound = {"b_run_id": lease.run_id, "b_owner": values["owner"]}
            renewed = {**bound, "b_expires_at": values["expires_at"]}
            self._driver.execute(conn, _RENEW_LEASE, renewed)

    def acquire_lease(self, lease: Lease, *, replacing: str | None = None) -> str | None:
        """Take the lease unless another live owner holds it; the expired owner replaced."""
        with self._faults(lease.run_id, "taking the run's lease"):
            self._check_file(lease.run_id)
            try:
                with self._write() as conn:
                    row = self._locked_lease(conn, lease.run_id)
                    if (
                        row is not None
                        and row.owner not in (lease.owner, replacing)
                        and row.expires_at > _now()
                    ):
                        raise RunBusyError(
                            f"run {lease.run_id} is being driven by another request or "
                            f"process (lease held for {row.expires_at - _now():.0f} s more)",
                            hint=(
                                "wait until it pauses or ends (corral resume --wait; over "
                                "HTTP, try again later), or look at it: corral show RUN, "
                                "GET /runs/RUN"
                            ),
                        )
                    self._take(conn, lease, row)
                    if row is None or row.owner in (lease.owner, replacing):
                        return None
                    return str(row.owner)
            except IntegrityError:  # PostgreSQL: another process inserted the row first
                raise RunBusyError(
                    f"run {lease.run_id} is being driven by another request or process"
                ) from None

    def renew_lease(self, lease: Lease) -> None:
        """Extend the lease; ``LeaseLostError`` if another owner took it."""
        with self._faults(lease.run_id, "renewing the run's lease"), self._write() as conn:
            self._fence(conn, lease, renewal=True)

    def _fence(
        self,
        conn: Connection,
        lease: Lease,
        release: bool = False,
        *,
        renewal: bool = False,
        inserting: bool = False,
    ) -> None:
        """Inside a write transaction: go on only while ``lease`` is held; extend it.

        A ``renewal`` of a new run's lease before its first save makes no row: that save
        takes it. Under read committed a renewal cannot see a save still in flight, and a
        row it made would outlive the save that released the lease.

        ``inserting``: the transaction inserts the run's row, which fails (``IntegrityError``)
        if the run is stored; so a new run's lease needs no look at the run here, and the
        save's second try, without ``inserting``, fences strictly.
        """
        row = self._locked_lease(conn, lease.run_id)
        # a new run's lease is made here only until its run exists: after that, no row
        # means its one save released it, and a late heartbeat must not take it again
        creating = (
            row is None and lease.new_run and (inserting or not self._stored(conn, lease.run_id))
        )
        if not creating and (row is None or row.owner != lease.owner or row.expires_at <= _now()):
            raise LeaseLostError(
                f"this process no longer holds the lease on run {lease.run_id}",
                hint="another process took the run over; it finishes the run",
            )
        if release:
            if row is not None:  # else there is nothing to give up
                self._driver.execute(conn, _DELETE_LEASE, {"b_run_id": lease.run_id})
        elif not (creating and renewal):
            self._take(conn, lease, row)

    def _stored(self, conn: Connection, run_id: str) -> bool:
        """Whether the run's row exists (read inside the caller's transaction)."""
        return self._driver.first(conn, _RUN_EXISTS, {"b_run_id": run_id}) is not None

    def release_lease(self, lease: Lease) -> None:
        """Delete the lease row if we still own it."""
        with self._faults(lease.run_id, "releasing the run's lease"), self._write() as conn:
            conn.execute(
                delete(leases).where(leases.c.run_id == lease.run_id, leases.c.owner == lease.owner)
            )

    def lease_holder(self, run_id: str) -> LeaseHolder | None:
        """The live holder, or ``None``."""
        with self._faults(run_id, "reading the run's lease"), self._reading() as conn:
            row = conn.execute(select(leases).where(leases.c.run_id == run_id)).first()
        if row is None or row.expires_at <= _now():
            return None
        return LeaseHolder(owner=row.owner, expires_in_s=row.expires_at - _now())

    # ------------------------------------------------------------------ runs and events

    def save(
        self,
        run: RunRecord,
        new_events: Sequence[Event],
        handoff: HandoffPacket | None = None,
        *,
        lease: Lease | None = None,
        release: bool = False,
        wait: bool = True,
        session: SessionUpdate | None = None,
    ) -> None:
        """Check the lease, append events and upsert the run row, in one transaction.

        ``wait=False``: made at once on this thread, or ``SaveWouldWait`` with nothing
        written (``SavesInPlace``; SQLite only). ``session``: that session's update, in
        the same transaction (``SavesSessions``).
        """
        row = {
            "trace_id": run.trace_id,
            "agent": run.agent,
            "session_id": run.session_id,
            "status": run.status,
            "updated_at": run.updated_at,
            "summary": dumps(
                pack_summary(
                    run.run_id,
                    run.trace_id,
                    run.status,
                    run.summary,
                    new_events[-1].seq if new_events else None,
                )
            ),
        }
        if handoff is not None:
            row["handoff"] = handoff.model_dump_json()
        bodies: dict[str, str] = {}
        written: SessionRecord | None = None
        # in place, once the write lock is held: a save that finds it taken costs a BEGIN
        rows = _event_rows(new_events, bodies) if wait else None
        with self._faults(run.run_id, "saving the run"):
            self._check_file(run.run_id)
            try:
                with self._write_now(wait) as conn:
                    if rows is None:
                        rows = _event_rows(new_events, bodies)
                    creating = lease is not None and lease.new_run  # nobody knows its id yet
                    if lease is not None:
                        self._fence(conn, lease, release, inserting=creating)
                    self._store_plans(conn, bodies)
                    self._take_messages(conn, run, new_events)
                    self._driver.executemany(conn, _INSERT_EVENTS, rows)
                    if creating:  # no row yet: one insert (it fails if there is one)
                        new_row = {"run_id": run.run_id, **self._new_run(run, row)}
                        self._driver.execute(conn, _INSERT_RUN, new_row)
                    else:
                        self._upsert_run(conn, run, row)
                    self._project(conn, run, new_events)
                    if session is not None:
                        written = self._merge_session(conn, session, quiet=True)
            except IntegrityError:
                if rows is None or not wait:  # the rare repeat: left to a save that may wait
                    raise SaveWouldWait("a repeated save") from None
                with self._write() as conn:  # an identical repeat: append only what is new
                    if lease is not None:  # first, as a save that did not fail does
                        self._fence(conn, lease, release)
                    unstored, later = self._unstored(conn, run.run_id, new_events)
                    missing = {e.seq for e in unstored}
                    self._store_plans(conn, bodies)
                    self._take_messages(conn, run, unstored)
                    again = [r for r in rows if r["seq"] in missing]
                    self._driver.executemany(conn, _INSERT_EVENTS, again)
                    if not later:  # a repeat of an earlier stretch: the row says more already
                        self._upsert_run(conn, run, row)
                    self._project(conn, run, [e for e in new_events if e.seq in missing])
                    if session is not None:
                        written = self._merge_session(conn, session, quiet=True)
            self._check_file(run.run_id)
        self._plans_stored.update(bodies)  # only once the transaction that wrote them committed
        if session is not None:  # what the transaction that committed wrote of it
            session.written = written
        if wait and self._in_place is not None and self._in_place_allowed:
            self._in_place.prepare()  # here, where waiting is allowed: the next saves use it

    def _merge_session(
        self, conn: Connection, update: SessionUpdate, *, quiet: bool
    ) -> SessionRecord | None:
        """Read, merge and write the session in ``conn``'s write transaction; what it wrote.

        ``quiet`` (a save's, ``SavesSessions``): a merge that raises writes nothing of the
        session (``None``), and the save goes on; its caller finds nothing written and
        updates the session on its own, where the error is raised.
        """
        row = self._driver.first(conn, _SESSION_FOR_UPDATE, {"b_session_id": update.session_id})
        try:
            merged = update.merge(_session_of(row, update.now))
        except Exception:
            if not quiet:
                raise
            return None
        _put_session(self._driver.on(conn), merged, exists=row is not None)
        return merged

    def _take_messages(self, conn: Connection, run: RunRecord, new_events: Sequence[Event]) -> None:
        """Keep the message ids ``new_events`` hold (``MessageLog``), or raise.

        An id held by another event is ``MessageRepeatedError``, and the transaction
        writes nothing. Two saves taking one id at once both find it free: the second's
        insert fails on the key, and the save's second try finds the first's row.
        """
        for message_id, seq in message_ids(new_events):
            key = _message_key(run.agent, run.session_id, message_id)
            holder = self._driver.first(conn, _MESSAGE, {f"b_{k}": v for k, v in key.items()})
            if holder is None:
                self._driver.execute(
                    conn, _INSERT_MESSAGE, {**key, "run_id": run.run_id, "seq": seq}
                )
            elif (holder.run_id, holder.seq) != (run.run_id, seq):
                raise MessageRepeatedError.taken_by(holder.run_id, message_id)

    def run_of_message(self, agent: str, session_id: str | None, message_id: str) -> str | None:
        """The run whose events hold this message id (``MessageLog``), or ``None``."""
        key = _message_key(agent, session_id, message_id)
        bound = {f"b_{k}": v for k, v in key.items()}
        with self._faults(action="reading a message id"), self._reading() as conn:
            holder = self._driver.first(conn, _MESSAGE, bound)
        return holder.run_id if holder is not None else None

    def _project(self, conn: Connection, run: RunRecord, inserted: Sequence[Event]) -> None:
        """Write the stats facts of the events this transaction inserted (``projection``)."""
        projection.record(
            self._driver.on(conn),
            run,
            inserted,
            lambda seq: projection.before_seq(conn, _PREVIOUS_EVENT, run.run_id, seq),
            lambda: self._events(conn, run.run_id),
        )

    def _store_plans(self, conn: Connection, bodies: dict[str, str]) -> None:
        """Store the plan bodies not stored yet (content-addressed: a repeat is a no-op)."""
        new = {key: body for key, body in bodies.items() if key not in self._plans_stored}
        if not new:
            return
        known = conn.execute(select(plans.c.hash).where(plans.c.hash.in_(list(new)))).scalars()
        missing = set(new) - set(known)
        if missing:
            conn.execute(insert(plans), [{"hash": k, "body": new[k]} for k in sorted(missing)])

    def _plan_bodies(self, conn: Connection, keys: set[str], remember: bool) -> dict[str, str]:
        """The plan bodies of ``keys``: those known, the others read.

        ``remember``: keep what was read, for a read outside any write transaction only.
        Inside a save's, a body may be the transaction's own insert, which a rollback
        takes back: known, it would be skipped by the save's retry, whose events would
        then name a body that is not stored.
        """
        known = self._plans_stored
        found = {key: known[key] for key in keys if key in known}
        missing = sorted(keys - found.keys())
        if missing:
            query = select(plans.c.hash, plans.c.body).where(plans.c.hash.in_(missing))
            read = {row.hash: row.body for row in conn.execute(query)}
            if remember:
                known.update(read)
            found.update(read)
        return found

    def _upsert_run(self, conn: Connection, run: RunRecord, row: dict[str, Any]) -> None:
        statement = _UPDATE_RUN_HANDOFF if "handoff" in row else _UPDATE_RUN
        bound = {f"b_{name}": value for name, value in row.items()}
        if not self._driver.execute(conn, statement, {"b_run_id": run.run_id, **bound}):
            new_row = {"run_id": run.run_id, **self._new_run(run, row)}
            self._driver.execute(conn, _INSERT_RUN, new_row)

    @staticmethod
    def _new_run(run: RunRecord, row: dict[str, Any]) -> dict[str, Any]:
        """The columns of a run row being inserted (every column bound: one statement)."""
        return {"created_at": run.created_at, "handoff": None, **row}

    def _unstored(
        self, conn: Connection, run_id: str, new_events: Sequence[Event]
    ) -> tuple[list[Event], bool]:
        """The events not stored yet, and whether the log goes on past them.

        Raises unless every stored one is the same as new. A repeat of an identical batch
        (a retried flush) is harmless; a different event at a taken ``seq`` means another
        writer appended to the run. A repeat of an earlier stretch of the log (a durable
        drive executed again after a later drive ran) must not set the run row back.
        """
        stored = {e.seq: e for e in self._events(conn, run_id)}
        for new in new_events:
            old = stored.get(new.seq)
            if old is not None and (old.type, old.stage, old.data) != (
                new.type,
                new.stage,
                json.loads(dumps(new.data)),
            ):
                raise EventConflictError(
                    f"event {new.seq} of run {run_id} was already written by another writer",
                    hint="only the lease holder may append; this writer stops",
                )
        last = new_events[-1].seq if new_events else 0
        later = any(seq > last for seq in stored)
        return [e for e in new_events if e.seq not in stored], later

    def _record(self, row: Any) -> RunRecord:
        return RunRecord(
            run_id=row.run_id,
            trace_id=row.trace_id,
            agent=row.agent,
            session_id=row.session_id,
            status=row.status,
            created_at=_stored_time(row.created_at),
            updated_at=_stored_time(row.updated_at),
            summary=unpack_summary(row.run_id, row.trace_id, row.status, json.loads(row.summary)),
        )

    def get_run(self, run_id: str) -> RunRecord | None:
        """The run row, or ``None``."""
        with self._faults(run_id, "reading the run"), self._reading() as conn:
            row = self._driver.first(conn, _RUN_ROW, {"b_run_id": run_id})
        return self._record(row) if row else None

    def list_runs(self, limit: int = 50) -> list[RunRecord]:
        """Most recent first."""
        query = select(runs).order_by(runs.c.created_at.desc()).limit(limit)
        with self._faults(action="listing runs"), self.engine.connect() as conn:
            return [self._record(row) for row in conn.execute(query)]

    def load_events(self, run_id: str) -> list[Event]:
        """Every event of the run, by ``seq``.

        Inside ``in_place``, a run of more than ``IN_PLACE_MAX_EVENTS`` events is
        ``SaveWouldWait``, read and decoded in a store thread instead: its read would hold
        the event loop for as long as it takes (about 10 ms per 1 000 events here).
        """
        most = IN_PLACE_MAX_EVENTS if self._here_now() is not None else None
        with self._faults(run_id, "reading the run's events"), self._reading() as conn:
            return self._events(conn, run_id, committed=True, most=most)

    def _events(
        self, conn: Connection, run_id: str, *, committed: bool = False, most: int | None = None
    ) -> list[Event]:
        """The run's events as ``conn`` sees them.

        ``committed``: ``conn`` holds no write transaction (``_plan_bodies`` may then
        remember the plan bodies it reads). ``most``: more rows than that are
        ``SaveWouldWait``, before any is decoded.
        """
        # the row first: a save between the two reads only adds events after its count
        row = self._driver.first(conn, _RUN_SUMMARY, {"b_run_id": run_id})
        claimed = claimed_events(row.summary) if row is not None else None
        if most is None:
            found = self._driver.rows(conn, _EVENTS_OF_RUN, {"b_run_id": run_id})
        else:
            found = self._driver.rows(
                conn, _EVENTS_OF_RUN_UP_TO, {"b_run_id": run_id, "b_most": most + 1}
            )
            if len(found) > most:
                raise SaveWouldWait(f"a run of more than {most} events is read in a thread")
        rows = [
            StoredRow(found_id, seq, read_instant(ts), kind, stage, data)
            for found_id, seq, ts, kind, stage, data in found
        ]
        events = decode_rows(rows, lambda keys: self._plan_bodies(conn, keys, committed))
        if events and claimed is not None and len(events) < claimed:
            raise StoreCorruptError(
                f"the run's row was written with {claimed} events, and {len(events)} are "
                "stored: the last ones are missing",
                run_id=run_id,
                hint="restore the store from a backup; the run is not resumed from a short log",
            )
        return events

    def get_handoff(self, run_id: str) -> HandoffPacket | None:
        """The stored handoff packet, if any."""
        with self._faults(run_id, "reading the handoff"), self.engine.connect() as conn:
            value = conn.execute(select(runs.c.handoff).where(runs.c.run_id == run_id)).scalar()
        return HandoffPacket.model_validate_json(value) if value else None

    def get_session(self, session_id: str, now: datetime) -> SessionRecord | None:
        """The session unless unknown or expired."""
        with self._faults(action="reading the session"), self._reading() as conn:
            row = self._driver.first(conn, _SESSION, {"b_session_id": session_id})
        return _session_of(row, now)

    def purge(self, now: datetime, task_ttl: timedelta) -> tuple[int, list[str]]:
        """Delete expired sessions and ended runs older than the TTL, in one transaction."""
        cutoff = now - task_ttl
        with self._faults(action="purging"), self._write() as conn:
            sessions_deleted = conn.execute(
                delete(sessions).where(sessions.c.expires_at <= now)
            ).rowcount
            old = select(runs.c.run_id).where(
                runs.c.status.in_(TERMINAL_STATUSES), runs.c.updated_at < cutoff
            )
            old_ids = [row.run_id for row in conn.execute(old)]
            for start in range(0, len(old_ids), 500):
                chunk = old_ids[start : start + 500]
                conn.execute(delete(events).where(events.c.run_id.in_(chunk)))
                conn.execute(delete(runs).where(runs.c.run_id.in_(chunk)))
                conn.execute(delete(leases).where(leases.c.run_id.in_(chunk)))
                conn.execute(delete(messages).where(messages.c.run_id.in_(chunk)))
                projection.forget(conn, chunk)
        return sessions_deleted, old_ids

    def save_session(self, session: SessionRecord) -> None:
        """Create or replace a session row."""
        with self._faults(action="saving the session"), self._write() as conn:
            _put_session(self._driver.on(conn), session)

    def update_session(self, session_id: str, now: datetime, merge: SessionMerge) -> None:
        """Read, merge and write the session in one write transaction (``SessionUpdater``).

        SQLite's write lock is held from the transaction's first statement; PostgreSQL
        locks the row (``FOR UPDATE``). Two writers of a session that does not exist yet
        both find none and both insert: the second's insert fails on the key, and it is
        merged again, with the first's row there to lock.
        """
        update = SessionUpdate(session_id, now, merge)
        with self._faults(action="updating the session"):
            for attempt in range(2):
                try:
                    with self._write() as conn:
                        self._merge_session(conn, update, quiet=False)
                    return
                except IntegrityError:
                    if attempt:
                        raise

    # ------------------------------------------------------------------ stats projection

    def ensure_facts(self, batch: int = 500) -> int:
        """Backfill the stats facts of runs stored before the projection existed.

        Each run is folded from its events once, under the write lock, and re-checked
        there (a save may have projected it meanwhile). Returns how many were written;
        a read-only store writes nothing (its figures cover the runs already projected).
        The check runs without the write lock: a store with nothing to backfill (every
        store written by this corral) never makes a running run's save wait.
        """
        if self.read_only or self._facts_whole:
            return 0
        with self._faults(action="reading the stats facts"), self.engine.connect() as conn:
            if not projection.unprojected(conn, runs, events, 1):
                self._facts_whole = True
                return 0
        written = 0
        while True:
            with self._faults(action="backfilling the stats facts"), self._write() as conn:
                missing = projection.unprojected(conn, runs, events, batch)
                for run_id in missing:
                    row = conn.execute(select(runs).where(runs.c.run_id == run_id)).first()
                    if row is not None:
                        found = self._events(conn, run_id)
                        projection.replace_facts(self._driver.on(conn), self._record(row), found)
            written += len(missing)
            if len(missing) < batch:
                self._facts_whole = True
                return written

    def _older(self) -> bool:
        """Whether the store is at an older schema revision (read-only: not migrated)."""
        with self._faults(action="reading the schema revision"), self.engine.connect() as conn:
            return schema.state(conn).label == "older"

    def has_stats_projection(self, conn: Connection) -> bool:
        """Whether the projection's tables exist (a read-only old home may lack them).

        Asked once it holds (every run start of an agent with equivalent tools asks, and
        an inspection costs more than the query it guards): tables are never dropped.
        """
        if not self._has_projection:
            self._has_projection = inspect(conn).has_table(projection.run_facts_table.name)
        return self._has_projection

    def figures(self, since: datetime | None = None, agent: str | None = None) -> Figures:
        """The stats figures of runs created since ``since`` (of ``agent``), from SQL.

        Runs not projected yet are backfilled first (``ensure_facts``).
        """
        self.ensure_facts()
        if self.read_only and self._older():  # its facts have an older shape: fold its events
            return aggregate(folded(self, since, agent))
        with self._faults(action="reading the stats"), self.engine.connect() as conn:
            if self.engine.dialect.name == "postgresql":  # one snapshot for every query
                conn = conn.execution_options(isolation_level="REPEATABLE READ")
            with conn.begin():  # SQLite: a read transaction is one snapshot already
                if not self.has_stats_projection(conn):
                    return Figures()
                return projection.figures(conn, since, agent)

    def find_runs(
        self,
        *,
        run_id: str | None = None,
        trace_id: str | None = None,
        session_id: str | None = None,
        intent: str | None = None,
        status: str | None = None,
        agent: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 20,
    ) -> list[str]:
        """Ids of the newest ``limit`` runs that match every filter given, found in SQL.

        ``since``/``until`` bound the run's creation time (``until`` excluded). ``intent``
        is read from the stats projection (runs not projected yet are backfilled first).
        """
        where = run_conditions(
            run_id=run_id,
            trace_id=trace_id,
            session_id=session_id,
            status=status,
            agent=agent,
            since=since,
            until=until,
        )
        if intent is not None:
            self.ensure_facts()
        with self._faults(action="finding runs"), self.engine.connect() as conn:
            if intent is not None and not self.has_stats_projection(conn):
                return []
            return projection.run_ids(conn, runs, where, intent, limit)

    def tool_latency(
        self,
        agent: str,
        tools: Collection[str],
        last: int,
        timeouts_ms: Mapping[str, float] | None = None,
    ) -> dict[str, ToolLatency]:
        """Tool -> its p95 over its ``last`` latest timed calls (``LatencySource``).

        Read from the stats projection in one query. Runs of a home older than the
        projection count once ``corral stats`` has backfilled them: a run start does not
        wait for that; an old read-only home without the projection has no observations.
        """
        if not tools:
            return {}
        with self._faults(action="reading tool latency"), self._reading() as conn:
            if not self.has_stats_projection(conn):
                return {}
            shape, params = projection.latency_request(agent, sorted(tools), last, timeouts_ms)
            query = self._latency_queries.get(shape)
            if query is None:  # built once per shape: a run start binds only its values
                query = self._latency_queries[shape] = projection.latency_query(shape)
            return latencies(projection.durations(self._driver.rows(conn, query, params)))


def _session_of(row: Any, now: datetime) -> SessionRecord | None:
    """A session row as the driver gives it, as a record; ``None``: none, or it expired."""
    if row is None:
        return None
    expires_at = _stored_time(row.expires_at)
    if expires_at <= now:
        return None
    try:
        data = _StoredSession.model_validate_json(row.data)
    except ValidationError as exc:
        problems = validation_problems(exc, 3, root="data")
        raise StoreCorruptError(
            f"session {row.session_id} cannot be read: {problems}",
            hint="delete the session's row (its runs stay), or restore it from a backup",
        ) from None
    return SessionRecord(
        session_id=row.session_id,
        agent=row.agent,
        turns=data.turns,
        entities=data.entities,
        open_run_id=data.open_run_id,
        updated_at=_stored_time(row.updated_at),
        expires_at=expires_at,
        earlier_open_runs=data.earlier_open_runs,
    )


class _StoredSession(BaseModel):
    """A session row's ``data`` as ``_put_session`` writes it: read back only if it fits."""

    turns: list[dict[str, Any]]
    entities: dict[str, Any]
    open_run_id: str | None = None
    earlier_open_runs: list[str] = Field(default_factory=list)


def _stored_time(value: Any) -> datetime:
    """A ``DateTime`` column as the driver returns it, aware (UTC).

    SQLite's is the text SQLAlchemy writes (``2026-01-31 12:00:00.000000``, no zone: corral
    stores UTC), which ``fromisoformat`` reads; PostgreSQL's is a ``datetime`` already.
    """
    return _aware(datetime.fromisoformat(value) if isinstance(value, str) else value)


def _put_session(on: driver.Bound, session: SessionRecord, exists: bool | None = None) -> None:
    """Write the session's row: an update, else an insert (``exists`` when known)."""
    fields: dict[str, Any] = {
        "turns": session.turns,
        "entities": session.entities,
        "open_run_id": session.open_run_id,
    }
    if session.earlier_open_runs:  # left out when none, as sessions stored before it have
        fields["earlier_open_runs"] = session.earlier_open_runs
    data = dumps(fields)
    values = {
        "agent": session.agent,
        "data": data,
        "updated_at": session.updated_at,
        "expires_at": session.expires_at,
    }
    if exists is not False:
        bound = {f"b_{name}": value for name, value in values.items()}
        if on.execute(_UPDATE_SESSION, {"b_session_id": session.session_id, **bound}) or exists:
            return
    on.execute(_INSERT_SESSION, {"session_id": session.session_id, **values})


def run_conditions(
    *,
    run_id: str | None = None,
    trace_id: str | None = None,
    session_id: str | None = None,
    status: str | None = None,
    agent: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> list[ColumnElement[bool]]:
    """The ``WHERE`` of a search over the run rows: each filter given, on its column.

    The one filter behind ``SqlStore.find_runs`` (``corral traces``) and ``GET /runs``;
    ``since``/``until`` bound the run's creation time (``until`` excluded). The intent is
    not here: each reads it where it is indexed for its use.
    """
    columns = runs.c
    equal = {
        columns.run_id: run_id,
        columns.trace_id: trace_id,
        columns.session_id: session_id,
        columns.status: status,
        columns.agent: agent,
    }
    where = [column == value for column, value in equal.items() if value is not None]
    if since is not None:
        where.append(columns.created_at >= since)
    if until is not None:
        where.append(columns.created_at < until)
    return where


_METHODS = frozenset(
    name
    for klass in SqlStore.__mro__[:-1]
    for name, value in vars(klass).items()
    if not name.startswith("__")
    and (callable(value) or isinstance(value, (property, classmethod, staticmethod)))
)
"""The names of ``SqlStore``'s methods and properties (``calls_in_place``); not its dunder
methods: a subclass's own ``__init__`` makes no call in place."""


def _overrides(cls: type[SqlStore]) -> bool:
    """Whether ``cls`` (or a class between it and ``SqlStore``) redefines one of them.

    Or looks its attributes up in code of its own (``__getattribute__``, ``__getattr__``).
    """
    below = cls.__mro__[: cls.__mro__.index(SqlStore)]
    return any(name in _METHODS or name in _LOOKUPS for klass in below for name in vars(klass))


_LOOKUPS = frozenset({"__getattribute__", "__getattr__"})
