"""A run started from a plan instead of a message (``Runtime.run_plan``).

Integrations and tests that know what to do should not need a fake regex intent. The
caller's plan is resolved and validated here, completely, before a run exists: an unknown
template or a plan that fails validation raises ``PlanInvalidError`` (the code a model
plan gets) and nothing is stored, nothing runs. What the log then holds in place of
intent classification is a ``routed`` decision that says the plan was given, so the
allow-list, the reply, confirmations and resume work as for a message-started run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from pydantic import TypeAdapter, ValidationError

from corral.agent import ENTITY_TYPES, Agent
from corral.config import EntitySpec
from corral.contracts import Plan, RouteAction, RouteDecision, RunStatus
from corral.effects import Effects
from corral.errors import (
    ConfigInvalidError,
    InvalidArgumentError,
    MissingArgumentError,
    PlanInvalidError,
)
from corral.events import EntitiesMerged, Event, PlanCreated, Routed, RunStarted
from corral.intent.entities import EntityExtractor
from corral.planning.validate import PlanGraph, validate_plan
from corral.routing.router import plan_templates, required_entities, substitutes
from corral.runtime.journal import Journal
from corral.validation import validation_messages

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
"""Pattern and vocabulary entities read no clock; the extractor still asks for one."""

ENTRY_MESSAGE = "message"
"""``run_started.entry`` of a run started by a user's message (``Runtime.start``)."""
ENTRY_PLAN = "plan"
"""``run_started.entry`` of a run started by ``run_plan``; it has no ``user_message``."""


@dataclass(frozen=True, slots=True)
class GivenPlan:
    """A caller's plan, validated, with the route decision the log records for it."""

    plan: Plan
    decision: RouteDecision
    graph: PlanGraph
    """``plan`` compiled: the agent's own graph of a template, else validated here."""


def resolve_plan(agent: Agent, plan: str | Plan, intent: str | None) -> GivenPlan:
    """Validate a template name or a ``Plan`` against the agent, as a model plan would be.

    A template is run for ``intent`` when given, else for the one intent that names it
    (its allow-list and reply apply); a template no intent (or several) names runs with
    its own tools as the allow-list. A ``Plan`` runs for its own ``intent``.
    """
    if intent is not None and not isinstance(intent, str):
        raise InvalidArgumentError(f"intent must be an intent's name, not {type(intent).__name__}")
    if isinstance(plan, str):
        given = _template_plan(agent, plan, intent)
    elif not isinstance(plan, Plan):
        raise PlanInvalidError(
            [f"run_plan takes a template's name or a Plan, not {type(plan).__name__}"]
        )
    else:
        given = plan if intent is None else plan.model_copy(update={"intent": intent})
        declared = agent.config.plans.get(given.template or "")
        if given.template is not None and (declared is None or declared.steps != given.steps):
            # the caller's own steps: not the template's confirmations, failure policies or
            # shared stored body (they may hold literal values)
            given = given.model_copy(update={"template": None})
    label = _known_intent(agent, given.intent)
    if label != given.intent:
        given = given.model_copy(update={"intent": label})
    compiled = agent.template_graphs.get((label or "", given.template or ""))
    if compiled is None or compiled.plan.steps != given.steps:
        # a template of its intent was validated when the agent was built, against the
        # same context: anything else is validated here
        compiled = validate_plan(given, agent.plan_context(label))  # raises PlanInvalidError
    if label is not None:
        allowed = list(agent.allowed[label])
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
    return GivenPlan(given, decision, compiled)


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
    """The caller's entities, each declared by the agent and read as a message's would be.

    A value is of its kind's type and is one the agent's own extraction could produce: a
    pattern entity is what its patterns capture from the value (so ``hd20240501`` becomes
    ``HD20240501`` under ``upper``, and a value no pattern captures is refused); a
    vocabulary entity is a canonical value or one of its surface words; an amount is
    finite. Business rules and tools then never see a value a message could not carry.
    """
    if not isinstance(entities, Mapping):
        raise InvalidArgumentError(
            f"entities must be a mapping of names to values, not {type(entities).__name__}",
            hint='entities={"order_id": "HD20240501"}',
        )
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
            typed = TypeAdapter(ENTITY_TYPES[spec.kind]).validate_python(value)
        except ValidationError as exc:
            raise InvalidArgumentError(
                f"entity {name!r} is not a {spec.kind}: {validation_messages(exc, 1)}",
                hint=_SHAPES.get(spec.kind, "give it as a message would state it"),
            ) from None
        checked[name] = _as_extracted(name, spec, typed)
    return checked


