"""``HEAD`` over real HTTP on loopback: answered as ``GET`` is, with no body, at once.

Load balancers, uptime monitors and ``curl -I`` probe with ``HEAD``; a 405 there made a
healthy server look down. RFC 9110 §9.3.2: the status and headers of the ``GET``.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from pydantic import BaseModel

from corral import tool
from corral.agent import Agent
from tests.conftest import AFTERSALES
from tests.helpers import build_agent
from tests.serving import AUTH, TOKEN, client, load, serving, sse

HANG_S = 30.0
"""How long the held tool waits for the test: only a broken test waits this long."""
PROMPT_S = 5.0
"""The longest a HEAD may take: one that followed the stream would take until HANG_S."""
DATA_ROUTES = ("/agents", "/runs", "/handoffs", "/stats", "/workers", "/openapi.json")


@pytest.fixture
def base(tmp_path: Path) -> Iterator[str]:
    home = tmp_path / "home"
    with serving(load(AFTERSALES, home), home=home) as url:
        yield url


def same_head(
    http: httpx.Client, path: str, headers: dict[str, str] | None = None
) -> httpx.Response:
    """HEAD ``path``; checks it has the status and headers of the GET, and no body."""
    got = http.get(path, headers=headers)
    head = http.head(path, headers=headers)
    assert head.status_code == got.status_code, path
    assert head.content == b"", path
    for name in ("content-type", "content-length", "www-authenticate", "location"):
        assert head.headers.get(name) == got.headers.get(name), (path, name)
    return head


def test_head_on_the_health_check_is_its_get_without_a_body(base: str) -> None:
    with client(base, headers={}) as http:
        head = same_head(http, "/healthz")
        assert head.status_code == 200
        assert int(head.headers["content-length"]) > 0  # the GET body's length, as RFC allows
        assert http.get("/healthz").json()["status"] == "ok"  # same connection: no body leaked


def test_head_needs_the_token_exactly_as_get_does(base: str) -> None:
    with client(base, headers={}) as http:
        for path in (*DATA_ROUTES, "/runs/run_x", "/runs/run_x/events", "/runs/run_x/stream"):
            refused = same_head(http, path)
            assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
            wrong = {"Authorization": "Bearer nope"}
            assert same_head(http, path, headers=wrong).status_code == 401
        for path in DATA_ROUTES:
            assert same_head(http, path, headers=AUTH).status_code == 200, path
        for path in ("/runs/run_x", "/runs/run_x/events", "/runs/run_x/stream"):
            assert same_head(http, path, headers=AUTH).status_code == 404, path
        assert same_head(http, "/runs?status=nope", headers=AUTH).status_code == 422


def test_head_on_the_dashboard_gives_its_redirect_and_its_security_headers(base: str) -> None:
    with client(base, headers={}) as http:
        assert same_head(http, "/ui").status_code == 307
        page = same_head(http, "/ui/")
        assert page.status_code == 200
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        assert same_head(http, "/ui/js/nope.js").status_code == 404


def test_head_on_a_route_that_takes_only_post_is_still_405_and_starts_nothing(
    base: str,
) -> None:
    with client(base) as http:
        refused = http.head("/agents/aftersales/runs")
        assert refused.status_code == 405 and refused.headers["allow"] == "POST"
        assert refused.content == b""
        assert http.get("/runs").json()["runs"] == []
        wrong = http.delete("/runs")  # a GET route takes HEAD too, and says so
        assert wrong.status_code == 405 and wrong.headers["allow"] == "GET, HEAD"


class Done(BaseModel):
    ref: str


@pytest.fixture
def held_agent() -> Iterator[tuple[Agent, threading.Event]]:
    gate = threading.Event()

    @tool
    def wait() -> Done:
        gate.wait(HANG_S)
        return Done(ref="done")

    yield build_agent([wait], [{"id": "s1", "tool": "wait"}]), gate
    gate.set()


def test_head_on_a_live_run_s_stream_answers_at_once_and_does_not_follow_it(
    held_agent: tuple[Agent, threading.Event], tmp_path: Path
) -> None:
    agent, gate = held_agent
    with serving(agent, home=tmp_path / "home") as base, client(base) as http:
        started = http.post("/agents/test/runs", json={"message": "go", "wait": False})
        run_id = started.json()["run_id"]
        began = time.monotonic()
        head = http.head(f"/runs/{run_id}/stream", timeout=PROMPT_S)
        assert time.monotonic() - began < PROMPT_S
        assert head.status_code == 200 and head.content == b""
        assert head.headers["content-type"].startswith("text/event-stream")
        # on the wire: the headers, then nothing, so the connection serves the next request
        url = urlsplit(base)
        with socket.create_connection((url.hostname, url.port), timeout=PROMPT_S) as raw:
            raw.sendall(
                f"HEAD /runs/{run_id}/stream HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {TOKEN}\r\n\r\n"
                "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".encode()
            )
            seen = b""
            while b'"status":"ok"' not in seen:
                chunk = raw.recv(65536)
                assert chunk, seen
                seen += chunk
        first, _, rest = seen.partition(b"\r\n\r\n")
        assert first.startswith(b"HTTP/1.1 200") and b"text/event-stream" in first
        assert rest.startswith(b"HTTP/1.1 200"), seen  # no body, no chunk, between the two
        gate.set()  # the HEADs stopped only their own answers: the run goes on to its end
        with http.stream("GET", f"/runs/{run_id}/stream") as followed:
            messages = list(sse(followed.iter_lines()))
        assert messages[-1]["event"] == "summary"
        assert json.loads(messages[-1]["data"])["status"] == "finished"


def test_the_schema_documents_503_and_adds_no_head_operations(base: str) -> None:
    with client(base) as http:
        schema = http.get("/openapi.json").json()
    for path, operations in schema["paths"].items():
        assert "head" not in operations, path
        for method, operation in operations.items():
            if path != "/healthz":  # reads no store
                assert "503" in operation["responses"], (method, path)
