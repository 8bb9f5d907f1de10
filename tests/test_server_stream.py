"""Live event streams over SSE: read, disconnect, reconnect from a ``seq``, miss nothing.

The agent's one tool waits for the test to release it, so the run is truly live (stuck
in a step) while the client reads, leaves and comes back: no timing is assumed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel
from sqlalchemy import text

from corral import ToolPolicy, tool
from corral.agent import Agent
from corral.store.sql import SqlStore
from tests.helpers import build_agent
from tests.serving import client, followed_until_started, seq_of, serving, sse

HANG_S = 8.0
"""How long the tool waits for the test (under the 10 s tool timeout): only a broken test
ever waits this long, and then the run fails instead of hanging."""


class Value(BaseModel):
    value: int


@pytest.fixture
def gate() -> threading.Event:
    return threading.Event()


@pytest.fixture
def gated(gate: threading.Event) -> Agent:
    @tool
    def slow(n: int) -> Value:
        gate.wait(HANG_S)
        return Value(value=n)

    steps = [
        {"id": "s1", "tool": "slow", "args": {"n": 1}},
        {"id": "s2", "tool": "slow", "args": {"n": 2}, "depends_on": ["s1"]},
    ]
    return build_agent([slow], steps)


@pytest.fixture
def base(gated: Agent, gate: threading.Event, tmp_path: Path) -> Iterator[str]:
    with serving(gated, home=tmp_path / "home") as url:
        yield url
        gate.set()  # never leave a tool thread waiting


def test_a_client_that_leaves_and_comes_back_misses_nothing(
    base: str, gate: threading.Event
) -> None:
    with client(base) as http:
        started = http.post("/agents/test/runs", json={"message": "go", "wait": False})
        assert started.status_code == 202
        run_id = started.json()["run_id"]
        assert started.json()["status"] == "running"

        first: list[dict[str, str]] = []
        with http.stream("GET", f"/runs/{run_id}/stream") as answer:
            assert answer.headers["content-type"].startswith("text/event-stream")
            for message in sse(answer.iter_lines()):
                first.append(message)
                if json.loads(message["data"])["type"] == "step_started":
                    break  # the tool is waiting for the gate: leave mid-run
        assert all(m["event"] == "event" for m in first)

        # leaving did not stop the run: it still waits in its step
        assert http.get(f"/runs/{run_id}").json()["status"] == "executing"
        gate.set()

        rest: list[dict[str, str]] = []
        last = first[-1]["id"]
        with http.stream(
            "GET", f"/runs/{run_id}/stream", headers={"Last-Event-ID": last}
        ) as answer:
            rest = list(sse(answer.iter_lines()))
        stored = http.get(f"/runs/{run_id}/events").json()["events"]

    assert rest[-1]["event"] == "summary"
    assert all(m["event"] == "event" for m in rest[:-1])  # its copy holds: no reset
    summary = json.loads(rest[-1]["data"])
    assert summary["status"] == "finished" and summary["run_id"] == run_id
    seqs = [seq_of(m) for m in first + rest[:-1]]
    assert seqs == list(range(1, len(stored) + 1))  # no gap, no repeat, in order
    sent = [json.loads(m["data"]) for m in first + rest[:-1]]
    assert sent == stored


def test_a_stream_from_a_seq_of_an_ended_run_sends_the_rest_then_the_summary(
    base: str, gate: threading.Event
) -> None:
    gate.set()
    with client(base) as http:
        done = http.post("/agents/test/runs", json={"message": "go"}).json()
        assert done["status"] == "finished"
        run_id = done["run_id"]
        stored = http.get(f"/runs/{run_id}/events").json()["events"]
        with http.stream("GET", f"/runs/{run_id}/stream", params={"after_seq": 3}) as answer:
            messages = list(sse(answer.iter_lines()))
        # the query wins over an older Last-Event-ID: the later of the two is where it starts
        with http.stream(
            "GET",
            f"/runs/{run_id}/stream",
            params={"after_seq": 5},
            headers={"Last-Event-ID": "2"},
        ) as answer:
            later = list(sse(answer.iter_lines()))
    assert [seq_of(m) for m in messages[:-1]] == [e["seq"] for e in stored[3:]]
    assert json.loads(messages[-1]["data"]) == done
    assert [seq_of(m) for m in later[:-1]] == [e["seq"] for e in stored[5:]]


def test_a_live_run_is_followed_to_its_end_by_several_clients(
    base: str, gate: threading.Event
) -> None:
    with client(base) as http:
        run_id = http.post("/agents/test/runs", json={"message": "go", "wait": False}).json()[
            "run_id"
        ]
        with (
            http.stream("GET", f"/runs/{run_id}/stream") as one,
            http.stream("GET", f"/runs/{run_id}/stream", params={"after_seq": 2}) as two,
        ):
            lines_one, lines_two = sse(one.iter_lines()), sse(two.iter_lines())
            head = next(lines_one)
            gate.set()
            got_one = [head, *lines_one]
            got_two = list(lines_two)
    assert got_one[-1]["event"] == got_two[-1]["event"] == "summary"
    assert got_one[-1]["data"] == got_two[-1]["data"]
    assert json.loads(got_one[-1]["data"])["status"] == "finished"
    assert got_two[:-1] == got_one[2:-1]


@pytest.mark.parametrize(
    "header", [b"\xb2", b"9" * 5000, b"-3", b"abc", b"3-0000000g", b"3-ABCDEF12", b"3-1"]
)
def test_a_last_event_id_that_is_no_seq_replays_the_run_from_its_start(
    base: str, gate: threading.Event, header: bytes
) -> None:
    """A proxy or a hostile client may send anything: it names no event, so the client is
    told to drop what it holds, and the stream starts at 0."""
    gate.set()
    with client(base) as http:
        run_id = http.post("/agents/test/runs", json={"message": "go"}).json()["run_id"]
        stored = http.get(f"/runs/{run_id}/events").json()["events"]
        headers = [
            (b"Authorization", http.headers["Authorization"].encode()),
            (b"Last-Event-ID", header),
        ]
        with http.stream("GET", f"/runs/{run_id}/stream", headers=headers) as answer:
            assert answer.status_code == 200
            messages = list(sse(answer.iter_lines()))
    assert messages[0]["event"] == "reset"
    assert json.loads(messages[0]["data"])["after_seq"] == 0
    assert [seq_of(m) for m in messages[1:-1]] == [e["seq"] for e in stored]
    assert messages[-1]["event"] == "summary"


@pytest.mark.parametrize("stale", ["mark", "beyond"])
def test_a_last_event_id_the_log_does_not_hold_is_answered_by_a_reset_and_the_whole_log(
    base: str, gate: threading.Event, stale: str
) -> None:
    """The client saw an event its server never saved (``tests/test_server_stream_crash.py``).

    Another event at that ``seq`` (another mark), or none at all: the client is told to
    drop what it holds, and is sent every event, then the summary.
    """
    gate.set()
    with client(base) as http:
        run_id = http.post("/agents/test/runs", json={"message": "go"}).json()["run_id"]
        stored = http.get(f"/runs/{run_id}/events").json()["events"]
        with http.stream("GET", f"/runs/{run_id}/stream") as answer:
            first = list(sse(answer.iter_lines()))
        seq, mark = first[2]["id"].split("-")
        other = f"{(int(mark, 16) ^ 1):08x}"
        last = f"{seq}-{other}" if stale == "mark" else f"{len(stored) + 1}-{mark}"
        with http.stream(
            "GET",
            f"/runs/{run_id}/stream",
            params={"after_seq": 4},
            headers={"Last-Event-ID": last},
        ) as answer:
            again = list(sse(answer.iter_lines()))
    assert again[0]["event"] == "reset" and "id" not in again[0]
    assert json.loads(again[0]["data"])["after_seq"] == 0
    assert again[1:] == first  # the whole log, then the summary
    assert [seq_of(m) for m in again[1:-1]] == [e["seq"] for e in stored]


def test_a_client_moving_to_another_server_of_a_live_run_is_believed(
    gate: threading.Event, tmp_path: Path
) -> None:
    """The events it saw may be unsaved yet, not lost: the run is still driven elsewhere.

    Two servers over one home; the first drives the run (a write, then a step held by the
    test), the client follows it there, then reconnects to the second, whose store has
    the run only up to its save before the write.
    """

    @tool(policy=ToolPolicy(kind="write"))
    def mark(n: int) -> Value:
        return Value(value=n)

    @tool
    def slow(n: int) -> Value:
        gate.wait(HANG_S)
        return Value(value=n)

    steps = [
        {"id": "s1", "tool": "mark", "args": {"n": 1}},
        {"id": "s2", "tool": "slow", "args": {"n": 2}, "depends_on": ["s1"]},
    ]
    agent = build_agent([mark, slow], steps)
    home = tmp_path / "home"
    try:
        with serving(agent, home=home) as one, serving(agent, home=home) as two:
            with client(one) as http:
                run_id, seen = followed_until_started(http, "test", "s2")
            last = {"Last-Event-ID": seen[-1]["id"]}
            with client(two) as http:
                saved = http.get(f"/runs/{run_id}/events").json()["events"]
                assert saved[-1]["seq"] < seq_of(seen[-1])  # what it saw is not saved yet
                with http.stream("GET", f"/runs/{run_id}/stream", headers=last) as answer:
                    elsewhere = list(sse(answer.iter_lines()))
                # the first server's lease runs out (as when it died): nobody drives the
                # run, and what it saved is all its log holds until a resume
                store = SqlStore.open(home / "corral.db")
                with store.engine.begin() as conn:
                    conn.execute(text("DELETE FROM corral_leases WHERE run_id = :r"), {"r": run_id})
                store.engine.dispose()
                with http.stream("GET", f"/runs/{run_id}/stream", headers=last) as answer:
                    orphaned = list(sse(answer.iter_lines()))
            gate.set()
    finally:
        gate.set()
    assert [m["event"] for m in elsewhere] == ["summary"]  # no reset, nothing it holds
    assert json.loads(elsewhere[0]["data"])["status"] == "executing"
    assert orphaned[0]["event"] == "reset"
    assert [seq_of(m) for m in orphaned[1:-1]] == [e["seq"] for e in saved]
