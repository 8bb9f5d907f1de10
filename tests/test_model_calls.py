"""Model calls over real HTTP (issue 9): negotiation that survives a blip and is cached in
the home, one retry policy whose every attempt is an event, failed calls that replay, and
the wall-clock budget counting model time."""

from __future__ import annotations

import json
import shutil
import socket
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from corral import Agent, EventType, MemoryStore, RunStatus, Runtime, parse_config
from corral.errors import ModelUnavailableError
from corral.events import Event
from corral.models import Message, ModelRequest
from corral.models.negotiation import NEGOTIATION_FILE, NegotiationCache, rejects_format
from corral.models.openai_compat import OpenAICompatibleModel
from corral.runtime.replay import replay_run
from corral.testing import FixedEffects
from tests.conftest import AFTERSALES
from tests.fake_openai import LLAMA_CPP_JSON_SCHEMA_500, Behaviour, FakeOpenAI
from tests.helpers import corral_cli
from tests.test_models import CONFIG, GOOD_PLAN, forecast, lookup

GREET = '{"label": "greet", "confidence": 0.93}'
SCHEMA_REQUEST = ModelRequest("t", (Message("user", "hi"),), schema={"type": "object"})


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI().start()
    yield server
    server.stop()


def closed_port() -> int:
    """A loopback port nothing listens on: connecting is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def http_model(base_url: str, **kwargs: Any) -> OpenAICompatibleModel:
    return OpenAICompatibleModel(
        "fake-model", base_url=base_url, api_key="test", **{"timeout_s": 5.0, **kwargs}
    )


def agent_with(model: Any, budget: dict[str, Any] | None = None, **settings: Any) -> Agent:
    config = parse_config(
        {**CONFIG, "model": {**CONFIG["model"], **settings}, "budget": budget or {}}
    )
    return Agent.build(config, [lookup, forecast], model=model)


async def run(agent: Agent, message: str) -> tuple[Any, list[Event], FixedEffects]:
    effects = FixedEffects()
    runtime = Runtime(agent, MemoryStore(), effects=effects)
    summary = await runtime.start(message)
    return summary, await runtime.events(summary.run_id), effects


def model_calls(events: list[Event]) -> list[dict[str, Any]]:
    return [e.data for e in events if e.type is EventType.MODEL_CALL]


# ------------------------------------------------------------------ negotiation


async def test_a_burst_of_500s_never_drops_structured_output(fake: FakeOpenAI) -> None:
    """Issue 9, defect 1: three 500s used to turn structured output off for good."""
    model = http_model(fake.base_url)
    fake.script(*[Behaviour(status=500)] * 6)  # extraction and intent: 3 attempts each
    blip, events, _ = await run(agent_with(model, extract_entities=True), "qwerty")
    assert blip.status is RunStatus.AWAITING_USER  # the rules' verdict (clarify) stands
    assert model.modes[0] == "json_schema"
    for _ in range(2):  # the server is healthy again: extraction and intent are accepted
        fake.script('{"entities": {}}', GREET)
        healthy, later, _ = await run(
            agent_with(model, extract_entities=True), "good morning, friend"
        )
        assert healthy.intent is not None and healthy.intent.source == "model"
        assert [(c["purpose"], c["accepted"]) for c in model_calls(later)] == [
            ("extract", True),
            ("intent", True),
        ]
    assert [r["response_format"]["type"] for r in fake.requests] == ["json_schema"] * 10
    assert [c["error_code"] for c in model_calls(events)] == ["MODEL_UNAVAILABLE"] * 6


@pytest.mark.parametrize(
    ("status", "body", "dropped"),
    [
        (500, LLAMA_CPP_JSON_SCHEMA_500, True),
        (400, '{"error": {"message": "response_format json_schema is not supported"}}', True),
        (422, '{"detail": [{"loc": ["body", "response_format"]}]}', True),
        (400, '{"error": {"message": "messages: too long"}}', False),
        (500, '{"error": {"message": "CUDA out of memory"}}', False),
        (503, '{"error": {"message": "response_format busy"}}', False),
    ],
)
def test_only_a_rejected_response_format_drops_a_mode(
    status: int, body: str, dropped: bool
) -> None:
    assert rejects_format(status, body) is dropped


async def test_a_negotiated_mode_is_cached_in_the_home(fake: FakeOpenAI, tmp_path: Path) -> None:
    cache = tmp_path / "home" / "cache" / NEGOTIATION_FILE
    fake.script(Behaviour(status=500, raw_body=LLAMA_CPP_JSON_SCHEMA_500), '{"a": 1}')
    first = http_model(fake.base_url, negotiation_cache=cache)
    answer = await first.complete(SCHEMA_REQUEST)
    assert answer.meta["structured_mode"] == "json_object"
    assert answer.meta["negotiation"]["source"] == "probe"
    assert answer.meta["negotiation"]["rejected"] == ["json_schema"]
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    # A new process reads the home instead of probing: one request, the right mode.
    fake.script('{"a": 2}', '{"a": 3}')
    second = http_model(fake.base_url, negotiation_cache=cache)
    for _ in range(2):
        answer = await second.complete(SCHEMA_REQUEST)
        assert answer.meta["negotiation"] == {"source": "cache", "rejected": []}
    assert [r["response_format"]["type"] for r in fake.requests[2:]] == ["json_object"] * 2
    # Another model on the same server, or an expired entry, is probed again.
    fake.script('{"a": 4}', '{"a": 5}')
    other = OpenAICompatibleModel(
        "other-model", base_url=fake.base_url, api_key="t", negotiation_cache=cache
    )
    await other.complete(SCHEMA_REQUEST)
    expired = http_model(fake.base_url, negotiation_cache=cache, negotiation_ttl_s=1e-9)
    await expired.complete(SCHEMA_REQUEST)
    assert [r["response_format"]["type"] for r in fake.requests[4:]] == ["json_schema"] * 2


async def test_a_rejected_mode_is_cached_even_when_the_next_attempt_fails(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    cache = tmp_path / NEGOTIATION_FILE
    fake.script(Behaviour(status=500, raw_body=LLAMA_CPP_JSON_SCHEMA_500), Behaviour(status=503))
    with pytest.raises(ModelUnavailableError):
        await http_model(fake.base_url, negotiation_cache=cache).complete(SCHEMA_REQUEST)
    fake.script('{"a": 1}')
    await http_model(fake.base_url, negotiation_cache=cache).complete(SCHEMA_REQUEST)
    assert fake.requests[-1]["response_format"]["type"] == "json_object"
    assert len(fake.requests) == 3


@pytest.mark.parametrize("content", [b"{not json", b'{"version": 1, "endpoints": 3}', b""])
async def test_a_corrupt_negotiation_cache_is_ignored(
    fake: FakeOpenAI, tmp_path: Path, content: bytes
) -> None:
    cache = tmp_path / NEGOTIATION_FILE
    cache.write_bytes(content)
    cache.chmod(0o600)
    fake.script('{"a": 1}')
    answer = await http_model(fake.base_url, negotiation_cache=cache).complete(SCHEMA_REQUEST)
    assert answer.meta["structured_mode"] == "json_schema"
    # "now" is read after the write: a file's mtime is coarser than the clock, and can be
    # earlier than the moment the entry was stamped.
    entry = NegotiationCache(cache).load(fake.base_url, "fake-model", time.time())
    assert entry == ("json_schema", "json_object", "prompt")  # rewritten whole


async def test_the_mode_is_recorded_on_the_runs_model_calls(fake: FakeOpenAI) -> None:
    fake.script(Behaviour(status=500, raw_body=LLAMA_CPP_JSON_SCHEMA_500), GOOD_PLAN)
    summary, events, _ = await run(agent_with(http_model(fake.base_url)), "weather for A1?")
    assert summary.status is RunStatus.FINISHED
    [call] = model_calls(events)
    assert call["structured_mode"] == "json_object"
    assert {k: call["negotiation"][k] for k in ("source", "rejected")} == {
        "source": "probe",
        "rejected": ["json_schema"],
    }
    assert [r["http_status"] for r in call["negotiation"]["requests"]] == [500]
    assert (await replay_run(agent_with(None), events)).same_path


# ------------------------------------------------------------------ one retry policy


async def test_every_attempt_is_an_event_and_retry_after_is_honoured(fake: FakeOpenAI) -> None:
    """Issue 9, defect 4: the SDK's own retries were invisible to corral."""
    fake.script(
        Behaviour(status=429, headers={"Retry-After": "7"}),
        Behaviour(status=503),
        GOOD_PLAN,
    )
    summary, events, effects = await run(agent_with(http_model(fake.base_url)), "weather A1?")
    assert summary.status is RunStatus.FINISHED and len(fake.requests) == 3
    calls = model_calls(events)
    assert [c["status"] for c in calls] == ["error", "error", "success"]
    assert [(c["status"], c.get("http_status"), c["try"]) for c in calls] == [
        ("error", 429, 1),
        ("error", 503, 2),
        ("success", None, 3),
    ]
    assert calls[0]["error_code"] == calls[1]["error_code"] == "MODEL_UNAVAILABLE"
    assert all(c["latency_ms"] >= 0 for c in calls)
    assert effects.sleeps == [7.0, 2.0]  # the server's Retry-After, then the backoff
    assert calls[2]["usage"] == {"prompt_tokens": 11, "completion_tokens": 7, "estimated": False}
    assert (await replay_run(agent_with(None), events)).same_path


