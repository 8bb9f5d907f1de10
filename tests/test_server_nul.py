"""A NUL character in a filter or a session id is a 422 on every store, before any SQL.

Found by a walkthrough on PostgreSQL, whose text holds no NUL: ``GET /runs?session_id=%00``
was a plain-text 500, ``GET /stats?agent=%00`` and a start with that session id a 503
``STORE_UNAVAILABLE`` (the store was up), and a queued start answered 202 with a run id
that never existed; SQLite answered 200.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from corral import Agent, MemoryStore, Runtime
from corral.errors import InvalidInputError
from tests.conftest import AFTERSALES, ORDERS
from tests.extras import postgres_url
from tests.serving import EXCHANGE, client, load, serving


@pytest.fixture(params=["sqlite", "postgresql"])
def base(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    agent = load(AFTERSALES, tmp_path / "home")
    store = None if request.param == "sqlite" else postgres_url()
    with serving(agent, home=tmp_path / "home", store=store) as url:
        yield url


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/runs", {"session_id": "\x00"}),
        ("/runs", {"agent": "a\x00"}),
        ("/runs", {"intent": "\x00x"}),
        ("/runs", {"trace_id": "trace_\x00"}),
        ("/stats", {"agent": "\x00"}),
    ],
)
def test_a_nul_in_a_filter_is_a_422(base: str, path: str, query: dict[str, str]) -> None:
    with client(base) as http:
        answer = http.get(path, params=query)
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        assert error["code"] == "INVALID_ARGUMENT" and "NUL" in error["message"]
        assert http.get(path).status_code == 200  # the store is up


def test_a_nul_in_a_session_id_is_refused_before_a_run_exists(base: str) -> None:
    with client(base) as http:
        before = http.get("/runs", params={"limit": 500}).json()["runs"]
        body = {"message": EXCHANGE, "session_id": "a\x00b"}
        answer = http.post("/agents/aftersales/runs", json=body)
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["code"] == "INVALID_INPUT"
        assert http.get("/runs", params={"limit": 500}).json()["runs"] == before


async def test_the_runtime_refuses_it_too(aftersales: Agent) -> None:
    with pytest.raises(InvalidInputError, match="NUL"):
        await Runtime(aftersales, MemoryStore()).start(EXCHANGE, session_id="s\x00")


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_a_nul_a_user_typed_into_a_run_leaves_the_listing_working(
    store: str, tmp_path: Path
) -> None:
    """Found by a hostile review: an address answered with a NUL went into the run's
    summary (its prompt repeats it), and PostgreSQL could not read that summary as JSON
    for the intent label: every page of ``GET /runs`` holding the run was a plain-text
    500 (and so was any ``intent=`` filter) until the run was purged."""
    agent = load(ORDERS, tmp_path / "home")
    url = None if store == "sqlite" else postgres_url()
    with serving(agent, home=tmp_path / "home", store=url) as base, client(base) as http:
        asked = http.post("/agents/orders/runs", json={"message": "改地址 OD2611250001"}).json()
        answer = {"answer": "北京市海淀区\x00中关村大街 1 号"}
        paused = http.post(f"/runs/{asked['run_id']}/resume", json=answer).json()
        assert paused["status"] == "awaiting_confirm" and "\x00" in paused["reply"]
        for query in ({"agent": "orders"}, {"agent": "orders", "intent": "change_address"}):
            listed = http.get("/runs", params=query)
            assert listed.status_code == 200, listed.text
            runs = listed.json()["runs"]
            assert [run["intent"] for run in runs if run["run_id"] == paused["run_id"]] == [
                "change_address"
            ]
