"""Which request a follow-up line asks again ("那 OD… 呢？", "不对，是 OD…").

The line itself is read by ``corral.intent.follow_up``. What it may ask again is decided
here, by code, from the session and the agent: the last request this agent understood
and planned for, and only one whose plan carries out no write without asking first. A
bare "C20003" after a P0 fault must not page on-call for a customer who reported nothing,
nor "HD20240501" after a repair book one for another machine: such a plan's writes ask
nobody, so its follow-ups are asked what they mean instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral.agent import Agent
from corral.contracts import RouteAction, RunStatus
from corral.errors import ConfigInvalidError
from corral.intent.follow_up import FollowUp
from corral.planning.validate import CompiledStep, PlanGraph
from corral.routing.router import choose_plan, required_entities
from corral.runtime.state import RunState
from corral.store.base import SessionRecord

FOLLOWED_STATUSES = frozenset(
    {RunStatus.FINISHED.value, RunStatus.AWAITING_CONFIRM.value, RunStatus.FAILED.value}
)
"""A turn that ended in one of these was understood: a follow-up asks it again, of another
value (a declined request too: it finished, and a correction declines one). Not one that
asked what the user meant, nor one handed to a person."""


def request_of(state: RunState) -> str | None:
    """The intent a run understood and went on to plan for (a turn's ``request``), if any.

    Not the label of a message that was unclear (a guess below the threshold), nor one
    answered from a template: a follow-up asks only a request that did something again.
    A line that asked again for a waiting request (outcome ``repeated``) stands for it:
    "不对，是 HD…" after it corrects that request.
    """
    route = state.route
    if route is None and state.outcome == "repeated" and state.intent is not None:
        return state.intent.label
    return route.intent if route is not None and route.action is RouteAction.PLAN else None


def last_request(session: SessionRecord | None, agent: str) -> str | None:
    """The request of the session's last turn, if this agent understood it (``follows``).

    A session id shared by agents holds the turns of whichever spoke last: another
    agent's request is not this one's to ask again, even under a name both declare.
    """
    if session is None or not session.turns or session.agent != agent:
        return None
    last = session.turns[-1]
    label = last.get("request")
    followed = isinstance(label, str) and last.get("status") in FOLLOWED_STATUSES
    return label if followed else None


def may_follow(agent: Agent, intent: str, line: FollowUp) -> bool:
    """Whether ``line`` may ask ``intent`` again (see the module).

    The intent still declared, planned from templates, none of whose writes runs without
    the person's yes; a bare value (no frame word) only for an entity the intent needs:
    one it ``requires``, or one a plan of it reads as ``$entities.x``.
    """
    try:
        spec = agent.config.intent(intent)
    except ConfigInvalidError:  # the agent no longer declares it
        return False
    if spec.route is not RouteAction.PLAN or not asks_before_writing(agent, spec.name):
        return False
    if line.kind != "bare":
        return True
    needed = set(required_entities(agent.config, spec.name, spec.plan))
    for name, template in agent.template_graphs:  # and what its plans cannot run without:
        if name == spec.name:  # "OD…" after "查一下 OD… 和 OD…" (``others_named``)
            needed.update(agent.template_entities.get(template, ()))
    return bool(line.named & needed)


def asks_before_writing(agent: Agent, intent: str) -> bool:
    """Whether every plan template of ``intent`` asks the person before each write.

    ``False`` for an intent a model plans for: what its plan would write is not known.
    """
    graphs = _templates(agent, intent)
    return bool(graphs) and all(_asks(step) for graph in graphs for step in graph.steps.values())


def plans_a_write(agent: Agent, intent: str) -> bool:
    """Whether a plan template of ``intent`` calls a write tool: a request that acts."""
    return any(_writes(graph) for graph in _templates(agent, intent))


def plans_only_reads(agent: Agent, intent: str, entities: Mapping[str, Any]) -> bool:
    """Whether ``intent`` plans, and the template it takes for ``entities`` writes nothing.

    The template its plan rules choose for those values (``choose_plan``): "查订单" plans
    a search, though "取消 OD… 这单" by the same intent plans a cancellation. An intent
    that replies, hands off or asks plans nothing: ``False``.
    """
    spec = agent.config.intent(intent)
    if spec.route is not RouteAction.PLAN:
        return False
    template = choose_plan(agent.config, intent, entities, agent.policy.plan_rules.get(intent))
    graph = agent.template_graphs.get((intent, template)) if template else None
    return graph is not None and not _writes(graph)


def template_writes(agent: Agent, intent: str | None, template: str | None) -> bool:
    """Whether ``intent``'s plan template ``template`` calls a write tool."""
    graph = agent.template_graphs.get((intent, template)) if intent and template else None
    return graph is not None and _writes(graph)


def _writes(graph: PlanGraph) -> bool:
    """Whether a step of ``graph`` calls a write tool."""
    return any(step.spec.policy.kind == "write" for step in graph.steps.values())


def _templates(agent: Agent, intent: str) -> list[PlanGraph]:
    """The compiled plan templates of ``intent``."""
    return [graph for (name, _), graph in agent.template_graphs.items() if name == intent]


def _asks(step: CompiledStep) -> bool:
    """A read, or a write whose step or tool asks for approval first."""
    policy = step.spec.policy
    return policy.kind != "write" or policy.requires_confirmation or step.step.requires_confirmation


def names_its_own_value(
    agent: Agent, intent: str, found: Mapping[str, Any], known: Mapping[str, Any]
) -> bool:
    """Whether a line read as ``intent`` names (``found``) a value it needs, not ``known``'s.

    "取消订单 OD2611280008" typed at OD2611250001's question for a new address names the
    order its cancellation needs: a request of its own, no address. A value the request
    does not need ("北京市朝阳区建国路1号，周五前送不到就取消订单": a date; "寄到售后服务中心
    13800138000": a phone), or the one the question's run holds already, is part of an
    answer.
    """
    needed = required_entities(agent.config, intent, None)
    return any(name in needed and known.get(name) != value for name, value in found.items())
