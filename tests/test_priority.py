"""Decision by task priority (issue 13 §3, seed 001 "查机票").

Two equivalent flight searches: a fast, expensive one and a cheap, slow one. The run's
priority (from the caller, or the message's words) ranks them: urgent by latency (the
observed p95 once the store has enough calls, else the declared one), budget-conscious
and normal by price. Close scores are a tie for the model, or for the fixed order.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from corral import MemoryStore, Runtime, SqlStore, ToolPolicy, parse_config, tool
from corral.agent import Agent
from corral.config import PriorityWords
from corral.contracts import EventType
from corral.decision.priority import detect_priority
from corral.effects import FixedEffects
from corral.errors import InvalidArgumentError
from corral.models.base import ModelRequest
from corral.models.scripted import ScriptedModel
from corral.runtime.replay import replay_run
from corral.tools.spec import ToolSpec
from tests.helpers import build_agent, corral_cli, write_agent


class Flights(BaseModel):
    found: int


def search(name: str, latency_ms: float, cost: float) -> ToolSpec:
    policy = ToolPolicy(equivalent_group="flights", latency_ms=latency_ms, cost=cost)

    def run() -> Flights:
        return Flights(found=1)

    run.__doc__ = f"Search flights ({name})."
    return tool(name=name, policy=policy)(run)


FAST = search("search_fast", 80, 5.0)
CHEAP = search("search_cheap", 900, 1.0)


class TimedEffects(FixedEffects):
    """FixedEffects whose monotonic clock a tool call advances by that tool's duration.

    So a tool's recorded ``duration_ms`` is exactly what the test says, with no sleep.
    """

    def __init__(self, durations: dict[str, float]) -> None:
        super().__init__()
        self.durations = durations
        self.clock = 0.0

    def monotonic(self) -> float:
        return self.clock

    async def call_tool(self, spec: Any, args: Any, context: Any, timeout_s: float) -> Any:
        self.clock += self.durations.get(spec.name, 0.0) / 1000.0
        return await super().call_tool(spec, args, context, timeout_s)


def flights_agent(
    tools: list[ToolSpec] | None = None, planned: str = "search_fast", **decision: Any
) -> Agent:
    tools = tools or [FAST, CHEAP]
    base = build_agent(tools, [{"id": "s1", "tool": planned}])
    config = parse_config({**base.config.model_dump(), "decision": decision})
    return Agent.build(config, tools)


def selected(runtime: Runtime, run_id: str) -> list[dict[str, Any]]:
    events = runtime.store.load_events(run_id)
    return [e.data for e in events if e.type is EventType.TOOL_SELECTED]


def started(runtime: Runtime, run_id: str) -> dict[str, Any]:
    return runtime.store.load_events(run_id)[0].data


def called(summary: Any) -> str:
    [step] = summary.steps
    return str(step.tool)


# ------------------------------------------------------------------ detection


WORDS = PriorityWords()


@pytest.mark.parametrize(
    ("message", "priority"),
    [
        ("明天上午去上海的航班，急！", "urgent"),
        ("尽快帮我订", "urgent"),
        ("马上查一下", "urgent"),
        ("赶紧的", "urgent"),
        ("Flights to Shanghai ASAP", "urgent"),
        ("this is urgent", "urgent"),
        ("book it right away", "urgent"),
        ("下周去成都的机票，越便宜越好", "budget"),
        ("要便宜的", "budget"),
        ("想省钱", "budget"),
        ("the cheapest flight please", "budget"),
        ("on a tight budget", "budget"),
        ("明天去上海的航班", "normal"),
        ("flights to Chengdu next week", "normal"),
        # negation: the word does not count
        ("不急，慢慢来", "normal"),
        ("不用急", "normal"),
        ("别着急", "normal"),
        ("not urgent at all", "normal"),
        ("no rush, not urgent", "normal"),
        ("不要便宜的", "normal"),
        # a negated word does not hide a later plain one
        ("不急，但要便宜", "budget"),
        # both kinds: urgent wins (a deadline is hard, a price soft)
        ("急！越便宜越好", "urgent"),
        # an English negation must start a word; a keyword too
        ("casino cheap tickets", "budget"),
        ("nasap", "normal"),
    ],
)
def test_priority_is_detected_from_the_message_in_chinese_and_english(
    message: str, priority: str
) -> None:
    assert detect_priority(message, WORDS).priority == priority


def test_the_word_that_decided_is_named() -> None:
    found = detect_priority("下周去成都的机票，越便宜越好", WORDS)
    assert found.source == "message: 便宜"
    assert detect_priority("hello", WORDS).source == "default"


async def test_priority_words_come_from_agent_yaml() -> None:
    agent = flights_agent(priority_words={"urgent": ["rush"], "budget": ["frugal"]})
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    rushed = await runtime.start("go rush")
    assert started(runtime, rushed.run_id)["priority"] == "urgent"
    plain = await runtime.start("go 急")  # the default words were replaced
    assert started(runtime, plain.run_id)["priority"] == "normal"
    frugal = await runtime.start("go, be frugal")
    assert called(frugal) == "search_cheap"


# ------------------------------------------------------------------ the rules


async def test_an_urgent_run_takes_the_fast_tool_and_says_why() -> None:
    runtime = Runtime(flights_agent(planned="search_cheap"), MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go 明天上午去上海的航班，急！")
    assert called(summary) == "search_fast"
    assert started(runtime, summary.run_id)["priority_source"] == "message: 急"
    [event] = selected(runtime, summary.run_id)
    assert event["priority"] == "urgent"
    assert event["reason"] == "urgent: lowest latency (declared 80 ms)"
    assert event["candidates"] == ["search_fast", "search_cheap"]
    assert event["scores"]["search_fast"] == {"latency_ms": 80, "cost": 5.0, "observed_calls": 0}
    assert event["scores"]["search_cheap"]["latency_ms"] == 900


async def test_a_budget_run_takes_the_cheap_tool() -> None:
    runtime = Runtime(flights_agent(), MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go 下周去成都的机票，越便宜越好")
    assert called(summary) == "search_cheap"
    [event] = selected(runtime, summary.run_id)
    assert (event["priority"], event["reason"]) == ("budget", "budget: lowest price (1)")


async def test_a_normal_run_ranks_by_price_by_default() -> None:
    runtime = Runtime(flights_agent(), MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go 下周去成都的机票")
    assert called(summary) == "search_cheap"
    assert started(runtime, summary.run_id)["priority"] == "normal"
    # a normal run's pick is recorded as before the priorities: no priority fields
    [event] = selected(runtime, summary.run_id)
    assert event["reason"] == "best ranked" and "priority" not in event


async def test_an_agent_may_still_prefer_latency_for_normal_runs() -> None:
    base = flights_agent()
    config = parse_config({**base.config.model_dump(), "tool_preference": "latency"})
    runtime = Runtime(Agent.build(config, [FAST, CHEAP]), MemoryStore(), effects=FixedEffects())
    assert called(await runtime.start("go")) == "search_fast"
    assert called(await runtime.start("go cheapest")) == "search_cheap"


async def test_the_caller_overrides_the_message() -> None:
    runtime = Runtime(flights_agent(), MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go 越便宜越好", priority="urgent")
    assert called(summary) == "search_fast"
    assert started(runtime, summary.run_id)["priority_source"] == "caller"
    plan = await runtime.run_plan("p", priority="budget")
    assert called(plan) == "search_cheap"
    assert started(runtime, plan.run_id)["priority"] == "budget"
    with pytest.raises(InvalidArgumentError, match="unknown priority 'soon'"):
        await runtime.start("go", priority="soon")


async def test_a_degraded_fast_tool_gives_way_to_the_cheap_one() -> None:
    calls: list[str] = []

    @tool(name="search_fast", policy=ToolPolicy(equivalent_group="flights", latency_ms=80, cost=5))
    def failing() -> Flights:
        calls.append("fast")
        raise ConnectionError("503")

    runtime = Runtime(flights_agent([failing, CHEAP]), MemoryStore(), effects=FixedEffects())
    first = await runtime.start("go 急")
    assert called(first) == "search_cheap"  # the fast one failed; the fallback served
    await runtime.start("go 急")
    tries = len(calls)
    third = await runtime.start("go 急")  # degraded after two failed runs: not tried first
    assert called(third) == "search_cheap" and len(calls) == tries


# ------------------------------------------------------------------ observed latency


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_observed_p95_replaces_the_declared_latency_once_there_are_enough_calls(
    backend: str, tmp_path: Path
) -> None:
    store = MemoryStore() if backend == "memory" else SqlStore.open(tmp_path / "corral.db")
    # declared: fast 80 ms, cheap 900 ms. Observed: the "fast" one really takes 2 s.
    effects = TimedEffects({"search_fast": 2000.0, "search_cheap": 50.0})
    runtime = Runtime(flights_agent(min_observations=5), store, effects=effects)
    for _ in range(4):
        await runtime.start("go", priority="urgent")  # fast (declared), 2000 ms each
        await runtime.start("go", priority="budget")  # cheap, 50 ms each
    fourth = await runtime.start("go", priority="urgent")  # 4 calls each: not enough yet
    assert called(fourth) == "search_fast"
    assert started(runtime, fourth.run_id)["observed_latency"]["search_fast"] == {
        "p95_ms": 2000.0,
        "calls": 4,
    }
    await runtime.start("go", priority="budget")  # cheap's 5th call
    summary = await runtime.start("go 急")  # fast has 5 now too
    assert called(summary) == "search_cheap"
    [event] = selected(runtime, summary.run_id)
    assert event["reason"] == "urgent: lowest p95 (observed 50 ms over 5 calls)"
    assert event["scores"]["search_fast"] == {
        "latency_ms": 2000.0,
        "cost": 5.0,
        "observed_calls": 5,
    }
    # the replay ranks by the figures the run recorded, not by its own empty store
    report = await replay_run(runtime.agent, runtime.store.load_events(summary.run_id))
    assert report.same_path, report


class AskedStore(MemoryStore):
    """A memory store that records what each run start asks the latency of."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[tuple[str, ...], int]] = []

    def tool_latency(self, agent: str, tools: Any, last: int, timeouts_ms: Any = None) -> Any:
        self.asked.append((tuple(sorted(tools)), last))
        self.timeouts_ms = timeouts_ms
        return super().tool_latency(agent, tools, last, timeouts_ms)