async def test_retries_are_bounded_by_the_setting(fake: FakeOpenAI) -> None:
    fake.script(*[Behaviour(status=502)] * 5)
    summary, events, _ = await run(
        agent_with(http_model(fake.base_url), max_retries=1), "weather for A1?"
    )
    assert summary.handoff is not None and summary.handoff.reason_code == "MODEL_UNAVAILABLE"
    assert len(fake.requests) == len(model_calls(events)) == 2


@pytest.mark.parametrize(
    ("shape", "requests", "status"),
    [
        (Behaviour(text=GOOD_PLAN, truncate=True), 2, RunStatus.FINISHED),  # retried
        (Behaviour(raw_body="<html>proxy error</html>"), 1, RunStatus.HANDED_OFF),
        (Behaviour(status=401), 1, RunStatus.HANDED_OFF),
        (Behaviour(status=408), 2, RunStatus.FINISHED),
    ],
)
async def test_error_shapes(
    fake: FakeOpenAI, shape: Behaviour, requests: int, status: RunStatus
) -> None:
    fake.script(shape, GOOD_PLAN)
    summary, events, _ = await run(agent_with(http_model(fake.base_url)), "weather for A1?")
    assert summary.status is status and len(fake.requests) == requests
    assert model_calls(events)[0]["status"] == "error"
    assert (await replay_run(agent_with(None), events)).same_path


