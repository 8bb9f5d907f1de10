"""Which tools may run an admitted step, best first, and why the others may not.

The plan's tool and its declared equivalents, ranked by health and the agent's preference
(``selector.rank_tools``); with capability matching on, interchangeable tools whose
description is similar enough are added after them. A candidate runs only when the
intent allows it and its hard constraint holds. The scheduler tries them in this order,
going on to the next only when the recovery ladder lets it (``verify.recovery``).

The step's gates ran for the planned tool. Another tool (a stand-in) must not need what
they did not give: a step that writes nothing is never run by a write, and a tool that
asks for the person's approval stands in only for a step that asked for it
(``stand_in_refusal``). The agent's gates (the allow-list, the business rules, its own,
wherever they stand) are asked again for a stand-in when it is about to run
(``builtin_gates.stand_in_answer``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Literal

from corral.decision.capabilities import CapabilityIndex, interchangeable
from corral.decision.policy import DecisionPolicy
from corral.decision.selector import ToolHealth, rank_tools
from corral.tools.registry import ToolRegistry
from corral.tools.spec import ToolSpec

MIN_SIMILARITY = 0.15
"""Capability matching proposes a tool only above this TF-IDF cosine similarity."""
NOT_ALLOWED = "not allowed for this intent"
"""Why a tool outside the intent's allow-list may not run the step."""
WRITE_FOR_READ = "a write cannot stand in for a step that writes nothing"
UNAPPROVED = "asks for the person's approval, which this step did not ask for"


def stand_in_refusal(
    planned: ToolSpec, candidate: ToolSpec, *, step_asks_approval: bool
) -> str | None:
    """Why ``candidate`` may not run a step the gates admitted for ``planned`` (or ``None``).

    The confirmation gate asked the person (or not) for the step and the planned tool: a
    stand-in that asks for approval itself runs only where that was asked.
    """
    if candidate.policy.kind == "write" and planned.policy.kind != "write":
        return WRITE_FOR_READ
    approved = step_asks_approval or planned.policy.requires_confirmation
    if candidate.policy.requires_confirmation and not approved:
        return UNAPPROVED
    return None


def simple(planned: ToolSpec, policy: DecisionPolicy, capabilities: CapabilityIndex | None) -> bool:
    """Whether the planned tool is its step's only possible candidate.

    True for most steps: the tool has no declared equivalent, capability matching is off
    and no constraint is declared. ``sole_candidate`` is then the whole of
    ``eligible_tools``, without its arguments built or its ranking run.
    """
    alone = planned.policy.equivalent_group is None
    return alone and capabilities is None and not policy.constraints


def sole_candidate(
    planned: ToolSpec, tools: ToolRegistry, allowed: Collection[str]
) -> tuple[list[ToolSpec], dict[str, str]]:
    """``eligible_tools`` for a ``simple`` step: the tool itself, if the intent allows it."""
    only = tools.get(planned.name)
    if only.name in allowed:
        return [only], {}
    return [], {only.name: NOT_ALLOWED}


def eligible_tools(
    planned: ToolSpec,
    tools: ToolRegistry,
    health: ToolHealth,
    prefer: Literal["latency", "cost"],
    *,
    allowed: Collection[str],
    policy: DecisionPolicy,
    names: Mapping[str, Any],
    capabilities: CapabilityIndex | None = None,
    query: str = "",
    latency: Mapping[str, float] | None = None,
    step_asks_approval: bool = False,
) -> tuple[list[ToolSpec], dict[str, str]]:
    """The tools that may run the step, best first, and tool -> why it may not.

    ``names``: what the tools' constraints read; ``query``: what capability matching
    compares descriptions with (the step's, the tool's, the run's goal); ``latency``:
    observed p95s that replace declared latencies in the ranking; ``step_asks_approval``:
    the step itself requires confirmation (``stand_in_refusal``).
    """
    if simple(planned, policy, capabilities):
        return sole_candidate(planned, tools, allowed)
    if planned.policy.equivalent_group is None:  # nothing to rank it against
        ranked = [tools.get(planned.name)]
    else:
        ranked = rank_tools(tools, planned.name, health, prefer, latency=latency)
    if capabilities is not None:
        similar = capabilities.similarity(query)
        known = {c.name for c in ranked}
        ranked += [
            tools.get(name)
            for name, score in sorted(similar.items(), key=lambda kv: -kv[1])
            if score >= MIN_SIMILARITY
            and name not in known
            and interchangeable(tools.get(name), planned)
        ]
    eligible: list[ToolSpec] = []
    excluded: dict[str, str] = {}
    for candidate in ranked:
        if candidate.name not in allowed:
            excluded[candidate.name] = NOT_ALLOWED
            continue
        if candidate.name != planned.name:
            refusal = stand_in_refusal(planned, candidate, step_asks_approval=step_asks_approval)
            if refusal is not None:
                excluded[candidate.name] = refusal
                continue
        ok, reason = policy.allows(candidate.name, names) if policy.constraints else (True, "")
        if ok:
            eligible.append(candidate)
        else:
            excluded[candidate.name] = reason
    return eligible, excluded
