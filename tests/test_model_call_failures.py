"""Review of issue 9 (findings 5-7): concurrent negotiation, long ``Retry-After``, and
model failures that are not HTTP errors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from corral.errors import ModelUnavailableError
from corral.models.negotiation import NEGOTIATION_FILE
from tests.fake_openai import Behaviour, FakeOpenAI
from tests.test_model_calls import SCHEMA_REQUEST, http_model

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
