"""A run started from a plan instead of a message (``Runtime.run_plan``).

Integrations and tests that know what to do should not need a fake regex intent. The
caller's plan is resolved and validated here, completely, before a run exists: an unknown
template or a plan that fails validation raises ``PlanInvalidError`` (the code a model
plan gets) and nothing is stored, nothing runs. What the log then holds in place of
intent classification is a ``routed`` decision that says the plan was given, so the
allow-list, the reply, confirmations and resume work as for a message-started run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from corral.agent import ENTITY_TYPES, Agent
from corral.contracts import Plan, RouteAction, RouteDecision, RunStatus
from corral.effects import Effects
from corral.errors import ConfigInvalidError, InvalidArgumentError, PlanInvalidError
from corral.events import EntitiesMerged, Event, PlanCreated, Routed, RunStarted
from corral.planning.validate import validate_plan
from corral.routing.router import allowed_tools, plan_templates, substitutes
from corral.runtime.journal import Journal

ENTRY_MESSAGE = "message"
"""``run_started.entry`` of a run started by a user's message (``Runtime.start``)."""
ENTRY_PLAN = "plan"
"""``run_started.entry`` of a run started by ``run_plan``; it has no ``user_message``."""


@dataclass(frozen=True, slots=True)
class GivenPlan:
    """A caller's plan, validated, with the route decision the log records for it."""

    plan: Plan
    decision: RouteDecision


def resolve_plan(agent: Agent, plan: str | Plan, intent: str | None) -> GivenPlan:
    """Validate a template name or a ``Plan`` against the agent, as a model plan would be.

    A template is run for ``intent`` when given, else for the one intent that names it
    (its allow-list and reply apply); a template no intent (or several) names runs with
    its own tools as the allow-list. A ``Plan`` runs for its own ``intent``.
    """
    if isinstance(plan, str):
        given = _template_plan(agent, plan, intent)
    else:
        given = plan if intent is None else plan.model_copy(update={"intent": intent})
    label = _known_intent(agent, given.intent)
    given = given.model_copy(update={"intent": label})
    validate_plan(given, agent.plan_context(label))  # raises PlanInvalidError
    if label is not None:
        allowed = allowed_tools(agent.config, label, agent.tools)
    else:  # no intent: the plan's own tools are its allow-list
        allowed = substitutes(agent.config, {s.tool for s in given.steps}, agent.tools)
    what = f"template {given.template}" if given.template else f"plan {given.plan_id}"
    decision = RouteDecision(
        action=RouteAction.PLAN,
        intent=label,
        template=given.template,
        reason=f"{what} given by the caller",
        allowed_tools=allowed,
    )
    return GivenPlan(given, decision)


def _template_plan(agent: Agent, name: str, intent: str | None) -> Plan:
    declared = agent.config.plans.get(name)
    if declared is None:
        known = ", ".join(sorted(agent.config.plans)) or "none"
        raise PlanInvalidError(
            [f"no plan template named {name!r} (templates: {known})"],
            hint="name a template under `plans:` in agent.yaml",
        )
    if intent is None:
        users = [
            s.name for s in agent.config.intents if name in plan_templates(agent.config, s.name)
        ]
        intent = users[0] if len(users) == 1 else None
    return Plan(plan_id="template", intent=intent, steps=declared.steps, template=name)


def _known_intent(agent: Agent, name: str | None) -> str | None:
    if name is None:
        return None
    try:
        return agent.config.intent(name).name
    except ConfigInvalidError:
        raise PlanInvalidError([f"the plan is for unknown intent {name!r}"]) from None


def check_entities(agent: Agent, entities: Mapping[str, Any]) -> dict[str, Any]:
    """The caller's entities, each declared by the agent and of its kind's type."""
    declared = agent.config.entities
    checked: dict[str, Any] = {}
    for name, value in entities.items():
        spec = declared.get(name)
        if spec is None:
            known = ", ".join(sorted(declared)) or "none"
            raise InvalidArgumentError(
                f"unknown entity {name!r} (entities: {known})",
                hint="declare it under `entities:` in agent.yaml",
            )
        try:
            checked[name] = TypeAdapter(ENTITY_TYPES[spec.kind]).validate_python(value)
        except ValidationError as exc:
            raise InvalidArgumentError(
                f"entity {name!r} is not a {spec.kind}: {exc.errors()[0]['msg']}"
            ) from None
    return checked


def start_plan(journal: Journal, given: GivenPlan, effects: Effects) -> None:
    """Record the caller's plan where a message run records its route and plan.

    The run gives the plan its id, as it does a template's or a model's: a replay that
    passes the recorded ``Plan`` back takes the same path.
    """
    plan = given.plan.model_copy(update={"plan_id": effects.new_id("plan")})
    journal.emit("route", Routed(given.decision))
    journal.transition(RunStatus.PLANNING, given.decision.reason)
    journal.emit("plan", PlanCreated(plan))
    journal.transition(RunStatus.DECIDING, "plan validated")


def recorded_entry(events: Sequence[Event]) -> tuple[Plan, dict[str, Any]] | None:
    """The plan and entities a ``run_plan`` run was given (``None``: a message started it)."""
    first = events[0].payload if events else None
    if not isinstance(first, RunStarted) or first.entry != ENTRY_PLAN:
        return None
    created = next(e.payload for e in events if isinstance(e.payload, PlanCreated))
    entities: dict[str, Any] = {}
    for event in events:
        merged = event.payload
        if isinstance(merged, EntitiesMerged) and merged.origin == "caller":
            entities.update(merged.entities)
    return created.plan, entities
