"""A small MCP server over stdio for corral's MCP tests and benchmark: real process, real SQLite.

Tools:
- ``get_note(topic)``: a read with an output schema (structured content);
- ``post_note(channel, text, idempotency_key="")``: a write stored in SQLite, deduplicated
  by the idempotency key (the argument, else the request's ``_meta``
  ``corral/idempotency_key``); when the file named by ``NOTES_CRASH_AFTER_WRITE`` exists,
  it is removed and the process dies right after the row is committed (a crash mid-call
  whose effect happened);
- ``echo_text(text)``: plain text, no output schema (a non-JSON answer);
- ``chatty(text)``: first prints a line that is not JSON-RPC to stdout, as a careless
  ``print()`` in a stdio server does, then answers;
- ``refuse(reason)``: answers ``isError``;
- ``whoami()``: the server's pid, so a test can check the process is gone;
- ``crash()``: the process dies mid-call;
- ``hold(path)``: answers once ``path`` exists (a test's call times out meanwhile);
- ``delete_all()``: a destructive tool that no agent imports.

``NOTES_DB`` is the SQLite file (default ``notes.sqlite3`` in the working directory). With
``NOTES_PIDS`` set, every start appends its pid to that file, so a test can check that no
process it started outlives the agent. With ``NOTES_PORT`` set, it serves streamable HTTP
on ``127.0.0.1:NOTES_PORT/mcp`` instead of stdio, and with ``NOTES_TOKEN`` set too, it
answers 401 to a request without the header ``X-Notes-Token: Bearer NOTES_TOKEN``.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any, TypedDict

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("notes")
META_KEY = "corral/idempotency_key"


class Note(TypedDict):
    topic: str
    text: str
    words: int


class Posted(TypedDict):
    post_id: int
    channel: str
    duplicate: bool


def _db() -> sqlite3.Connection:
    conn = sqlite3.connect(os.environ.get("NOTES_DB", "notes.sqlite3"))
    conn.execute(
        "CREATE TABLE IF NOT EXISTS posts (id INTEGER PRIMARY KEY, key TEXT UNIQUE,"
        " channel TEXT, text TEXT)"
    )
    return conn


@server.tool()
def get_note(topic: str) -> Note:
    """Read the note about a topic."""
    text = f"notes about {topic}"
    return Note(topic=topic, text=text, words=len(text.split()))


@server.tool()
def post_note(channel: str, text: str, ctx: Context, idempotency_key: str = "") -> Posted:
    """Post a note to a channel, once per idempotency key."""
    meta = ctx.request_context.meta or {}
    key = idempotency_key or str(meta.get(META_KEY, "")) or None
    with _db() as conn:
        if key is not None:
            row = conn.execute("SELECT id, channel FROM posts WHERE key = ?", (key,)).fetchone()
            if row is not None:
                return Posted(post_id=row[0], channel=row[1], duplicate=True)
        cursor = conn.execute(
            "INSERT INTO posts (key, channel, text) VALUES (?, ?, ?)", (key, channel, text)
        )
        post_id = int(cursor.lastrowid or 0)
    crash_flag = os.environ.get("NOTES_CRASH_AFTER_WRITE")
    if crash_flag and Path(crash_flag).exists():
        Path(crash_flag).unlink()
        os._exit(3)
    return Posted(post_id=post_id, channel=channel, duplicate=False)


@server.tool(structured_output=False)
def echo_text(text: str) -> str:
    """Answer plain text, which is not JSON."""
    return f"you said: {text}"


@server.tool(structured_output=False)
def chatty(text: str) -> str:
    """Print a stray line on the protocol's stdout, then answer."""
    sys.stdout.write(f"debug: got {text}\n")
    sys.stdout.flush()
    return text.upper()


@server.tool()
def refuse(reason: str) -> Note:
    """Always fails: the server answers isError."""
    raise ToolError(f"refused: {reason}")


@server.tool()
def whoami() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
async def hold(path: str) -> int:
    """Answer once ``path`` exists; a test lets a call time out while it waits."""
    for _ in range(12_000):  # at most ~2 minutes: only ends a test that forgot to release it
        if Path(path).exists():
            return 1
        await asyncio.sleep(0.01)
    return 0


@server.tool()
def delete_all() -> int:
    """Delete every post (never imported: an agent takes only the tools it names)."""
    with _db() as conn:
        return conn.execute("DELETE FROM posts").rowcount


@server.tool()
def crash() -> int:
    """Die mid-call, as a server that segfaults would."""
    os._exit(4)


def _serve_http(port: int, token: str | None) -> None:
    """Streamable HTTP behind a token check, as an ASGI wrapper around the SDK's app."""
    import uvicorn

    app = server.streamable_http_app(host="127.0.0.1")
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if (
            token
            and scope["type"] == "http"
            and dict(scope["headers"]).get(b"x-notes-token") != expected
        ):
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"missing or wrong token"})
            return
        await app(scope, receive, send)

    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    if os.environ.get("NOTES_PIDS"):
        with open(os.environ["NOTES_PIDS"], "a", encoding="utf-8") as pids:
            pids.write(f"{os.getpid()}\n")
    if os.environ.get("NOTES_PORT"):
        _serve_http(int(os.environ["NOTES_PORT"]), os.environ.get("NOTES_TOKEN"))
    else:
        server.run("stdio")
