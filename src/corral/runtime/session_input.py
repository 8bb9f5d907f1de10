"""Where a session's next message goes while its open run waits for an answer.

A session's message answers the question its open run asked ("which order?"), unless it
is a request of another task: "我的退款到账了吗 OD2610280005" asked which order to cancel,
"查一下订单 OD2610280005 的物流" asked which order's address to change. Taken as the
answer, such a message went on with the cancel or the change of address; it starts a run
of its own instead, and the open run keeps waiting for its answer (the session's next
message still reaches it). Only another intent's rules decide it, never a guess: a
message no rule claims, or the open run's own intent claims, is the answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral.agent import Agent
from corral.contracts import RouteAction
from corral.runtime.state import RunState


def asks(text: str) -> bool:
    """Whether a line reads as a question (it ends as one does)."""
    return text.rstrip().endswith(("?", "？", "吗", "呢", "么", "嘛"))


def another_request(
    agent: Agent, text: str, slot: str, found: Mapping[str, Any], label: str
) -> str | None:
    """The intent whose request ``text`` is, answering ``slot`` in a run of ``label``.

    ``None`` when no other intent's rules decide it. A free-text answer (``whole_answer``)
    is a request only when it also asks or names something (``found``: the entities read
    in it): "OD2611250001 发货了吗" asked for a new address is, "物流园路8号" is an address
    whatever the logistics rules read in it.
    """
    other = agent.intent.rule_intent(text)
    if other is None or other == label:
        return None
    spec = agent.config.entities.get(slot)
    free_text = spec is not None and spec.whole_answer
    if free_text and not (any(name != slot for name in found) or asks(text)):
        return None
    return other


def another_task(agent: Agent, state: RunState, text: str) -> bool:
    """Whether a session's message is another planned task's request, not an answer.

    The answer the open run (``state``) waits for. An intent that only replies (thanks,
    small talk) never takes an answer away; a run that asked what the user meant takes
    any answer.
    """
    pending, intent = state.pending, state.intent
    label = intent.label if intent is not None else None
    if pending is None or pending.slot is None or label is None or state.received_at is None:
        return False
    found = agent.intent.entities.extract(text, state.received_at, answering=pending.slot)
    other = another_request(agent, text, pending.slot, found, label)
    return other is not None and agent.config.intent(other).route is RouteAction.PLAN
