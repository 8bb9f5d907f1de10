"""Review of the performance branches: each fast path must answer as the slow one did.

Each test here compares a computation made faster with the one it replaced (or with a
full recompute), over the cases users hit and over generated values.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral import DEFAULT_GATES, Agent, EventType, GateRun, MemoryStore, Proposal, Runtime, tool
from corral.config import PriorityWords
from corral.decision import Answer, Gate
from corral.decision.priority import PriorityDetector, detect_priority
from corral.effects import FixedEffects
from corral.hashing import canonical_json
from corral.runtime.runtime import summarize_run
from corral.runtime.state import fold
from corral.verify.loop_guard import LoopGuard
from tests.helpers import build_agent
from tests.test_gates_and_verifiers import CALLS as REFUNDS
from tests.test_gates_and_verifiers import agent as refund_agent
from tests.test_gates_and_verifiers import run as run_refund
from tests.test_priority import flights_agent, started
from tests.test_signals import Value, city_agent

WORDS = PriorityWords()

# ------------------------------------------------------------------ priority words


def test_the_per_agent_detector_reads_full_width_words_as_detect_priority_does() -> None:
    """Text is compared in NFKC form: the detector's first look must be in that form too,
    or 'ＡＳＡＰ' typed with a Chinese input method is read as naming no priority."""
    detector = PriorityDetector(WORDS)
    for message in ("ＡＳＡＰ！", "Ｃｈｅａｐｅｓｔ please", "ｕｒｇｅｎｔ", "asap"):
        assert detector.detect(message) == detect_priority(message, WORDS), message
    assert detector.detect("ＡＳＡＰ！").priority == "urgent"


_PIECES = ("急", "不", "便宜", "ＡＳＡＰ", "Ａ", "ｓ", "asap", "ASAP", "cheap", "Ｃ", "ﬁ", "!", "İ")
_LETTERS = st.sampled_from([*_PIECES, "ß", " "])


@settings(max_examples=300, deadline=None)
@given(st.lists(_LETTERS, max_size=8).map("".join))
def test_the_detector_answers_as_detect_priority_for_any_message(message: str) -> None:
    assert PriorityDetector(WORDS).detect(message) == detect_priority(message, WORDS)


async def test_a_full_width_urgent_message_makes_an_urgent_run() -> None:
    agent = flights_agent(priority_words={"urgent": ["rush"], "budget": ["frugal"]})
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    rushed = await runtime.start("go ＲＵＳＨ")
    assert started(runtime, rushed.run_id)["priority"] == "urgent"


# ------------------------------------------------------------------ the loop guard's keys

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
    | st.dates()
    | st.datetimes()
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_JSON)
def test_canonical_json_is_json_dumps_with_sorted_keys(value: object) -> None:
    """The C encoder built once writes what ``json.dumps`` writes (idempotency keys and
    model fingerprints hash this text: a difference would change stored digests)."""
    expected = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    assert canonical_json(value) == expected


_FACTS = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c", "order"]), _JSON), min_size=1, max_size=12
)


@settings(max_examples=200, deadline=None)
@given(_FACTS, st.randoms(use_true_random=False))
def test_the_running_facts_digest_is_a_full_recompute_in_any_write_order(
    writes: list[tuple[str, object]], rng: random.Random
) -> None:
    """Facts written one by one (a value replaced, in any order) give the digest of the
    facts as they end, computed afresh: equal states, equal keys; different, different."""
    running = LoopGuard()
    final: dict[str, object] = {}
    for name, value in writes:
        running.fact_written(name, value)
        final[name] = value
    fresh = LoopGuard()
    items = list(final.items())
    rng.shuffle(items)
    for name, value in items:
        fresh.fact_written(name, value)
    assert running.facts_digest == fresh.facts_digest
    assert running.fact_digests == fresh.fact_digests


# ------------------------------------------------------------------ the run row's summary


class _CheckedStore(MemoryStore):
    """A store that holds every save's row summary to the dump of the folded run."""

    def __init__(self) -> None:
        super().__init__()
        self.checked = 0

    def save(self, run: Any, new_events: Any, *args: Any, **kwargs: Any) -> None:
        super().save(run, new_events, *args, **kwargs)
        state = fold(run.run_id, self.load_events(run.run_id))
        dumped = summarize_run(state).model_dump(mode="json", exclude={"handoff"})
        assert run.summary == dumped
        assert json.dumps(run.summary, ensure_ascii=False) == json.dumps(dumped, ensure_ascii=False)
        self.checked += 1


