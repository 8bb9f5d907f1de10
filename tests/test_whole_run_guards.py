"""Six guards, each shown to work in a whole run through the public API.

Each of these behaviours once survived a deliberate bug with the suite still green: unit
tests of the parts passed while a run no longer used them. Every test here starts a real
run (``Runtime.start`` / ``resume``, or an agent folder loaded like ``corral run`` does)
and asserts on what the run did.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from corral import (
    NO_RETRY,
    Agent,
    EventType,
    MemoryStore,
    RunStatus,
    Runtime,
    ToolPolicy,
    load_agent,
    parse_config,
    tool,
)
from corral.models.openai_compat import OpenAICompatibleModel
from corral.testing import FixedEffects
from corral.tools.spec import ToolSpec
from tests.fake_openai import FakeOpenAI
from tests.helpers import build_agent, corral_cli, write_agent


class Found(BaseModel):
    order_id: str


def _runtime(agent: Agent) -> Runtime:
    return Runtime(agent, MemoryStore(), effects=FixedEffects())


def _agent(tools: list[ToolSpec], steps: list[dict[str, Any]], **top: Any) -> Agent:
    """A one-intent agent ('go' runs the plan) with top-level config keys added."""
    intent: dict[str, Any] = {
        "name": "do",
        "rules": [{"keywords": ["go"], "confidence": 0.95}],
        "route": "plan",
        "plan": "p",
        "reply": "done",
        **top.pop("intent", {}),
    }
    config = {
        "name": "guards",
        "entities": {"order_id": {"kind": "pattern", "patterns": [r"(A\d+)"]}},
        "intents": [intent],
        "plans": {"p": {"steps": steps}},
        "templates": {"done": {"zh": "完成", "en": "done"}},
        **top,
    }
    return Agent.build(parse_config(config), tools)


# ------------------------------------------------------------------ 1. out-of-scope threshold

OOS_AGENT = """\
    name: oos-guard
    limits:
      intent_confidence: 0.3
    classifier:
      enabled: true
      oos_threshold: 0.8
      out_of_scope_examples: [what is the weather today, tell me a joke,
        who won the football game, recommend a good movie, write me a poem,
        what time is it in paris]
    intents:
      - name: track
        route: reply
        reply: tracked
        examples: [where is my parcel, track my package, when will my parcel arrive,
          has my package shipped, parcel tracking please, my delivery is late]
      - name: refund
        route: reply
        reply: refunded
        examples: [i want my money back, refund my order, please refund me,
          how do i get a refund, return this item for a refund, cancel and refund]
    templates:
      tracked: {zh: 已查询, en: tracked}
      refunded: {zh: 已退款, en: refunded}
    """


def _oos_agent(tmp_path: Path, threshold: float) -> Path:
    text = OOS_AGENT.replace("oos_threshold: 0.8", f"oos_threshold: {threshold}")
    return write_agent(tmp_path / f"agent-{threshold}", text, "")


@pytest.mark.parametrize("threshold", [0.0, 0.8])
async def test_the_out_of_scope_threshold_decides_whether_a_weak_match_is_answered(
    tmp_path: Path, threshold: float
) -> None:
    """'parcel weather' leans to `track` (p about 0.55, above the 0.3 intent bar). With no
    cut it is answered as `track`; under the agent's 0.8 cut it is out of scope and the run
    asks. A confident message is answered either way."""
    agent = load_agent(_oos_agent(tmp_path, threshold), cache_dir=tmp_path / "cache")
    runtime = _runtime(agent)
    weak = await runtime.start("parcel weather")
    assert weak.intent is not None
    if threshold:
        assert weak.status is RunStatus.AWAITING_USER, weak.reply
        assert weak.intent.label is None and weak.intent.source == "none"
        assert weak.pending is not None and weak.pending.slot is None  # a clarification
    else:
        assert weak.status is RunStatus.FINISHED and weak.reply == "tracked"
        assert weak.intent.label == "track" and 0.3 < weak.intent.confidence < 0.8
    strong = await runtime.start("where is my package")
    assert strong.status is RunStatus.FINISHED and strong.reply == "tracked"


def test_corral_run_applies_the_out_of_scope_threshold(tmp_path: Path) -> None:
    """The same through the CLI: `corral run` trains the agent's classifier and cuts."""
    folder = _oos_agent(tmp_path, 0.8)
    out = corral_cli(tmp_path / "home", "run", str(folder), "parcel weather", "--json")
    summary = json.loads(out.stdout)
    assert summary["status"] == "awaiting_user" and summary["intent"]["label"] is None


def test_the_out_of_scope_threshold_is_validated(tmp_path: Path) -> None:
    from corral.errors import ConfigInvalidError

    folder = write_agent(
        tmp_path / "agent", OOS_AGENT.replace("oos_threshold: 0.8", "oos_threshold: 1.5"), ""
    )
    with pytest.raises(ConfigInvalidError, match="oos_threshold"):
        load_agent(folder, cache_dir=tmp_path / "cache")


# ------------------------------------------------------------------ 2. state-hash loop detection


