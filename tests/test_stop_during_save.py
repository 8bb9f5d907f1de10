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
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from corral import Agent, MemoryStore, Runtime, SqlStore, ToolPolicy, tool
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


class Holds:
    """Its first save blocks in its thread; it notes any store call made meanwhile.

    It blocks until ``go`` is set, or ``HELD_S``; then it saves, or fails (``fail``).
    A mixin over a store class (``HeldSave``, ``HeldSqlSave``).
    """

    def held(self, fail: bool = False) -> None:
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
            super().save(record, events, handoff, **fencing)  # type: ignore[misc]
        finally:
            if first:
                with self.lock:
                    self.saver = None
                self.done.set()

    def renew_lease(self, lease: Any) -> None:
        self._note("renew_lease")
        super().renew_lease(lease)  # type: ignore[misc]

    def release_lease(self, lease: Any) -> None:
        self._note("release_lease")
        super().release_lease(lease)  # type: ignore[misc]


class HeldSave(Holds, MemoryStore):
    def __init__(self, fail: bool = False) -> None:
        MemoryStore.__init__(self, blocking=True)
        self.held(fail)


class HeldSqlSave(Holds, SqlStore):
    """On a SQLite file: a new run's first save inserts the lease with the run."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        SqlStore.__init__(self, *args, **kwargs)
        self.held()


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


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_a_second_stop_gives_up_waiting_for_the_save_and_loses_nothing(
    backend: str, tmp_path: Path
) -> None:
    """A second stop (a double Ctrl-C, a server out of time) does not wait for the save.

    The run's own save then stores the batch again with what came after it (a store
    stores a repeat only once), so whichever commits first, the log has no hole.
    """
    entered: list[int] = []
    agent = sending(entered)
    store = HeldSave() if backend == "memory" else HeldSqlSave.open(tmp_path / "corral.db")
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
    [run_id] = [run.run_id for run in store.list_runs()]
    assert store.lease_holder(run_id) is not None  # the release waits for that save
    store.go.set()
    assert await asyncio.to_thread(store.done.wait, 30)
    # and runs after it, in a store thread: the save, a new run's first, inserts the
    # lease with the run; released before it committed, the lease came back with it and
    # the run was ``RUN_BUSY`` until the lease expired (30 s)
    await free_then_resumed(store, run_id, agent, entered)
    assert "release_lease" not in store.overtaken  # not beside the save it gave up on


async def free_then_resumed(store: Any, run_id: str, agent: Agent, entered: list[int]) -> None:
    """The run's lease is free within 5 s; its log has no hole; a resume finishes it."""
    for _ in range(500):
        if store.lease_holder(run_id) is None:
            break
        await asyncio.sleep(0.01)
    assert store.lease_holder(run_id) is None
    events = store.load_events(run_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert fold(run_id, events).steps["s1"].status is StepStatus.RUNNING
    resumed = await Runtime(agent, store, effects=FixedEffects()).resume(run_id, wait_s=0)
    assert resumed.status.value == "finished" and entered == [1]


class TwoHeldSaves(SqlStore):
    """A SQLite store whose first two saves block in their threads until ``go``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entered = [threading.Event(), threading.Event()]
        self.go = threading.Event()
        self.saves = 0
        self.ended = 0
        self.both_ended = threading.Event()
        self.lock = threading.Lock()
        self.run_ids: set[str] = set()

    def save(self, record: Any, events: Any, handoff: Any = None, **fencing: Any) -> None:
        with self.lock:
            number, self.saves = self.saves, self.saves + 1
            self.run_ids.add(record.run_id)
        if number >= 2:
            super().save(record, events, handoff, **fencing)
            return
        try:
            self.entered[number].set()
            self.go.wait(HELD_S)
            super().save(record, events, handoff, **fencing)
        finally:
            with self.lock:
                self.ended += 1
                if self.ended == 2:
                    self.both_ended.set()


async def test_a_run_stopped_again_during_its_stops_save_is_free_once_both_saves_end(
    tmp_path: Path,
) -> None:
    """A third stop gives up on the stop's own save too (``anyio`` cancels at every turn).

    The lease was released at once, while both saves were still in their threads: the
    first to commit inserted the run with its lease, and the run was ``RUN_BUSY`` until
    the lease expired. Now the release runs after them.
    """
    entered: list[int] = []
    agent = sending(entered)
    store = TwoHeldSaves.open(tmp_path / "corral.db")
    task = asyncio.create_task(Runtime(agent, store, effects=FixedEffects()).start("go"))
    assert await asyncio.to_thread(store.entered[0].wait, 30)  # the save before the write
    task.cancel()  # the stop waits for it
    for _ in range(5):
        await asyncio.sleep(0)
    task.cancel()  # gives up: the stop's own save begins (held too)
    assert await asyncio.to_thread(store.entered[1].wait, 30)
    task.cancel()  # gives up on that one as well
    with pytest.raises(asyncio.CancelledError):
        await task
    [run_id] = store.run_ids
    store.go.set()
    assert await asyncio.to_thread(store.both_ended.wait, 30)
    await free_then_resumed(store, run_id, agent, entered)
    store.engine.dispose()


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


class FailsFirstSave(SqlStore):
    """A SQLite store whose first save fails as if the database were away for a moment."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.failed = threading.Event()
        self.run_ids: set[str] = set()

    def save(self, record: Any, events: Any, handoff: Any = None, **fencing: Any) -> None:
        self.run_ids.add(record.run_id)
        if not self.failed.is_set():
            self.failed.set()
            raise StoreUnavailableError("the database is away for a moment")
        super().save(record, events, handoff, **fencing)


async def test_a_run_stopped_again_while_its_stops_save_waits_to_retry_is_freed_after() -> None:
    """The stop's own save failed and waits to try again when the second stop comes.

    No save was in a thread then: the lease was released at once, and the retry, the new
    run's first save, inserted it again with the run (``RUN_BUSY`` for 30 s).
    """
    import tempfile

    entered: list[int] = []
    gate = asyncio.Event()  # never set: the run is stopped in its step

    @tool
    async def look(n: int) -> Done:
        entered.append(n)
        await gate.wait()
        return Done(ref="seen")

    agent = build_agent([look], [{"id": "s1", "tool": "look", "args": {"n": 1}}])
    with tempfile.TemporaryDirectory() as folder:
        store = FailsFirstSave.open(Path(folder) / "corral.db")
        runtime = Runtime(agent, store, effects=FixedEffects(), save_retry_s=5.0)
        task = asyncio.create_task(runtime.start("go"))
        while not entered:
            await asyncio.sleep(0.001)
        task.cancel()  # the stop's save fails, and waits 50 ms to try again
        assert await asyncio.to_thread(store.failed.wait, 30)
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        [run_id] = store.run_ids
        # the stop's save retries for up to ``save_retry_s`` (5 s) on a loaded machine, and
        # the release follows it: wait past that, well short of the lease's 30 s that a
        # lease inserted again after the release would hold the run for
        deadline = time.monotonic() + 15.0
        while time.monotonic() < deadline:
            if store.lease_holder(run_id) is None and store.load_events(run_id):
                break
            await asyncio.sleep(0.01)
        assert store.lease_holder(run_id) is None
        assert [e.seq for e in store.load_events(run_id)][:1] == [1]
        gate.set()
        resumed = await Runtime(agent, store, effects=FixedEffects()).resume(run_id, wait_s=0)
        assert resumed.status.value == "finished"
        store.engine.dispose()


class HoldsTwoRunsSaves(MemoryStore):
    """The first save of the first two runs blocks in its thread until ``go``."""

    def __init__(self) -> None:
        super().__init__(blocking=True)
        self.go = threading.Event()
        self.held: list[str] = []
        self.lock = threading.Lock()

    def save(self, record: Any, events: Any, handoff: Any = None, **fencing: Any) -> None:
        with self.lock:
            hold = len(self.held) < 2 and record.run_id not in self.held
            if hold:
                self.held.append(record.run_id)
        if hold:
            self.go.wait(20)
        super().save(record, events, handoff, **fencing)


async def test_runs_stopped_again_during_saves_leave_the_store_threads_to_others() -> None:
    """A release put off until a save ends takes no store thread while it waits.

    A thread per waiting release filled the runtime's four store threads with two such
    runs, and every other run's saves (and heartbeats) queued behind them.
    """
    entered: list[int] = []
    store = HoldsTwoRunsSaves()
    runtime = Runtime(sending(entered), store, effects=FixedEffects())
    try:
        for count in (1, 2):
            task = asyncio.create_task(runtime.start("go"))
            while len(store.held) < count:
                await asyncio.sleep(0.001)
            task.cancel()
            for _ in range(5):
                await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        third = await asyncio.wait_for(asyncio.shield(runtime.start("go")), 5)
        assert third.status.value == "finished"
    finally:
        store.go.set()
