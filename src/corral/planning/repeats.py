"""A replan never repeats a write the run already made (seed 000: writes happen once).

A replan keeps the steps that succeeded and asks the model for the rest. The model is
told not to repeat them, but a model's word is not a guarantee: a new step id calling the
same write tool with the same arguments would get a new idempotency key and post, pay or
send a second time. This check, run on every draft, names such steps as problems, so the
model is asked again, and a draft that insists is refused (the run goes to a person).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from corral.errors import CorralError
from corral.hashing import stable_hash
from corral.planning.binding import bind_arguments
from corral.planning.validate import PlanGraph
from corral.tools.registry import ToolRegistry


@dataclass(frozen=True)
class MadeWrite:
    """A write step that succeeded: the tool it called and the arguments it was given."""

    step_id: str
    tool: str
    args: Mapping[str, Any]


def repeated_writes(
    graph: PlanGraph,
    new_steps: Iterable[str],
    made: Iterable[MadeWrite],
    tools: ToolRegistry,
    values: tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any], str | None],
) -> list[str]:
    """A problem for each of ``new_steps`` that makes one of the ``made`` writes again.

    ``values``: the entities, facts, step results and message its references bind to
    now (``bind_arguments``'s sources: a write bound to ``$message`` is compared too); a step
    whose arguments read what is not known yet (a new step's result) is not compared.
    """
    done = {stable_hash([write.tool, dict(write.args)]): write for write in made}
    problems: list[str] = []
    for step_id in new_steps:
        compiled = graph.steps[step_id]
        if tools.write(compiled.spec.name) is None:
            continue
        try:
            args = bind_arguments(compiled, *values)
        except CorralError:
            continue
        write = done.get(stable_hash([compiled.spec.name, args]))
        if write is not None:
            problems.append(
                f"step {step_id} repeats step {write.step_id} ({write.tool} with the same "
                "arguments), a write that is already done: keep it, do not make it again"
            )
    return problems
