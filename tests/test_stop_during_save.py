"""A run stopped while a save is in its thread waits for that save before anything else.

A stop (a cancelled task: a server shutting down, a stream's consumer leaving) cannot stop
a store call's thread. Before, the stopped run went on at once: it saved again and
released its lease while the first save still ran. That save then renewed the lease of a
run nobody drove (``RUN_BUSY`` until it expired), or failed on the released lease and lost
its batch; a later batch could be stored before an earlier one.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from pydantic import BaseModel

from corral import MemoryStore, Runtime, ToolPolicy, tool
from corral.contracts import StepStatus
from corral.runtime.state import fold
from corral.testing import FixedEffects
from tests.helpers import build_agent

HELD_S = 2.0
"""How long the first save waits. Nothing is meant to happen meanwhile: in the passing
case the stopped run waits it out, so its length decides nothing but the test's time."""


class Done(BaseModel):
    ref: str


class HeldSave(MemoryStore):
    """Its first save blocks in its thread; it notes any store call made meanwhile."""

    def __init__(self) -> None:
        super().__init__(blocking=True)
        self.entered = threading.Event()
        self.lock = threading.Lock()
        self.saver: int | None = None
        self.first = True
        self.overtaken: list[str] = []

    def _note(self, call: str) -> None:
        with self.lock:
            if self.saver is not None and self.saver != threading.get_ident():
                self.overtaken.append(call)

    def save(self, record: Any, events: Any, handoff: Any = None, **fencing: Any) -> None:
        self._note("save")
        with self.lock:
            first, self.first = self.first, False
            if first:
                self.saver = threading.get_ident()
        try:
            if first:
                self.entered.set()
                threading.Event().wait(HELD_S)
            super().save(record, events, handoff, **fencing)
        finally:
            if first:
                with self.lock:
                    self.saver = None

    def renew_lease(self, lease: Any) -> None:
        self._note("renew_lease")
        super().renew_lease(lease)

    def release_lease(self, lease: Any) -> None:
        self._note("release_lease")
        super().release_lease(lease)


async def test_a_stop_during_a_save_waits_for_it_then_keeps_the_run_and_frees_it() -> None:
    entered: list[int] = []

    @tool(policy=ToolPolicy(kind="write"))
    def send(n: int) -> Done:
        entered.append(n)
        return Done(ref="sent")

    agent = build_agent([send], [{"id": "s1", "tool": "send", "args": {"n": 1}}])
    store = HeldSave()
    runtime = Runtime(agent, store, effects=FixedEffects())
    task = asyncio.create_task(runtime.start("go"))
    assert await asyncio.to_thread(store.entered.wait, 30)  # the save before the write
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert store.overtaken == []  # nothing ran beside the save it was stopped in
    (run_id,) = store.runs
    assert store.lease_holder(run_id) is None  # free: a resume may take it at once
    events = store.load_events(run_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert fold(run_id, events).steps["s1"].status is StepStatus.RUNNING  # saved to enter
    assert entered == []  # the stop came before the write was entered
    resumed = await Runtime(agent, store, effects=FixedEffects()).resume(run_id)
    assert resumed.status.value == "finished" and entered == [1]