@tool
def broken(n: int) -> Value:
    raise RuntimeError("the service is down")


async def test_every_saved_row_summary_is_the_summary_dump_whatever_the_run_did(
    aftersales: Agent, effects: FixedEffects
) -> None:
    store = _CheckedStore()
    runtime = Runtime(aftersales, store, effects=effects)
    paused = await runtime.start("我的打印机上周坏了，订单号 HD20240501，能换新吗？")
    await runtime.resume(paused.run_id, approve=False)  # declined: cancelled
    again = await runtime.start("我的打印机上周坏了，订单号 HD20240501，能换新吗？")
    await runtime.resume(again.run_id, approve=True)
    for message in ("我想申请换新", "你们这个打印机真是气死我了！", "Hello there", "查一下订单"):
        await runtime.start(message)
    calls: list[str] = []
    cities = Runtime(city_agent(calls), store, effects=effects)
    asked = await cities.start("weather in shanghai or beijing tomorrow?")
    await cities.resume(asked.run_id, answer="the second one")
    await cities.resume(asked.run_id, answer="whichever")  # handed off, with signals
    failing = Runtime(
        build_agent([broken], [{"id": "s1", "tool": "broken", "args": {"n": 1}}]),
        store,
        effects=effects,
    )
    failed = await failing.start("go")
    assert failed.steps[0].error_code is not None
    assert store.checked >= 12


# ------------------------------------------------------------------ a sealed step


@dataclass(frozen=True)
class _CopyOnly:
    """A gate that passes the step on as an equal copy (as a gate may)."""

    def check(self, proposal: Proposal, run: GateRun) -> Answer:
        return replace(proposal, args=dict(proposal.args))


@dataclass(frozen=True)
class _FillsInPlace:
    """A gate that fills a value into the arguments it was given, after they were sealed."""

    def check(self, proposal: Proposal, run: GateRun) -> Answer:
        proposal.args["amount"] = 9999.0
        return proposal


@pytest.mark.parametrize("before", [(), (_CopyOnly(),)], ids=["sealed", "copied"])
async def test_arguments_changed_in_place_after_the_seal_fail_the_step(
    before: tuple[Gate, ...],
) -> None:
    """What is validated is what runs and what the log says ran: a gate after
    ``ValidateArguments`` that changes the arguments in place (``args[k] = v``) fails the
    step with ``EXTENSION_FAILED``, as one that returns changed arguments does. Without
    the check the tool ran with the validated 300 while ``step_started`` said 9999; after
    an equal copy (``copied``) the check was skipped as ``answer is proposal``."""
    gates = (*DEFAULT_GATES, *before, _FillsInPlace())
    summary, events = await run_refund(refund_agent(300, gates=gates))
    assert REFUNDS == []
    assert summary.steps[0].error_code == "EXTENSION_FAILED"
    assert [e for e in events if e.type is EventType.STEP_STARTED] == []


async def test_a_gate_after_the_seal_that_changes_nothing_lets_the_step_run() -> None:
    gates = (*DEFAULT_GATES, _CopyOnly(), _CopyOnly())
    summary, events = await run_refund(refund_agent(300, gates=gates))
    assert (summary.outcome, REFUNDS) == ("success", [300.0])
    started = next(e for e in events if e.type is EventType.STEP_STARTED)
    assert started.data["args"] == {"amount": 300.0}
