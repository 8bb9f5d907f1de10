"""Driver failures become store errors with the right stable code."""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

from corral.errors import (
    StoreCorruptError,
    StoreFullError,
    StoreReadOnlyError,
    StoreUnavailableError,
)
from corral.store.faults import classify


def driver_error(message: str) -> OperationalError:
    return OperationalError("INSERT ...", {}, sqlite3.OperationalError(message))


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("attempt to write a readonly database", StoreReadOnlyError),
        ("database or disk is full", StoreFullError),
        ("unable to open database file", StoreUnavailableError),
        ("file is not a database", StoreCorruptError),
        ("database disk image is malformed", StoreCorruptError),
    ],
)
def test_sqlite_messages(message: str, expected: type[Exception]) -> None:
    assert classify(driver_error(message)) is expected


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (errno.ENOSPC, StoreFullError),
        (errno.EROFS, StoreReadOnlyError),
        (errno.EIO, StoreUnavailableError),
    ],
)
def test_os_errors(code: int, expected: type[Exception]) -> None:
    assert classify(OSError(code, os.strerror(code))) is expected


def test_a_disk_io_error_on_a_full_file_system_is_store_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    error = driver_error("disk I/O error")
    assert classify(error, tmp_path) is StoreUnavailableError  # there is room here

    def full(_: Any) -> SimpleNamespace:
        return SimpleNamespace(f_bavail=0, f_frsize=4096, f_blocks=1000)

    monkeypatch.setattr(os, "statvfs", full)
    assert classify(error, tmp_path) is StoreFullError
