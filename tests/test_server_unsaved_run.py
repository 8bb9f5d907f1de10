"""A run this server drives that is not saved yet is busy, not missing.

Found by a walkthrough: a ``wait: false`` run whose first save had not come (a read-only
plan saves only at its end) answered a resume with 404 ``RUN_NOT_FOUND`` while ``GET
/runs/{id}`` showed it executing; a client told "no run" after its 202 may start it again.
"""

from __future__ import annotations

import threading
from pathlib import Path

from pydantic import BaseModel

from corral import tool
from tests.helpers import build_agent
from tests.serving import client, serving

HANG_S = 8.0


class Done(BaseModel):
    ref: str


def test_resuming_a_live_run_not_saved_yet_is_run_busy(tmp_path: Path) -> None:
    gate = threading.Event()

    @tool
    def wait() -> Done:
        gate.wait(HANG_S)
        return Done(ref="done")

    agent = build_agent([wait], [{"id": "s1", "tool": "wait"}])
    with serving(agent, home=tmp_path / "home") as base, client(base) as http:
        try:
            started = http.post("/agents/test/runs", json={"message": "go", "wait": False})
            run_id = started.json()["run_id"]
            assert http.get(f"/runs/{run_id}").json()["status"] == "executing"
            answer = http.post(f"/runs/{run_id}/resume", json={})
            assert answer.status_code == 409, answer.text
            assert answer.json()["error"]["code"] == "RUN_BUSY"
            assert "not saved yet" in answer.json()["error"]["message"]
        finally:
            gate.set()
        with http.stream("GET", f"/runs/{run_id}/stream") as followed:
            list(followed.iter_lines())  # until the run ends
        assert http.get(f"/runs/{run_id}").json()["status"] == "finished"
        gone = http.post("/runs/run_0123456789abcdef/resume", json={})
        assert gone.status_code == 404  # a run nobody has is still not found
