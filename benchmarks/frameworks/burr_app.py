"""Burr: one application per task (it holds the run's state), four actions.

s2 and s3 run in one action with asyncio.gather: Burr's actions run one at a time, and
this keeps the critical path the same as the others' (4 tool latencies).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

from burr.core import ApplicationBuilder, State, action
from burr.core.persistence import SQLitePersister

from frameworks.common import checked_chain, combine, combine_sync, fetch, fetch_sync, sync_off

TRANSITIONS = [("s1", "s23"), ("s23", "s4"), ("s4", "s5")]


def _async_actions(latency_s: float) -> dict[str, object]:
    @action(reads=[], writes=["s1"])
    async def s1(state: State) -> tuple[dict, State]:
        out = await fetch(1, latency_s)
        return out, state.update(s1=out["value"])

    @action(reads=["s1"], writes=["s2", "s3"])
    async def s23(state: State) -> tuple[dict, State]:
        a, b = await asyncio.gather(combine(state["s1"], 1, latency_s), fetch(3, latency_s))
        return {}, state.update(s2=a["value"], s3=b["value"])

    @action(reads=["s2", "s3"], writes=["s4"])
    async def s4(state: State) -> tuple[dict, State]:
        out = await combine(state["s2"], state["s3"], latency_s)
        return out, state.update(s4=out["value"])

    @action(reads=["s4"], writes=["s5"])
    async def s5(state: State) -> tuple[dict, State]:
        out = await combine(state["s4"], 1, latency_s)
        return out, state.update(s5=out["value"])

    return {"s1": s1, "s23": s23, "s4": s4, "s5": s5}


def _sync_actions() -> dict[str, object]:
    @action(reads=[], writes=["s1"])
    def s1(state: State) -> tuple[dict, State]:
        out = fetch_sync(1)
        return out, state.update(s1=out["value"])

    @action(reads=["s1"], writes=["s2", "s3"])
    def s23(state: State) -> tuple[dict, State]:
        a, b = combine_sync(state["s1"], 1), fetch_sync(3)
        return {}, state.update(s2=a["value"], s3=b["value"])

    @action(reads=["s2", "s3"], writes=["s4"])
    def s4(state: State) -> tuple[dict, State]:
        out = combine_sync(state["s2"], state["s3"])
        return out, state.update(s4=out["value"])

    @action(reads=["s4"], writes=["s5"])
    def s5(state: State) -> tuple[dict, State]:
        out = combine_sync(state["s4"], 1)
        return out, state.update(s5=out["value"])

    return {"s1": s1, "s23": s23, "s4": s4, "s5": s5}


def _builder(
    actions: dict[str, object], transitions: list[tuple[str, str]] = TRANSITIONS
) -> ApplicationBuilder:
    return (
        ApplicationBuilder()
        .with_actions(**actions)
        .with_transitions(*transitions)
        .with_entrypoint("s1")
        .with_state()
    )


def _chain_actions(latency_s: float, steps: int) -> dict[str, object]:
    """s1 -> s2 -> ... -> sN, each one call adding 1 to the value before it."""

    @action(reads=[], writes=["value"])
    async def first(state: State) -> tuple[dict, State]:
        out = await fetch(1, latency_s)
        return out, state.update(value=out["value"])

    @action(reads=["value"], writes=["value"])
    async def next_(state: State) -> tuple[dict, State]:
        out = await combine(state["value"], 1, latency_s)
        return out, state.update(value=out["value"])

    return {"s1": first, **{f"s{k}": next_ for k in range(2, steps + 1)}}


def _chain(latency_s: float, steps: int) -> Callable[[int], Awaitable[int]]:
    actions = _chain_actions(latency_s, steps)
    transitions = [(f"s{k}", f"s{k + 1}") for k in range(1, steps)]

    async def one(_: int) -> int:
        app = _builder(actions, transitions).build()
        _, _, state = await app.arun(halt_after=[f"s{steps}"])
        return checked_chain(int(state["value"]), steps)

    return one


def make(latency_s: float, steps: int = 0) -> Callable[[int], Awaitable[int]]:
    """The 5-step DAG (four actions), or (``steps``) a chain of that many actions."""
    if steps:
        return _chain(latency_s, steps)
    actions = _async_actions(latency_s)

    async def one(_: int) -> int:
        app = _builder(actions).build()
        _, _, state = await app.arun(halt_after=["s5"])
        return int(state["s5"])

    return one


def durable(db: Path) -> Callable[[int], Awaitable[int]]:
    """Burr's SQLite persister saves the state after every action."""
    connection = sqlite3.connect(db)
    sync_off(connection)
    persister = SQLitePersister(str(db), connection=connection)
    persister.initialize()
    actions = _sync_actions()

    async def one(run: int) -> int:
        app = (
            _builder(actions)
            .with_identifiers(app_id=f"run-{run}")
            .with_state_persister(persister)
            .build()
        )
        _, _, state = app.run(halt_after=["s5"])
        return int(state["s5"])

    return one
