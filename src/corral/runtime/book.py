"""The scheduler's bookkeeping, kept as steps settle instead of rescanning the plan.

Per step: how many of its dependencies have not succeeded, and how many producers of the
facts read before it are still unsettled. A step with both at zero, pending (or running
after a crash), is a candidate; a settled step updates only its dependents and the steps
that wait for it. A step that did not succeed queues its pending dependents to be blocked,
and blocking walks on through theirs. So one step costs the same whatever the plan's length.

A queued step is blocked once every one of its dependencies has settled: its reason then
names every dependency that did not succeed, whichever of two concurrent failures ends
first (the log must not depend on a thread's timing). It could never run either way. A
dependency cannot wait for its dependent, so each one settles, or the run ends (a stop, a
budget) and the last pass blocks the step with what it knows.
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


class StepBook:
    """What the scheduler knows of each step of one graph, updated one step at a time."""

    def __init__(self, graph: PlanGraph, steps: Mapping[str, StepState]) -> None:
        self.graph = graph
        self.steps = steps
        self.index: Mapping[str, int] = graph.position
        self.status = status = {sid: steps[sid].status for sid in graph.order}
        self.waited_by: Mapping[str, tuple[str, ...]] = graph.waited_by
        self.unmet: dict[str, int] = {}
        """Step id -> how many of its dependencies have not succeeded."""
        self.waits: dict[str, int] = {}
        """Step id -> how many producers of the facts read before it are unsettled."""
        self.results: dict[str, Any] = {}
        """Step id -> data of the steps that succeeded, for ``$sN.result`` references."""
        self.started: dict[str, None] = {}
        """The steps entered with arguments (the budget counts them). A dict of ``None``,
        not a set: the collector does not track a dict that holds no container, and walks
        every set (this and ``candidates`` live as long as the run)."""
        self.candidates: dict[str, None] = {}
        self.to_block: list[tuple[int, str]] = []
        self.queued_to_block: dict[str, None] = {}
        """Steps queued to be blocked once: a dependency that succeeds later queues them
        again, as one that was unsettled when they were first looked at may have been."""
        succeeded = StepStatus.SUCCEEDED
        depends = graph.depends
        for sid in graph.order:  # one pass: a run opens one per segment
            compiled, step, current = graph.steps[sid], steps[sid], status[sid]
            unmet = 0
            for dependency in depends[sid]:
                unmet += status[dependency] is not succeeded
            waits = 0
            for producer in compiled.waits_for:
                waits += status.get(producer) in UNSETTLED
            self.unmet[sid], self.waits[sid] = unmet, waits
            if step.args is not None:
                self.started[sid] = None
            if current in UNSETTLED and not unmet and not waits:
                self.candidates[sid] = None
            elif current is succeeded and step.result is not None and step.result.data is not None:
                self.results[sid] = step.result.data
        for sid in graph.order:
            if status[sid] in BAD:
                self._queue_dependents(sid)

    def _queue_dependents(self, sid: str) -> None:
        for dependent in self.graph.dependents.get(sid, ()):
            if self.status[dependent] is StepStatus.PENDING:
                heapq.heappush(self.to_block, (self.index[dependent], dependent))
                self.queued_to_block[dependent] = None

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
        self.started[sid] = None
        self.status[sid] = StepStatus.RUNNING

    def note(self, sid: str) -> None:
        """Read the step's state again after events about it were emitted."""
        step = self.steps[sid]
        if step.args is not None:
            self.started[sid] = None
        before, after = self.status[sid], step.status
        if before is after:
            return
        self.status[sid] = after
        if after is StepStatus.SUCCEEDED:
            if step.result is not None and step.result.data is not None:
                self.results[sid] = step.result.data
            for dependent in self.graph.dependents.get(sid, ()):
                self.unmet[dependent] -= 1
                self._refresh(dependent)
                if (
                    dependent in self.queued_to_block
                    and self.status[dependent] is StepStatus.PENDING
                ):
                    heapq.heappush(self.to_block, (self.index[dependent], dependent))
        if before in UNSETTLED and after not in UNSETTLED:
            for waiter in self.waited_by.get(sid, ()):
                self.waits[waiter] -= 1
                self._refresh(waiter)
        if after in BAD:
            self._queue_dependents(sid)
        self._refresh(sid)

    def _refresh(self, sid: str) -> None:
        if self.status[sid] in UNSETTLED and not self.unmet[sid] and not self.waits[sid]:
            self.candidates[sid] = None
        else:
            self.candidates.pop(sid, None)

    def next_blocked(self, *, wait: bool = True) -> tuple[str, list[str]] | None:
        """The next pending step to block, and its dependencies that did not succeed.

        In plan order, so a block walks on to its dependents; ``None`` when none is left.
        A step with a dependency still pending or running waits: that one queues it again
        when it settles (``note``), failed or succeeded. When the run will start nothing
        more (a stop, or a step left ``running``), ``wait=False`` blocks it at once.
        """
        status = self.status
        while self.to_block:
            _, sid = heapq.heappop(self.to_block)
            if status[sid] is not StepStatus.PENDING:
                continue
            depends_on = self.graph.steps[sid].step.depends_on
            if wait and any(status[d] in UNSETTLED for d in depends_on):
                continue
            bad = [d for d in depends_on if status[d] in BAD]
            if bad:
                return sid, bad
        return None

    def queue_waiting_again(self) -> None:
        """Queue again the steps that waited for an unsettled dependency (out of the heap)."""
        for sid in self.queued_to_block:
            if self.status[sid] is StepStatus.PENDING:
                heapq.heappush(self.to_block, (self.index[sid], sid))
