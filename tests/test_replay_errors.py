"""Replay of runs whose tools failed, and replays that must diverge.

A replay answers every tool call from the log: a recorded failure is reproduced with its
code and retryability, without calling the tool. A replay that would call another tool
than the recorded one, or feed an input the new path does not wait for, reports a
divergence instead of inventing an answer.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from corral import Agent, EventType, MemoryStore, RunStatus, Runtime, parse_config, tool
from corral.errors import RunNotFoundError, ToolFailedError, TransientToolError
from corral.events import Event
from corral.runtime.replay import ReplayEffects, replay_run
from corral.testing import FixedEffects
from tests.one_intent import one_intent

CALLS: list[str] = []


class Order(BaseModel):
    order_id: str
    city: str


@tool
def lookup(order_id: str) -> Order:
    """Find an order; the provider is down."""
    CALLS.append(f"lookup {order_id}")
    raise ToolFailedError("order service is down")


@tool
def flaky(order_id: str) -> Order:
    """Find an order; the first call times out, the second answers."""
    CALLS.append(f"flaky {order_id}")
    if CALLS.count(f"flaky {order_id}") == 1:
        raise TransientToolError("timed out")
    return Order(order_id=order_id, city="Lyon")


@tool
def other(order_id: str) -> Order:
    """Another lookup the recorded run never called."""
    CALLS.append(f"other {order_id}")
    return Order(order_id=order_id, city="Paris")


def agent(
    step_tool: str, *, route: str = "plan", reply: str = "done {order_id}", pattern: str = ""
) -> Agent:
    steps = [{"id": "s1", "tool": step_tool, "args": {"order_id": "$entities.order_id"}}]
    entities = {"order_id": {"kind": "pattern", "patterns": [pattern]}} if pattern else None
    config = one_intent(
        "track", steps=steps, entities=entities, requires=["order_id"], route=route, reply=reply
    )
    return Agent.build(parse_config(config), [lookup, flaky, other])


async def record(chosen: Agent, *messages: str) -> tuple[Any, list[Event]]:
    runtime = Runtime(chosen, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start(messages[0])
    for answer in messages[1:]:
        summary = await runtime.resume(summary.run_id, answer=answer)
    return summary, await runtime.events(summary.run_id)


def attempts(events: list[Event]) -> list[tuple[Any, ...]]:
    return [
        (e.data["step_id"], e.data["attempt"], e.data["status"], e.data.get("error_code"))
        for e in events
        if e.type is EventType.TOOL_ATTEMPT
    ]


async def test_a_recorded_tool_failure_is_replayed_without_calling_the_tool() -> None:
    CALLS.clear()
    summary, events = await record(agent("lookup"), "track A1")
    assert summary.status is RunStatus.HANDED_OFF and CALLS == ["lookup A1"]
    assert attempts(events) == [("s1", 1, "error", "TOOL_FAILED")]
    CALLS.clear()
    report = await replay_run(agent("lookup"), events)
    assert report.same_path, report
    assert report.error is None and report.replayed_events == report.original_events
    assert CALLS == []


async def test_a_recorded_retry_replays_both_attempts_from_the_log() -> None:
    CALLS.clear()
    summary, events = await record(agent("flaky"), "track A2")
    assert summary.status is RunStatus.FINISHED and summary.reply == "done A2"
    assert attempts(events) == [("s1", 1, "error", "TOOL_TRANSIENT"), ("s1", 2, "success", None)]
    CALLS.clear()
    report = await replay_run(agent("flaky"), events)
    assert report.same_path, report
    assert CALLS == []


async def test_a_changed_tool_diverges_and_neither_tool_is_called() -> None:
    CALLS.clear()
    _, events = await record(agent("lookup"), "track A1")
    CALLS.clear()
    report = await replay_run(agent("other"), events)
    assert not report.same_path and report.error is None
    assert CALLS == []  # the replay never runs a real tool, even one it was not given
    assert report.original is not None and report.replayed is not None
    assert report.original[:3] == ("step_started", "s1", "lookup")
    assert report.replayed[:3] == ("step_started", "s1", "other")


async def test_a_call_to_an_unrecorded_tool_is_answered_with_the_divergence_code() -> None:
    """The replay's own log: the step's tool is entered, and told it diverged."""
    _, events = await record(agent("lookup"), "track A1")
    CALLS.clear()
    runtime = Runtime(agent("other"), MemoryStore(), effects=ReplayEffects.from_events(events))
    summary = await runtime.start("track A1")
    assert CALLS == [] and summary.status is RunStatus.HANDED_OFF
    assert attempts(await runtime.events(summary.run_id)) == [("s1", 1, "error", "REPLAY_DIVERGED")]


async def test_changed_arguments_to_the_same_tool_diverge() -> None:
    """The entity pattern changed since the run was recorded: same tool, another order id.

    The reply does not show the id, so only the tool call itself can tell the runs apart.
    """
    CALLS.clear()
    _, events = await record(agent("flaky", reply="done"), "track A12")
    assert CALLS == ["flaky A12", "flaky A12"]
    CALLS.clear()
    report = await replay_run(agent("flaky", reply="done", pattern=r"\b(A\d)"), events)
    assert CALLS == []
    assert not report.same_path
    assert report.original is not None and report.replayed is not None
    assert report.original[:4] == ("tool_attempt", "s1", "flaky", "error")
    assert report.replayed[:4] == ("tool_attempt", "s1", "flaky", "error")
    assert report.original[5] == "TOOL_TRANSIENT" and report.replayed[5] == "REPLAY_DIVERGED"
    # the unchanged agent still replays the same log on the same path
    assert (await replay_run(agent("flaky", reply="done"), events)).same_path


async def test_a_tool_whose_parameters_changed_diverges() -> None:
    """The recorded arguments no longer validate for the tool of the same name."""

    @tool
    def lookup(order_id: str, region: str) -> Order:
        """Find an order in a region."""
        CALLS.append(f"regional lookup {order_id}")
        return Order(order_id=order_id, city="Lyon")

    _, events = await record(agent("lookup"), "track A1")
    CALLS.clear()
    steps = [
        {"id": "s1", "tool": "lookup", "args": {"order_id": "$entities.order_id", "region": "eu"}}
    ]
    changed = Agent.build(parse_config(one_intent("track", steps=steps)), [lookup])
    runtime = Runtime(changed, MemoryStore(), effects=ReplayEffects.from_events(events))
    summary = await runtime.start("track A1")
    assert CALLS == []
    assert attempts(await runtime.events(summary.run_id)) == [("s1", 1, "error", "REPLAY_DIVERGED")]
    assert not (await replay_run(changed, events)).same_path


async def test_an_input_the_new_path_does_not_wait_for_is_a_divergence() -> None:
    # recorded: the order id was asked for, then given
    _, events = await record(agent("other"), "track my parcel", "it is A9")
    assert any(e.type is EventType.USER_ANSWERED for e in events)
    # replayed with an agent that answers at once: the run ends before the answer comes
    report = await replay_run(agent("other", route="reply"), events)
    assert not report.same_path
    assert report.error is not None and "RUN_NOT_RESUMABLE" in report.error


async def test_a_log_without_its_start_is_refused() -> None:
    _, events = await record(agent("other"), "track A4")
    with pytest.raises(RunNotFoundError):
        await replay_run(agent("other"), events[1:])
    with pytest.raises(RunNotFoundError):
        await replay_run(agent("other"), [])


async def test_a_run_a_session_message_approved_replays_on_the_same_path() -> None:
    """On main the replay approved by ``resume`` and left out the session's "yes" message
    the recorded log holds before its decision: every such run diverged at that event."""
    from corral import MemoryStore, Runtime
    from corral.runtime.replay import replay_run
    from corral.testing import FixedEffects
    from tests.test_confirmation_scope import voucher_desk

    agent, calls = voucher_desk(rewrite=False)
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    asked = await runtime.start("go 5", session_id="s1")
    done = await runtime.start("好的", session_id="s1")
    assert done.run_id == asked.run_id and calls == ["refund 5"]
    report = await replay_run(agent, await runtime.events(asked.run_id))
    assert report.same_path, report
