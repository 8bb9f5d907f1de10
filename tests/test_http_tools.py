"""HTTP tools against a real loopback service (tests/http_service.py, served by uvicorn).

An HTTP tool is an ordinary ``ToolSpec``: the same timeouts, retries, envelopes, plan
checks and idempotency keys as a function tool. What is HTTP's own is pinned here: which
statuses are retried (and for how long ``Retry-After`` is honoured), which are not, what
a broken or endless body becomes, that only declared fields survive, that the auth token
never shows, and that a write carries its idempotency key on every try.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from tests.extras import REQUIRE_ALL, import_extra

import_extra("fastapi", REQUIRE_ALL)
import_extra("httpx", REQUIRE_ALL)

from corral import (  # noqa: E402
    Agent,
    FixedEffects,
    MemoryStore,
    Plan,
    Runtime,
    Step,
    parse_config,
    tool,
)
from corral.errors import ConfigInvalidError  # noqa: E402
from corral.events import ToolAttempt, tool_attempts  # noqa: E402
from corral.tools.http import retry_after_s  # noqa: E402
from tests.helpers import SECRETS, corral_cli  # noqa: E402
from tests.http_service import HUGE_CHUNKS, Ledger, make_app  # noqa: E402
from tests.one_intent import one_intent  # noqa: E402
from tests.serving import serve_app  # noqa: E402

TOKEN = "t1-http-token-Zq8"
"""A token corral's own detectors do not recognise: only the HTTP tool can hide it."""
DAY = "2026-12-01"
FORECAST_INPUT = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "date": {"type": "string", "format": "date"}},
    "required": ["city", "date"],
}
FORECAST_OUTPUT = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "date": {"type": "string", "format": "date"},
        "rain_probability": {"type": "number"},
        "high_c": {"type": "integer"},
        "sky": {"type": "string", "enum": ["sun", "rain", "cloud"]},
    },
    "required": ["city", "date", "rain_probability", "high_c", "sky"],
}
POST_INPUT = {
    "type": "object",
    "properties": {"channel": {"type": "string"}, "text": {"type": "string"}},
    "required": ["channel", "text"],
}
POST_OUTPUT = {
    "type": "object",
    "properties": {
        "post_id": {"type": "integer"},
        "channel": {"type": "string"},
        "idempotency_key": {"type": ["string", "null"]},
    },
    "required": ["post_id", "channel", "idempotency_key"],
}


@pytest.fixture(scope="module")
def service() -> Iterator[tuple[str, Ledger]]:
    app, ledger = make_app()
    with serve_app(app) as base:
        yield base, ledger


@pytest.fixture
def ledger(service: tuple[str, Ledger]) -> Ledger:
    """The service's ledger, emptied for this test."""
    service[1].reset()
    return service[1]


def weather_tool(path: str = "/weather/{city}", **policy: Any) -> dict[str, Any]:
    return {
        "name": "get_forecast",
        "description": "Forecast for a city and a date.",
        "url": "${SERVICE_URL}" + path,
        "input": FORECAST_INPUT,
        "output": FORECAST_OUTPUT,
        "policy": {"timeout_s": 5, "max_retries": 2, "backoff_s": [0.1, 0.2], **policy},
    }


SHANGHAI = {"city": "shanghai", "date": DAY, "rain_probability": 0.8, "high_c": 12, "sky": "rain"}
"""What the weather tool keeps of the service's forecast for Shanghai."""


def agent_with(
    base: str, *tools: dict[str, Any], steps: list[dict[str, Any]] | None = None
) -> Agent:
    args = {"city": "shanghai", "date": DAY}
    steps = steps or [{"id": "s1", "tool": tools[0]["name"], "args": args}]
    config = parse_config(one_intent("go", steps=steps, http_tools=list(tools)))
    return Agent.build(config, [], deps={"SERVICE_URL": base})


async def run_once(
    agent: Agent, log_dir: Path | None = None
) -> tuple[list[ToolAttempt], FixedEffects, Runtime, str]:
    effects = FixedEffects()
    async with Runtime(agent, MemoryStore(), effects=effects, log_dir=log_dir) as runtime:
        summary = await runtime.start("go")
        events = await runtime.events(summary.run_id)
    attempts = list(tool_attempts(e.payload for e in events))
    return attempts, effects, runtime, summary.run_id


