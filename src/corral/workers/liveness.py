"""Whether a worker is alive: PostgreSQL's own connection state, not a lease table of ours.

A worker holds a session advisory lock keyed by its executor id, on a connection of its
own whose ``application_name`` is ``corral-worker:<executor_id>``. PostgreSQL drops the
connection, and with it the lock, the moment the worker's process dies (its socket
closes). So "the lock is free" means "no process is that executor", with no heartbeat to
tune and no clock to trust.

- ``hold`` takes the lock when a worker starts, before DBOS launches (a DBOS launch
  recovers its own executor id's pending workflows: a second worker with a live worker's
  id would steal its runs). A second worker with the same id is refused
  (``WORKER_ID_IN_USE``).
- ``Liveness.keeper`` is a thread of its own in every worker: every ``poll_s`` it keeps
  the worker's lock, taking it again after a reconnect. It does nothing else, so nothing
  can hold it up: a scan that waits on DBOS (whose calls block, retrying, while the
  server is away) must not keep a live worker from taking its lock back in time, or it
  is called dead and its runs, still in flight, are entered again elsewhere.
- ``Watcher`` runs in every worker: every ``poll_s`` it lists the executors that own
  pending workflows, and takes over those whose lock is free. It holds the dead
  executor's lock while it does, so a restarting worker of that id cannot recover the
  same workflows at the same time.

A worker's liveness session also ends when the worker stops talking on it: it says
``SELECT 1`` every poll, and the session carries ``idle_session_timeout`` (a few polls,
at least ``IDLE_S``), so PostgreSQL ends it once the worker went quiet. A host that lost
power or its network sends no FIN: without the timeout its session, and so its runs,
stayed held until the kernel's keepalive gave up (about two hours by default).

After it opens a connection, its first one or one after the last was lost (PostgreSQL
restarted, say), a watcher waits ``settle_s`` before it calls anyone dead: every live
worker's lock may have vanished with the server, and each takes its own again within a
poll. One executor whose takeover fails is tried again at the next round; the round goes
on with the others.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from corral.errors import (
    ConfigInvalidError,
    InvalidInputError,
    StoreUnavailableError,
    WorkerIdInUseError,
)

if TYPE_CHECKING:
    import psycopg

logger = logging.getLogger(__name__)

APP_NAME_PREFIX = "corral-worker:"
"""``application_name`` of a worker's liveness connection, before its executor id."""

WATCH_NAME_PREFIX = "corral-watch:"
"""``application_name`` of a watcher's connection (it holds a dead worker's lock a moment)."""

LOCK_CLASS = 0x636F7272  # "corr": advisory locks of corral workers, apart from any other
"""The first key of the two-key advisory lock; the second is a hash of the executor id."""

EXECUTOR_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,47}")
"""An executor id: short enough for ``application_name`` (63 bytes), safe in a log line."""

IDLE_S = 10.0
"""The least time a liveness session may stay quiet before PostgreSQL ends it."""

START_WAIT_S = 10.0
"""How long a starting worker waits while a watcher (not a worker) holds its lock."""


def checked_executor_id(executor_id: str) -> str:
    """``executor_id`` if it is one; ``INVALID_INPUT`` otherwise."""
    if not EXECUTOR_ID.fullmatch(executor_id):
        raise InvalidInputError(
            f"{executor_id[:60]!r} is not an executor id",
            hint="1 to 48 letters, digits, '.', '_' or '-', starting with a letter or digit",
        )
    return executor_id


