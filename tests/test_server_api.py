"""The HTTP API over real HTTP on loopback: auth, body limits, bad bodies, runs, reads."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.agent import Agent
from corral.observe.trace_ids import otel_trace_id
from corral.store.sql import SqlStore
from tests.conftest import AFTERSALES
from tests.helpers import exchange_count
from tests.serving import AUTH, EXCHANGE, TOKEN, client, load, serving


@pytest.fixture
def agent(tmp_path: Path) -> Agent:
    return load(AFTERSALES, tmp_path / "home")


@pytest.fixture
def base(agent: Agent, tmp_path: Path) -> Iterator[str]:
    with serving(agent, home=tmp_path / "home", body_limit=4096) as url:
        yield url


def stored_runs(home: Path) -> int:
    return len(SqlStore.open(home / "corral.db", read_only=True).list_runs(1000))


def test_health_needs_no_token_and_the_rest_do(base: str) -> None:
    with client(base, headers={}) as http:
        health = http.get("/healthz")
        assert health.status_code == 200 and health.json()["status"] == "ok"
        for path in ("/agents", "/runs", "/handoffs", "/openapi.json", "/runs/run_x/events"):
            refused = http.get(path)
            assert refused.status_code == 401, path
            error = refused.json()["error"]
            assert error["code"] == "UNAUTHORIZED"
            # corral's own words, not taken for a credential ("a valid bearer [SECRET]")
            assert error["message"] == "a valid API token is required"
            assert error["hint"].startswith("send Authorization: Bearer TOKEN")
            assert refused.headers["www-authenticate"] == "Bearer"


def test_a_wrong_token_is_refused_and_the_right_one_accepted(base: str) -> None:
    wrong = [
        {"Authorization": "Bearer nope"},
        {"Authorization": TOKEN},  # no scheme
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": f"Basic {TOKEN}"},
    ]
    with client(base, headers={}) as http:
        for headers in wrong:
            assert http.get("/agents", headers=headers).status_code == 401, headers
        agents = http.get("/agents", headers=AUTH)
    assert agents.status_code == 200
    assert agents.json()["agents"][0]["name"] == "aftersales"
    assert "申请换新" in agents.json()["agents"][0]["intents"]


def test_the_scheme_is_read_without_regard_to_case_as_http_says(base: str) -> None:
    """RFC 9110 §11.1: ``bearer`` and ``BEARER`` are the same scheme; the token is exact."""
    with client(base, headers={}) as http:
        for scheme in ("bearer", "BEARER"):
            answer = http.get("/agents", headers={"Authorization": f"{scheme} {TOKEN}"})
            assert answer.status_code == 200, scheme
        assert (
            http.get("/agents", headers={"Authorization": f"bearer {TOKEN.upper()}"}).status_code
            == 401
        )
        assert http.get("/agents", headers={"Authorization": f"bearer  {TOKEN}"}).status_code == 401


def test_401_says_the_same_for_a_run_that_exists_and_one_that_does_not(
    base: str, tmp_path: Path
) -> None:
    with client(base) as http:
        run_id = http.post("/agents/aftersales/runs", json={"message": EXCHANGE}).json()["run_id"]
    with client(base, headers={"Authorization": "Bearer wrong"}) as http:
        for path in ("", "/events", "/stream"):
            real = http.get(f"/runs/{run_id}{path}")
            missing = http.get(f"/runs/run_00000000000000ff{path}")
            assert (real.status_code, real.content) == (missing.status_code, missing.content)
            assert real.status_code == 401
            assert dict(real.headers) | {"date": ""} == dict(missing.headers) | {"date": ""}
        refused = http.post(f"/runs/{run_id}/resume", json={"approve": True})
        assert refused.status_code == 401
    with client(base) as http:
        assert http.get(f"/runs/{run_id}").json()["status"] == "awaiting_confirm"


def test_an_oversized_body_is_413_with_or_without_content_length(base: str, tmp_path: Path) -> None:
    big = json.dumps({"message": "换新 " * 3000}).encode()
    assert len(big) > 4096

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(big), 1000):
            yield big[start : start + 1000]

    with client(base) as http:
        declared = http.post(
            "/agents/aftersales/runs",
            content=big,
            headers=AUTH | {"content-type": "application/json"},
        )
        chunked = http.post(
            "/agents/aftersales/runs",
            content=chunks(),
            headers=AUTH | {"content-type": "application/json"},
        )
    assert "content-length" not in chunked.request.headers
    assert chunked.request.headers["transfer-encoding"] == "chunked"
    for refused in (declared, chunked):
        assert refused.status_code == 413
        assert refused.json()["error"]["code"] == "INPUT_TOO_LARGE"
    assert stored_runs(tmp_path / "home") == 0


@pytest.mark.parametrize(
    "body",
    [
        b'{"message": ',  # malformed JSON
        b'{"message": 5}',  # wrong type
        b'{"message": "hi", "wait": "yes"}',  # no coercion of strings into booleans
        b'{"message": "hi", "sesion_id": "s1"}',  # an unknown (misspelt) field
        b"{}",  # no message
        b'["message"]',
    ],
)
def test_a_bad_body_is_422_with_a_corral_code_and_changes_nothing(
    base: str, tmp_path: Path, body: bytes
) -> None:
    with client(base) as http:
        answer = http.post(
            "/agents/aftersales/runs",
            content=body,
            headers=AUTH | {"content-type": "application/json"},
        )
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "INVALID_ARGUMENT"
    assert stored_runs(tmp_path / "home") == 0


def test_a_body_that_is_not_utf8_is_422_invalid_input(base: str, tmp_path: Path) -> None:
    with client(base) as http:
        answer = http.post(
            "/agents/aftersales/runs",
            content=b'{"message": "\xff\xfe"}',
            headers=AUTH | {"content-type": "application/json"},
        )
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "INVALID_INPUT"
    assert stored_runs(tmp_path / "home") == 0


def test_a_bad_resume_body_is_422_and_the_run_still_waits(base: str, agent: Agent) -> None:
    with client(base) as http:
        run_id = http.post("/agents/aftersales/runs", json={"message": EXCHANGE}).json()["run_id"]
        for body in ({"approve": "true"}, {"approve": True, "force": True}, {"answer": 3}):
            answer = http.post(f"/runs/{run_id}/resume", json=body)
            assert answer.status_code == 422, body
            assert answer.json()["error"]["code"] == "INVALID_ARGUMENT"
        assert http.get(f"/runs/{run_id}").json()["status"] == "awaiting_confirm"
    assert exchange_count(agent) == 0


def test_a_resume_without_a_body_is_a_resume_with_neither(base: str) -> None:
    """As ``{}``: pick the run up (here refused: it waits for an approval), not a 422."""
    with client(base) as http:
        run_id = http.post("/agents/aftersales/runs", json={"message": EXCHANGE}).json()["run_id"]
        bare = http.post(f"/runs/{run_id}/resume")
        empty = http.post(f"/runs/{run_id}/resume", json={})
    assert (bare.status_code, bare.json()) == (empty.status_code, empty.json())
    assert bare.json()["error"]["code"] == "RUN_NOT_RESUMABLE"
    # advice for whoever asked: the HTTP call, not only the CLI's flags
    assert 'POST /runs/RUN/resume {"approve": true}' in bare.json()["error"]["hint"]


def test_unknown_runs_and_agents_are_404_with_their_codes(base: str) -> None:
    with client(base) as http:
        for answer in (
            http.get("/runs/run_00000000000000ff"),
            http.get("/runs/run_00000000000000ff/events"),
            http.get("/runs/run_00000000000000ff/stream"),
            http.get("/runs/not-a-run-id"),
            http.post("/runs/run_00000000000000ff/resume", json={"approve": True}),
        ):
            assert answer.status_code == 404, answer.request.url
            assert answer.json()["error"]["code"] == "RUN_NOT_FOUND"
        unknown = http.post("/agents/nobody/runs", json={"message": "hi"})
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "AGENT_NOT_FOUND"


def test_start_approve_and_read_a_run(base: str, agent: Agent, tmp_path: Path) -> None:
    with client(base) as http:
        paused = http.post(
            "/agents/aftersales/runs", json={"message": EXCHANGE, "session_id": "s1"}
        )
        assert paused.status_code == 200
        summary = paused.json()
        assert summary["status"] == "awaiting_confirm"
        assert summary["intent"]["label"] == "申请换新"
        step = summary["pending"]["step_id"]
        run_id = summary["run_id"]
        assert exchange_count(agent) == 0

        done = http.post(f"/runs/{run_id}/resume", json={"approve": True, "step_id": step})
        assert done.status_code == 200
        assert done.json()["status"] == "finished"
        assert exchange_count(agent) == 1

        again = http.post(f"/runs/{run_id}/resume", json={"approve": True, "step_id": step})
        assert again.status_code == 200 and again.json()["status"] == "finished"
        conflict = http.post(f"/runs/{run_id}/resume", json={"approve": False, "step_id": step})
        assert conflict.status_code == 409
        assert conflict.json()["error"]["code"] == "RUN_NOT_RESUMABLE"
        assert exchange_count(agent) == 1

        detail = http.get(f"/runs/{run_id}").json()
        assert detail["status"] == "finished" and detail["agent"] == "aftersales"
        assert detail["reply"] == done.json()["reply"]
        events = http.get(f"/runs/{run_id}/events").json()["events"]
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert events[0]["type"] == "run_started"
        later = http.get(f"/runs/{run_id}/events", params={"after_seq": 5}).json()["events"]
        assert later == events[5:]

        listed = http.get("/runs", params={"status": "finished", "since": "1h"}).json()
        assert [r["run_id"] for r in listed["runs"]] == [run_id]
        assert listed["runs"][0]["intent"] == "申请换新"
        assert listed["runs"][0]["session_id"] == "s1"
        assert http.get("/runs", params={"intent": "投诉"}).json()["runs"] == []
        assert http.get("/runs", params={"agent": "orders"}).json()["runs"] == []
        # a conversation's runs, and the run of a trace (as `corral traces` finds them)
        by_session = http.get("/runs", params={"session_id": "s1"}).json()["runs"]
        assert [r["run_id"] for r in by_session] == [run_id]
        assert http.get("/runs", params={"session_id": "s2"}).json()["runs"] == []
        trace = detail["trace_id"]
        by_trace = http.get("/runs", params={"trace_id": trace}).json()["runs"]
        assert [r["run_id"] for r in by_trace] == [run_id]
        assert http.get("/runs", params={"trace_id": "trace_none"}).json()["runs"] == []
        # the OpenTelemetry form of the id, as `corral traces --trace` takes it
        by_otel = http.get("/runs", params={"trace_id": otel_trace_id(trace)}).json()["runs"]
        assert [r["run_id"] for r in by_otel] == [run_id]
        unknown = http.get("/runs", params={"status": "nonsense"})
        assert unknown.status_code == 422 and "handed_off" in unknown.json()["error"]["message"]
        assert http.get("/runs", params={"status": ""}).json()["runs"]  # no filter, as before
    # the CLI reads the same store
    assert SqlStore.open(tmp_path / "home" / "corral.db").get_run(run_id) is not None


def test_runs_are_listed_newest_first_in_pages(base: str) -> None:
    with client(base) as http:
        made = [
            http.post("/agents/aftersales/runs", json={"message": f"打印机保修多久 {i}"}).json()
            for i in range(3)
        ]
        first = http.get("/runs", params={"limit": 2}).json()
        second = http.get("/runs", params={"limit": 2, "offset": first["next_offset"]}).json()
        bad_time = http.get("/runs", params={"since": "yesterday"})
    listed = [r["run_id"] for r in first["runs"] + second["runs"]]
    assert listed == [m["run_id"] for m in reversed(made)]
    assert first["next_offset"] == 2 and second["next_offset"] is None
    assert bad_time.status_code == 422
    assert bad_time.json()["error"]["code"] == "INVALID_ARGUMENT"
    # found by a new user's walkthrough: a problem per member of pydantic's union
    # ("query.since.datetime: ...; query.since.constrained-str: String should match ...")
    message = bad_time.json()["error"]["message"]
    assert "query.since: Value error, 'yesterday' is neither a duration back from now " in message
    assert "constrained-str" not in message and "datetime" not in message


def test_an_empty_filter_is_no_filter_on_every_listing(base: str) -> None:
    """Found by a walkthrough: a form's empty field meant no filter for ``status``, an
    empty filter (no runs) for ``agent``, ``intent``, ``session_id`` and ``trace_id``, and a
    422 for ``since`` and ``until`` (``/stats?since=`` too)."""
    with client(base) as http:
        http.post("/agents/aftersales/runs", json={"message": "打印机保修多久"})
        everything = http.get("/runs", params={"limit": 500}).json()["runs"]
        for name in ("agent", "status", "intent", "session_id", "trace_id", "since", "until"):
            answer = http.get("/runs", params={name: "", "limit": 500})
            assert answer.status_code == 200, (name, answer.text)
            assert answer.json()["runs"] == everything, name
        stats = http.get("/stats", params={"since": "", "agent": ""})
        assert stats.status_code == 200 and stats.json() == http.get("/stats").json()
        too_long = http.get("/runs", params={"session_id": "u" * 129})  # no store holds one
        assert too_long.status_code == 422, too_long.text


def test_answers_are_redacted(base: str) -> None:
    secret_phone = "13812345678"
    secret_mail = "li.lei@example.com"
    message = f"我的打印机坏了，订单号 HD20240501，能换新吗？电话 {secret_phone} 邮箱 {secret_mail}"
    with client(base) as http:
        run_id = http.post("/agents/aftersales/runs", json={"message": message}).json()["run_id"]
        answers = [
            http.get(f"/runs/{run_id}").text,
            http.get(f"/runs/{run_id}/events").text,
            http.get(f"/runs/{run_id}/stream").text,
        ]
    for text in answers:
        assert secret_phone not in text and secret_mail not in text
    assert "[PHONE]" in answers[1] and "[EMAIL]" in answers[2]  # the user's message, hidden


def test_the_handoff_queue_lists_handed_off_runs_with_their_packets(base: str) -> None:
    with client(base) as http:
        handed = http.post(
            "/agents/aftersales/runs", json={"message": "你们这个打印机真是气死我了！投诉"}
        )
        queue = http.get("/handoffs").json()["handoffs"]
    assert handed.json()["status"] == "handed_off"
    assert [item["run_id"] for item in queue] == [handed.json()["run_id"]]
    assert queue[0]["packet"]["reason_code"] == queue[0]["reason_code"]
    assert queue[0]["agent"] == "aftersales"


def test_an_unknown_route_or_method_is_answered_with_a_hint_to_the_routes(base: str) -> None:
    with client(base) as http:
        missing = http.get("/nothing")
        assert missing.status_code == 404
        assert missing.json()["error"] == {
            "code": "INVALID_ARGUMENT",
            "message": "no such route",
            "hint": "GET /openapi.json lists the routes and their methods",
        }
        asset = http.get("/ui/js/nope.js")  # the dashboard's file: no API advice
        assert asset.status_code == 404 and asset.json()["error"]["hint"] is None
        wrong = http.delete("/runs/run_x")
        assert wrong.status_code == 405 and wrong.headers["allow"] == "GET, HEAD"
        assert wrong.json()["error"]["message"] == "the route takes GET, HEAD"


def test_a_blank_message_or_answer_is_422_and_records_nothing(base: str, tmp_path: Path) -> None:
    """The defect: ``{"message": ""}`` started a run (200) that could only ask what was
    meant, and ``{"answer": "   "}`` was taken as an answer: it used up one of the run's
    questions, so the next real answer was handed to a person."""
    with client(base) as http:
        for blank in ("", "   ", "\n\t"):
            refused = http.post("/agents/aftersales/runs", json={"message": blank})
            assert refused.status_code == 422, blank
            assert refused.json()["error"]["code"] == "INVALID_INPUT"
        assert stored_runs(tmp_path / "home") == 0
        asked = http.post("/agents/aftersales/runs", json={"message": "我想申请换新"}).json()
        assert asked["status"] == "awaiting_user"
        before = http.get(f"/runs/{asked['run_id']}/events").json()["events"]
        for blank in ("", "  "):
            refused = http.post(f"/runs/{asked['run_id']}/resume", json={"answer": blank})
            assert refused.status_code == 422 and refused.json()["error"]["code"] == "INVALID_INPUT"
            assert "blank" in refused.json()["error"]["message"] or blank == ""
        assert http.get(f"/runs/{asked['run_id']}/events").json()["events"] == before
        answered = http.post(
            f"/runs/{asked['run_id']}/resume", json={"answer": "订单号 HD20240501，打印机坏了"}
        )
    assert answered.status_code == 200 and answered.json()["status"] != "handed_off"


def test_an_approval_with_an_answer_is_a_422_not_a_409(base: str, agent: Agent) -> None:
    """The defect: both at once said 409 "waits for a confirmation; approve it", to a
    client that had sent an approval."""
    with client(base) as http:
        run_id = http.post("/agents/aftersales/runs", json={"message": EXCHANGE}).json()["run_id"]
        both = http.post(f"/runs/{run_id}/resume", json={"approve": True, "answer": "yes"})
        assert both.status_code == 422
        assert both.json()["error"]["code"] == "INVALID_INPUT"  # as from the CLI and Python
        assert both.json()["error"]["message"] == "give an approval or an answer, not both"
        # a step named with an answer is the same kind of mistake (it was 409)
        stepped = http.post(f"/runs/{run_id}/resume", json={"answer": "yes", "step_id": "s4"})
        assert stepped.status_code == 422
        assert stepped.json()["error"]["code"] == "INVALID_INPUT"
        assert "a step is named only with an approval" in stepped.json()["error"]["message"]
        assert http.get(f"/runs/{run_id}").json()["status"] == "awaiting_confirm"
    assert exchange_count(agent) == 0


def test_a_json_body_sent_without_its_content_type_is_told_so(base: str) -> None:
    """Found by a walkthrough: ``curl -d '{"message": "hello"}'`` (form-encoded by
    default) got "Input should be a valid dictionary", never naming the content type."""
    with client(base) as http:
        for headers in (
            {"Content-Type": "text/plain"},
            {"Content-Type": "application/x-www-form-urlencoded"},
        ):
            answer = http.post(
                "/agents/aftersales/runs", content=b'{"message": "hello"}', headers=headers
            )
            assert answer.status_code == 422
            error = answer.json()["error"]
            assert "not as application/json" in error["message"]
            assert "Content-Type: application/json" in error["hint"]
        wrong_field = http.post("/agents/aftersales/runs", json={"mesage": "hello"})
        assert "application/json" not in wrong_field.json()["error"]["message"]  # sent as JSON
        # review: a +json type is JSON to FastAPI, and no body at all was sent as nothing
        merge_patch = {"Content-Type": "application/merge-patch+json"}
        wrong = http.post("/agents/aftersales/runs", content=b'{"mesage": 1}', headers=merge_patch)
        assert "not as application/json" not in wrong.json()["error"]["message"]
        empty = http.post("/agents/aftersales/runs")
        assert empty.status_code == 422 and "not as application/json" not in empty.text


def test_every_refused_input_s_hint_says_where_to_look_over_http(base: str) -> None:
    """Found by a walkthrough: some refusals had a null hint ("has already ended", "was
    approved") or named only the CLI ("see `corral show RUN`")."""
    with client(base) as http:
        paused = http.post("/agents/aftersales/runs", json={"message": EXCHANGE}).json()
        run_id, step = paused["run_id"], paused["pending"]["step_id"]
        refused = [
            http.post(f"/runs/{run_id}/resume", json={"approve": True, "step_id": "s9"}),
            http.post(f"/runs/{run_id}/resume", json={"approve": True, "answer": "x"}),
        ]
        http.post(f"/runs/{run_id}/resume", json={"approve": True, "step_id": step})
        refused += [
            http.post(f"/runs/{run_id}/resume", json={"approve": False, "step_id": step}),
            http.post(f"/runs/{run_id}/resume", json={"answer": "hi"}),
        ]
    for answer in refused:
        assert answer.status_code in (409, 422), answer.text
        hint = answer.json()["error"]["hint"]
        assert hint, answer.text
        assert "GET /runs/RUN" in hint or "POST /agents/AGENT/runs" in hint, hint