async def test_a_call_keeps_only_the_declared_fields(
    service: tuple[str, Ledger], ledger: Ledger
) -> None:
    agent = agent_with(service[0], weather_tool())
    attempts, _, runtime, run_id = await run_once(agent)
    assert [a.status for a in attempts] == ["success"]
    assert attempts[0].data == SHANGHAI
    assert "raw-only-field" not in json.dumps(
        [e.payload for e in await runtime.events(run_id)], default=str
    )
    assert ledger.calls["/weather/shanghai"] == 1
    assert "idempotency-key" not in ledger.headers[-1]  # a read has none


async def test_a_timeout_is_retried_then_ends_as_tool_timeout(
    service: tuple[str, Ledger], ledger: Ledger
) -> None:
    agent = agent_with(service[0], weather_tool("/slow/{city}", timeout_s=0.3, max_retries=1))
    attempts, effects, _, _ = await run_once(agent)
    assert [(a.error_code, a.retryable) for a in attempts] == [("TOOL_TIMEOUT", True)] * 2
    assert effects.sleeps == [0.1]
    assert ledger.calls["/slow/shanghai"] == 2


async def test_a_5xx_is_retried_and_the_next_try_succeeds(
    service: tuple[str, Ledger], ledger: Ledger
) -> None:
    agent = agent_with(service[0], weather_tool("/flaky/{city}?fail=1"))
    attempts, effects, _, _ = await run_once(agent)
    assert [(a.status, a.error_code) for a in attempts] == [
        ("error", "TOOL_TRANSIENT"),
        ("success", None),
    ]
    assert "HTTP 503" in (attempts[0].error_message or "")
    assert "overloaded" not in (attempts[0].error_message or "")  # the body is never shown
    assert effects.sleeps == [0.1]


async def test_a_429_waits_as_long_as_retry_after_says(
    service: tuple[str, Ledger], ledger: Ledger
) -> None:
    agent = agent_with(service[0], weather_tool("/limited/{city}?wait=2"))
    attempts, effects, _, _ = await run_once(agent)
    assert [a.status for a in attempts] == ["error", "success"]
    assert attempts[0].backoff_s == 2.0
    assert effects.sleeps == [2.0]  # the service's 2 s, not the policy's 0.1 s


async def test_a_retry_after_beyond_the_policy_is_not_waited_for(
    service: tuple[str, Ledger], ledger: Ledger
) -> None:
    far = "Wed,%2021%20Oct%202099%2007:28:00%20GMT"
    agent = agent_with(service[0], weather_tool("/limited/{city}?wait=" + far))
    attempts, effects, _, _ = await run_once(agent)
    assert len(attempts) == 1 and effects.sleeps == []
    assert attempts[0].retryable is True  # another tool, or a later run, may still try
    assert "asks to wait" in (attempts[0].error_message or "")
    assert ledger.calls["/limited/shanghai"] == 1


def test_retry_after_reads_seconds_and_http_dates() -> None:
    from datetime import UTC, datetime

    now = datetime(2026, 12, 1, 8, 0, 0, tzinfo=UTC)
    assert retry_after_s("3", now) == 3.0
    assert retry_after_s("Tue, 01 Dec 2026 08:00:30 GMT", now) == 30.0
    assert retry_after_s("Tue, 01 Dec 2026 07:00:00 GMT", now) == 0.0  # already past
    assert retry_after_s("soon", now) is None
    assert retry_after_s(None, now) is None


async def test_a_4xx_is_not_retried(service: tuple[str, Ledger], ledger: Ledger) -> None:
    agent = agent_with(service[0], weather_tool("/refused/{city}"))
    attempts, effects, _, _ = await run_once(agent)
    assert [(a.error_code, a.retryable) for a in attempts] == [("TOOL_FAILED", False)]
    assert "HTTP 400" in (attempts[0].error_message or "")
    assert "bad city" not in (attempts[0].error_message or "")
    assert effects.sleeps == [] and ledger.calls["/refused/shanghai"] == 1


