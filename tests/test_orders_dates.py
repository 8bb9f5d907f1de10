"""The order agent's "older than three months" rule, at every clock (issue 8, found under load).

``test_orders_cli.py::test_old_orders_use_the_historical_search`` failed on 2026-11-30 after
16:00 UTC: the date extraction read "三个月前" in the agent's timezone (Asia/Shanghai, already
1 December: September) while ``resolve_order_params`` counted days from the UTC date (30
November), so September 1st was 90 days back, not more, and the recent search was used.
Even with one timezone, a rule in days misreads "three months ago" on some dates (on 1 March
the first of December is exactly 90 days back). These runs pin the clock at such dates.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from corral import Agent, MemoryStore, Runtime
from corral.effects import FixedEffects
from corral.events import StepFinished

CLOCKS = [
    datetime(2026, 11, 30, 16, 30, tzinfo=UTC),  # Shanghai is already on 1 December
    datetime(2027, 3, 1, 2, 0, tzinfo=UTC),  # 1 March: 1 December is exactly 90 days back
    datetime(2026, 5, 1, 1, 0, tzinfo=UTC),  # 1 May: 1 February is 89 days back
    datetime(2026, 8, 31, 3, 0, tzinfo=UTC),  # the end of a month
]


@pytest.mark.parametrize("now", CLOCKS, ids=[c.date().isoformat() for c in CLOCKS])
@pytest.mark.parametrize(
    ("message", "search"),
    [
        ("三个月前买过什么订单", "search_historical_orders"),
        ("orders from 3 months ago", "search_historical_orders"),
        ("上个月买过什么订单", "search_orders"),
        ("最近三个月的订单", "search_orders"),
        ("orders in the last 3 months", "search_orders"),
    ],
)
async def test_three_months_ago_is_the_archive_and_last_month_is_not(
    orders: Agent, now: datetime, message: str, search: str
) -> None:
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects(start=now))
    summary = await runtime.start(message)
    tools = [step.tool for step in summary.steps]
    assert tools == ["resolve_order_params", search, "generate_reply"]


async def test_a_tool_reads_the_date_in_the_agents_timezone(orders: Agent) -> None:
    """At 16:30 UTC on 30 November it is 1 December in Shanghai, the agent's timezone."""
    now = datetime(2026, 11, 30, 16, 30, tzinfo=UTC)
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects(start=now))
    summary = await runtime.start("我的订单")  # no date said: the last 30 days
    resolved = next(
        e.payload.result.data
        for e in runtime.store.load_events(summary.run_id)
        if isinstance(e.payload, StepFinished) and e.payload.result is not None
    )
    assert resolved is not None and resolved["end_date"] == "2026-12-01", resolved