async def test_the_same_call_with_the_same_answer_and_no_new_fact_is_a_loop() -> None:
    """Two steps make one call and learn nothing new. The identical-call limit (5) allows
    it; the state hash must not: the run came back to where it was."""
    calls: list[str] = []

    @tool
    def search(order_id: str) -> Found:
        """Look an order up."""
        calls.append(order_id)
        return Found(order_id=order_id)

    agent = _agent(
        [search],
        [
            {"id": "a", "tool": "search", "args": {"order_id": "A1"}},
            {"id": "b", "tool": "search", "args": {"order_id": "A1"}, "depends_on": ["a"]},
            {"id": "c", "tool": "search", "args": {"order_id": "A2"}, "depends_on": ["b"]},
        ],
        limits={"max_identical_calls": 5},
    )
    runtime = _runtime(agent)
    summary = await runtime.start("go")
    assert summary.status is RunStatus.HANDED_OFF, summary.reply
    assert summary.handoff is not None and summary.handoff.reason_code == "LOOP_DETECTED"
    assert calls == ["A1", "A1"]  # c never ran
    events = await runtime.events(summary.run_id)
    assert [e.data["step_id"] for e in events if e.type is EventType.LOOP_DETECTED] == ["b"]


async def test_a_repeated_call_that_teaches_something_new_is_not_a_loop() -> None:
    """The same call twice is progress when the answer changed what the run knows."""
    answers = iter(["A7", "A8"])

    @tool
    def poll(order_id: str) -> Found:
        """Poll an order's latest id."""
        return Found(order_id=next(answers))

    agent = _agent(
        [poll],
        [
            {"id": "a", "tool": "poll", "args": {"order_id": "A1"}, "facts": {"x": "result"}},
            {
                "id": "b",
                "tool": "poll",
                "args": {"order_id": "A1"},
                "depends_on": ["a"],
                "facts": {"x": "result"},
            },
        ],
    )
    summary = await _runtime(agent).start("go")
    assert summary.status is RunStatus.FINISHED and summary.outcome == "success"


# ------------------------------------------------------------------ 3. fact source priority


async def test_a_tool_result_does_not_overwrite_the_users_correction() -> None:
    """The user gives order A123; a lookup says A999. Later steps must read A123."""
    seen: list[str] = []

    @tool
    def lookup(order_id: str) -> Found:
        """Find the order (the back end answers with another id)."""
        return Found(order_id="A999")

    @tool
    def act(order_id: str) -> Found:
        """Act on the order the run knows."""
        seen.append(order_id)
        return Found(order_id=order_id)

    agent = build_agent(
        [lookup, act],
        [
            {
                "id": "s1",
                "tool": "lookup",
                "args": {"order_id": "$entities.order_id"},
                "facts": {"order_id": "result.order_id"},
            },
            {
                "id": "s2",
                "tool": "act",
                "args": {"order_id": "$facts.order_id"},
                "depends_on": ["s1"],
            },
        ],
        requires=["order_id"],
    )
    runtime = _runtime(agent)
    asked = await runtime.start("go")
    assert asked.status is RunStatus.AWAITING_USER and asked.pending is not None
    done = await runtime.resume(asked.run_id, answer="it is A123")
    assert done.status is RunStatus.FINISHED, done.reply
    assert seen == ["A123"]
    events = await runtime.events(done.run_id)
    rejected = [e.data for e in events if e.type is EventType.FACT_REJECTED]
    assert [(r["name"], r["value"], r["source"]) for r in rejected] == [
        ("order_id", "A999", "tool")
    ]


# ------------------------------------------------------------------ 4. allow-list vs fallbacks


@pytest.mark.parametrize("also_allowed", [False, True])
async def test_a_similar_tool_is_a_fallback_only_when_the_intent_allows_it(
    also_allowed: bool,
) -> None:
    """Capability matching finds `lookup_order_copy` (same parameters and output) when
    `lookup_order` fails. Off the intent's allow-list it must not run: the run hands off.
    On it, it takes over and the run succeeds."""
    called: list[str] = []

    @tool(policy=ToolPolicy(retry=NO_RETRY))
    def lookup_order(order_id: str) -> Found:
        """Look up an order by its id."""
        called.append("lookup_order")
        raise ConnectionError("order service is down")

    @tool(name="lookup_order_copy")
    def lookup_copy(order_id: str) -> Found:
        """Look up an order by its id (a copy)."""
        called.append("lookup_order_copy")
        return Found(order_id=order_id)

    allowed = ["lookup_order", "lookup_order_copy"] if also_allowed else ["lookup_order"]
    agent = _agent(
        [lookup_order, lookup_copy],
        [{"id": "s1", "tool": "lookup_order", "args": {"order_id": "$entities.order_id"}}],
        capability_matching=True,
        intent={"tools": allowed},
    )
    runtime = _runtime(agent)
    summary = await runtime.start("go A1")
    selected = [
        e.data for e in await runtime.events(summary.run_id) if e.type is EventType.TOOL_SELECTED
    ]
    if also_allowed:
        assert called == ["lookup_order", "lookup_order_copy"]
        assert summary.status is RunStatus.FINISHED
        assert selected[0]["excluded"] == {}
    else:
        assert called == ["lookup_order"]
        assert summary.status is RunStatus.HANDED_OFF
        assert selected[0]["excluded"] == {"lookup_order_copy": "not allowed for this intent"}


