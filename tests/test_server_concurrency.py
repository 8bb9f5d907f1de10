"""Two approvals of one run at once, over real HTTP: exactly one exchange order is made.

The count is read inside the tool's own business database, where the write lands, not
from the run's events: what matters is how many orders a customer would get.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from tests.conftest import AFTERSALES
from tests.helpers import exchange_count
from tests.serving import AUTH, EXCHANGE, client, load, serving

RUNS = 3


async def approve_twice_at_once(base: str, run_id: str, step: str) -> list[httpx.Response]:
    async with httpx.AsyncClient(base_url=base, headers=AUTH, timeout=60.0) as http:
        body = {"approve": True, "step_id": step}
        return list(
            await asyncio.gather(
                http.post(f"/runs/{run_id}/resume", json=body),
                http.post(f"/runs/{run_id}/resume", json=body),
            )
        )


def test_concurrent_approvals_make_one_write(tmp_path: Path) -> None:
    home = tmp_path / "home"
    agent = load(AFTERSALES, home)
    with serving(agent, home=home) as base:
        with client(base) as http:
            paused = [
                http.post("/agents/aftersales/runs", json={"message": EXCHANGE}).json()
                for _ in range(RUNS)
            ]
        assert all(p["status"] == "awaiting_confirm" for p in paused)
        answers, made = [], []
        for p in paused:
            answers.append(
                asyncio.run(approve_twice_at_once(base, p["run_id"], p["pending"]["step_id"]))
            )
            # an order is exchanged once: each run exchanges the demo's order afresh
            made.append(exchange_count(agent, forget=True))
        with client(base) as http:
            final = [http.get(f"/runs/{p['run_id']}").json() for p in paused]

    assert made == [1] * RUNS  # one exchange per run, however many approvals
    for pair, run in zip(answers, final, strict=True):
        codes = sorted(a.status_code for a in pair)
        assert codes in ([200, 200], [200, 409]), [a.text for a in pair]
        for answer in pair:
            if answer.status_code == 409:
                assert answer.json()["error"]["code"] == "RUN_BUSY"
            else:
                assert answer.json()["status"] == "finished"
                assert answer.json()["run_id"] == run["run_id"]
        assert run["status"] == "finished"
        assert [s["status"] for s in run["steps"]].count("succeeded") == len(run["steps"])
