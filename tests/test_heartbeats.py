"""Held leases share one timer for their first renewal, and every one of them is renewed.

Most drives end before their lease needs renewing, so the runtime keeps one timer per
event loop instead of one per drive; these tests check that sharing it loses no renewal:
several leases held at once are each renewed, and a runtime used from a second event loop
(one ``asyncio.run`` after another, as a CLI does) still renews its leases there.
"""

from __future__ import annotations

import asyncio
from typing import Any

from corral.runtime.ownership import Ownership
from corral.store.memory import MemoryStore


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
