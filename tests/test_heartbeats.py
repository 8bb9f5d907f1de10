"""Held leases share one timer for their first renewal, and every one of them is renewed.

Most drives end before their lease needs renewing, so the runtime keeps one timer per
event loop instead of one per drive; these tests check that sharing it loses no renewal:
several leases held at once are each renewed, and a runtime used from a second event loop
(one ``asyncio.run`` after another, as a CLI does) still renews its leases there. Loops
that take turns on one runtime (threads with a loop each) keep one timer each, not one
per turn, and a loop that goes away leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import pytest

from corral import Agent, RunStatus, Runtime
from corral.runtime import ownership as ownership_module
from corral.runtime.ownership import Heartbeats, Ownership
from corral.store.memory import MemoryStore
from corral.testing import FixedEffects


def _renewals(store: MemoryStore) -> tuple[Ownership, dict[str, asyncio.Event]]:
    """An ownership whose store calls set ``renewed[run_id]`` when a lease is renewed."""
    renewed: dict[str, asyncio.Event] = {}

    async def io(call: Any, *args: Any) -> Any:
        result = call(*args)
        if getattr(call, "__name__", "") == "renew_lease":
            renewed.setdefault(args[0].run_id, asyncio.Event()).set()
        return result

    return Ownership(store, io, ttl_s=0.06), renewed


async def _hold_until_renewed(ownership: Ownership, renewed: dict[str, asyncio.Event]) -> None:
    async with (
        ownership.holding("run_a", 0.0, new_run=True),
        ownership.holding("run_b", 0.0, new_run=True),
    ):
        for run_id in ("run_a", "run_b"):
            event = renewed.setdefault(run_id, asyncio.Event())
            async with asyncio.timeout(30):  # however late the loop gets to it
                await event.wait()


def test_every_lease_held_at_once_is_renewed() -> None:
    store = MemoryStore()
    ownership, renewed = _renewals(store)
    asyncio.run(_hold_until_renewed(ownership, renewed))
    assert set(renewed) == {"run_a", "run_b"}
    assert store.leases == {}  # both released when their blocks ended


def test_a_second_event_loop_gets_its_own_timer() -> None:
    store = MemoryStore()
    ownership, renewed = _renewals(store)
    asyncio.run(_hold_until_renewed(ownership, renewed))
    renewed.clear()  # the events of the first loop cannot be awaited in the second
    asyncio.run(_hold_until_renewed(ownership, renewed))
    assert set(renewed) == {"run_a", "run_b"} and store.leases == {}


class _Built:
    """Every ``Heartbeats`` the ownership builds, held weakly: how many, and which live."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.built: list[weakref.ref[Heartbeats]] = []
        built = self.built

        class Counted(Heartbeats):
            def __init__(self) -> None:
                super().__init__()
                built.append(weakref.ref(self))

        monkeypatch.setattr(ownership_module, "Heartbeats", Counted)

    def alive(self) -> int:
        gc.collect()
        return sum(ref() is not None for ref in self.built)


def _pending_ticks(loop: asyncio.AbstractEventLoop) -> int:
    """Timers of a ``Heartbeats`` still waiting on ``loop`` (asyncio has no public list)."""
    scheduled = loop._scheduled  # type: ignore[attr-defined]
    callbacks = [handle._callback for handle in scheduled if not handle.cancelled()]
    return sum(isinstance(getattr(call, "__self__", None), Heartbeats) for call in callbacks)


@pytest.fixture
def two_loops() -> Iterator[list[asyncio.AbstractEventLoop]]:
    loops = [asyncio.new_event_loop(), asyncio.new_event_loop()]
    yield loops
    for loop in loops:
        loop.close()


def _taking_turns(
    loops: list[asyncio.AbstractEventLoop],
    drive: Callable[[int], Coroutine[Any, Any, None]],
    turns: int,
) -> None:
    """Loop after loop in one thread: each run's loop is not the one the previous run had."""
    for turn in range(turns):
        for loop in loops:
            loop.run_until_complete(drive(turn))


def test_loops_taking_turns_keep_one_timer_each_and_renew_every_lease(
    monkeypatch: pytest.MonkeyPatch, two_loops: list[asyncio.AbstractEventLoop]
) -> None:
    built = _Built(monkeypatch)
    store = MemoryStore()
    ownership, renewed = _renewals(store)

    async def short(turn: int) -> None:  # ends long before its lease needs renewing
        async with ownership.holding(f"short_{turn}", 0.0, new_run=True):
            pass

    async def long(turn: int) -> None:
        await _hold_until_renewed(ownership, renewed)
        assert set(renewed) == {"run_a", "run_b"}
        renewed.clear()  # its events belong to this loop

    _taking_turns(two_loops, short, 20)
    _taking_turns(two_loops, long, 2)  # the shared timer still renews every held lease
    _taking_turns(two_loops, short, 20)
    assert len(built.built) == 2  # one per loop, not one per turn
    assert max(_pending_ticks(loop) for loop in two_loops) <= 1
    for loop in two_loops:  # past the last first-renewal due: the timer fired, nothing held
        loop.run_until_complete(asyncio.sleep(ownership.ttl_s / 3))
    assert [_pending_ticks(loop) for loop in two_loops] == [0, 0]
    assert store.leases == {}


def test_a_closed_loop_leaves_no_timer_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    built = _Built(monkeypatch)
    ownership, _ = _renewals(MemoryStore())

    async def short() -> None:
        async with ownership.holding("run_a", 0.0, new_run=True):
            pass

    for _ in range(3):  # a chat: one asyncio.run per turn, each leaving its timer pending
        asyncio.run(short())
    assert len(built.built) == 3 and built.alive() == 0


def test_a_runtime_driven_from_loops_taking_turns_keeps_one_timer_each(
    monkeypatch: pytest.MonkeyPatch, aftersales: Agent, two_loops: list[asyncio.AbstractEventLoop]
) -> None:
    built = _Built(monkeypatch)
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())

    async def chat(turn: int) -> None:
        summary = await runtime.start(f"Hello! Nice weather today, isn't it? ({turn})")
        assert summary.status is RunStatus.FINISHED

    _taking_turns(two_loops, chat, 5)
    assert len(built.built) == 2
    assert max(_pending_ticks(loop) for loop in two_loops) <= 1  # 10 s off: still waiting
    two_loops[0].run_until_complete(runtime.aclose())
    while two_loops:
        two_loops.pop().close()
    assert built.alive() == 0  # the loops are gone, and their timers with them