async def test_a_run_start_asks_the_store_only_about_tools_with_equivalents() -> None:
    @tool(name="book", policy=ToolPolicy(latency_ms=10, cost=1))
    def book() -> Flights:
        return Flights(found=1)

    @tool(name="hotels", policy=ToolPolicy(equivalent_group="hotels", latency_ms=10, cost=1))
    def alone() -> Flights:  # a group of one: no equivalent
        return Flights(found=1)

    plain = AskedStore()
    lone = build_agent([book, alone], [{"id": "s1", "tool": "book"}])
    await Runtime(lone, plain).start("go", priority="urgent")
    assert plain.asked == []  # no equivalents: no query at all

    grouped = AskedStore()
    agent = flights_agent([FAST, CHEAP, book, alone], latency_window=7)
    await Runtime(agent, grouped).start("go", priority="urgent")
    await Runtime(agent, grouped).start("go")
    # one query per start, for the grouped tools only, over decision.latency_window
    assert grouped.asked == [(("search_cheap", "search_fast"), 7)] * 2
    # with each tool's timeout: a call cut off at it counts, at the time it took
    assert grouped.timeouts_ms == {"search_cheap": 10_000.0, "search_fast": 10_000.0}


class ThreeArgumentStore(MemoryStore):
    """A store written for ``tool_latency(agent, tools, last)``, before timeouts counted."""

    def tool_latency(self, agent: str, tools: Any, last: int) -> Any:
        return super().tool_latency(agent, tools, last)