_SHAPES = {
    "date_range": 'a date range is {"start": "2026-11-01", "end": "2026-11-30"} (ISO dates, '
    'start <= end), with an optional "text": the words a reply shows',
}
"""How a value of a kind is written, for the hint of a refused one."""


def _date_range(name: str, value: dict[str, str]) -> dict[str, str]:
    """A date range as the date normaliser writes one: ISO ``start`` <= ``end``, and ``text``."""
    unknown = sorted(set(value) - {"start", "end", "text"})
    try:
        start, end = date.fromisoformat(value["start"]), date.fromisoformat(value["end"])
    except (KeyError, ValueError) as exc:
        problem = f"no {exc.args[0]!r}" if isinstance(exc, KeyError) else str(exc)
        raise InvalidArgumentError(
            f"entity {name!r} is not a date range ({problem})", hint=_SHAPES["date_range"]
        ) from None
    if unknown or start > end:
        problem = f"unknown keys {unknown}" if unknown else "it starts after it ends"
        raise InvalidArgumentError(
            f"entity {name!r} is not a date range ({problem})", hint=_SHAPES["date_range"]
        )
    text = value.get("text") or (str(start) if start == end else f"{start} – {end}")
    return {"start": start.isoformat(), "end": end.isoformat(), "text": text}


def _as_extracted(name: str, spec: EntitySpec, value: Any) -> Any:
    """``value`` as extraction would have produced it, or ``InvalidArgumentError``."""
    if spec.kind == "date_range":
        return _date_range(name, value)
    if spec.kind == "amount" and not math.isfinite(value):
        raise InvalidArgumentError(f"entity {name!r} must be a finite amount, not {value!r}")
    if spec.kind == "vocabulary":
        if value in spec.vocabulary.values():
            return value
        by_word = {word.lower(): canonical for word, canonical in spec.vocabulary.items()}
        if str(value).lower() in by_word:
            return by_word[str(value).lower()]
        raise InvalidArgumentError(
            f"entity {name!r}: {value!r} is not in its vocabulary",
            hint="give a canonical value or one of its words from agent.yaml",
        )
    if spec.kind == "pattern" and spec.patterns:
        extractor = EntityExtractor({name: spec}, "UTC")
        several = extractor.mentions(str(value), [name]).get(name, [])
        if len(several) > 1:  # a message giving two would be asked "which one?"
            raise InvalidArgumentError(
                f"entity {name!r}: {value!r} gives {len(several)} values "
                f"({', '.join(several)}); give one",
            )
        found = extractor.extract(str(value), EPOCH, answering=name).get(name)
        if found is None:
            raise InvalidArgumentError(
                f"entity {name!r}: {value!r} matches none of its patterns",
                hint="give the value as a message would state it",
            )
        return found
    return value


def check_no_message(given: GivenPlan) -> None:
    """``PLAN_INVALID`` before the run starts if a step needs ``$message``.

    A run from a plan has no message: the step would stop it only after the steps before
    it had acted (a write among them). ``$message?`` binds None there instead.
    """
    needing = [
        step_id
        for step_id, compiled in given.graph.steps.items()
        if any(ref.scope == "message" and not ref.optional for ref in compiled.references.values())
    ]
    if needing:
        raise PlanInvalidError(
            [
                f"step {step} binds $message, and a run from a plan has no message"
                for step in needing
            ],
            hint="start it from a message, or write $message? (None without one)",
        )


def check_required(
    agent: Agent, given: GivenPlan, entities: Mapping[str, Any], carried: Mapping[str, Any]
) -> None:
    """The entities the plan's intent (and its template) ``requires:`` are given or carried over.

    A message run asks the user for a missing one; ``run_plan`` has nobody to ask, so it
    refuses before a run exists instead of failing a step and handing off to a person.
    """
    if given.decision.intent is None:
        return
    requires = required_entities(agent.config, given.decision.intent, given.decision.template)
    missing = [name for name in requires if name not in entities and name not in carried]
    if missing:
        raise MissingArgumentError(
            f"intent {given.decision.intent!r} requires {', '.join(missing)}",
            hint="pass it: run_plan(..., entities={...}), or corral run-plan --entity NAME=VALUE",
        )


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
