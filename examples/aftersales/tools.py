"""Tools of the after-sales assistant (seed 000), on a SQLite business database.

Each tool is a typed function: the signature is its input schema, the return model is
its output schema. Business rules (warranty ⇒ exchange) live in agent.yaml, not here.
"""

from __future__ import annotations

import sqlite3
from datetime import date
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from corral import ToolContext, ToolFailedError, ToolPolicy, tool
from corral.tools.builtin import generate_reply

__all__ = ["generate_reply"]  # registered from corral's built-ins

HERE = Path(__file__).parent


def setup(data_dir: Path) -> dict[str, Any]:
    """Create (or reuse) the business database under ``data_dir``; returns the tools' deps."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / "aftersales.db"
    with sqlite3.connect(path) as conn:
        conn.executescript((HERE / "data" / "business.sql").read_text(encoding="utf-8"))
    return {"db": path}


def _connect(ctx: ToolContext) -> sqlite3.Connection:
    conn = sqlite3.connect(ctx.deps["db"], timeout=5)
    conn.row_factory = sqlite3.Row
    return conn


def _add_months(day: date, months: int) -> date:
    index = day.year * 12 + day.month - 1 + months
    return date(index // 12, index % 12 + 1, min(day.day, 28))


class OrderInfo(BaseModel):
    order_id: str
    product_name: str
    category: str
    purchase_date: date
    status: str
    open_exchange: str | None = None
    """The exchange already made for this order, if one was: an order is exchanged once."""
    open_repair: str | None = None
    """The order's repair still open, if one is: reported again, it is not booked twice."""


def _lookup_order(order_id: str, ctx: ToolContext) -> OrderInfo | None:
    with _connect(ctx) as conn:
        row = conn.execute(
            "SELECT o.order_id, o.purchase_date, o.status, p.category, p.name_zh, p.name_en "
            "FROM orders o JOIN products p ON p.sku = o.sku WHERE o.order_id = ?",
            (order_id.upper(),),
        ).fetchone()
        exchange = conn.execute(
            "SELECT exchange_id FROM exchanges WHERE order_id = ? ORDER BY created_at LIMIT 1",
            (order_id.upper(),),
        ).fetchone()
        repair = conn.execute(
            "SELECT repair_id FROM repairs WHERE order_id = ? AND status = 'open' "
            "ORDER BY created_at LIMIT 1",
            (order_id.upper(),),
        ).fetchone()
    if row is None:
        return None
    name = row["name_zh"] if ctx.language == "zh" else row["name_en"]
    return OrderInfo(
        order_id=row["order_id"],
        product_name=name,
        category=row["category"],
        purchase_date=date.fromisoformat(row["purchase_date"]),
        status=row["status"],
        open_exchange=exchange["exchange_id"] if exchange else None,
        open_repair=repair["repair_id"] if repair else None,
    )


@tool(
    policy=ToolPolicy(kind="read", equivalent_group="order_lookup", latency_ms=40),
    summary="订单 {order_id}: {product_name}, 购于 {purchase_date}",
)
def query_order(order_id: str, ctx: ToolContext) -> OrderInfo | None:
    """Look up an order by its id in the order system."""
    return _lookup_order(order_id, ctx)


@tool(
    policy=ToolPolicy(kind="read", equivalent_group="order_lookup", latency_ms=400),
    summary="订单 {order_id}: {product_name} (archive)",
)
def query_order_archive(order_id: str, ctx: ToolContext) -> OrderInfo | None:
    """Look up an order in the slower read replica; equivalent to query_order."""
    return _lookup_order(order_id, ctx)


class PolicyInfo(BaseModel):
    category: str
    warranty_months: int
    exchange_allowed: bool
    in_warranty: bool | None
    warranty_until: date | None


@tool(
    policy=ToolPolicy(kind="read", latency_ms=30),
    summary="{category}: {warranty_months} months, in warranty: {in_warranty}",
)
def query_policy(
    category: str, ctx: ToolContext, purchase_date: date | None = None
) -> PolicyInfo | None:
    """Warranty policy of a product category, and whether a purchase is still covered."""
    with _connect(ctx) as conn:
        row = conn.execute("SELECT * FROM policies WHERE category = ?", (category,)).fetchone()
    if row is None:
        return None
    until = _add_months(purchase_date, row["warranty_months"]) if purchase_date else None
    today = ctx.today()  # in the agent's timezone, as the purchase date the user said
    return PolicyInfo(
        category=category,
        warranty_months=row["warranty_months"],
        exchange_allowed=bool(row["exchange_allowed"]),
        in_warranty=(today <= until) if until else None,
        warranty_until=until,
    )


class Evidence(BaseModel):
    order_id: str
    has_evidence: bool
    kinds: list[str]


@tool(
    policy=ToolPolicy(kind="read", latency_ms=30), summary="evidence for {order_id}: {has_evidence}"
)
def check_evidence(order_id: str, ctx: ToolContext) -> Evidence:
    """Whether verified fault evidence (photo, diagnostic report) exists for an order."""
    with _connect(ctx) as conn:
        rows = conn.execute(
            "SELECT kind FROM evidence WHERE order_id = ? AND verified = 1", (order_id,)
        ).fetchall()
    return Evidence(order_id=order_id, has_evidence=bool(rows), kinds=[r["kind"] for r in rows])


class ExchangeOrder(BaseModel):
    exchange_id: str
    order_id: str
    created: bool
    """False when the idempotency key matched an exchange created earlier."""