async def test_a_timed_out_attempt_is_retried_and_its_prompt_counted(fake: FakeOpenAI) -> None:
    late = threading.Event()  # set after the test: the first answer comes too late
    fake.script(Behaviour(text=GOOD_PLAN, until=late), GOOD_PLAN)
    try:
        summary, events, _ = await run(
            agent_with(http_model(fake.base_url, timeout_s=0.3)), "weather for A1?"
        )
    finally:
        late.set()
    assert summary.status is RunStatus.FINISHED and len(fake.requests) == 2
    timed_out, answered = model_calls(events)
    assert (timed_out["error_code"], timed_out["retryable"]) == ("MODEL_TIMEOUT", True)
    # The server read the prompt but told a client that left nothing: it is estimated.
    assert timed_out["usage"]["estimated"] and timed_out["usage"]["prompt_tokens"] > 0
    assert answered["usage"]["estimated"] is False
    assert (await replay_run(agent_with(None), events)).same_path


async def test_the_sdk_never_retries_on_its_own(fake: FakeOpenAI) -> None:
    fake.script(Behaviour(status=500), '{"a": 1}')
    with pytest.raises(ModelUnavailableError) as info:
        await http_model(fake.base_url).complete(SCHEMA_REQUEST)
    assert info.value.retryable and info.value.status == 500 and len(fake.requests) == 1


# ------------------------------------------------------------------ failures are events


@pytest.mark.parametrize(
    ("message", "status", "code"),
    [("qwerty", RunStatus.AWAITING_USER, None), ("weather for A1?", None, "MODEL_UNAVAILABLE")],
)
async def test_an_unreachable_model_leaves_events_and_the_run_replays(
    message: str, status: RunStatus | None, code: str | None
) -> None:
    """Issue 9, defect 3: a failed call left no event, and such runs did not replay."""
    model = http_model(f"http://127.0.0.1:{closed_port()}/v1")
    summary, events, effects = await run(agent_with(model), message)
    if status is not None:
        assert summary.status is status
    if code is not None:
        assert summary.handoff is not None and summary.handoff.reason_code == code
    report = await replay_run(agent_with(model), events)
    assert report.same_path, report
    calls = model_calls(events)
    assert [(c["status"], c["error_code"]) for c in calls] == [("error", "MODEL_UNAVAILABLE")] * 3
    assert effects.sleeps == [1.0, 2.0]


