"""A stream opened while an approval starts follows the approved run to its end.

Found by a walkthrough (9 of 12 tries): the stream sent the stored events up to
``awaiting_confirm``, then a summary saying ``executing`` (the approval's drive had begun
meanwhile) and closed; the approval's events were never sent.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from corral import ToolPolicy, tool
from corral.server.app import ServerSettings, create_app
from tests.helpers import build_agent
from tests.serving import TOKEN, client, serve_app, sse

HANG_S = 8.0


class Booked(BaseModel):
    booking: int


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    opened = threading.Event()
    yield opened
    opened.set()  # never leave a tool thread waiting


def test_a_stream_that_missed_the_approval_s_start_follows_it(
    gate: threading.Event, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    @tool(policy=ToolPolicy(kind="write", requires_confirmation=True, idempotent=True))
    def book(n: int) -> Booked:
        """Books, once the test lets it."""
        gate.wait(HANG_S)
        return Booked(booking=n)

    agent = build_agent([book], [{"id": "s1", "tool": "book", "args": {"n": 1}}])
    app = create_app(ServerSettings(agents=(agent,), home=tmp_path / "home", token=TOKEN))
    hub = app.state.corral.hub
    with serve_app(app) as base, client(base) as http:
        paused = http.post("/agents/test/runs", json={"message": "go"}).json()
        assert paused["status"] == "awaiting_confirm"
        run_id = paused["run_id"]
        approving = http.post(f"/runs/{run_id}/resume", json={"approve": True, "wait": False})
        assert approving.status_code == 202  # the write waits in the tool, the run is live
        live = hub.live
        calls = iter([None])  # the stream's first look misses the drive, as in the race

        def missed_once(wanted: str) -> Any:
            return next(calls, live(wanted))

        stored = len(http.get(f"/runs/{run_id}/events").json()["events"])
        monkeypatch.setattr(hub, "live", missed_once)
        got: queue.Queue[dict[str, str] | None] = queue.Queue()

        def read() -> None:
            with http.stream("GET", f"/runs/{run_id}/stream") as answer:
                for message in sse(answer.iter_lines()):
                    got.put(message)
            got.put(None)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        messages = [got.get(timeout=10) for _ in range(stored)]
        try:  # the stored events are sent; what comes next waits for the write to end
            early = got.get(timeout=0.5)
        except queue.Empty:
            early = None
        gate.set()
        rest = [early] if early is not None else []
        while (message := got.get(timeout=10)) is not None:
            rest.append(message)
        reader.join(10)
    assert all(m is not None for m in messages)
    summary = rest[-1]
    assert summary["event"] == "summary", rest
    assert json.loads(summary["data"])["status"] == "finished"
    events = [json.loads(m["data"])["type"] for m in rest[:-1]]
    assert events[-1] == "run_finished"  # the approval's events were sent before it
