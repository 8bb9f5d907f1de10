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

from corral import Agent, MemoryStore, Runtime, ToolPolicy, tool
from corral.contracts import StepStatus
from corral.errors import StoreUnavailableError
from corral.runtime.state import fold
from corral.testing import FixedEffects
from tests.extras import REQUIRE_ALL, import_extra
from tests.helpers import build_agent

HELD_S = 2.0
"""How long the first save waits unless a test lets it go sooner. Nothing is meant to happen
meanwhile: in the passing case the stopped run waits it out, so its length decides
nothing but the test's time."""


class Done(BaseModel):
    ref: str


class HeldSave(MemoryStore):
    """Its first save blocks in its thread; it notes any store call made meanwhile.

    It blocks until ``go`` is set, or ``HELD_S``; then it saves, or fails (``fail``).
    """

    def __init__(self, fail: bool = False) -> None:
        super().__init__(blocking=True)
        self.entered = threading.Event()
        self.go = threading.Event()
        self.done = threading.Event()
        self.fail = fail
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
                self.go.wait(HELD_S)
                if self.fail:
                    raise StoreUnavailableError("the database went away during the save")
            super().save(record, events, handoff, **fencing)
        finally:
            if first:
                with self.lock:
                    self.saver = None
                self.done.set()

    def renew_lease(self, lease: Any) -> None:
        self._note("renew_lease")
        super().renew_lease(lease)

    def release_lease(self, lease: Any) -> None:
        self._note("release_lease")
        super().release_lease(lease)


def sending(entered: list[int]) -> Agent:
    """One write, ``send``, which notes each entry: the run saves before it enters it."""

    @tool(policy=ToolPolicy(kind="write"))
    def send(n: int) -> Done:
        entered.append(n)
        return Done(ref="sent")

    return build_agent([send], [{"id": "s1", "tool": "send", "args": {"n": 1}}])


async def test_a_stop_during_a_save_waits_for_it_then_keeps_the_run_and_frees_it() -> None:
    entered: list[int] = []
    agent = sending(entered)
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


async def test_a_batch_whose_save_failed_during_a_stop_is_saved_with_the_rest() -> None:
    """The stop's own save stores it: before, it went missing (the run was never stored,
    or stored from a later batch with a hole before it)."""
    entered: list[int] = []
    agent = sending(entered)
    store = HeldSave(fail=True)
    task = asyncio.create_task(Runtime(agent, store, effects=FixedEffects()).start("go"))
    assert await asyncio.to_thread(store.entered.wait, 30)
    task.cancel()
    store.go.set()  # the save fails now; the stop waits for that before its own save
    with pytest.raises(asyncio.CancelledError):
        await task
    (run_id,) = store.runs
    events = store.load_events(run_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert fold(run_id, events).steps["s1"].status is StepStatus.RUNNING
    assert store.lease_holder(run_id) is None
    resumed = await Runtime(agent, store, effects=FixedEffects()).resume(run_id)
    assert resumed.status.value == "finished" and entered == [1]


async def test_a_second_stop_gives_up_waiting_for_the_save_and_loses_nothing() -> None:
    """A second stop (a double Ctrl-C, a server out of time) does not wait for the save.

    The run's own save then stores the batch again with what came after it (a store
    stores a repeat only once), so whichever commits first, the log has no hole.
    """
    entered: list[int] = []
    agent = sending(entered)
    store = HeldSave()
    task = asyncio.create_task(Runtime(agent, store, effects=FixedEffects()).start("go"))
    assert await asyncio.to_thread(store.entered.wait, 30)
    task.cancel()
    for _ in range(5):  # the first stop reaches the run: it waits for the save
        await asyncio.sleep(0)
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not store.done.is_set()  # it did not wait for the save any longer
    store.go.set()
    assert await asyncio.to_thread(store.done.wait, 30)
    (run_id,) = store.runs
    events = store.load_events(run_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert fold(run_id, events).steps["s1"].status is StepStatus.RUNNING
    resumed = await Runtime(agent, store, effects=FixedEffects()).resume(run_id, wait_s=60)
    assert resumed.status.value == "finished" and entered == [1]


async def test_a_stopping_server_stops_a_run_still_saving_after_the_grace_again() -> None:
    """``Hub.close`` is bounded: a run whose stop waits for a store call is stopped again."""
    import_extra("fastapi", REQUIRE_ALL)
    from corral.server.hub import Hub

    store = HeldSave()
    hub = Hub()
    runtime = Runtime(sending([]), store, effects=FixedEffects())
    await hub.drive(runtime.stream("go"))
    assert await asyncio.to_thread(store.entered.wait, 30)
    await hub.close(grace_s=0.05, stop_s=0.05)
    assert not store.done.is_set()  # closed while the save was still held
    store.go.set()
    assert await asyncio.to_thread(store.done.wait, 30)
    (run_id,) = store.runs  # what it did is stored, whichever save committed it
    events = store.load_events(run_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
