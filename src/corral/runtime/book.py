"""The scheduler's bookkeeping, kept as steps settle instead of rescanning the plan.

Per step: how many of its dependencies have not succeeded, and how many producers of the
facts read before it are still unsettled. A step with both at zero, pending (or running
after a crash), is a candidate; a settled step updates only its dependents and the steps
that wait for it. A step that did not succeed queues its pending dependents to be blocked,
and blocking walks on through theirs. So one step costs the same whatever the plan's length.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from typing import Any

from corral.contracts import StepStatus
from corral.planning.validate import PlanGraph
from corral.runtime.state import StepState

UNSETTLED = frozenset({StepStatus.PENDING, StepStatus.RUNNING})
BAD = frozenset({StepStatus.FAILED, StepStatus.BLOCKED, StepStatus.SKIPPED, StepStatus.UNKNOWN})
_PENDING, _RUNNING, _SUCCEEDED = StepStatus.PENDING, StepStatus.RUNNING, StepStatus.SUCCEEDED
"""The statuses tested on every step by identity: a membership test in ``UNSETTLED`` or
``BAD`` hashes the member, and an enum's hash is a Python-level call."""


def _unsettled(status: StepStatus | None) -> bool:
    """Pending or running (``UNSETTLED``); ``None``: a step not in this graph."""
    return status is _PENDING or status is _RUNNING


def _bad(status: StepStatus) -> bool:
    """Settled without succeeding (``BAD``)."""
    return status is not _PENDING and status is not _RUNNING and status is not _SUCCEEDED


class StepBook:
    """What the scheduler knows of each step of one graph, updated one step at a time."""

    def __init__(self, graph: PlanGraph, steps: Mapping[str, StepState]) -> None:
        self.graph = graph
        self.steps = steps
        self.index: dict[str, int] = {}
        self.status = status = {sid: steps[sid].status for sid in graph.order}
        self.waited_by: dict[str, list[str]] = {}
        self.unmet: dict[str, int] = {}
        """Step id -> how many of its dependencies have not succeeded."""
        self.waits: dict[str, int] = {}
        """Step id -> how many producers of the facts read before it are unsettled."""
        self.results: dict[str, Any] = {}
        """Step id -> data of the steps that succeeded, for ``$sN.result`` references."""
        self.started: set[str] = set()
        """The steps entered with arguments (the budget counts them)."""
        self.candidates: set[str] = set()
        self.to_block: list[tuple[int, str]] = []
        succeeded = StepStatus.SUCCEEDED
        for position, sid in enumerate(graph.order):  # one pass: a run opens one per segment
            compiled, step, current = graph.steps[sid], steps[sid], status[sid]
            self.index[sid] = position
            unmet = 0
            for dependency in set(compiled.step.depends_on) if compiled.step.depends_on else ():
                unmet += status[dependency] is not succeeded
            waits = 0
            for producer in compiled.waits_for:
                self.waited_by.setdefault(producer, []).append(sid)
                waits += _unsettled(status.get(producer))
            self.unmet[sid], self.waits[sid] = unmet, waits
            if step.args is not None:
                self.started.add(sid)
            if _unsettled(current) and not unmet and not waits:
                self.candidates.add(sid)
            elif current is succeeded and step.result is not None and step.result.data is not None:
                self.results[sid] = step.result.data
        for sid in graph.order:
            if _bad(status[sid]):
                self._queue_dependents(sid)

    def _queue_dependents(self, sid: str) -> None:
        for dependent in self.graph.dependents.get(sid, ()):
            if self.status[dependent] is StepStatus.PENDING:
                heapq.heappush(self.to_block, (self.index[dependent], dependent))

    def ready(self) -> list[str]:
        """The candidates, in the plan's topological order."""
        if len(self.candidates) < 2:
            return list(self.candidates)
        return sorted(self.candidates, key=self.index.__getitem__)

    def started_step(self, sid: str) -> None:
        """The step was admitted (``step_started``): it runs now.

        What ``note`` would conclude from that event, without reading the step back. It
        stays a candidate, as every running step does (``_ready`` skips those in flight).
        """
        self.started.add(sid)
        self.status[sid] = StepStatus.RUNNING

    def note(self, sid: str) -> None:
        """Read the step's state again after events about it were emitted."""
        step = self.steps[sid]
        if step.args is not None:
            self.started.add(sid)
        status = self.status
        before, after = status[sid], step.status
        if before is after:
            return
        status[sid] = after
        if after is _SUCCEEDED:
            result = step.result
            if result is not None and result.data is not None:
                self.results[sid] = result.data
            unmet = self.unmet
            for dependent in self.graph.dependents.get(sid, ()):
                unmet[dependent] -= 1
                self._refresh(dependent)
        elif _bad(after):
            self._queue_dependents(sid)
        if (before is _PENDING or before is _RUNNING) and after is not _PENDING and (
            after is not _RUNNING
        ):
            waits = self.waits
            for waiter in self.waited_by.get(sid, ()):
                waits[waiter] -= 1
                self._refresh(waiter)
        self._refresh(sid)

    def _refresh(self, sid: str) -> None:
        current = self.status[sid]
        if (
            (current is _PENDING or current is _RUNNING)
            and not self.unmet[sid]
            and not self.waits[sid]
        ):
            self.candidates.add(sid)
        else:
            self.candidates.discard(sid)

    def next_blocked(self) -> tuple[str, list[str]] | None:
        """The next pending step to block, and its dependencies that did not succeed.

        In plan order, so a block walks on to its dependents; ``None`` when none is left.
        """
        while self.to_block:
            _, sid = heapq.heappop(self.to_block)
            if self.status[sid] is not StepStatus.PENDING:
                continue
            depends_on = self.graph.steps[sid].step.depends_on
            bad = [d for d in depends_on if _bad(self.status[d])]
            if bad:
                return sid, bad
        return None