def find_exchange_by_key(order_id: str, ctx: ToolContext) -> ExchangeOrder | None:
    """The exchange this run's key created, if any: settles a write whose outcome is unknown."""
    with _connect(ctx) as conn:
        row = conn.execute(
            "SELECT exchange_id FROM exchanges WHERE idempotency_key = ?", (ctx.idempotency_key,)
        ).fetchone()
    return (
        ExchangeOrder(exchange_id=row["exchange_id"], order_id=order_id, created=True)
        if row
        else None
    )


@tool(
    policy=ToolPolicy(kind="write", requires_confirmation=True, timeout_s=10, idempotent=True),
    summary="exchange {exchange_id} for {order_id}",
    reconcile=find_exchange_by_key,
)
def create_exchange_order(order_id: str, reason: str, ctx: ToolContext) -> ExchangeOrder:
    """Create an exchange order. Idempotent: the same key never creates a second one.

    Nor does an order that was exchanged already: agent.yaml's rule refuses that before
    asking, and this is the guard for two runs that both asked (two sessions, or a run
    that looked the order up before the other's exchange was made). A repair still open
    for the order is closed as replaced: no engineer calls about the machine sent back.
    """
    existing = find_exchange_by_key(order_id, ctx)
    if existing is not None:
        return existing.model_copy(update={"created": False})
    with _connect(ctx) as conn:
        conn.execute("BEGIN IMMEDIATE")  # the check and the insert, one writer at a time
        earlier = conn.execute(
            "SELECT exchange_id FROM exchanges WHERE order_id = ? ORDER BY created_at LIMIT 1",
            (order_id.upper(),),
        ).fetchone()
        if earlier is not None:  # nothing made: a failure that proves no effect
            raise ToolFailedError(
                f"order {order_id} was exchanged already ({earlier['exchange_id']})"
            )
        exchange_id = "EX" + ctx.idempotency_key[:10].upper()
        conn.execute(
            "INSERT INTO exchanges VALUES (?, ?, ?, ?, ?)",
            (
                exchange_id,
                order_id.upper(),
                reason,
                ctx.idempotency_key,
                ctx.received_at.isoformat(),
            ),
        )
        # the machine is replaced: a repair still open for it would send an engineer to
        # a machine that is gone
        conn.execute(
            "UPDATE repairs SET status = 'replaced' WHERE order_id = ? AND status = 'open'",
            (order_id.upper(),),
        )
    return ExchangeOrder(exchange_id=exchange_id, order_id=order_id, created=True)


class RepairTicket(BaseModel):
    repair_id: str
    order_id: str
    """As the repairs table holds it: the plan's success check compares it with the order."""
    created: bool
    """False when the order's open repair was booked earlier (this run's key, or another
    run's): the engineer already has it, and a second ticket would only call twice."""


class RepairStatus(BaseModel):
    order_id: str
    product_name: str
    state: str
    """"open" while the order has a repair in progress, else "none"."""
    repair_id: str | None = None


@tool(
    policy=ToolPolicy(kind="read", latency_ms=40),
    summary="{order_id}: repair {state}",
)
def get_repair_status(order_id: str, ctx: ToolContext) -> RepairStatus | None:
    """Whether the order has a repair in progress, and which: a question, never a booking."""
    order = _lookup_order(order_id, ctx)
    if order is None:
        return None
    return RepairStatus(
        order_id=order.order_id,
        product_name=order.product_name,
        state="open" if order.open_repair else "none",
        repair_id=order.open_repair,
    )


def find_repair_by_key(order_id: str, in_warranty: bool, ctx: ToolContext) -> RepairTicket | None:
    """The repair this run's key booked, if any: settles a write whose outcome is unknown."""
    with _connect(ctx) as conn:
        row = conn.execute(
            "SELECT repair_id, order_id FROM repairs WHERE idempotency_key = ?",
            (ctx.idempotency_key,),
        ).fetchone()
    return (
        RepairTicket(repair_id=row["repair_id"], order_id=row["order_id"], created=True)
        if row
        else None
    )


@tool(
    policy=ToolPolicy(kind="write", timeout_s=10, idempotent=True),
    summary="repair {repair_id} for {order_id}",
    reconcile=find_repair_by_key,
)
def book_repair(order_id: str, in_warranty: bool, ctx: ToolContext) -> RepairTicket:
    """Book a repair: the engineer's callback list. Idempotent, and one open repair per order.

    No confirmation is asked: a booking commits the customer to nothing (a charged repair
    is quoted before any work). The reply that says "repair booked" is true only once
    this row exists, so the plan books it before the reply is written.
    """
    existing = find_repair_by_key(order_id, in_warranty, ctx)
    if existing is not None:
        return existing.model_copy(update={"created": False})
    with _connect(ctx) as conn:
        conn.execute("BEGIN IMMEDIATE")  # the check and the insert, one writer at a time
        open_repair = conn.execute(
            "SELECT repair_id, order_id FROM repairs WHERE order_id = ? AND status = 'open' "
            "ORDER BY created_at LIMIT 1",
            (order_id.upper(),),
        ).fetchone()
        if open_repair is not None:  # reported again: the same ticket, not a second call
            return RepairTicket(
                repair_id=open_repair["repair_id"], order_id=open_repair["order_id"], created=False
            )
        repair_id = "RP" + ctx.idempotency_key[:10].upper()
        conn.execute(
            "INSERT INTO repairs VALUES (?, ?, ?, 'open', ?, ?)",
            (
                repair_id,
                order_id.upper(),
                int(in_warranty),
                ctx.idempotency_key,
                ctx.received_at.isoformat(),
            ),
        )
    return RepairTicket(repair_id=repair_id, order_id=order_id.upper(), created=True)
