"""Translate database failures into corral's store errors, with the run they hit.

A driver exception is an implementation detail; what a caller needs is a stable code and
whether to retry: the disk is full (free space, then resume), the store is read-only, it
cannot be reached, or its data is damaged. Nothing here retries or hides a failure.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from corral.errors import (
    StoreCorruptError,
    StoreError,
    StoreFullError,
    StoreReadOnlyError,
    StoreUnavailableError,
)

_SQLITE_HINTS: tuple[tuple[str, type[StoreError]], ...] = (
    ("readonly database", StoreReadOnlyError),
    ("read-only", StoreReadOnlyError),
    ("disk is full", StoreFullError),
    ("database or disk is full", StoreFullError),
    ("disk i/o error", StoreUnavailableError),
    ("unable to open database", StoreUnavailableError),
    ("database is locked", StoreUnavailableError),
    ("file is not a database", StoreCorruptError),
    ("malformed", StoreCorruptError),
    ("no such table", StoreCorruptError),
)

_PG_STATES: dict[str, type[StoreError]] = {
    "53100": StoreFullError,  # disk_full
    "53200": StoreUnavailableError,  # out_of_memory
    "25006": StoreReadOnlyError,  # read_only_sql_transaction
    "42501": StoreReadOnlyError,  # insufficient_privilege
    "XX001": StoreCorruptError,  # data_corrupted
    "XX002": StoreCorruptError,  # index_corrupted
}


_LOCKED = "55P03"  # lock_not_available: a lock wait ran past lock_timeout
_LOCKED_HINT = (
    "another session holds a lock the store needs (see pg_locks and pg_stat_activity); "
    "end it, or let corral wait longer: ?options=-c%20lock_timeout%3D30000 in the URL, "
    "or ALTER ROLE ... SET lock_timeout"
)


def _sqlstate(exc: BaseException) -> str | None:
    """The PostgreSQL SQLSTATE of a driver failure (psycopg's ``sqlstate``), if it has one."""
    orig = exc.orig if isinstance(exc, DBAPIError) else None
    state = getattr(orig, "sqlstate", None)
    return state if isinstance(state, str) else None


def _full(folder: Path | None) -> bool:
    """Whether the file system holding ``folder`` has no space left for us."""
    if folder is None:
        return False
    try:
        stat = os.statvfs(folder)
    except OSError:
        return False
    if stat.f_blocks == 0:  # a file system with no blocks at all (/proc): not a full disk
        return False
    return stat.f_bavail * stat.f_frsize < 64 * 1024


def classify(exc: BaseException, folder: Path | None = None) -> type[StoreError]:
    """The store error class for a driver or OS exception.

    SQLite often reports a full disk as a plain "disk I/O error"; with the database's
    ``folder`` the free space decides.
    """
    kind = _classify(exc)
    # an OS error that says what it is (no such file, say) is not a full disk in disguise
    said = isinstance(exc, OSError) and exc.errno not in (None, errno.EIO)
    if kind is StoreUnavailableError and not said and _full(folder):
        return StoreFullError
    return kind


def _classify(exc: BaseException) -> type[StoreError]:
    if isinstance(exc, OSError):
        if exc.errno in (28, 122):  # ENOSPC, EDQUOT
            return StoreFullError
        if exc.errno in (13, 30, 1):  # EACCES, EROFS, EPERM
            return StoreReadOnlyError
        return StoreUnavailableError
    orig = exc.orig if isinstance(exc, DBAPIError) else None
    state = _sqlstate(exc)
    if state is not None:
        if state in _PG_STATES:
            return _PG_STATES[state]
        if state.startswith("08"):  # connection exceptions
            return StoreUnavailableError
    text = str(orig if orig is not None else exc).lower()
    for needle, kind in _SQLITE_HINTS:
        if needle in text:
            return kind
    return StoreUnavailableError


def first_line(exc: BaseException) -> str:
    """The driver's message without SQLAlchemy's SQL echo and background links."""
    orig = exc.orig if isinstance(exc, DBAPIError) else exc
    return (str(orig).strip().splitlines() or [type(exc).__name__])[0][:200]


@contextmanager
def store_faults(
    run_id: str | None = None, action: str = "store access", folder: Path | None = None
) -> Iterator[None]:
    """Re-raise database and OS failures inside the block as ``StoreError`` subclasses."""
    try:
        yield
    except StoreError:
        raise
    except (SQLAlchemyError, OSError) as exc:
        kind = classify(exc, folder)
        hint = _LOCKED_HINT if _sqlstate(exc) == _LOCKED else None
        raise kind(f"{action} failed: {first_line(exc)}", run_id=run_id, hint=hint) from exc