async def test_budget_refusals_are_events_that_replay() -> None:
    from corral.models import ScriptedModel

    model = ScriptedModel(['{"steps": [{"id": "s1", "tool": "delete_all", "args": {}}]}'])
    summary, events, _ = await run(agent_with(model, {"max_model_calls": 1}), "weather A1?")
    assert summary.handoff is not None and summary.handoff.reason_code == "BUDGET_EXCEEDED"
    calls = model_calls(events)
    assert [(c["status"], c.get("refused")) for c in calls] == [("rejected", None), ("error", True)]
    assert calls[1]["error_code"] == "BUDGET_EXCEEDED"
    assert (await replay_run(agent_with(None, {"max_model_calls": 1}), events)).same_path


# ------------------------------------------------------------------ wall-clock budget


@pytest.mark.parametrize(("message", "stage"), [("weather for A1?", "plan"), ("qwerty", "intent")])
async def test_the_wall_clock_budget_counts_model_time(
    fake: FakeOpenAI, message: str, stage: str
) -> None:
    """Issue 9, defect 6: the wall clock was checked only before tool steps."""
    stall = threading.Event()  # the server answers only after the test
    fake.script(Behaviour(text=GOOD_PLAN, until=stall))
    budget = {"max_wall_clock_s": 0.3}
    try:
        summary, events, _ = await run(agent_with(http_model(fake.base_url), budget), message)
    finally:
        stall.set()
    assert summary.handoff is not None and summary.handoff.reason_code == "BUDGET_EXCEEDED"
    [call] = model_calls(events)
    assert (call["status"], call["error_code"]) == ("error", "BUDGET_EXCEEDED")
    exceeded = [e for e in events if e.type is EventType.BUDGET_EXCEEDED]
    assert [e.stage for e in exceeded] == [stage]
    assert (await replay_run(agent_with(None, budget), events)).same_path


async def test_a_reply_that_runs_out_of_the_wall_clock_stops_the_run(fake: FakeOpenAI) -> None:
    stall = threading.Event()
    fake.script(GOOD_PLAN, Behaviour(text='{"text": "done"}', until=stall))
    budget = {"max_wall_clock_s": 1.0}
    try:
        summary, events, _ = await run(
            agent_with(http_model(fake.base_url), budget, replies=True), "weather for A1?"
        )
    finally:
        stall.set()
    # The tools ran; the reply's model call did not finish, and the run says so.
    assert [s.status.value for s in summary.steps] == ["succeeded", "succeeded"]
    assert summary.handoff is not None and summary.handoff.reason_code == "BUDGET_EXCEEDED"
    exceeded = [e.stage for e in events if e.type is EventType.BUDGET_EXCEEDED]
    assert exceeded == ["reply"]
    assert (await replay_run(agent_with(None, budget, replies=True), events)).same_path


# ------------------------------------------------------------------ the CLI, end to end


