"""``GET /stats``: the figures ``corral stats --json`` prints, over real HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.agent import Agent
from tests.conftest import AFTERSALES
from tests.helpers import corral_cli
from tests.serving import EXCHANGE, client, load, serving

REPAIR = "订单 HD20240501 的打印机坏了，要报修"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def base(home: Path) -> Iterator[str]:
    agent: Agent = load(AFTERSALES, home)
    with serving(agent, home=home) as url:
        yield url


def test_stats_answers_what_the_cli_prints(base: str, home: Path) -> None:
    with client(base) as http:
        assert http.post("/agents/aftersales/runs", json={"message": REPAIR}).status_code == 200
        paused = http.post("/agents/aftersales/runs", json={"message": EXCHANGE}).json()
        assert paused["status"] == "awaiting_confirm"
        done = http.post(f"/runs/{paused['run_id']}/resume", json={"approve": True}).json()
        assert done["status"] == "finished"
        answer = http.get("/stats")
        assert answer.status_code == 200
        figures = answer.json()
        assert figures["runs"] == 2
        assert figures["completion_rate"] == 1.0
        assert figures["handoff_rate"] == 0.0
        assert set(figures["stage_p95_ms"]) >= {"execute"}
        recent = http.get("/stats", params={"since": "1h"}).json()
        assert recent["since"] is not None and without_since(recent) == without_since(figures)
        assert http.get("/stats", params={"agent": "nobody"}).json()["runs"] == 0
    printed = json.loads(corral_cli(home, "stats", "--json").stdout)
    assert without_since(printed) == without_since(figures)


def without_since(figures: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in figures.items() if k != "since"}


def test_stats_needs_the_token_and_a_valid_period(base: str) -> None:
    with client(base, headers={}) as http:
        assert http.get("/stats").status_code == 401
    with client(base) as http:
        bad = http.get("/stats", params={"since": "0h"})
        assert bad.status_code == 422
        assert http.get("/stats", params={"since": "yesterday"}).status_code == 422


@pytest.mark.parametrize(
    ("given", "read"), [("20260101", "2026-01-01T00:00:00Z"), ("2026-01-01T08:00+08:00", None)]
)
def test_an_iso_time_is_read_as_the_cli_reads_it(
    base: str, home: Path, given: str, read: str | None
) -> None:
    """Found by a hostile review: ``since=20260101`` was read as a Unix time (1970-08-23),
    where ``corral stats --since 20260101`` reads 2026-01-01; a number alone is no time."""
    printed = json.loads(corral_cli(home, "stats", "--since", given, "--json").stdout)["since"]
    assert read is None or printed == read
    with client(base) as http:
        assert http.get("/stats", params={"since": given}).json()["since"] == printed
        for number in ("0", "1700000000"):
            bad = http.get("/stats", params={"since": number})
            assert bad.status_code == 422 and "neither a duration" in bad.text
            assert http.get("/runs", params={"until": number}).status_code == 422