async def test_a_store_with_the_three_argument_form_is_still_asked() -> None:
    store = ThreeArgumentStore()
    effects = TimedEffects({"search_fast": 2000.0, "search_cheap": 50.0})
    runtime = Runtime(flights_agent(min_observations=1), store, effects=effects)
    await runtime.start("go", priority="urgent")
    second = await runtime.start("go", priority="urgent")
    observed = started(runtime, second.run_id)["observed_latency"]
    assert observed == {"search_fast": {"p95_ms": 2000.0, "calls": 1}}
    assert called(second) == "search_cheap"


async def test_observations_are_per_agent_and_other_failures_do_not_count() -> None:
    store = MemoryStore()
    effects = TimedEffects({"search_fast": 2000.0, "search_cheap": 50.0})
    base = flights_agent(min_observations=1)
    other = Agent.build(parse_config({**base.config.model_dump(), "name": "other"}), [FAST, CHEAP])
    await Runtime(other, store, effects=effects).start("go", priority="urgent")  # other's fast

    @tool(name="search_fast", policy=ToolPolicy(equivalent_group="flights", latency_ms=80, cost=5))
    def failing() -> Flights:
        raise ConnectionError("503")

    runtime = Runtime(flights_agent([failing, CHEAP], min_observations=1), store, effects=effects)
    first = await runtime.start("go", priority="urgent")  # fast fails after 2 s; cheap serves
    assert started(runtime, first.run_id)["observed_latency"] == {}
    second = await runtime.start("go", priority="urgent")
    observed = started(runtime, second.run_id)["observed_latency"]
    assert observed == {"search_cheap": {"p95_ms": 50.0, "calls": 1}}