def test_cli_unreachable_model_answers_is_traced_and_replays(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent"
    shutil.copytree(AFTERSALES, agent_dir)
    config = yaml.safe_load((agent_dir / "agent.yaml").read_text("utf-8"))
    config["model"] = {
        "name": "openai:x",
        "base_url": f"http://127.0.0.1:{closed_port()}/v1",
        "intent_fallback": True,
        "max_retries": 0,
    }
    (agent_dir / "agent.yaml").write_text(yaml.safe_dump(config, allow_unicode=True), "utf-8")
    home = tmp_path / "home"
    done = corral_cli(home, "run", str(agent_dir), "早呀朋友，吃了吗", "--json")
    answer = json.loads(done.stdout)
    assert answer["reply"]  # it still answers (the rules' clarification)
    traces = corral_cli(home, "traces", answer["run_id"], "--json")
    records = [json.loads(line) for line in traces.stdout.splitlines()]
    failed = [r for r in records if r["event"] == "model_call"]
    assert len(failed) == 1 and failed[0]["status"] == "error", records
    replayed = corral_cli(home, "replay", answer["run_id"])
    assert replayed.returncode == 0


ASK = ModelRequest("t", (Message("user", "hi"),))


@pytest.mark.parametrize(
    "behaviour",
    [
        Behaviour(raw_body="<html>captive portal</html>", content_type="text/html"),
        Behaviour(raw_body="null"),
        Behaviour(raw_body="[1, 2]"),
        Behaviour(raw_body='{"foo": 1}'),
        Behaviour(raw_body='{"choices": []}'),
        Behaviour(raw_body='{"choices": [{"message": "hi"}]}'),
        Behaviour(message={"role": "assistant", "content": {"entities": {}}}),
        Behaviour(message={"role": "assistant", "content": 12345}),
        Behaviour(message={"role": "assistant", "content": [{"type": "image_url"}]}),
    ],
)
async def test_a_200_that_is_no_chat_completion_is_model_unavailable(
    fake: FakeOpenAI, behaviour: Behaviour
) -> None:
    """Found by a walkthrough: each crashed the run with a raw AttributeError (a 500 over
    HTTP), and nothing of the run was kept, though the model had been called."""
    fake.script(behaviour)
    with pytest.raises(ModelUnavailableError) as info:
        await http_model(fake.base_url).complete(ASK)
    assert "malformed response" in info.value.message and not info.value.retryable


async def test_content_in_text_parts_is_their_text_and_bad_counts_are_estimated(
    fake: FakeOpenAI,
) -> None:
    parts = [
        {"type": "thinking", "thinking": "the user wants a"},  # a reasoning model's
        {"type": "text", "text": '{"a": '},
        {"type": "text", "text": "1}"},
    ]
    fake.script(
        Behaviour(message={"role": "assistant", "content": parts}),
        Behaviour(text="ok", usage_counts={"prompt_tokens": -1000000, "completion_tokens": 5}),
        Behaviour(text="ok", usage_counts={"prompt_tokens": "12 tokens", "completion_tokens": 5}),
        # found by a hostile walkthrough: past int64 crashed the save (OverflowError, no
        # code, the run lost); below it, the home's stats sums overflowed from then on
        Behaviour(text="ok", usage_counts={"prompt_tokens": 10**30, "completion_tokens": 1}),
        Behaviour(text="ok", usage_counts={"prompt_tokens": 1, "completion_tokens": 2**63 - 9}),
    )
    model = http_model(fake.base_url)
    assert (await model.complete(ASK)).text == '{"a": 1}'
    for _ in range(4):  # a negative count undid the token budget; a text one crashed
        usage = (await model.complete(ASK)).usage
        assert 0 < usage.prompt_tokens + usage.completion_tokens < 10**6 and usage.estimated


async def test_an_agent_whose_key_variable_is_unset_sends_no_other_providers_key(
    fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by a walkthrough: with ``api_key_env: DEEPSEEK_API_KEY`` unset, the SDK's
    fallback sent ``OPENAI_API_KEY`` to the agent's own base_url."""
    from corral.agent import model_from_config

    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-PERSONAL-KEY-1111")
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    settings = {"name": "openai:deepseek-chat", "base_url": fake.base_url}
    config = parse_config({**CONFIG, "model": {**settings, "api_key_env": "DEEPSEEK_API_KEY"}})
    model = model_from_config(config)
    assert model is not None
    fake.script("{}")
    await model.complete(ASK)
    assert fake.authorizations == ["Bearer not-needed"]


async def test_the_key_an_endpoint_echoes_in_an_error_is_not_kept(fake: FakeOpenAI) -> None:
    """Found by a walkthrough: "Incorrect API key provided: gsk_..." was stored, logged and
    traced as it is: redaction knows some key shapes, not every provider's."""
    key = "gsk_Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56"
    body = json.dumps({"error": {"message": f"Incorrect API key provided: {key}. See docs"}})
    fake.script(Behaviour(status=401, raw_body=body))
    model = OpenAICompatibleModel("m", base_url=fake.base_url, api_key=key, timeout_s=5.0)
    with pytest.raises(ModelUnavailableError) as info:
        await model.complete(ASK)
    assert key not in info.value.message and "[API_KEY]" in info.value.message
