"""SQLite writes (and reads) made on the caller's thread when nothing would make them wait.

The runtime hands a blocking store's calls to threads, so that a lock held by another
process never stalls the event loop. For a SQLite save that costs more than the save: a
5-step run cost 1.15 to 1.7× the CPU with its save in a thread, on a 2-core machine (the
hop, and the run's events read on another core; ``docs/performance.md``).

So a save is first tried here, on one connection kept for it, where it cannot wait:

- the connection's busy timeout is 0: a write lock held by anyone (another process, a
  store thread of this one) fails ``BEGIN IMMEDIATE`` at once (``SaveWouldWait``); the
  runtime tries again in place for a moment, then a thread waits for the lock as before;
- one thread at a time uses the connection; another finds it taken, as a lock;
- the connection is opened by a save that may wait (in a store thread: a full pool makes
  its checkout wait), then detached from the pool: it holds no slot, and its settings never
  reach another user of the pool. ``engine.dispose()`` closes it; a file whose commits
  sync (``synchronous=FULL``) or that is not in WAL mode is never written in place;
- it never checkpoints the WAL (``wal_autocheckpoint=0``): a checkpoint writes up to a
  thousand pages and syncs the file. After every ``CHECKPOINT_EVERY`` writes, a thread of
  its own runs a passive checkpoint, which takes no write lock (writes go on meanwhile),
  so the WAL stays bounded. (A save sent to a store thread for it instead held the write
  lock there, waiting for the GIL while the loop was busy: the saves beside it waited.)

With ``synchronous=NORMAL`` in WAL mode, what is left on the caller's thread is the save's
own CPU and the commit's ``write`` calls into the OS cache: no fsync, no wait. (WAL needs
a local file system, so the ``stat`` calls that check the file are local too.)
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from functools import partial
from typing import cast

from sqlalchemy import Connection, Engine, RootTransaction, event
from sqlalchemy.exc import DBAPIError, IntegrityError

from corral.store.base import SaveWouldWait

CHECKPOINT_EVERY = 32
"""A passive checkpoint follows this many writes made in place (a 5-step run's save
writes ~15 pages; SQLite's own default checkpoints at 1 000)."""

_WOULD_WAIT = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}
_NORMAL = 1
"""``PRAGMA synchronous``: OFF 0 and NORMAL 1 sync no commit in WAL mode; FULL 2 does."""


def would_wait(exc: DBAPIError) -> bool:
    """Whether SQLite refused for a lock (busy or locked, any extended code): no harm done."""
    code = getattr(exc.orig, "sqlite_errorcode", None)
    return code is not None and (code & 0xFF) in _WOULD_WAIT