# ------------------------------------------------------------------ 5. sync tools off the loop

HAND_OFF_WAIT_S = 30.0
"""How long a side waits for the other. Reached only when the loop is blocked (the bug);
then the test fails with the timeout's message rather than hanging."""


class Done(BaseModel):
    released: bool


PATIENT = ToolPolicy(timeout_s=HAND_OFF_WAIT_S * 2, retry=NO_RETRY)


async def test_a_sync_tool_runs_in_a_thread_while_the_loop_serves_other_steps() -> None:
    """`wait` (sync) blocks until `release` (async, a parallel step) lets it go, and
    `release` first waits until `wait` has started. If `wait` ran on the event loop,
    `release` could never run while it waits: `wait` reports that it was not released."""
    entered, released = threading.Event(), threading.Event()
    threads: dict[str, int] = {}

    @tool(policy=PATIENT)
    def wait() -> Done:
        """Block until released."""
        threads["wait"] = threading.get_ident()
        entered.set()
        return Done(released=released.wait(HAND_OFF_WAIT_S))

    @tool(policy=PATIENT)
    async def release() -> Done:
        """Release `wait` once it is waiting."""
        threads["loop"] = threading.get_ident()
        started = await asyncio.to_thread(entered.wait, HAND_OFF_WAIT_S)
        released.set()
        return Done(released=started)

    agent = _agent(
        [wait, release],
        [
            {"id": "w", "tool": "wait", "args": {}, "facts": {"w": "result.released"}},
            {"id": "r", "tool": "release", "args": {}, "facts": {"r": "result.released"}},
        ],
    )
    runtime = _runtime(agent)
    summary = await runtime.start("go")
    assert summary.status is RunStatus.FINISHED, summary.reply
    facts = {
        e.data["name"]: e.data["value"]
        for e in await runtime.events(summary.run_id)
        if e.type is EventType.FACT_WRITTEN
    }
    assert facts == {"w": True, "r": True}
    assert threads["wait"] != threads["loop"]


# ------------------------------------------------------------------ 6. per-layer temperature


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI().start()
    yield server
    server.stop()


TEMPERATURES = {"extract": 0.15, "intent": 0.65, "plan": 0.35, "judge": 0.45, "reply": 0.55}
"""None is 0.0, the default and the fallback, so a layer that ignores its setting shows."""


async def test_each_layer_sends_its_configured_temperature_to_the_model(fake: FakeOpenAI) -> None:
    """Two runs over real HTTP ask the model for all five purposes. The temperature each
    request carried on the wire must be the one configured for the layer that asked."""

    @tool
    def lookup(order_id: str) -> Found:
        """Find an order."""
        return Found(order_id=order_id)

    model = OpenAICompatibleModel(
        "fake-model", base_url=fake.base_url, api_key="test", timeout_s=5.0
    )
    config = parse_config(
        {
            "name": "temperatures",
            "entities": {
                "order_id": {"kind": "pattern", "patterns": [r"(A\d+)"]},
                "city": {"kind": "pattern"},  # no pattern: only the model can find it
            },
            "intents": [
                {"name": "check", "route": "plan", "plan": "judged", "reply": "done"},
                {
                    "name": "improvise",
                    "rules": [{"keywords": ["improvise"], "confidence": 0.95}],
                    "route": "plan",
                    "planner": "model",
                    "tools": ["lookup"],
                    "reply": "done",
                },
            ],
            "plans": {
                "judged": {
                    "steps": [
                        {
                            "id": "s1",
                            "tool": "lookup",
                            "args": {"order_id": "$entities.order_id"},
                            "judge": "the order exists",
                        }
                    ]
                }
            },
            "templates": {"done": {"zh": "完成", "en": "done"}},
            "model": {
                "intent_fallback": True,
                "extract_entities": True,
                "replies": True,
                "temperatures": TEMPERATURES,
            },
        }
    )
    runtime = _runtime(Agent.build(config, [lookup], model=model))
    no_city, reply = json.dumps({"entities": {}}), json.dumps({"text": "All done."})
    fake.script(
        no_city,
        json.dumps({"label": "check", "confidence": 0.9}),
        json.dumps({"passed": True, "reason": "it was found"}),
        reply,
        no_city,
        json.dumps({"steps": [{"id": "s1", "tool": "lookup", "args": {"order_id": "A1"}}]}),
        reply,
    )
    asked: list[str] = []
    for message in ("could you check A1 for me", "improvise something for A1"):
        summary = await runtime.start(message)
        assert summary.status is RunStatus.FINISHED and summary.reply == "All done."
        events = await runtime.events(summary.run_id)
        asked += [e.data["purpose"] for e in events if e.type is EventType.MODEL_CALL]
    assert asked == ["extract", "intent", "judge", "reply", "extract", "plan", "reply"]
    sent = [body["temperature"] for body in fake.requests]
    assert sent == [TEMPERATURES[purpose] for purpose in asked]