class HalfTimingOut(FixedEffects):
    """``search_fast`` answers in 20 ms, but every other call of it times out.

    ``own_timeout_ms``: how long a timed-out call took. ``None``: the tool's whole timeout
    (corral's deadline cut it off); a number: the tool's own, shorter timeout.
    """

    def __init__(self, own_timeout_ms: float | None) -> None:
        super().__init__()
        self.own_timeout_ms = own_timeout_ms
        self.clock = 0.0
        self.fast_calls = self.fast_timeouts = 0

    def monotonic(self) -> float:
        return self.clock

    async def call_tool(self, spec: Any, args: Any, context: Any, timeout_s: float) -> Any:
        if spec.name != "search_fast":
            self.clock += 0.050
        else:
            self.fast_calls += 1
            if self.fast_calls % 2:
                took = timeout_s if self.own_timeout_ms is None else self.own_timeout_ms / 1000
                self.clock += took
                self.fast_timeouts += 1
                raise TimeoutError
            self.clock += 0.020
        return await super().call_tool(spec, args, context, timeout_s)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
@pytest.mark.parametrize(
    ("own_timeout_ms", "fifth_pick"),
    [
        (None, "search_cheap"),  # cut off at its 10 s deadline: its p95 is the 10 s it took
        (30.0, "search_fast"),  # its own 30 ms timeout says nothing of how long it takes
    ],
)
async def test_a_call_cut_off_at_its_deadline_counts_in_the_observed_p95(
    backend: str, own_timeout_ms: float | None, fifth_pick: str, tmp_path: Path
) -> None:
    store = MemoryStore() if backend == "memory" else SqlStore.open(tmp_path / "corral.db")
    effects = HalfTimingOut(own_timeout_ms)
    runtime = Runtime(flights_agent(min_observations=2), store, effects=effects)
    # declared 80 ms against 900: the fast one is tried until it is observed; a try of it
    # that times out is retried or turned to the cheap one (which answers in 50 ms)
    for _ in range(4):
        assert (await runtime.start("go", priority="urgent")).status.value == "finished"
    answered = effects.fast_calls - effects.fast_timeouts
    assert effects.fast_timeouts >= 1 and answered >= 1
    fifth = await runtime.start("go", priority="urgent")
    observed = started(runtime, fifth.run_id)["observed_latency"]
    if own_timeout_ms is None:
        timed = answered + effects.fast_timeouts
        assert observed["search_fast"] == {"p95_ms": 10_000.0, "calls": timed}
    else:  # observed often enough to be ranked by what it took to answer
        assert observed["search_fast"] == {"p95_ms": 20.0, "calls": answered} and answered >= 2
    assert called(fifth) == fifth_pick


# ------------------------------------------------------------------ ties


TWIN_A = search("search_a", 100, 1.0)
TWIN_B = search("search_b", 105, 1.04)  # within 10 % of A on both measures
PRICEY = search("search_pricey", 100, 50.0)


def scripted(answer: dict[str, Any]) -> ScriptedModel:
    def reply(request: ModelRequest) -> str:
        if request.purpose == "decide":
            return json.dumps(answer)
        return json.dumps({"text": "完成"})

    return ScriptedModel(function=reply)


def tie_agent(model: ScriptedModel | None, planned: str = "search_b") -> Agent:
    agent = flights_agent([TWIN_A, TWIN_B, PRICEY], planned=planned)
    return dataclasses.replace(agent, model=model)


