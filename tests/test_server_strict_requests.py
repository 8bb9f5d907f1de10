"""Requests the HTTP API must refuse rather than guess at (real HTTP on loopback).

Reproduced on main by a hostile review of the service:

- ``{"approve": false, "approve": true}`` sent to ``/runs/{id}/resume`` approved the
  exchange (JSON's last key wins), where a proxy or an audit log that reads the first key
  records a rejection: one body, two readings, and the write ran.
- ``/runs/`` (and every route with a trailing slash) was answered ``307`` with an empty
  body and a ``Location`` built from the client's ``Host`` header, always ``http://``:
  not the documented ``404 INVALID_ARGUMENT``, a scheme downgrade behind a TLS proxy, and
  with a spoofed ``Host`` a redirect to another host.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from corral.agent import Agent
from tests.conftest import AFTERSALES
from tests.helpers import exchange_count
from tests.serving import AUTH, EXCHANGE, client, load, serving


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[tuple[Agent, str]]:
    """The aftersales demo (its exchange is the write these requests must not make), served.

    The body limit leaves room for the deep JSON below.
    """
    agent = load(AFTERSALES, tmp_path / "home")
    with serving(agent, home=tmp_path / "home", body_limit=100_000) as url:
        yield agent, url


def post_text(http: httpx.Client, path: str, body: bytes) -> httpx.Response:
    """POST ``body`` as JSON text, as it is (``json=`` could never give a key twice)."""
    return http.post(path, content=body, headers=AUTH | {"content-type": "application/json"})


def test_a_body_that_repeats_a_key_is_refused_and_the_write_waits(demo: tuple[Agent, str]) -> None:
    agent, base = demo
    with client(base) as http:
        run_id = http.post("/agents/aftersales/runs", json={"message": EXCHANGE}).json()["run_id"]
        for body in (
            b'{"approve": false, "approve": true}',
            b'{"approve": true, "step_id": "s3", "approve": false}',
        ):
            answer = post_text(http, f"/runs/{run_id}/resume", body)
            assert answer.status_code == 422, body
            error = answer.json()["error"]
            assert error["code"] == "INVALID_ARGUMENT"
            assert "approve" in error["message"], error
        assert http.get(f"/runs/{run_id}").json()["status"] == "awaiting_confirm"
    assert exchange_count(agent) == 0


def test_a_repeated_key_inside_a_nested_object_is_refused_too(demo: tuple[Agent, str]) -> None:
    _, base = demo
    with client(base) as http:
        answer = post_text(
            http, "/agents/aftersales/runs", b'{"message": "hi", "x": {"a": 1, "a": 2}}'
        )
        listed = http.get("/runs").json()
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "INVALID_ARGUMENT"
    assert error["message"] == "the body gives the key 'a' more than once", error
    assert listed["runs"] == []  # nothing was started


def test_a_body_without_repeats_is_taken_as_before(demo: tuple[Agent, str]) -> None:
    """A body sent as raw JSON text, each key once: the exchange is approved once."""
    agent, base = demo
    with client(base) as http:
        run_id = http.post("/agents/aftersales/runs", json={"message": EXCHANGE}).json()["run_id"]
        approved = post_text(http, f"/runs/{run_id}/resume", b'{"approve": true}')
    assert approved.status_code == 200, approved.text
    assert approved.json()["status"] == "finished"
    assert exchange_count(agent) == 1


@pytest.mark.parametrize(
    "path", ["/runs/", "/agents/", "/handoffs/", "/stats/", "/runs/run_00000000000000ff/"]
)
def test_a_trailing_slash_is_no_route_and_never_a_redirect(
    demo: tuple[Agent, str], path: str
) -> None:
    _, base = demo
    with client(base, follow_redirects=False) as http:
        answer = http.get(path, headers={"Host": "evil.example"})
    assert answer.status_code == 404, (answer.status_code, answer.headers)
    assert "location" not in answer.headers
    assert answer.json()["error"]["code"] == "INVALID_ARGUMENT"
    assert answer.json()["error"]["message"] == "no such route"


def test_a_resume_with_a_trailing_slash_changes_nothing(demo: tuple[Agent, str]) -> None:
    agent, base = demo
    with client(base, follow_redirects=False) as http:
        run_id = http.post("/agents/aftersales/runs", json={"message": EXCHANGE}).json()["run_id"]
        answer = http.post(f"/runs/{run_id}/resume/", json={"approve": True})
        assert answer.status_code == 404
        assert http.get(f"/runs/{run_id}").json()["status"] == "awaiting_confirm"
    assert exchange_count(agent) == 0


def test_the_dashboard_is_still_served_and_its_own_redirect_is_relative(
    demo: tuple[Agent, str],
) -> None:
    """``/ui`` sends the browser on to ``ui/``, relative: no ``Host`` goes into it."""
    _, base = demo
    with client(base, follow_redirects=False) as http:
        bare = http.get("/ui", headers={"Host": "evil.example"})
        index = http.get("/ui/")
    assert (bare.status_code, bare.headers["location"]) == (307, "ui/")
    assert index.status_code == 200 and "<html" in index.text.lower()


@pytest.mark.parametrize(
    "body",
    [b"[" * 30000 + b"]" * 30000, b'{"message": "hi", "x": 1' + b"0" * 5000 + b"}"],
    ids=["nested too deep", "a number too long"],
)
def test_json_too_deep_or_too_long_to_read_is_an_invalid_argument(
    demo: tuple[Agent, str], body: bytes
) -> None:
    """JSON, not text that fails to decode: ``INVALID_ARGUMENT`` (was ``INVALID_INPUT``)."""
    _, base = demo
    with client(base) as http:
        answer = post_text(http, "/agents/aftersales/runs", body)
        listed = http.get("/runs").json()
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "INVALID_ARGUMENT", answer.text
    assert "cannot read" in answer.json()["error"]["message"]
    assert listed["runs"] == []


def test_text_that_is_not_utf8_is_still_invalid_input(demo: tuple[Agent, str]) -> None:
    _, base = demo
    with client(base) as http:
        answer = post_text(http, "/agents/aftersales/runs", b'{"message": "\xff\xfe"}')
    assert (answer.status_code, answer.json()["error"]["code"]) == (422, "INVALID_INPUT")


@pytest.mark.parametrize("step_id", ["", "x" * 10_000])
def test_a_step_id_no_step_could_have_is_refused_not_echoed(
    demo: tuple[Agent, str], step_id: str
) -> None:
    """Found by the review: a 10 000-character ``step_id`` came back whole in a 409, and an
    empty one was a 409 too: 422 ``INVALID_INPUT``, as a blank or long session id. Bounded,
    not patterned: a long plan waits on ``#plan`` (``tests/test_signal_review.py``)."""
    agent, base = demo
    with client(base) as http:
        run_id = http.post("/agents/aftersales/runs", json={"message": EXCHANGE}).json()["run_id"]
        answer = http.post(f"/runs/{run_id}/resume", json={"approve": True, "step_id": step_id})
        assert answer.status_code == 422, answer.text[:300]
        assert answer.json()["error"]["code"] == "INVALID_INPUT"  # as a session id's
        assert len(answer.text) < 2_000
        assert http.get(f"/runs/{run_id}").json()["status"] == "awaiting_confirm"
    assert exchange_count(agent) == 0
