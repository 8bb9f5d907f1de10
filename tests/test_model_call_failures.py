"""Review of issue 9 (findings 5-7): concurrent negotiation, long ``Retry-After``, and
model failures that are not HTTP errors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from corral import EventType, MemoryStore, Runtime
from corral.errors import (
    ConfigInvalidError,
    CorralError,
    ModelUnavailableError,
    PlanInvalidError,
    ReplayDivergedError,
    RunNotFoundError,
)
from corral.models import Message, ModelRequest, ScriptedModel
from corral.models.local import LocalModel
from corral.models.negotiation import NEGOTIATION_FILE
from corral.models.replay import ReplayModel
from corral.runtime.replay import replay_run
from corral.testing import FixedEffects
from tests.conftest import AFTERSALES
from tests.fake_openai import Behaviour, FakeOpenAI
from tests.helpers import corral_cli
from tests.test_model_calls import SCHEMA_REQUEST, agent_with, http_model, model_calls, run

REFUSED = Behaviour(
    status=400,
    raw_body='{"error": {"message": "response_format json_schema is not supported"}}',
    delay_s=0.5,  # both requests are in flight before either is refused
)


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI().start()
    yield server
    server.stop()


async def test_concurrent_rejections_drop_only_the_rejected_mode(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    """Review finding 5: two refusals of json_schema also dropped json_object."""
    cache = tmp_path / NEGOTIATION_FILE
    model = http_model(fake.base_url, negotiation_cache=cache)
    fake.script(REFUSED, REFUSED, '{"a": 1}', '{"a": 2}')
    answers = await asyncio.gather(model.complete(SCHEMA_REQUEST), model.complete(SCHEMA_REQUEST))
    assert model.modes == ("json_object", "prompt")
    assert [a.meta["structured_mode"] for a in answers] == ["json_object", "json_object"]
    assert [r["response_format"]["type"] for r in fake.requests[2:]] == ["json_object"] * 2
    stored = json.loads(cache.read_text())["endpoints"]
    assert [entry["modes"] for entry in stored.values()] == [["json_object", "prompt"]]


async def test_each_step_down_request_is_recorded(fake: FakeOpenAI) -> None:
    """Review nit 10.3: the refused request of a step-down left no trace of its own."""
    fake.script(Behaviour(status=400, raw_body=REFUSED.raw_body), '{"a": 1}')
    answer = await http_model(fake.base_url).complete(SCHEMA_REQUEST)
    steps = answer.meta["negotiation"]["requests"]
    assert [(s["mode"], s["http_status"]) for s in steps] == [("json_schema", 400)]
    assert steps[0]["latency_ms"] >= 0


@dataclass
class ClockEffects(FixedEffects):
    """Effects whose clock advances by each sleep, as the live clock does."""

    offset: float = 0.0

    def monotonic(self) -> float:
        return super().monotonic() + self.offset

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.offset += seconds


@pytest.mark.parametrize("after", [99999.0, 61.0])
async def test_a_retry_after_beyond_the_budget_or_the_cap_is_final_at_once(after: float) -> None:
    """Review finding 6: a long Retry-After slept out the budget, then BUDGET_EXCEEDED."""

    def busy(request: ModelRequest) -> str:
        raise ModelUnavailableError("HTTP 429: slow down", retry_after=after, status=429)

    model = ScriptedModel(function=busy)
    agent = agent_with(model)
    effects = ClockEffects()
    runtime = Runtime(agent, MemoryStore(), effects=effects)
    summary = await runtime.start("weather A1?")
    events = await runtime.events(summary.run_id)
    assert effects.sleeps == []
    assert summary.handoff is not None and summary.handoff.reason_code == "MODEL_UNAVAILABLE"
    assert [(c["error_code"], c["backoff_s"]) for c in model_calls(events)] == [
        ("MODEL_UNAVAILABLE", None)
    ]
    assert not any(e.type is EventType.BUDGET_EXCEEDED for e in events)
    assert len(model.requests) == 1
    assert (await replay_run(agent_with(None), events)).same_path


@pytest.mark.parametrize(
    "error", [ConfigInvalidError("local:x: cannot load /x.gguf"), PlanInvalidError("odd")]
)
async def test_any_model_failure_is_an_event_and_replays(error: CorralError) -> None:
    """Review finding 7: a failure that was not an HTTP error left no event, and the
    replay diverged (REPLAY_DIVERGED instead of the recorded code)."""

    def broken(request: ModelRequest) -> str:
        raise error

    model = ScriptedModel(function=broken)
    summary, events, effects = await run(agent_with(model), "weather A1?")
    assert summary.handoff is not None and summary.handoff.reason_code == error.code.value
    calls = model_calls(events)
    assert [(c["status"], c["error_code"], c["retryable"]) for c in calls] == [
        ("error", error.code.value, False)
    ]
    assert effects.sleeps == [] and len(model.requests) == 1
    report = await replay_run(agent_with(None), events)
    assert report.same_path, report


async def test_a_divergence_in_a_replay_is_not_recorded_as_a_model_failure() -> None:
    def diverged(request: ModelRequest) -> str:
        raise ReplayDivergedError("never asked")

    _, events, _ = await run(agent_with(ScriptedModel(function=diverged)), "weather A1?")
    assert model_calls(events) == []


def test_a_local_model_error_is_not_retried(tmp_path: Path) -> None:
    """Review nit 10.1: llama's deterministic errors were retried twice."""

    class Llama:
        def create_chat_completion(self, **kwargs: object) -> object:
            raise ValueError("Requested tokens exceed context window")

    model = LocalModel(tmp_path / "x.gguf", _llama=Llama())
    with pytest.raises(ModelUnavailableError) as caught:
        asyncio.run(model.complete(ModelRequest("t", (Message("user", "hi"),))))
    assert caught.value.retryable is False


def test_an_unknown_replay_run_fails_at_load() -> None:
    with pytest.raises(RunNotFoundError):
        ReplayModel.of_run("run_doesnotexist", [])


def test_cli_a_local_model_that_cannot_load_is_traced_and_replays(tmp_path: Path) -> None:
    """Review finding 7 through the CLI: the failed call is listed, and the run replays."""
    home = tmp_path / "home"
    model = ["--model", "local:/nonexistent/x.gguf"]
    started = corral_cli(
        home, "run", str(AFTERSALES), "这个订单有什么问题 HD20240501", *model, "--json"
    )
    run_id = json.loads(started.stdout)["run_id"]
    shown = corral_cli(home, "show", run_id, "--json")
    calls = json.loads(shown.stdout)["model_calls"]
    assert calls and all(c["error_code"] == "CONFIG_INVALID" for c in calls), calls
    corral_cli(home, "replay", run_id)  # exit 0: the same path
    unknown = corral_cli(
        home, "run", str(AFTERSALES), "hi", "--model", "replay:run_00000000000000ff", ok=False
    )
    assert unknown.returncode != 0 and "RUN_NOT_FOUND" in unknown.stdout + unknown.stderr
    # found by a walkthrough: a path was RUN_NOT_FOUND where `corral show` says INVALID_INPUT
    path = corral_cli(home, "run", str(AFTERSALES), "hi", "--model", "replay:../../x", ok=False)
    assert path.returncode == 2 and "error INVALID_INPUT" in path.stderr
