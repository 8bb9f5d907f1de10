"""corral: the full message -> reply path (rule intent, route, template plan, steps, reply)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from corral import Agent, MemoryStore, Runtime, parse_config, tool
from frameworks.common import RESULT, combine, fetch


class Out(BaseModel):
    value: int


def _tools(latency_s: float) -> list[Any]:
    @tool
    async def lookup(n: int) -> Out:
        """Stands for a lookup."""
        return Out(**await fetch(n, latency_s))

    @tool
    async def add(a: int, b: int) -> Out:
        """Stands for a computation over two results."""
        return Out(**await combine(a, b, latency_s))

    return [lookup, add]


DAG = [
    {"id": "s1", "tool": "lookup", "args": {"n": 1}},
    {"id": "s2", "tool": "add", "args": {"a": "$s1.result.value", "b": 1}, "depends_on": ["s1"]},
    {"id": "s3", "tool": "lookup", "args": {"n": 3}, "depends_on": ["s1"]},
    {
        "id": "s4",
        "tool": "add",
        "depends_on": ["s2", "s3"],
        "args": {"a": "$s2.result.value", "b": "$s3.result.value"},
    },
    {"id": "s5", "tool": "add", "depends_on": ["s4"], "args": {"a": "$s4.result.value", "b": 1}},
]


def chain(steps: int) -> list[dict[str, Any]]:
    """s1 -> s2 -> ... -> sN, each adding 1 to the one before: the scaling workload."""
    plan: list[dict[str, Any]] = [{"id": "s1", "tool": "lookup", "args": {"n": 1}}]
    for k in range(2, steps + 1):
        plan.append(
            {
                "id": f"s{k}",
                "tool": "add",
                "args": {"a": f"$s{k - 1}.result.value", "b": 1},
                "depends_on": [f"s{k - 1}"],
            }
        )
    return plan


def agent(
    latency_s: float, steps: list[dict[str, Any]], more_intents: Sequence[dict[str, Any]] = ()
) -> Agent:
    """The bench agent: ``go`` runs ``steps``; ``more_intents`` (``profile_fixed.py``)."""
    config = parse_config(
        {
            "name": "bench",
            "intents": [
                {
                    "name": "go",
                    "rules": [{"keywords": ["go"], "confidence": 0.95}],
                    "route": "plan",
                    "plan": "p",
                    "reply": "done",
                },
                *more_intents,
            ],
            "plans": {"p": {"steps": steps}},
            "templates": {"done": {"zh": "完成", "en": "done"}},
            "limits": {
                "max_plan_steps": max(10, len(steps)),
                # the benchmark measures execution, not a person approving a long plan
                "max_plan_steps_without_confirmation": max(10, len(steps)),
            },
            "budget": {
                "max_wall_clock_s": 3600,
                "max_steps": max(20, len(steps) * 2),
                "max_tool_calls": max(40, len(steps) * 2),
            },
        }
    )
    return Agent.build(config, _tools(latency_s))


def _runner(runtime: Runtime) -> Callable[[int], Awaitable[int]]:
    async def one(_: int) -> int:
        summary = await runtime.start("go")
        if summary.status.value != "finished":
            raise RuntimeError(f"corral run did not finish: {summary}")
        return RESULT

    return one


def make(latency_s: float, steps: int = 0) -> Callable[[int], Awaitable[int]]:
    """The 5-step DAG, or (``steps``) a chain of that many steps; in-memory store."""
    plan = chain(steps) if steps else DAG
    # a long process that reads each result as it ends keeps a bounded store (README)
    return _runner(Runtime(agent(latency_s, plan), MemoryStore(max_ended_runs=100)))


def durable(db: Path) -> Callable[[int], Awaitable[int]]:
    """The 5-step DAG on a SQLite file (SQLAlchemy is imported here: A and B never load it)."""
    from sqlalchemy import event

    from corral import SqlStore

    store = SqlStore.open(db)
    store.engine.dispose()  # connections opened from now on get the pragma below as well

    @event.listens_for(store.engine, "connect")
    def _sync_off(connection: Any, _record: Any) -> None:
        connection.execute("PRAGMA synchronous=OFF")

    return _runner(Runtime(agent(0.0, DAG), store))