async def test_a_tie_goes_to_the_model_when_one_is_configured() -> None:
    model = scripted({"tool": "search_a", "reason": "more airlines"})
    runtime = Runtime(tie_agent(model), MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    assert called(summary) == "search_a"  # not the planned search_b: the model chose
    [asked] = [r for r in model.requests if r.purpose == "decide"]
    assert asked.schema is not None
    assert asked.schema["properties"]["tool"]["enum"] == ["search_b", "search_a"]
    [event] = selected(runtime, summary.run_id)
    assert event["reason"] == "tie within 10 %: model chose search_a"
    assert event["priority"] == "normal" and set(event["scores"]) == {
        "search_a",
        "search_b",
        "search_pricey",
    }
    events = runtime.store.load_events(summary.run_id)
    assert any(e.type is EventType.MODEL_CALL and e.stage == "decide" for e in events)
    report = await replay_run(runtime.agent, events)
    assert report.same_path, report


@pytest.mark.parametrize("answer", ["search_pricey", "search_nowhere"])
async def test_a_model_naming_a_tool_outside_the_tie_is_ignored(answer: str) -> None:
    runtime = Runtime(tie_agent(scripted({"tool": answer})), MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go")
    assert called(summary) == "search_b"  # the fixed order: the plan's tool
    [event] = selected(runtime, summary.run_id)
    assert event["reason"] == (
        "tie within 10 %: fixed order chose search_b (the plan's tool); "
        f"model answer '{answer}' ignored"
    )


async def test_without_a_model_a_tie_goes_to_the_fixed_order() -> None:
    runtime = Runtime(tie_agent(None), MemoryStore(), effects=FixedEffects())
    planned = await runtime.start("go", priority="budget")
    assert called(planned) == "search_b"  # the plan's tool, though a sorts first
    [event] = selected(runtime, planned.run_id)
    assert event["reason"] == "tie within 10 %: fixed order chose search_b (the plan's tool)"
    runtime = Runtime(
        tie_agent(None, planned="search_pricey"), MemoryStore(), effects=FixedEffects()
    )
    by_name = await runtime.start("go", priority="budget")
    assert called(by_name) == "search_a"  # the plan's tool is not in the tie: the name
    [event] = selected(runtime, by_name.run_id)
    assert event["reason"] == "tie within 10 %: fixed order chose search_a (by name)"


async def test_a_zero_margin_turns_the_tie_into_a_rule() -> None:
    agent = flights_agent([TWIN_A, TWIN_B], planned="search_b", tie_margin=0.0)
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go", priority="urgent")
    assert called(summary) == "search_a"
    [event] = selected(runtime, summary.run_id)
    assert event["reason"] == "urgent: lowest latency (declared 100 ms)"


async def test_close_latencies_leave_the_choice_to_price() -> None:
    near = search("search_near", 104, 9.0)  # within 10 % of A's latency, far dearer
    agent = flights_agent([TWIN_A, near], planned="search_near")
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go 急")
    assert called(summary) == "search_a"
    [event] = selected(runtime, summary.run_id)
    assert event["reason"] == "urgent: latency within 10 %, then lowest price (1)"


# ------------------------------------------------------------------ the CLI


AGENT_YAML = """\
name: flights
default_language: zh
intents:
  - name: search_flights
    rules: [{keywords: [航班, 机票, flight], confidence: 0.95}]
    route: plan
    plan: search
    reply: done
plans:
  search:
    steps: [{id: s1, tool: search_flights_cheap}]
templates:
  done: {zh: 查到了, en: found}
"""

TOOLS_PY = """\
from pydantic import BaseModel

from corral import ToolPolicy, tool


class Flights(BaseModel):
    found: int


@tool(policy=ToolPolicy(equivalent_group="flights", latency_ms=80, cost=5))
def search_flights_fast() -> Flights:
    \"\"\"Search flights: fast, dear.\"\"\"
    return Flights(found=3)


@tool(policy=ToolPolicy(equivalent_group="flights", latency_ms=900, cost=1))
def search_flights_cheap() -> Flights:
    \"\"\"Search flights: slow, cheap.\"\"\"
    return Flights(found=3)
"""


def test_corral_run_takes_a_priority(tmp_path: Path) -> None:
    folder = write_agent(tmp_path / "flights", AGENT_YAML, TOOLS_PY)
    home = tmp_path / "home"
    urgent = corral_cli(home, "run", str(folder), "查航班", "--priority", "urgent", "--json")
    assert [s["tool"] for s in json.loads(urgent.stdout)["steps"]] == ["search_flights_fast"]
    by_words = corral_cli(home, "run", str(folder), "下周去成都的机票，越便宜越好", "--json")
    assert [s["tool"] for s in json.loads(by_words.stdout)["steps"]] == ["search_flights_cheap"]
    wrong = corral_cli(home, "run", str(folder), "查航班", "--priority", "soon", ok=False)
    assert wrong.returncode != 0 and "INVALID_ARGUMENT" in wrong.stdout + wrong.stderr


def test_the_http_api_takes_a_priority_in_the_run_body(tmp_path: Path) -> None:
    from tests.serving import client, load, serving

    folder = write_agent(tmp_path / "flights", AGENT_YAML, TOOLS_PY)
    home = tmp_path / "home"
    with serving(load(folder, home), home=home) as base, client(base) as http:
        body = {"message": "查航班", "priority": "urgent"}
        urgent = http.post("/agents/flights/runs", json=body).json()
        assert [s["tool"] for s in urgent["steps"]] == ["search_flights_fast"]
        plain = http.post("/agents/flights/runs", json={"message": "查航班"}).json()
        assert [s["tool"] for s in plain["steps"]] == ["search_flights_cheap"]
        wrong = http.post("/agents/flights/runs", json={"message": "查航班", "priority": "soon"})
        assert wrong.status_code == 422
