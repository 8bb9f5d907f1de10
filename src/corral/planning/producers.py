"""Facts read before a step are produced first: the static proof and the run-time wait.

A business rule gating a step's tool, and the step's ``success`` criterion, read
``facts.x``. A rule that runs before the fact exists sees nothing and refuses, so a plan
is valid only when every fact read before a step is

- published by one of the step's ancestors (transitive ``depends_on``), which have all
  succeeded by the time the step may start; or
- named like a declared entity: the user gives it (a message, a slot answer, the
  session), and rules and ``$facts`` references fall back to the entity's value.

Other steps that publish a fact a step reads and are not its descendants are waited
for at run time, so a rule never sees a value that a running or pending step is about to
replace. Tool constraints and argument rewrites are not part of the proof: their
documented meaning for a missing value is "no" and "does not apply", and which ones run
depends on the tool chosen at run time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from corral.contracts import Step


@dataclass(frozen=True)
class FactRead:
    """Something that reads facts before a step: a business rule or the step's success."""

    reader: str
    """``business rule NAME`` or ``success``, for messages."""
    facts: frozenset[str]


def descendants(step_id: str, ancestors: Mapping[str, frozenset[str]]) -> frozenset[str]:
    """The steps that (transitively) depend on ``step_id``."""
    return frozenset(other for other, above in ancestors.items() if step_id in above)


def check_producers(
    step: Step,
    reads: tuple[FactRead, ...],
    ancestors: Mapping[str, frozenset[str]],
    writers: Mapping[str, tuple[str, ...]],
    entity_names: frozenset[str],
) -> tuple[list[str], frozenset[str]]:
    """Problems with the facts read before ``step``, and the steps it must wait for."""
    problems: list[str] = []
    above = ancestors[step.id]
    below = descendants(step.id, ancestors)
    waits: set[str] = set()
    for read in reads:
        for fact in sorted(read.facts):
            producers = writers.get(fact, ())
            waits.update(p for p in producers if p != step.id and p not in below)
            if any(p in above for p in producers) or fact in entity_names:
                continue
            elsewhere = [p for p in producers if p != step.id]
            hint = (
                f"; {', '.join(elsewhere)} publishes it: add it to {step.id}.depends_on"
                if elsewhere
                else "; no step of the plan publishes it and no entity has that name"
            )
            problems.append(
                f"{step.id}: {read.reader} reads facts.{fact}, but no step that "
                f"{step.id} depends on publishes it{hint}"
            )
    return problems, frozenset(waits)


def wait_cycle(steps: list[Step], waits: Mapping[str, frozenset[str]]) -> list[str]:
    """Steps on a cycle of ``depends_on`` and waits (each would wait for the other)."""
    edges = {s.id: set(s.depends_on) | set(waits.get(s.id, ())) for s in steps}
    done: set[str] = set()
    on_path: list[str] = []

    def visit(node: str) -> list[str]:
        if node in on_path:
            return on_path[on_path.index(node) :]
        if node in done or node not in edges:
            return []
        on_path.append(node)
        for nxt in sorted(edges[node]):
            cycle = visit(nxt)
            if cycle:
                return cycle
        on_path.pop()
        done.add(node)
        return []

    for step in steps:
        cycle = visit(step.id)
        if cycle:
            return cycle
    return []
