"""The run's state machine: the transitions that are allowed, and nothing else."""

from __future__ import annotations

from corral.contracts import RunStatus
from corral.errors import IllegalTransitionError

S = RunStatus

TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    S.PARSING: frozenset({S.PLANNING, S.AWAITING_USER, S.FINISHED, S.FAILED, S.HANDED_OFF}),
    S.PLANNING: frozenset({S.DECIDING, S.FAILED, S.HANDED_OFF}),
    S.DECIDING: frozenset({S.EXECUTING, S.AWAITING_CONFIRM, S.FINISHED, S.FAILED, S.HANDED_OFF}),
    S.EXECUTING: frozenset(
        {S.DECIDING, S.AWAITING_CONFIRM, S.AWAITING_USER, S.FINISHED, S.FAILED, S.HANDED_OFF}
    ),
    S.AWAITING_CONFIRM: frozenset({S.DECIDING, S.HANDED_OFF, S.FAILED}),
    S.AWAITING_USER: frozenset({S.PARSING, S.HANDED_OFF, S.FAILED}),
    S.FINISHED: frozenset(),
    S.FAILED: frozenset(),
    S.HANDED_OFF: frozenset(),
}
"""Every allowed transition. Terminal states have none."""


def check_transition(current: RunStatus, target: RunStatus) -> None:
    """Raise ``IllegalTransitionError`` unless ``current -> target`` is allowed."""
    if target not in TRANSITIONS[current]:
        allowed = ", ".join(sorted(t.value for t in TRANSITIONS[current])) or "none (terminal)"
        raise IllegalTransitionError(
            f"a run cannot go from {current.value} to {target.value}",
            hint=f"allowed from {current.value}: {allowed}",
        )