def lock_key(executor_id: str) -> int:
    """The second advisory-lock key of ``executor_id``: a signed 32-bit hash, stable anywhere.

    Python's ``hash`` changes per process; PostgreSQL's ``hashtext`` is not documented as
    stable across versions. Two ids sharing a hash (one chance in four billion) would look
    like one worker: the second to start is refused, never silently doubled.
    """
    digest = hashlib.blake2b(executor_id.encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


CONNECT_TIMEOUT_S = 10
"""How long a connect may wait for a server that does not answer (a lost network), unless
the URL (``?connect_timeout=N``) or ``PGCONNECT_TIMEOUT`` says."""


def _connect(url: str, application_name: str) -> psycopg.Connection[tuple[object, ...]]:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    bounded: dict[str, Any] = {}
    if "connect_timeout" not in conninfo_to_dict(url) and "PGCONNECT_TIMEOUT" not in os.environ:
        bounded["connect_timeout"] = CONNECT_TIMEOUT_S
    return psycopg.connect(url, application_name=application_name, autocommit=True, **bounded)


SETTLE_S = 5.0
"""The least time a new watcher connection waits before it calls anyone dead."""


def settle_time_s(poll_s: float) -> float:
    """How long a new watcher connection waits before it calls anyone dead.

    Every live worker's keeper takes its lock back at its next poll after a restart: three
    polls leave room for one that fails (the server still starting), and at least
    ``SETTLE_S``. A fixed 5 s called live workers dead whose keepers poll every 5 s or more.
    """
    return max(SETTLE_S, 3 * poll_s)


MAX_SETTLE_S = 3600.0
"""The longest settling a worker takes (``--takeover-settle-s``): an hour."""


def chosen_settle_s(settle_s: float | None, poll_s: float) -> float:
    """A worker's settling time: ``settle_s`` if given, else ``settle_time_s(poll_s)``.

    A fleet whose workers poll at different rates gives every worker the settling of its
    slowest poll (a watcher cannot see the poll of a worker whose session a restart ended).
    Less than this worker's own ``settle_time_s`` is ``CONFIG_INVALID``: the watcher would
    call live workers of its own poll dead after a restart.
    """
    least = settle_time_s(poll_s)
    if settle_s is None:
        return least
    if not settle_s <= MAX_SETTLE_S:  # inf and NaN too: no takeover, ever
        raise ConfigInvalidError(
            f"a takeover settling time of {settle_s} s is longer than {MAX_SETTLE_S:g} s",
            hint="a dead worker's runs would wait that long after every restart",
        )
    if not settle_s >= least:
        raise ConfigInvalidError(
            f"a takeover settling time of {settle_s} s is shorter than three polls of "
            f"{poll_s} s (at least {least:g} s)",
            hint="give every worker three polls of the fleet's slowest worker, or leave it out",
        )
    return settle_s


def idle_timeout_s(poll_s: float) -> float:
    """How long a worker polling every ``poll_s`` may be quiet before its session ends."""
    return max(IDLE_S, 5 * poll_s)


def _quiet_ends(conn: psycopg.Connection[tuple[object, ...]], idle_s: float) -> None:
    """Have PostgreSQL end this session once it is idle for ``idle_s`` (PostgreSQL 14+).

    An older server has no such setting: the session then ends only when its socket does.
    """
    import psycopg

    try:
        conn.execute(f"SET idle_session_timeout = {int(idle_s * 1000)}")
    except psycopg.errors.UndefinedObject:
        logger.warning("PostgreSQL before 14: a lost host's worker is seen dead only by TCP")


def _try_lock(conn: psycopg.Connection[tuple[object, ...]], executor_id: str) -> bool:
    row = conn.execute(
        "SELECT pg_try_advisory_lock(%s, %s)", (LOCK_CLASS, lock_key(executor_id))
    ).fetchone()
    return bool(row and row[0])


def _unlock(conn: psycopg.Connection[tuple[object, ...]], executor_id: str) -> None:
    conn.execute("SELECT pg_advisory_unlock(%s, %s)", (LOCK_CLASS, lock_key(executor_id)))


def _holder(conn: psycopg.Connection[tuple[object, ...]], executor_id: str) -> str | None:
    """The ``application_name`` of the session holding ``executor_id``'s lock, if any."""
    row = conn.execute(
        "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 "
        "AND l.classid = %s::bigint AND l.objid = %s::bigint",
        (LOCK_CLASS, lock_key(executor_id) & 0xFFFFFFFF),
    ).fetchone()
    return None if row is None else str(row[0])


@dataclass
class Liveness:
    """A worker's held lock: alive while ``conn`` is. ``close`` lets it go (a clean stop)."""

    url: str
    executor_id: str
    conn: psycopg.Connection[tuple[object, ...]]
    idle_s: float = IDLE_S
    """PostgreSQL ends the session when it is quiet this long (``ensure`` talks on it)."""
    since: float = field(default_factory=time.time)
    """When this worker took its lock (epoch seconds)."""
    _guard: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    """Held for a moment while ``conn`` is swapped, kept or closed, never across a connect."""
    _reconnecting: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    """One reconnect at a time: the keeper and the watcher may both find the session gone."""
    _closed: bool = field(default=False, repr=False, compare=False)
    _kept: bool = field(default=False, repr=False, compare=False)
    """``keep`` was called: a session taken again later is kept however quiet, too."""

    def ensure(self) -> bool:
        """Whether the lock is held now, taking it again on a new connection if it was lost.

        False while it cannot be taken back (the server is down, or a watcher holds it a
        moment): the caller tries again at its next poll. A reconnect holds no lock that
        ``keep`` or ``close`` need: a stopping worker never waits for a connect to a server
        that does not answer.
        """
        conn = self.conn
        try:
            conn.execute("SELECT 1")
            return True
        except Exception:  # psycopg.Error, or a closed connection: reconnect below
            pass
        with suppress(Exception):
            conn.close()
        with self._reconnecting:
            if self.conn is not conn:  # the other thread took it back meanwhile
                return not self._closed
            return self._reconnect()

    def keeper(self, stopping: threading.Event, poll_s: float) -> threading.Thread:
        """A daemon thread (not started) that keeps the lock every ``poll_s`` until ``stopping``.

        Its session is quiet no longer than a poll however long a takeover scan takes.
        """

        def keep_lock() -> None:
            while not stopping.wait(poll_s):
                self.ensure()

        return threading.Thread(
            target=keep_lock, name=f"corral-keep-{self.executor_id}", daemon=True
        )

    def _reconnect(self) -> bool:
        try:
            conn = _connect(self.url, APP_NAME_PREFIX + self.executor_id)
            _quiet_ends(conn, self.idle_s)
            if not _try_lock(conn, self.executor_id):
                conn.close()
                return False
        except Exception as exc:  # the server is still away: next poll
            logger.warning("worker %s: liveness connection lost (%s)", self.executor_id, exc)
            return False
        with self._guard:
            if self._closed:  # the worker let its lock go meanwhile: so does this session
                with suppress(Exception):  # at once: a closed session's end is not
                    _unlock(conn, self.executor_id)
                conn.close()
                return False
            # a stop began during the connect: nobody talks on the new session from now
            if self._kept and not self._kept_quiet(conn):
                with suppress(Exception):
                    conn.close()
                return False
            self.conn = conn
        logger.warning("worker %s: liveness lock taken again", self.executor_id)
        return True

    def keep(self) -> None:
        """Keep the session however quiet it stays (no idle timeout from now on).

        A stopping worker's keeper no longer talks on it, and its lock must last until
        the process ends: a drive may still be inside a tool's thread. A reconnect under
        way (the keeper's or the watcher's) keeps the session it makes as well: it would
        carry the idle timeout, with nobody left to talk on it.
        """
        with self._guard:
            self._kept = True
            self._kept_quiet(self.conn)

    def _kept_quiet(self, conn: psycopg.Connection[tuple[object, ...]]) -> bool:
        """Take the idle timeout off ``conn``; False (said) when its session is gone."""
        try:
            _quiet_ends(conn, 0.0)
        except Exception as exc:  # the session is gone already: nothing left to keep
            logger.warning("worker %s: liveness session lost (%s)", self.executor_id, exc)
            return False
        return True

    def close(self) -> None:
        """Release the lock (closing the session does) and the connection."""
        with self._guard:
            self._closed = True
            self.conn.close()


def hold(
    url: str, executor_id: str, *, wait_s: float = START_WAIT_S, idle_s: float = IDLE_S
) -> Liveness:
    """Take ``executor_id``'s lock for this process, or refuse: ``WORKER_ID_IN_USE``.

    ``url`` is a libpq URL (``postgresql://...``). A live worker holding it is a refusal
    at once; a watcher holding it (taking over that id's runs, a few milliseconds) is
    waited for up to ``wait_s``. The session ends when it is quiet ``idle_s``: a launch
    that takes longer than that finds it gone at the watcher's first round, which takes
    the lock again (``Liveness.ensure``).
    """
    import psycopg

    name = APP_NAME_PREFIX + checked_executor_id(executor_id)
    try:
        conn = _connect(url, name)
    except psycopg.OperationalError as exc:
        raise StoreUnavailableError(
            f"cannot reach the store's PostgreSQL: {str(exc).strip()[:200]}",
            hint="check --store (CORRAL_STORE_URL) and that the server is up",
        ) from None
    _quiet_ends(conn, idle_s)
    deadline = time.monotonic() + wait_s
    while not _try_lock(conn, executor_id):
        holder = _holder(conn, executor_id)
        if holder == name or time.monotonic() >= deadline:
            conn.close()
            raise WorkerIdInUseError(
                f"a worker with executor id {executor_id!r} is already running "
                f"({holder or 'its session'} holds its lock)",
                hint="give each worker its own --executor-id; `corral workers` lists them",
            )
        time.sleep(0.05)
    return Liveness(url, executor_id, conn, idle_s)


@dataclass(frozen=True)
class Takeover:
    """One dead executor whose pending workflows this worker took over."""

    executor_id: str
    workflows: int
    lost_s: float
    """Seconds since the dead worker was last seen alive (an upper bound on how long ago
    its connection was lost), or since this watcher first found it dead when it never
    saw it alive (``seen`` False)."""
    seen: bool


@dataclass
class Watcher:
    """Takes over the pending workflows of executors whose liveness lock is free.

    ``pending_owners`` lists the executor ids owning pending workflows (a public DBOS
    read); ``recover`` takes over one executor's and says how many (``recovery.py``).
    """

    liveness: Liveness
    pending_owners: Callable[[], set[str]]
    recover: Callable[[str], int]
    poll_s: float = 1.0
    settle_s: float | None = None
    """After this watcher's connection was made (the first one, or again after it was
    lost), how long it waits before it calls any worker dead (the others take their locks
    back after a server restart, each keeper at its next poll). ``None``: ``settle_time_s``
    of ``poll_s``, the fleet's poll taken to be this worker's; a mixed fleet passes
    ``chosen_settle_s`` of its slowest poll (``corral worker --takeover-settle-s``)."""
    clock: Callable[[], float] = time.monotonic
    _last_seen: dict[str, float] = field(default_factory=dict)
    _first_dead: dict[str, float] = field(default_factory=dict)
    _conn: psycopg.Connection[tuple[object, ...]] | None = None
    _settled_at: float = 0.0

    def __post_init__(self) -> None:
        if self.settle_s is None:
            self.settle_s = settle_time_s(self.poll_s)

    def thread(self, stopping: threading.Event) -> threading.Thread:
        """A daemon thread (not started) that polls every ``poll_s`` until ``stopping``."""
        return threading.Thread(
            target=self.run,
            args=(stopping,),
            name=f"corral-watch-{self.liveness.executor_id}",
            daemon=True,
        )

    def run(self, stopping: threading.Event) -> None:
        """Poll until ``stopping`` is set; a failed round (the server away) is logged."""
        try:
            while not stopping.wait(self.poll_s):
                try:
                    self.poll()
                except Exception as exc:  # the server is away, or DBOS is stopping
                    if not stopping.is_set():
                        logger.warning("takeover watcher: %s", exc)
                    self._close()
        finally:
            self._close()

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def poll(self) -> list[Takeover]:
        """One round: check our lock, note who is alive, take over the dead ones' runs.

        Our own lock is kept by ``Liveness.keeper``; a round checks it (and takes it
        back if the keeper has not yet) because a watcher without it must take nothing.
        """
        if not self.liveness.ensure():
            return []
        conn = self._connection()
        now = self.clock()
        for name in self._live_names(conn):
            self._last_seen[name] = now
        if now < self._settled_at:
            return []
        done = []
        for executor_id in sorted(self.pending_owners() - {self.liveness.executor_id}):
            takeover = self._take_over(conn, executor_id, now)
            if takeover is not None:
                done.append(takeover)
        return done

    def _connection(self) -> psycopg.Connection[tuple[object, ...]]:
        if self._conn is None or self._conn.closed:
            name = WATCH_NAME_PREFIX + self.liveness.executor_id
            self._conn = _connect(self.liveness.url, name)
            # Every new session settles, the first one too: it has not seen who held a lock
            # before it, and a server that just restarted ended every live worker's session
            # (each takes its lock back at its keeper's next poll). A watcher whose first
            # round comes just after a restart would otherwise call them all dead.
            self._settled_at = self.clock() + (self.settle_s or 0.0)
        return self._conn

    @staticmethod
    def _live_names(conn: psycopg.Connection[tuple[object, ...]]) -> list[str]:
        rows = conn.execute(
            "SELECT substr(application_name, %s) FROM pg_stat_activity "
            "WHERE application_name LIKE %s AND datname = current_database()",
            (len(APP_NAME_PREFIX) + 1, APP_NAME_PREFIX + "%"),
        ).fetchall()
        return [str(row[0]) for row in rows]

    def _take_over(
        self, conn: psycopg.Connection[tuple[object, ...]], executor_id: str, now: float
    ) -> Takeover | None:
        if not _try_lock(conn, executor_id):
            return None  # alive (or another watcher is taking it over)
        try:
            count = self.recover(executor_id)
        except Exception as exc:  # this one's next round tries again; the others go on
            logger.warning("takeover watcher: taking over executor %s failed: %s", executor_id, exc)
            return None
        finally:
            _unlock(conn, executor_id)
        last_seen = self._last_seen.get(executor_id)
        since = self._first_dead.setdefault(executor_id, now) if last_seen is None else last_seen
        takeover = Takeover(executor_id, count, max(0.0, now - since), last_seen is not None)
        if count:
            logger.warning(
                "took over %d workflow(s) of executor %s, %.2f s after it was %s",
                count,
                executor_id,
                takeover.lost_s,
                "last seen alive" if takeover.seen else "found dead",
            )
        return takeover
