"""pydantic-graph: four nodes (s2 and s3 in one, with asyncio.gather); no durable workload.

Its nodes are dataclasses whose ``run`` return annotation names the next node, so they
live at module level; the tool latency is in the graph's state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from pydantic_graph import BaseNode, End, GraphBuilder, GraphRunContext
from pydantic_graph.step import NodeStep

from frameworks.common import combine, fetch


@dataclass
class Task:
    latency_s: float
    values: dict[str, int] = field(default_factory=dict)


@dataclass
class S1(BaseNode[Task]):
    async def run(self, ctx: GraphRunContext[Task]) -> S23:
        ctx.state.values["s1"] = (await fetch(1, ctx.state.latency_s))["value"]
        return S23()


@dataclass
class S23(BaseNode[Task]):
    async def run(self, ctx: GraphRunContext[Task]) -> S4:
        latency, values = ctx.state.latency_s, ctx.state.values
        a, b = await asyncio.gather(combine(values["s1"], 1, latency), fetch(3, latency))
        values["s2"], values["s3"] = a["value"], b["value"]
        return S4()


@dataclass
class S4(BaseNode[Task]):
    async def run(self, ctx: GraphRunContext[Task]) -> S5:
        values = ctx.state.values
        values["s4"] = (await combine(values["s2"], values["s3"], ctx.state.latency_s))["value"]
        return S5()


@dataclass
class S5(BaseNode[Task, None, int]):
    async def run(self, ctx: GraphRunContext[Task]) -> End[int]:
        return End((await combine(ctx.state.values["s4"], 1, ctx.state.latency_s))["value"])


def _graph():
    builder = GraphBuilder(state_type=Task, input_type=S1, output_type=int)
    builder.add(
        builder.edge_from(builder.start_node).to(NodeStep(S1)),
        builder.node(S1),
        builder.node(S23),
        builder.node(S4),
        builder.node(S5),
    )
    return builder.build()


GRAPH = _graph()


def make(latency_s: float) -> Callable[[int], Awaitable[int]]:
    async def one(_: int) -> int:
        return int(await GRAPH.run(state=Task(latency_s), inputs=S1()))

    return one
