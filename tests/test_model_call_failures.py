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
from corral.errors import ModelUnavailableError
from corral.models import ModelRequest, ScriptedModel
from corral.models.negotiation import NEGOTIATION_FILE
from corral.runtime.replay import replay_run
from corral.testing import FixedEffects
from tests.fake_openai import Behaviour, FakeOpenAI
from tests.test_model_calls import SCHEMA_REQUEST, agent_with, http_model, model_calls

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
