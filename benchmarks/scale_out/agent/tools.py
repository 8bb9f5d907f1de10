"""Tools of the scale-out load: examples/aftersales's exchange flow on PostgreSQL.

Every business tool first sleeps ``TOOL_SLEEP_S`` (50 ms) to stand for a network call,
then queries the business database named by ``SCALE_OUT_BUSINESS_URL`` (a SQLAlchemy URL
the harness sets) through a small connection pool, on a thread so the event loop of a
worker keeps driving its other runs. ``generate_reply`` is corral's built-in (local
compute, no sleep), as in the example.

The exchange write logs every entry in ``exchange_entries`` (no unique key) before it
writes the order under its UNIQUE idempotency key: a write entered again after its worker
died shows there, and the UNIQUE key keeps the order single.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from types import ModuleType
from typing import Any

from sqlalchemy import Engine, create_engine, text

from corral import ToolContext, ToolPolicy, tool
from corral.tools.builtin import generate_reply

__all__ = ["generate_reply"]  # registered from corral's built-ins

URL_ENV = "SCALE_OUT_BUSINESS_URL"
TOOL_SLEEP_S = 0.05
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "aftersales" / "tools.py"


def _example() -> ModuleType:
    """examples/aftersales/tools.py: its output models and date rule serve here unchanged."""
    spec = importlib.util.spec_from_file_location("scale_out_aftersales_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves the models' annotations through it
    spec.loader.exec_module(module)
    return module


_shared = _example()
OrderInfo = _shared.OrderInfo
PolicyInfo = _shared.PolicyInfo
Evidence = _shared.Evidence
ExchangeOrder = _shared.ExchangeOrder
_add_months = _shared._add_months


def setup(data_dir: Path) -> Iterator[dict[str, Any]]:
    """Open the business database's pool; the harness created its tables beforehand."""
    url = os.environ.get(URL_ENV)
    if not url:
        raise RuntimeError(f"set {URL_ENV} to the business database's URL")
    engine = create_engine(url, pool_size=4, max_overflow=4)
    try:
        yield {"engine": engine}
    finally:
        engine.dispose()


def _rows(ctx: ToolContext, sql: str, **params: Any) -> list[dict[str, Any]]:
    engine: Engine = ctx.deps["engine"]
    with engine.begin() as conn:
        return [dict(row) for row in conn.execute(text(sql), params).mappings()]


async def _query(ctx: ToolContext, sql: str, **params: Any) -> list[dict[str, Any]]:
    """The network call's 50 ms, then the query on a thread."""
    await asyncio.sleep(TOOL_SLEEP_S)
    return await asyncio.to_thread(_rows, ctx, sql, **params)


@tool(
    policy=ToolPolicy(kind="read", latency_ms=50),
    summary="订单 {order_id}: {product_name}, 购于 {purchase_date}",
)
async def query_order(order_id: str, ctx: ToolContext) -> OrderInfo | None:
    """Look up an order by its id in the order system."""
    rows = await _query(
        ctx,
        "SELECT o.order_id, o.purchase_date, o.status, p.category, p.name_zh, p.name_en "
        "FROM orders o JOIN products p ON p.sku = o.sku WHERE o.order_id = :order_id",
        order_id=order_id.upper(),
    )
    if not rows:
        return None
    row = rows[0]
    return OrderInfo(
        order_id=row["order_id"],
        product_name=row["name_zh"] if ctx.language == "zh" else row["name_en"],
        category=row["category"],
        purchase_date=row["purchase_date"],
        status=row["status"],
    )


@tool(
    policy=ToolPolicy(kind="read", latency_ms=50),
    summary="{category}: {warranty_months} months, in warranty: {in_warranty}",
)
async def query_policy(
    category: str, ctx: ToolContext, purchase_date: date | None = None
) -> PolicyInfo | None:
    """Warranty policy of a product category, and whether a purchase is still covered."""
    rows = await _query(ctx, "SELECT * FROM policies WHERE category = :category", category=category)
    if not rows:
        return None
    row = rows[0]
    until = _add_months(purchase_date, row["warranty_months"]) if purchase_date else None
    return PolicyInfo(
        category=category,
        warranty_months=row["warranty_months"],
        exchange_allowed=row["exchange_allowed"],
        in_warranty=(ctx.today() <= until) if until else None,
        warranty_until=until,
    )


@tool(
    policy=ToolPolicy(kind="read", latency_ms=50), summary="evidence for {order_id}: {has_evidence}"
)
async def check_evidence(order_id: str, ctx: ToolContext) -> Evidence:
    """Whether verified fault evidence (photo, diagnostic report) exists for an order."""
    rows = await _query(
        ctx, "SELECT kind FROM evidence WHERE order_id = :order_id AND verified", order_id=order_id
    )
    return Evidence(order_id=order_id, has_evidence=bool(rows), kinds=[r["kind"] for r in rows])


def find_exchange_by_key(order_id: str, ctx: ToolContext) -> ExchangeOrder | None:
    """The exchange this run's key created, if any: settles a write whose outcome is unknown."""
    rows = _rows(
        ctx,
        "SELECT exchange_id FROM exchanges WHERE idempotency_key = :key",
        key=ctx.idempotency_key,
    )
    return (
        ExchangeOrder(exchange_id=rows[0]["exchange_id"], order_id=order_id, created=True)
        if rows
        else None
    )


def _write_exchange(order_id: str, reason: str, ctx: ToolContext) -> ExchangeOrder:
    exchange_id = "EX" + ctx.idempotency_key[:10].upper()
    engine: Engine = ctx.deps["engine"]
    with engine.begin() as conn:
        made = conn.execute(
            text(
                "INSERT INTO exchanges (exchange_id, order_id, reason, idempotency_key, run_id) "
                "VALUES (:exchange_id, :order_id, :reason, :key, :run_id) "
                "ON CONFLICT (idempotency_key) DO NOTHING"
            ),
            {
                "exchange_id": exchange_id,
                "order_id": order_id,
                "reason": reason,
                "key": ctx.idempotency_key,
                "run_id": ctx.run_id,
            },
        ).rowcount
    return ExchangeOrder(exchange_id=exchange_id, order_id=order_id, created=made == 1)


@tool(
    policy=ToolPolicy(kind="write", requires_confirmation=True, timeout_s=10, idempotent=True),
    summary="exchange {exchange_id} for {order_id}",
    reconcile=find_exchange_by_key,
)
async def create_exchange_order(order_id: str, reason: str, ctx: ToolContext) -> ExchangeOrder:
    """Create an exchange order. Idempotent: the same key never creates a second one."""
    await asyncio.to_thread(
        _rows,
        ctx,
        "INSERT INTO exchange_entries (idempotency_key, run_id) VALUES (:key, :run_id) "
        "RETURNING entry_id",
        key=ctx.idempotency_key,
        run_id=ctx.run_id,
    )
    await asyncio.sleep(TOOL_SLEEP_S)
    return await asyncio.to_thread(_write_exchange, order_id, reason, ctx)
