"""LangGraph: one compiled graph, s2 and s3 in one superstep, fan-in to s4."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from frameworks.common import combine, combine_sync, fetch, fetch_sync, sync_off


class Task(TypedDict, total=False):
    s1: int
    s2: int
    s3: int
    s4: int
    s5: int


def _graph(nodes: dict[str, Any]) -> StateGraph:
    graph = StateGraph(Task)
    for name, node in nodes.items():
        graph.add_node(name, node)
    graph.add_edge(START, "s1")
    graph.add_edge("s1", "s2")
    graph.add_edge("s1", "s3")
    graph.add_edge(["s2", "s3"], "s4")
    graph.add_edge("s4", "s5")
    graph.add_edge("s5", END)
    return graph


def make(latency_s: float) -> Callable[[int], Awaitable[int]]:
    async def s1(state: Task) -> Task:
        return {"s1": (await fetch(1, latency_s))["value"]}

    async def s2(state: Task) -> Task:
        return {"s2": (await combine(state["s1"], 1, latency_s))["value"]}

    async def s3(state: Task) -> Task:
        return {"s3": (await fetch(3, latency_s))["value"]}

    async def s4(state: Task) -> Task:
        return {"s4": (await combine(state["s2"], state["s3"], latency_s))["value"]}

    async def s5(state: Task) -> Task:
        return {"s5": (await combine(state["s4"], 1, latency_s))["value"]}

    app = _graph({"s1": s1, "s2": s2, "s3": s3, "s4": s4, "s5": s5}).compile()

    async def one(_: int) -> int:
        return int((await app.ainvoke({}))["s5"])

    return one


def durable(db: Path) -> Callable[[int], Awaitable[int]]:
    """SqliteSaver checkpoints after every superstep; one thread per task."""
    nodes = {
        "s1": lambda state: {"s1": fetch_sync(1)["value"]},
        "s2": lambda state: {"s2": combine_sync(state["s1"], 1)["value"]},
        "s3": lambda state: {"s3": fetch_sync(3)["value"]},
        "s4": lambda state: {"s4": combine_sync(state["s2"], state["s3"])["value"]},
        "s5": lambda state: {"s5": combine_sync(state["s4"], 1)["value"]},
    }
    connection = sqlite3.connect(db, check_same_thread=False)
    sync_off(connection)
    app = _graph(nodes).compile(checkpointer=SqliteSaver(connection))

    async def one(run: int) -> int:
        result = app.invoke({}, {"configurable": {"thread_id": f"run-{run}"}})
        return int(result["s5"])

    return one