async def test_a_malformed_json_body_becomes_an_envelope(
    service: tuple[str, Ledger], ledger: Ledger
) -> None:
    agent = agent_with(service[0], weather_tool("/malformed/{city}"))
    attempts, _, runtime, run_id = await run_once(agent)
    assert [(a.error_code, a.retryable) for a in attempts] == [("TOOL_OUTPUT_INVALID", False)]
    assert "not valid JSON" in (attempts[0].error_message or "")
    stored = json.dumps([e.payload for e in await runtime.events(run_id)], default=str)
    assert '"rain' not in stored.replace('"rain_probability', "")


async def test_an_oversized_body_is_cut_off_while_it_streams(
    service: tuple[str, Ledger], ledger: Ledger
) -> None:
    tool = {**weather_tool("/huge/{city}"), "max_response_bytes": 100_000}
    attempts, _, _, _ = await run_once(agent_with(service[0], tool))
    assert [(a.error_code, a.retryable) for a in attempts] == [("TOOL_OUTPUT_INVALID", False)]
    assert "larger than 100000 bytes" in (attempts[0].error_message or "")
    assert ledger.huge_chunks_sent < HUGE_CHUNKS  # the rest was never read


async def test_the_auth_token_is_sent_but_never_shown(
    service: tuple[str, Ledger], ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("T1_TEST_TOKEN", TOKEN)
    auth = {"header": "Authorization", "env": "T1_TEST_TOKEN", "scheme": "Bearer"}
    echo = {**weather_tool("/echo/{city}"), "auth": auth}
    refused = {**echo, "name": "get_refused", "policy": {"max_retries": 0}}
    steps = [
        {"id": "s1", "tool": "get_forecast", "args": {"city": "shanghai", "date": DAY}},
        {"id": "s2", "tool": "get_refused", "args": {"city": "error", "date": DAY}},
    ]
    agent = agent_with(service[0], echo, refused, steps=steps)
    attempts, _, runtime, run_id = await run_once(agent, tmp_path / "logs")
    assert {h["authorization"] for h in ledger.headers} == {f"Bearer {TOKEN}"}
    by_tool = {a.tool: a for a in attempts}
    assert by_tool["get_forecast"].data is not None
    assert by_tool["get_forecast"].data["city"] == "shanghai [REDACTED]"  # the echo, hidden
    assert "HTTP 403" in (by_tool["get_refused"].error_message or "")
    events = json.dumps([e.payload for e in await runtime.events(run_id)], default=str)
    logs = "".join(p.read_text() for p in (tmp_path / "logs").rglob("*") if p.is_file())
    assert logs  # the run was logged
    for text in (events, logs):
        assert TOKEN not in text


async def test_a_missing_auth_variable_is_a_config_error_and_nothing_is_sent(
    service: tuple[str, Ledger], ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("T1_TEST_TOKEN", raising=False)
    tool = {**weather_tool(), "auth": {"env": "T1_TEST_TOKEN"}}
    attempts, _, _, _ = await run_once(agent_with(service[0], tool))
    assert [a.error_code for a in attempts] == ["CONFIG_INVALID"]
    assert sum(ledger.calls.values()) == 0


async def test_a_write_that_sent_nothing_fails_plainly_not_with_an_unknown_outcome(
    service: tuple[str, Ledger], ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("T1_TEST_TOKEN", raising=False)
    tool = {**post_tool(), "auth": {"env": "T1_TEST_TOKEN"}}
    steps = [{"id": "s1", "tool": "post_to_group", "args": {"channel": "ops", "text": "hi"}}]
    effects = FixedEffects()
    agent = agent_with(service[0], tool, steps=steps)
    async with Runtime(agent, MemoryStore(), effects=effects) as runtime:
        summary = await runtime.start("go")
    assert [s.error_code for s in summary.steps] == ["CONFIG_INVALID"]  # not OUTCOME_UNKNOWN
    assert ledger.keys == []


def post_tool(path: str = "/posts", **policy: Any) -> dict[str, Any]:
    return {
        "name": "post_to_group",
        "method": "POST",
        "url": "${SERVICE_URL}" + path,
        "input": POST_INPUT,
        "output": POST_OUTPUT,
        "policy": {"kind": "write", "backoff_s": [0.1], **policy},
    }


async def test_a_write_sends_its_idempotency_key_and_the_same_on_a_retry(
    service: tuple[str, Ledger], ledger: Ledger
) -> None:
    steps = [{"id": "s1", "tool": "post_to_group", "args": {"channel": "ops", "text": "hi"}}]
    agent = agent_with(service[0], post_tool("/posts?fail=1"), steps=steps)
    attempts, _, _, _ = await run_once(agent)
    assert [a.status for a in attempts] == ["error", "success"]  # 429: not applied, so retried
    first, second = ledger.keys
    assert first and first == second
    assert len(ledger.posts) == 1
    assert attempts[1].data == {"post_id": 1, "channel": "ops", "idempotency_key": first}


def test_a_plan_passing_an_http_field_of_the_wrong_type_is_refused_at_build(
    service: tuple[str, Ledger],
) -> None:
    steps = [
        {"id": "s1", "tool": "get_forecast", "args": {"city": "shanghai", "date": DAY}},
        {
            "id": "s2",
            "tool": "post_to_group",
            "args": {"channel": "ops", "text": "$s1.result.rain_probability"},
            "depends_on": ["s1"],
        },
    ]
    with pytest.raises(
        ConfigInvalidError, match=r"rain_probability is float, but post_to_group.text expects str"
    ):
        agent_with(service[0], weather_tool(), post_tool(), steps=steps)
    steps[1]["args"] = {"channel": "ops", "text": "$s1.result.sky"}  # a str enum: fine
    agent_with(service[0], weather_tool(), post_tool(), steps=steps)


def test_equivalent_http_tools_with_one_output_schema_build() -> None:
    fast = weather_tool(equivalent_group="forecast", latency_ms=50, cost=5)
    cheap = {**weather_tool(equivalent_group="forecast", latency_ms=900, cost=1)}
    cheap["name"] = "get_forecast_cheap"
    agent = agent_with("http://127.0.0.1:9", fast, cheap)
    equivalents = {s.name for s in agent.tools.equivalents("get_forecast")}
    assert equivalents == {"get_forecast", "get_forecast_cheap"}


async def test_an_unknown_placeholder_is_an_envelope_not_a_request(
    service: tuple[str, Ledger], ledger: Ledger
) -> None:
    tool = {**weather_tool(), "url": "${NO_SUCH_T1_URL}/weather/{city}"}
    attempts, _, _, _ = await run_once(agent_with(service[0], tool))
    assert [a.error_code for a in attempts] == ["CONFIG_INVALID"]
    assert "NO_SUCH_T1_URL" in (attempts[0].error_message or "")
    assert sum(ledger.calls.values()) == 0


def test_a_path_parameter_must_be_a_required_input() -> None:
    tool = {
        **weather_tool(),
        "input": {"type": "object", "properties": {"date": {"type": "string"}}},
    }
    with pytest.raises(ConfigInvalidError, match=r"\{city\} in the url must be a required input"):
        parse_config(one_intent("go", steps=[], http_tools=[tool]))


def test_corral_run_calls_http_tools_end_to_end(
    service: tuple[str, Ledger], ledger: Ledger, tmp_path: Path
) -> None:
    folder = tmp_path / "agent"
    folder.mkdir()
    auth = {"header": "Authorization", "env": "T1_TEST_TOKEN", "scheme": "Bearer"}
    steps = [
        {"id": "s1", "tool": "get_forecast", "args": {"city": "beijing", "date": DAY}},
        {
            "id": "s2",
            "tool": "post_to_group",
            "args": {"channel": "ops", "text": "$s1.result.sky"},
            "depends_on": ["s1"],
        },
    ]
    tools = [{**weather_tool(), "auth": auth}, post_tool()]
    config = one_intent("go", steps=steps, http_tools=tools)
    (folder / "agent.yaml").write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    home = tmp_path / "home"
    env = {"SERVICE_URL": service[0], "T1_TEST_TOKEN": SECRETS["api_key"] + TOKEN}
    done = corral_cli(home, "run", str(folder), "go", "--json", env=env)
    summary = json.loads(done.stdout)
    assert summary["status"] == "finished", summary
    assert [(s["tool"], s["status"]) for s in summary["steps"]] == [
        ("get_forecast", "succeeded"),
        ("post_to_group", "succeeded"),
    ]
    assert ledger.calls["/weather/beijing"] == 1 and len(ledger.posts) == 1
    written = "".join(
        p.read_text(errors="replace") for p in (home / "logs").rglob("*") if p.is_file()
    )
    assert written and TOKEN not in written and TOKEN not in done.stdout + done.stderr


async def test_business_rules_and_the_loop_guard_hold_for_http_tools(
    service: tuple[str, Ledger], ledger: Ledger
) -> None:
    forecast = {"id": "s1", "tool": "get_forecast", "args": {"city": "shanghai", "date": DAY}}
    published = {**forecast, "facts": {"rain_probability": "result.rain_probability"}}
    post = {
        "id": "s2",
        "tool": "post_to_group",
        "args": {"channel": "ops", "text": "$s1.result.sky"},
        "depends_on": ["s1"],
    }
    rule = {
        "name": "no_posts_in_rain",
        "before_tool": "post_to_group",
        "require": "facts.rain_probability < 0.5",
        "refusal": "rainy",
    }
    templates = {"done": {"zh": "好了", "en": "done"}, "rainy": {"zh": "下雨", "en": "rainy"}}
    config = one_intent(
        "go",
        steps=[published, post],
        http_tools=[weather_tool(), post_tool()],
        business_rules=[rule],
        templates=templates,
    )
    agent = Agent.build(parse_config(config), [], deps={"SERVICE_URL": service[0]})
    async with Runtime(agent, MemoryStore(), effects=FixedEffects()) as runtime:
        refused = await runtime.start("go")
    assert refused.reply == "rainy" and ledger.keys == []  # the rule read the HTTP result

    ledger.reset()
    loop = [{**forecast, "id": f"s{i}"} for i in (1, 2, 3)]
    async with Runtime(agent_with(service[0], weather_tool(), steps=loop), MemoryStore()) as rt:
        looped = await rt.start("go")
    assert looped.error_code == "LOOP_DETECTED"
    assert ledger.calls["/weather/shanghai"] == 2  # the third identical call never went out


def test_one_pooled_client_per_agent_reopened_in_a_new_event_loop(
    service: tuple[str, Ledger], ledger: Ledger
) -> None:
    """``corral chat`` runs each turn in its own loop and closes in yet another one."""
    import asyncio

    agent = agent_with(service[0], weather_tool())
    (transport,) = agent.transports
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    turns = [asyncio.run(runtime.start("go")) for _ in range(2)]  # a loop each
    assert [t.status.value for t in turns] == ["finished", "finished"]
    asyncio.run(runtime.aclose())  # the last client's loop has ended: it is dropped

    async def twice() -> None:
        await runtime.start("go")
        await runtime.start("go")
        await runtime.aclose()

    ledger.reset()
    asyncio.run(twice())
    assert transport.name == "http" and len(ledger.ports) == 2
    assert ledger.ports[0] == ledger.ports[1]  # one pool, one kept-alive connection


async def test_a_404_to_a_read_is_no_result_unless_declared_an_error(
    service: tuple[str, Ledger], ledger: Ledger
) -> None:
    """A mistyped base URL answers 404 too: ``not_found: error`` keeps it from reading as
    "nothing found" for an endpoint that never answers 404 for a missing thing."""
    missing = weather_tool("/no-such-route/{city}")
    attempts, _, _, _ = await run_once(agent_with(service[0], missing))
    assert [(a.status, a.error_code) for a in attempts] == [("no_result", None)]
    strict = {**missing, "not_found": "error"}
    attempts, effects, _, _ = await run_once(agent_with(service[0], strict))
    assert [(a.error_code, a.retryable) for a in attempts] == [("TOOL_FAILED", False)]
    assert "HTTP 404" in (attempts[0].error_message or "")
    assert effects.sleeps == [] and ledger.calls["/no-such-route/shanghai"] == 2


async def test_a_response_with_nan_is_not_valid_json(
    service: tuple[str, Ledger], ledger: Ledger
) -> None:
    """Found by a walkthrough: ``{"rain_probability": NaN}`` passed as a float the live run
    used, while the stored run held ``null``: a replay and the run disagreed."""
    agent = agent_with(service[0], weather_tool("/nan/{city}"))
    attempts, _, _, _ = await run_once(agent)
    assert [(a.error_code, a.retryable) for a in attempts] == [("TOOL_OUTPUT_INVALID", False)]
    assert "not valid JSON" in (attempts[0].error_message or "")


async def test_a_write_whose_body_cannot_be_json_sends_nothing_and_is_not_in_doubt(
    service: tuple[str, Ledger], ledger: Ledger
) -> None:
    """Found by a walkthrough: a NaN argument failed while httpx encoded the body, after
    the write counted as sent: OUTCOME_UNKNOWN, and a person asked to check a write that
    never left. The body is encoded before anything goes out."""
    tool = {
        **post_tool(),
        "input": {
            "type": "object",
            "properties": {"channel": {"type": "string"}, "text": {"type": "number"}},
            "required": ["channel", "text"],
        },
    }
    steps = [{"id": "s1", "tool": "post_to_group", "args": {"channel": "ops", "text": 1.5}}]
    config = parse_config(one_intent("go", steps=steps, http_tools=[tool]))
    agent = Agent.build(config, [], deps={"SERVICE_URL": service[0]})
    # a Python tool's NaN is refused where it returns (TOOL_OUTPUT_INVALID): this one is a
    # caller's literal, in a plan given to run_plan
    plan = Plan(
        plan_id="p",
        steps=[Step(id="s1", tool="post_to_group", args={"channel": "ops", "text": float("nan")})],
    )
    async with Runtime(agent, MemoryStore(), effects=FixedEffects()) as runtime:
        summary = await runtime.run_plan(plan)
    errors = {s.id: s.error_code for s in summary.steps}
    assert errors["s1"] == "CONFIG_INVALID" and summary.outcome != "unknown", summary
    assert ledger.keys == [] and not ledger.posts  # nothing went out


async def test_a_python_tools_nan_never_reaches_an_http_body(
    service: tuple[str, Ledger], ledger: Ledger
) -> None:
    tool = {
        **post_tool(),
        "input": {
            "type": "object",
            "properties": {"channel": {"type": "string"}, "text": {"type": "number"}},
            "required": ["channel", "text"],
        },
    }
    steps = [
        {"id": "s1", "tool": "gauge"},
        {
            "id": "s2",
            "tool": "post_to_group",
            "depends_on": ["s1"],
            "args": {"channel": "ops", "text": "$s1.result.value"},
        },
    ]
    config = parse_config(one_intent("go", steps=steps, http_tools=[tool]))
    agent = Agent.build(config, [gauge], deps={"SERVICE_URL": service[0]})
    async with Runtime(agent, MemoryStore(), effects=FixedEffects()) as runtime:
        summary = await runtime.start("go")
    errors = {s.id: s.error_code for s in summary.steps}
    assert errors == {"s1": "TOOL_OUTPUT_INVALID", "s2": "DEPENDENCY_FAILED"}, summary
    assert ledger.keys == [] and not ledger.posts


class Reading(BaseModel):
    value: float


@tool
def gauge() -> Reading:
    """A reading that is not a number (a Python tool may return one)."""
    return Reading(value=float("nan"))


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_a_write_answered_with_a_redirect_is_in_doubt_and_no_equivalent_runs(
    service: tuple[str, Ledger], ledger: Ledger, status: int
) -> None:
    """Found by a hostile review: a 302 to a write (how many services say "done, look
    there": the post was made) was a failure that proved nothing happened, so the step's
    equivalent write ran too, and the service had two posts. Only 303 was in doubt."""
    group = {"equivalent_group": "posting"}
    first = post_tool(f"/posts?moved={status}", **group)
    other = {**post_tool(**group), "name": "post_again"}
    steps = [{"id": "s1", "tool": "post_to_group", "args": {"channel": "ops", "text": "hi"}}]
    effects = FixedEffects()
    async with Runtime(
        agent_with(service[0], first, other, steps=steps), MemoryStore(), effects=effects
    ) as runtime:
        summary = await runtime.start("go")
    assert [s.error_code for s in summary.steps] == ["OUTCOME_UNKNOWN"]
    assert len(ledger.posts) == 1 and len(ledger.keys) == 1  # entered once, never again


async def test_a_null_path_argument_sends_nothing(
    service: tuple[str, Ledger], ledger: Ledger
) -> None:
    """Found by a hostile review: a path argument that may be null sent its template's
    ``{city}`` as it was (``GET /weather/%7Bcity%7D``): a path the config never declared."""
    tool = weather_tool()
    tool["input"] = {
        **FORECAST_INPUT,
        "properties": {**FORECAST_INPUT["properties"], "city": {"type": ["string", "null"]}},
    }
    steps = [{"id": "s1", "tool": "get_forecast", "args": {"city": None, "date": DAY}}]
    attempts, _, _, _ = await run_once(agent_with(service[0], tool, steps=steps))
    assert [a.error_code for a in attempts] == ["INVALID_ARGUMENT"]
    assert "city cannot be null" in (attempts[0].error_message or "")
    assert sum(ledger.calls.values()) == 0


@pytest.mark.parametrize("keep", [12, 40])
async def test_a_gzip_answer_that_never_ends_is_invalid_not_nothing(
    service: tuple[str, Ledger], ledger: Ledger, keep: int
) -> None:
    """Found by a review: a read answered with a gzip stream cut short was "no result" (the
    thing does not exist), or whatever part of it had come; its end is checked now."""
    agent = agent_with(service[0], weather_tool(f"/gzip-cut/{{city}}?keep={keep}"))
    attempts, _, _, _ = await run_once(agent)
    assert [(a.error_code, a.retryable) for a in attempts] == [("TOOL_OUTPUT_INVALID", False)]
    assert "compressed response was cut short" in (attempts[0].error_message or "")


async def test_an_empty_answer_marked_gzip_is_still_an_empty_answer(
    service: tuple[str, Ledger], ledger: Ledger
) -> None:
    """A review of the check above: no bytes at all have no end to reach. A read's empty
    answer is no result, as before."""
    agent = agent_with(service[0], weather_tool("/gzip-cut/{city}?keep=0"))
    attempts, _, _, _ = await run_once(agent)
    assert [(a.status, a.error_code) for a in attempts] == [("no_result", None)]


@pytest.mark.parametrize("how", ["members", "trailing", "raw"])
async def test_a_compressed_answer_in_any_valid_shape_is_read_whole(
    service: tuple[str, Ledger], ledger: Ledger, how: str
) -> None:
    """A gzip answer of two members was read to the end of its first and the rest
    dropped (a cut JSON document: TOOL_OUTPUT_INVALID, or worse, a shorter valid one);
    "deflate" without its zlib wrapper was "not valid gzip". Both are read whole now, as
    urllib3 and httpx read them, and zeros after the last member are still ignored."""
    agent = agent_with(service[0], weather_tool(f"/packed/{{city}}?how={how}"))
    attempts, _, _, _ = await run_once(agent)
    assert [(a.status, a.error_code) for a in attempts] == [("success", None)]
    assert attempts[0].data == SHANGHAI


async def test_a_write_answered_with_a_gzip_stream_cut_short_is_in_doubt(
    service: tuple[str, Ledger], ledger: Ledger
) -> None:
    """Found by a review: the write was recorded as a success with no data; its answer was
    lost, so whether it acted is unknown (it did, here), and it is not entered again."""
    steps = [{"id": "s1", "tool": "post_to_group", "args": {"channel": "ops", "text": "hi"}}]
    agent = agent_with(service[0], post_tool("/posts?cut=12"), steps=steps)
    attempts, _, runtime, run_id = await run_once(agent)
    assert [(a.status, a.error_code) for a in attempts] == [("error", "TOOL_OUTPUT_INVALID")]
    assert "cut short" in (attempts[0].error_message or "")  # not taken for an empty answer
    summary = await runtime.summary(run_id)
    assert [s.error_code for s in summary.steps] == ["OUTCOME_UNKNOWN"]
    assert len(ledger.posts) == 1 and len(ledger.keys) == 1
