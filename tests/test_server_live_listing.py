"""``GET /runs`` lists the runs this server drives that are not saved yet.

Found by a review: a run whose first save had not come (a read-only plan saves only at
its end; here its tool still runs) was shown by ``GET /runs/{id}`` but missing from the
listing, and so from the dashboard's list, which reads it: an operator did not see the
runs in flight. It is listed under the same filters and pages as a stored run, and once
saved it is listed once.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel

from corral import ToolPolicy, tool
from corral.store.sql import SqlStore
from tests.helpers import build_agent
from tests.serving import client, serving

HANG_S = 8.0


class Done(BaseModel):
    ref: str


def _listed(http: httpx.Client, **params: Any) -> list[str]:
    answer = http.get("/runs", params=params)
    assert answer.status_code == 200, answer.text
    return [row["run_id"] for row in answer.json()["runs"]]


def test_a_live_run_not_saved_yet_is_listed_under_the_filters_and_pages(
    tmp_path: Path,
) -> None:
    gate = threading.Event()
    calls: list[int] = []

    @tool
    def wait() -> Done:
        calls.append(1)
        if len(calls) == 2:  # the second run's tool runs until the test lets it end
            gate.wait(HANG_S)
        return Done(ref="done")

    agent = build_agent([wait], [{"id": "s1", "tool": "wait"}])
    with serving(agent, home=tmp_path / "home") as base, client(base) as http:
        older = http.post("/agents/test/runs", json={"message": "go", "session_id": "old"})
        older_id = older.json()["run_id"]
        try:
            started = http.post(
                "/agents/test/runs", json={"message": "go", "wait": False, "session_id": "new"}
            )
            live_id = started.json()["run_id"]
            newer = http.post("/agents/test/runs", json={"message": "go", "session_id": "old"})
            newer_id = newer.json()["run_id"]
            assert http.get(f"/runs/{live_id}").json()["status"] == "executing"

            whole = http.get("/runs").json()
            assert [row["run_id"] for row in whole["runs"]] == [newer_id, live_id, older_id]
            row = whole["runs"][1]
            assert (row["agent"], row["status"], row["intent"]) == ("test", "executing", "do")
            assert row["session_id"] == "new"
            assert whole["next_offset"] is None

            assert _listed(http, status="executing") == [live_id]
            assert _listed(http, status="finished") == [newer_id, older_id]
            assert _listed(http, agent="test") == [newer_id, live_id, older_id]
            assert _listed(http, agent="other") == []
            assert _listed(http, intent="do") == [newer_id, live_id, older_id]
            assert _listed(http, intent="other") == []
            assert _listed(http, session_id="new") == [live_id]
            assert _listed(http, session_id="old") == [newer_id, older_id]
            assert _listed(http, since="1h") == [newer_id, live_id, older_id]
            past = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
            assert _listed(http, until=past) == []

            pages = [http.get("/runs", params={"limit": 1, "offset": n}).json() for n in range(3)]
            assert [p["runs"][0]["run_id"] for p in pages] == [newer_id, live_id, older_id]
            assert [p["next_offset"] for p in pages] == [1, 2, None]
            two = http.get("/runs", params={"limit": 2, "offset": 1}).json()
            assert [r["run_id"] for r in two["runs"]] == [live_id, older_id]
        finally:
            gate.set()
        with http.stream("GET", f"/runs/{live_id}/stream") as followed:
            list(followed.iter_lines())  # until the run ends and is saved
        done = http.get("/runs").json()["runs"]
        assert [(r["run_id"], r["status"]) for r in done] == [
            (newer_id, "finished"),
            (live_id, "finished"),
            (older_id, "finished"),
        ]


def test_a_live_run_saved_already_is_listed_once(tmp_path: Path) -> None:
    """A run is saved before its write: it is in the hub and the store, and listed once."""
    gate = threading.Event()

    @tool(policy=ToolPolicy(kind="write"))
    def book() -> Done:
        gate.wait(HANG_S)
        return Done(ref="booked")

    agent = build_agent([book], [{"id": "s1", "tool": "book"}])
    with serving(agent, home=tmp_path / "home") as base, client(base) as http:
        try:
            started = http.post("/agents/test/runs", json={"message": "go", "wait": False})
            run_id = started.json()["run_id"]
            store = SqlStore.open(tmp_path / "home" / "corral.db")
            deadline = time.monotonic() + 10
            while store.get_run(run_id) is None and time.monotonic() < deadline:
                time.sleep(0.02)  # the drive saves before its write, in its own time
            assert store.get_run(run_id) is not None  # saved, and still driven here
            assert _listed(http) == [run_id]
            assert _listed(http, status="executing") == [run_id]
        finally:
            gate.set()
        with http.stream("GET", f"/runs/{run_id}/stream") as followed:
            list(followed.iter_lines())
        assert _listed(http) == [run_id]
