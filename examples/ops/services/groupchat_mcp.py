"""The ops example's work group chat: an MCP server over stdio (the official ``mcp`` SDK).

Tools:

- ``post_to_group(channel, text, idempotency_key)``: post a message. Posts live in SQLite
  (``GROUPCHAT_DB``) under a UNIQUE idempotency key, so a repeated key does not post twice:
  it returns the first post, with ``created: false``. The key comes as the argument, or in
  the request's ``_meta`` (``idempotency_key``); a call with neither gets a fresh one.
- ``list_posts(channel)``: a channel's posts, oldest first.

Faults armed through the ops API (``POST /faults`` with ``path: mcp:<tool>``) reach this
server through the shared file: ``crash: true`` kills the process in the middle of the
call, after a post is stored and before the answer is sent; ``delay_s`` answers late.

Run by corral (``mcp_servers:`` in agent.yaml) as ``python services/groupchat_mcp.py``;
it ends when its stdin closes, as every stdio MCP server does.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mcp.server.mcpserver import Context, MCPServer
from ops_state import open_state, take_fault


class Post(BaseModel):
    post_id: int
    channel: str
    text: str
    posted_at: str
    created: bool
    """False when the idempotency key had already posted: this is that first post."""


class Posts(BaseModel):
    channel: str
    count: int
    posts: list[Post]


def _post(row: sqlite3.Row, created: bool) -> Post:
    return Post(
        post_id=row["post_id"],
        channel=row["channel"],
        text=row["text"],
        posted_at=row["posted_at"],
        created=created,
    )


def _meta_key(ctx: Context[Any, Any] | None) -> str | None:
    """The idempotency key a client sent in the request's ``_meta``, if any."""
    try:
        meta = ctx.request_context.meta if ctx is not None else None
    except ValueError:  # no request in progress
        return None
    if meta is None:
        return None
    values = meta if isinstance(meta, dict) else getattr(meta, "model_extra", None) or {}
    for name in ("idempotency_key", "idempotencyKey", "corral/idempotency_key"):
        if isinstance(values.get(name), str) and values[name]:
            return str(values[name])
    return None


def build_server(db: Path) -> MCPServer:
    """The group-chat server over the SQLite file ``db``."""
    server = MCPServer("groupchat")
    conn = open_state(db)

    def strike(tool: str) -> bool:
        """Apply an armed fault for ``tool``: wait if it says so; True when it crashes."""
        fault = take_fault(conn, f"mcp:{tool}")
        if fault is None:
            return False
        if fault["delay_s"]:
            time.sleep(fault["delay_s"])
        return bool(fault["crash"])

    @server.tool()
    def post_to_group(
        channel: str,
        text: str,
        idempotency_key: str | None = None,
        ctx: Context[Any, Any] | None = None,
    ) -> Post:
        """Post a message to a work group channel. A repeated idempotency key posts once."""
        key = idempotency_key or _meta_key(ctx) or uuid.uuid4().hex
        crash = strike("post_to_group")
        conn.execute(
            "INSERT INTO posts (channel, text, idempotency_key) VALUES (?, ?, ?) "
            "ON CONFLICT (idempotency_key) DO NOTHING",
            (channel, text, key),
        )
        created = conn.execute("SELECT changes()").fetchone()[0] == 1
        if crash:  # killed mid-call: the post is stored, the answer is never sent
            os._exit(1)
        row = conn.execute("SELECT * FROM posts WHERE idempotency_key = ?", (key,)).fetchone()
        return _post(row, created)

    @server.tool()
    def list_posts(channel: str) -> Posts:
        """The posts of a work group channel, oldest first."""
        if strike("list_posts"):
            os._exit(1)
        rows = conn.execute(
            "SELECT * FROM posts WHERE channel = ? ORDER BY post_id", (channel,)
        ).fetchall()
        return Posts(channel=channel, count=len(rows), posts=[_post(r, True) for r in rows])

    return server


def main() -> None:
    db = Path(os.environ.get("GROUPCHAT_DB") or "groupchat.db")
    pidfile = os.environ.get("GROUPCHAT_PIDFILE")
    if pidfile:  # so tests can see that the server does not outlive the agent
        Path(pidfile).write_text(str(os.getpid()), encoding="utf-8")
    build_server(db).run("stdio")


if __name__ == "__main__":
    main()