class InPlaceWrites:
    """One SQLite connection kept for transactions that must not wait.

    Saves, and the reads and lease calls of a run's start or resume (``SqlStore.in_place``).
    """

    def __init__(
        self,
        engine: Engine,
        begin: Callable[[Connection], RootTransaction],
        still_ours: Callable[[], bool],
    ) -> None:
        """``begin``: starts the store's write transaction (``BEGIN IMMEDIATE``).

        ``still_ours``: whether the store's file is the one it opened (a checkpoint of a
        deleted file would make a new, empty one).
        """
        self._engine = engine
        self._begin = begin
        self._still_ours = still_ours
        self._lock = threading.Lock()
        self._connection: Connection | None = None
        self.usable = True
        """False once the file proved unfit: not in WAL mode, or syncing every commit."""
        self._made = 0
        self._checkpointing: threading.Thread | None = None
        # the engine may outlive this (stores on a shared engine): it holds a weak reference
        listener = partial(_on_dispose, weakref.ref(self))
        event.listen(engine, "engine_disposed", listener)
        weakref.finalize(self, _forget_listener, engine, listener)

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A write transaction on the kept connection, or ``SaveWouldWait`` before any write.

        A lock refused anywhere in it (its BEGIN, a statement, its COMMIT) rolls it back
        and raises ``SaveWouldWait``; any other failure is raised, and the connection is
        closed so that the next one starts clean. Until a store thread has opened the
        connection (``prepare``), it is ``SaveWouldWait`` too: opening one may wait.
        """
        with self._used(self._begin, writes=True) as connection:
            yield connection

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """A read transaction (deferred ``BEGIN``) on the kept connection, or ``SaveWouldWait``.

        In WAL mode a reader waits for nobody's write; what could still make it wait (a
        file being recovered, the kept connection in use) is ``SaveWouldWait``, as for a
        write, and the read is made in a store thread instead.
        """
        with self._used(Connection.begin, writes=False) as connection:
            yield connection

    @contextmanager
    def _used(
        self, begin: Callable[[Connection], RootTransaction], *, writes: bool
    ) -> Iterator[Connection]:
        """The kept connection, in a transaction that ``begin`` starts (see ``transaction``).

        ``writes``: a write transaction, counted (under the lock) for the checkpoints.
        """
        if not self._lock.acquire(blocking=False):
            raise SaveWouldWait("another thread is using the kept connection", locked=True)
        try:
            connection = self._connection
            if connection is None:
                raise SaveWouldWait("no kept connection yet: a store thread opens it")
            try:
                with begin(connection):
                    yield connection
                if writes:
                    self._made += 1
                    if self._made % CHECKPOINT_EVERY == 0:
                        self._checkpoint_soon()
            except DBAPIError as exc:
                if would_wait(exc):
                    raise SaveWouldWait("SQLite answered busy", locked=True) from exc
                if not isinstance(exc, IntegrityError):  # a key taken: the connection is fine
                    self._close()
                raise
            except SaveWouldWait:
                raise
            except BaseException:
                if connection.invalidated:
                    self._close()
                raise
        finally:
            self._lock.release()

    def prepare(self) -> None:
        """Open the kept connection, from a thread that may wait for it (a store thread).

        Taken from the pool (its checkout may wait: the pool full) and then detached: it
        holds no slot of the pool, and never goes back to it with this one's settings.
        Called after a save has committed, so it never fails: a connection that cannot
        be opened now leaves the saves in threads, and the next save tries again.
        """
        if self._connection is not None or not self.usable:
            return
        try:
            connection = self._open()  # outside the lock: a checkout may wait
        except Exception:
            return
        with self._lock:
            if self._connection is None and self.usable and connection is not None:
                self._connection, connection = connection, None
        if connection is not None:  # another thread was first
            connection.close()

    def _open(self) -> Connection | None:
        """A detached connection set for writes in place; None when the file is unfit."""
        connection = self._engine.connect()
        try:
            connection.detach()
            # on the driver's connection (autocommit): no transaction, nobody's listener
            raw = cast(sqlite3.Connection, connection.connection.dbapi_connection)
            mode = raw.execute("PRAGMA journal_mode").fetchone()[0]
            sync = raw.execute("PRAGMA synchronous").fetchone()[0]
            if mode != "wal" or sync > _NORMAL:
                # each commit would sync the file (or write a rollback journal): not here
                self.usable = False
                connection.close()
                return None
            raw.execute("PRAGMA busy_timeout=0")
            raw.execute("PRAGMA wal_autocheckpoint=0")
        except BaseException:
            connection.close()
            raise
        return connection

    def _checkpoint_soon(self) -> None:
        """Start a passive checkpoint in a thread, unless the last one is still running."""
        if self._checkpointing is not None and self._checkpointing.is_alive():
            return
        self._checkpointing = threading.Thread(
            target=self._checkpoint, name="corral-checkpoint", daemon=True
        )
        self._checkpointing.start()

    def _checkpoint(self) -> None:
        """Copy what the WAL holds into the database file, as far as readers allow.

        Passive: it waits for no one and nobody waits for it. A failure is left to the
        next one (a store closed meanwhile, a full disk the next write reports).
        """
        try:
            if not self._still_ours():
                return
            pooled = self._engine.raw_connection()
            try:
                raw = cast(sqlite3.Connection, pooled.dbapi_connection)
                raw.execute("PRAGMA wal_checkpoint(PASSIVE)")
            finally:
                pooled.close()
        except Exception:  # best effort: the next one tries again
            pass

    def _close(self) -> None:
        """Close the kept connection (detached: closed, not put back in the pool)."""
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def _disposed(self, _engine: Engine) -> None:
        """``engine.dispose()`` closes every connection: the kept one too (reopened on use)."""
        with self._lock:
            self._close()


def _on_dispose(kept: weakref.ref[InPlaceWrites], _engine: Engine) -> None:
    """``engine_disposed``: close the kept connection of writes still alive."""
    writes = kept()
    if writes is not None:
        writes._disposed(_engine)


def _forget_listener(engine: Engine, listener: Callable[[Engine], None]) -> None:
    """Once the writes are gone, their listener leaves the engine too."""
    with suppress(Exception):  # the engine's registry may be gone first, at exit
        event.remove(engine, "engine_disposed", listener)
