"""What the ops example's two services share: the SQLite state file and a parent watch.

The state file holds the faults armed through the API's ``POST /faults`` (tests and the
eval arm them) and the group chat's posts. Both services open it, so a fault aimed at
``mcp:<tool>`` reaches the MCP server though it was armed over HTTP. No FastAPI or MCP
import here: each service imports only what it runs on.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import threading
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS faults (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    path TEXT NOT NULL,
    status INTEGER,
    times INTEGER NOT NULL DEFAULT 1,
    retry_after REAL,
    delay_s REAL,
    body TEXT,
    crash INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS posts (
    post_id INTEGER PRIMARY KEY AUTOINCREMENT,
    channel TEXT NOT NULL,
    text TEXT NOT NULL,
    idempotency_key TEXT NOT NULL UNIQUE,
    posted_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);
"""


def open_state(path: Path | str) -> sqlite3.Connection:
    """The state file, created if new: autocommit, WAL, rows by name, short lock waits."""
    conn = sqlite3.connect(path, timeout=5, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(SCHEMA)
    return conn


def take_fault(conn: sqlite3.Connection, path: str) -> sqlite3.Row | None:
    """The oldest armed fault whose path prefixes ``path``, used up by one, atomically."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        row: sqlite3.Row | None = conn.execute(
            "SELECT * FROM faults WHERE substr(?, 1, length(path)) = path AND times > 0 "
            "ORDER BY id LIMIT 1",
            (path,),
        ).fetchone()
        if row is not None:
            conn.execute("UPDATE faults SET times = times - 1 WHERE id = ?", (row["id"],))
            conn.execute("DELETE FROM faults WHERE times <= 0")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return row


def die_with_parent() -> None:
    """Exit as soon as stdin closes: the parent ended (even by SIGKILL), so no orphan stays."""

    def watch() -> None:
        try:
            while sys.stdin.buffer.read(4096):
                pass
        finally:
            os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
