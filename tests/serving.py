"""Helpers for the HTTP API tests: a real uvicorn on a loopback port, in a thread.

The server listens on a socket the test bound itself (port 0: the kernel picks a free
one), so there is no race for a port and nothing to wait for but uvicorn's start flag.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.extras import REQUIRE_ALL, import_extra

import_extra("fastapi", REQUIRE_ALL)
import_extra("uvicorn", REQUIRE_ALL)
import_extra("sse_starlette", REQUIRE_ALL)

import httpx  # noqa: E402
import uvicorn  # noqa: E402

from corral.agent import Agent  # noqa: E402
from corral.cli.common import _load  # noqa: E402
from corral.server.app import ServerSettings, create_app  # noqa: E402

TOKEN = "test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
EXCHANGE = "我的打印机上周坏了，订单号 HD20240501，能换新吗？"
"""The aftersales demo's exchange: it pauses for a confirmation before the write."""
START_S = 20.0
"""The longest a server may take to start listening (a loaded CI machine)."""


def load(agent_dir: Path, home: Path) -> Agent:
    """An agent as ``corral serve`` loads it (business data under the home)."""
    return _load(agent_dir, home)


@contextmanager
def serving(*agents: Agent, home: Path, **options: Any) -> Iterator[str]:
    """Serve ``agents`` over ``home`` on a free loopback port; yields the base URL."""
    app = create_app(ServerSettings(agents=agents, home=home, token=TOKEN, **options))
    with serve_app(app) as base:
        yield base


@contextmanager
def serve_app(app: Any) -> Iterator[str]:
    """Serve an ASGI app on a free loopback port, in a thread; yields the base URL."""
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say TCP, and
    # without it every response waits 40 ms for a delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + START_S
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(START_S)
        sock.close()


def client(base: str, **kwargs: Any) -> httpx.Client:
    """A client of the server with the token (``headers=...`` replaces it)."""
    kwargs.setdefault("headers", AUTH)
    return httpx.Client(base_url=base, timeout=60.0, **kwargs)


def sse(lines: Iterator[str]) -> Iterator[dict[str, str]]:
    """SSE messages (``event``, ``id``, ``data``) read from a response's lines."""
    message: dict[str, str] = {}
    for line in lines:
        if line == "":
            if "data" in message:
                yield message
            message = {}
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        message[name] = value[1:] if value.startswith(" ") else value


def seq_of(message: dict[str, str]) -> int:
    """The ``seq`` of an SSE event message, read from its ``id`` (``<seq>-<mark>``)."""
    seq, mark = message["id"].split("-")
    assert len(mark) == 8 and int(mark, 16) >= 0, message["id"]
    return int(seq)


def followed_until_started(
    http: httpx.Client, agent: str, step_id: str
) -> tuple[str, list[dict[str, str]]]:
    """Start a run of ``agent`` without waiting; follow its stream until ``step_id`` starts.

    The run id, and the SSE messages read up to that step's ``step_started``.
    """
    run_id = http.post(f"/agents/{agent}/runs", json={"message": "go", "wait": False})
    run_id = run_id.json()["run_id"]
    seen: list[dict[str, str]] = []
    with http.stream("GET", f"/runs/{run_id}/stream") as answer:
        for message in sse(answer.iter_lines()):
            seen.append(message)
            data = json.loads(message["data"])
            if data["type"] == "step_started" and data["data"]["step_id"] == step_id:
                break
    return run_id, seen
