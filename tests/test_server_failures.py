"""A run the server drives that fails: its callers and followers are told why, redacted.

The store starts failing while the run waits in a step (the test holds the step's tool),
so the run's last save fails after a write was made: the failure a person must see,
with what had already happened, and without the customer's data in it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from corral import tool
from corral.agent import Agent
from corral.errors import StoreUnavailableError
from corral.store.sql import SqlStore
from corral.tools.policy import ToolPolicy
from tests.helpers import build_agent
from tests.serving import client, serving, sse

HANG_S = 8.0
"""How long the held tool waits for the test: only a broken test waits this long."""
PHONE = "13912345678"


class Booked(BaseModel):
    ref: str


@pytest.fixture
def gate() -> threading.Event:
    return threading.Event()


@pytest.fixture
def broken(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Once set, every save of the server's store fails as a lost disk would."""
    failing = threading.Event()
    save = SqlStore.save

    def flaky_save(self: SqlStore, *args: Any, **kwargs: Any) -> None:
        if failing.is_set():
            raise StoreUnavailableError("the database file is gone")
        save(self, *args, **kwargs)

    monkeypatch.setattr(SqlStore, "save", flaky_save)
    return failing


@pytest.fixture
def armed() -> threading.Event:
    """Once set, the write tool breaks the store as it returns: the next save fails."""
    return threading.Event()


@pytest.fixture
def agent(gate: threading.Event, armed: threading.Event, broken: threading.Event) -> Agent:
    @tool(policy=ToolPolicy(kind="write"), summary="booked {ref}")
    def book() -> Booked:
        if armed.is_set():
            broken.set()
        return Booked(ref=f"for {PHONE}")

    @tool
    def wait() -> Booked:
        gate.wait(HANG_S)
        return Booked(ref="done")

    steps = [{"id": "s1", "tool": "book"}, {"id": "s2", "tool": "wait", "depends_on": ["s1"]}]
    return build_agent([book, wait], steps)


@pytest.fixture
def base(agent: Agent, gate: threading.Event, tmp_path: Path) -> Iterator[str]:
    with serving(agent, home=tmp_path / "home") as url:
        yield url
        gate.set()


def test_a_run_started_without_waiting_that_fails_tells_its_followers_why(
    base: str, gate: threading.Event, broken: threading.Event
) -> None:
    with client(base) as http:
        run_id = http.post("/agents/test/runs", json={"message": "go", "wait": False}).json()[
            "run_id"
        ]
        with http.stream("GET", f"/runs/{run_id}/stream") as answer:
            messages = sse(answer.iter_lines())
            seen = [next(messages)]
            while _event(seen[-1]) != ("step_started", "s2"):
                seen.append(next(messages))  # the write is done; the run waits in s2's tool
            broken.set()
            gate.set()
            seen += list(messages)  # the stream ends cleanly, not cut off
    errors = [m for m in seen if m["event"] == "error"]
    assert len(errors) == 1
    error = json.loads(errors[0]["data"])["error"]
    assert error["code"] == "STORE_UNAVAILABLE"
    assert "book succeeded" in error["message"] and run_id in error["message"]
    assert PHONE not in errors[0]["data"]
    # what the store holds follows: the run as a resume will find it, not "finished"
    assert seen[-1]["event"] == "summary"
    assert json.loads(seen[-1]["data"])["status"] != "finished"


def test_a_failure_before_the_first_save_ends_the_stream_with_the_error(
    gate: threading.Event, broken: threading.Event, tmp_path: Path
) -> None:
    @tool
    def wait() -> Booked:
        gate.wait(HANG_S)
        return Booked(ref="done")

    @tool(policy=ToolPolicy(kind="write"))
    def book() -> Booked:
        return Booked(ref="b")

    steps = [{"id": "s1", "tool": "wait"}, {"id": "s2", "tool": "book", "depends_on": ["s1"]}]
    agent = build_agent([wait, book], steps)  # nothing is saved before the write
    with serving(agent, home=tmp_path / "home") as base, client(base) as http:
        run_id = http.post("/agents/test/runs", json={"message": "go", "wait": False}).json()[
            "run_id"
        ]
        with http.stream("GET", f"/runs/{run_id}/stream") as answer:
            messages = sse(answer.iter_lines())
            seen = [next(messages)]
            broken.set()  # the save before the write fails: nothing of the run is kept
            gate.set()
            seen += list(messages)
        assert http.get(f"/runs/{run_id}").status_code == 404
    assert [m["event"] for m in seen[:-1]] == ["event"] * (len(seen) - 1)
    assert seen[-1]["event"] == "error"
    assert json.loads(seen[-1]["data"])["error"]["code"] == "STORE_UNAVAILABLE"


def test_an_error_answer_shows_no_secret_of_the_run(
    base: str, gate: threading.Event, armed: threading.Event
) -> None:
    gate.set()
    armed.set()  # the save that records the write's result fails
    with client(base) as http:
        answer = http.post("/agents/test/runs", json={"message": "go"})
    assert answer.status_code == 503
    assert answer.json()["error"]["code"] == "STORE_UNAVAILABLE"
    assert "book succeeded" in answer.json()["error"]["message"]
    assert PHONE not in answer.text


def test_a_refused_body_does_not_echo_a_secret(base: str) -> None:
    with client(base) as http:
        answer = http.post("/agents/test/runs", json={"message": "go", PHONE: "call me"})
        unknown = http.post(f"/agents/{PHONE}/runs", json={"message": "go"})
    assert answer.status_code == 422 and answer.json()["error"]["code"] == "INVALID_ARGUMENT"
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "AGENT_NOT_FOUND"
    assert PHONE not in answer.text and PHONE not in unknown.text


def test_an_error_keeps_its_hint_as_written(base: str) -> None:
    with client(base, headers={}) as http:
        refused = http.get("/runs")
    assert refused.status_code == 401
    assert "Bearer TOKEN" in refused.json()["error"]["hint"]


def _event(message: dict[str, str]) -> tuple[str, str | None]:
    """An SSE event message's type and step id."""
    event = json.loads(message["data"])
    return event["type"], event["data"].get("step_id")
