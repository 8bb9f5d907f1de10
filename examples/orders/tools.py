"""Tools of the order-query assistant (seed 004, Agent-Reach), on a SQLite shop database.

Recent orders and the archive are separate tables. ``get_order`` hides which one it reads;
the searches are two tools, and the agent's config (``tool_constraints``) decides which one
a date range needs: older than three months goes to ``search_historical_orders``.
"""

from __future__ import annotations

import re
import sqlite3
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo

from pydantic import BaseModel

from corral import LOCAL_COMPUTE, ToolContext, ToolFailedError, ToolPolicy, tool
from corral.intent.dates import chinese_number
from corral.tools.builtin import generate_reply

__all__ = ["generate_reply"]  # registered from corral's built-ins

HERE = Path(__file__).parent
TABLES = ("orders_recent", "orders_history")
"""The only table names ever put into SQL text; values always go in as parameters."""
STATUS_TEXT = {
    "zh": {"pending": "待发货", "shipped": "已发货", "completed": "已完成", "canceled": "已取消"},
    "en": {
        "pending": "waiting to ship",
        "shipped": "shipped",
        "completed": "completed",
        "canceled": "canceled",
    },
}
OrderStatus = Literal["pending", "shipped", "completed", "canceled"]


def setup(data_dir: Path) -> dict[str, Any]:
    """Create (or reuse) the shop database under ``data_dir``."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / "orders.db"
    with sqlite3.connect(path) as conn:
        conn.executescript((HERE / "data" / "orders.sql").read_text(encoding="utf-8"))
    return {"db": path}


def _connect(ctx: ToolContext) -> sqlite3.Connection:
    conn = sqlite3.connect(ctx.deps["db"], timeout=5)
    conn.row_factory = sqlite3.Row
    return conn


def _find(conn: sqlite3.Connection, order_id: str) -> tuple[sqlite3.Row, str] | None:
    """The order's row and the table it lives in: routing the caller never sees."""
    for table in TABLES:
        row = conn.execute(
            f"SELECT o.*, p.name_zh, p.name_en, p.category FROM {table} o "
            "JOIN products p ON p.sku = o.sku WHERE o.order_id = ?",
            (order_id.upper(),),
        ).fetchone()
        if row is not None:
            return row, table
    return None


class OrderDetail(BaseModel):
    order_id: str
    product: str
    order_status: OrderStatus
    status_text: str
    created_at: date
    amount_cny: float
    refundable_cny: float
    """What is paid and not refunded yet: a second refund takes only what is left."""
    address: str
    archived: bool


@tool(
    policy=ToolPolicy(kind="read", latency_ms=20), summary="{order_id}: {product}, {order_status}"
)
def get_order(order_id: str, ctx: ToolContext) -> OrderDetail | None:
    """Look up one order by its id (recent orders and the archive alike)."""
    with _connect(ctx) as conn:
        found = _find(conn, order_id)
        if found is None:
            return None
        row, table = found
        refundable = _refundable(conn, row["order_id"], row["amount_cny"])
    language = ctx.language
    return OrderDetail(
        order_id=row["order_id"],
        product=row["name_zh"] if language == "zh" else row["name_en"],
        order_status=row["status"],
        status_text=STATUS_TEXT[language][row["status"]],
        created_at=date.fromisoformat(row["created_at"]),
        amount_cny=row["amount_cny"],
        refundable_cny=refundable,
        address=row["address"],
        archived=table == "orders_history",
    )


def _refundable(conn: sqlite3.Connection, order_id: str, paid: float) -> float:
    """What is paid for the order and not refunded yet."""
    refunded = conn.execute(
        "SELECT coalesce(sum(amount_cny), 0) FROM refunds WHERE order_id = ?", (order_id,)
    ).fetchone()[0]
    return _left_to_refund(paid, float(refunded))


def _left_to_refund(paid: float, refunded: float) -> float:
    return round(max(paid - refunded, 0.0), 2)


class Logistics(BaseModel):
    order_id: str
    stage: Literal["not_shipped", "in_transit", "delivered", "canceled"]
    carrier: str | None
    tracking_no: str | None
    latest_event: str | None
    latest_location: str | None
    latest_time: str | None


@tool(policy=ToolPolicy(kind="read", latency_ms=80), summary="{order_id}: {stage}")
def get_logistics(order_id: str, ctx: ToolContext) -> Logistics | None:
    """The delivery track of an order: carrier, latest event and where the parcel is."""
    with _connect(ctx) as conn:
        found = _find(conn, order_id)
        if found is None:
            return None
        events = conn.execute(
            "SELECT * FROM logistics WHERE order_id = ? ORDER BY ts DESC", (order_id.upper(),)
        ).fetchall()
    row, _ = found
    if not events:
        stage = "canceled" if row["status"] == "canceled" else "not_shipped"
        return Logistics(
            order_id=row["order_id"],
            stage=stage,
            carrier=None,
            tracking_no=None,
            latest_event=None,
            latest_location=None,
            latest_time=None,
        )
    latest = events[0]
    delivered = latest["event_en"] == "delivered"
    return Logistics(
        order_id=row["order_id"],
        stage="delivered" if delivered else "in_transit",
        carrier=latest["carrier"],
        tracking_no=latest["tracking_no"],
        latest_event=latest["event_zh"] if ctx.language == "zh" else latest["event_en"],
        latest_location=latest["location"],
        latest_time=latest["ts"],
    )


def _month_end(day: date) -> date:
    following = (day.replace(day=28) + timedelta(days=4)).replace(day=1)
    return following - timedelta(days=1)


def _whole_months(start: date, today: date) -> int:
    """Whole calendar months from ``start`` to ``today``: 3 once ``start`` is on or before
    the same day three months back ("三个月前" is 3 on every date; "the last 3 months",
    which starts a day later, is 2)."""
    months = (today.year - start.year) * 12 + today.month - start.month
    return months - (today.day < start.day)


class OrderQuery(BaseModel):
    start_date: date
    end_date: date
    age_days: int
    """How many days before the run's date the range starts."""
    age_months: int
    """Whole calendar months back the range starts: the constraints read it, so "三个月前"
    is the archive on every date (in days it is 89 to 92 days back)."""
    order_status: OrderStatus | None
    period: str


@tool(policy=LOCAL_COMPUTE, summary="{start_date}..{end_date} ({age_days} days back)")
def resolve_order_params(
    ctx: ToolContext,
    date_range: dict[str, str] | None = None,
    order_status: OrderStatus | None = None,
) -> OrderQuery:
    """Turn what the user said into query parameters: a date range (default: last 30 days)."""
    today = ctx.today()  # in the agent's timezone, as the extracted dates are
    if date_range:
        start, end = date.fromisoformat(date_range["start"]), date.fromisoformat(date_range["end"])
        period = date_range.get("text", "")
        if start == end and ("月前" in period or "month" in period):
            # "三个月前买的" means that month, not that single day.
            start = start.replace(day=1)
            end = min(_month_end(start), today)
    else:
        start, end = today - timedelta(days=29), today
        period = "最近 30 天" if ctx.language == "zh" else "the last 30 days"
    return OrderQuery(
        start_date=start,
        end_date=end,
        age_days=(today - start).days,
        age_months=_whole_months(start, today),
        order_status=order_status,
        period=period,
    )


class OrderBrief(BaseModel):
    order_id: str
    product: str
    status_text: str
    created_at: date


class OrderList(BaseModel):
    count: int
    found: bool
    orders: list[OrderBrief]
    listing: str
    """The first few orders as one short phrase, for the reply."""


def _listing(orders: list[OrderBrief], language: str) -> str:
    sep = "、" if language == "zh" else "; "
    listing = sep.join(
        f"{o.order_id} {o.product}（{o.status_text}）"
        if language == "zh"
        else f"{o.order_id} {o.product} ({o.status_text})"
        for o in orders[:3]
    )
    if len(orders) > 3:
        listing += "等" if language == "zh" else " and more"
    return listing


def _merge(first: OrderList, second: OrderList, ctx: ToolContext) -> OrderList:
    orders = sorted(first.orders + second.orders, key=lambda o: o.created_at, reverse=True)
    return OrderList(
        count=len(orders), found=bool(orders), orders=orders, listing=_listing(orders, ctx.language)
    )


def _search(
    table: str,
    ctx: ToolContext,
    start_date: date,
    end_date: date,
    order_status: str | None,
    phone: str | None,
) -> OrderList:
    query = (
        f"SELECT o.*, p.name_zh, p.name_en FROM {table} o "
        "JOIN products p ON p.sku = o.sku WHERE o.created_at BETWEEN ? AND ?"
    )
    params: list[Any] = [start_date.isoformat(), end_date.isoformat()]
    if order_status:
        query += " AND o.status = ?"
        params.append(order_status)
    if phone:
        query += " AND o.phone = ?"
        params.append(phone)
    with _connect(ctx) as conn:
        rows = conn.execute(query + " ORDER BY o.created_at DESC", params).fetchall()
    language = ctx.language
    orders = [
        OrderBrief(
            order_id=r["order_id"],
            product=r["name_zh"] if language == "zh" else r["name_en"],
            status_text=STATUS_TEXT[language][r["status"]],
            created_at=date.fromisoformat(r["created_at"]),
        )
        for r in rows
    ]
    return OrderList(
        count=len(orders), found=bool(orders), orders=orders, listing=_listing(orders, language)
    )


@tool(
    policy=ToolPolicy(kind="read", equivalent_group="order_search", latency_ms=60),
    summary="{count} orders",
)
def search_orders(
    start_date: date,
    end_date: date,
    ctx: ToolContext,
    order_status: OrderStatus | None = None,
    phone: str | None = None,
) -> OrderList:
    """Search recent orders (the last three months) by status and time range."""
    return _search("orders_recent", ctx, start_date, end_date, order_status, phone)


@tool(
    policy=ToolPolicy(kind="read", equivalent_group="order_search", latency_ms=900),
    summary="{count} archived orders",
)
def search_historical_orders(
    start_date: date,
    end_date: date,
    ctx: ToolContext,
    order_status: OrderStatus | None = None,
    phone: str | None = None,
) -> OrderList:
    """Search the order archive (older than three months) by status and time range.

    A range that reaches back past three months may end in the recent months too, so this
    tool reads the recent table as well; the caller never needs to know.
    """
    archived = _search("orders_history", ctx, start_date, end_date, order_status, phone)
    recent = _search("orders_recent", ctx, start_date, end_date, order_status, phone)
    return _merge(archived, recent, ctx)


class Refund(BaseModel):
    refund_id: str
    order_id: str
    amount_cny: float


def find_refund_by_key(order_id: str, ctx: ToolContext) -> Refund | None:
    """The refund this run's key opened, if any: settles a refund whose outcome is unknown."""
    row = _ledger_row(ctx, "refunds")
    if row is None:
        return None
    return Refund(refund_id=row["refund_id"], order_id=order_id, amount_cny=row["amount_cny"])


@tool(
    policy=ToolPolicy(kind="write", requires_confirmation=True, idempotent=True),
    summary="refund {refund_id}",
    reconcile=find_refund_by_key,
)
def request_refund(order_id: str, reason: str, amount_cny: float, ctx: ToolContext) -> Refund:
    """Refund ``amount_cny`` of an order (a return); idempotent by the run's key.

    The amount is the one the person confirmed (``quote_refund``, checked by the agent's
    rules against what is left). Another refund of the same order may have been made
    since: more than is left now is refused, nothing written.
    """
    existing = find_refund_by_key(order_id, ctx)
    if existing is not None:
        return existing
    with _connect(ctx) as conn:
        conn.execute("BEGIN IMMEDIATE")  # what is left is read and taken in one go
        found = _find(conn, order_id)
        left = _refundable(conn, order_id, float(found[0]["amount_cny"])) if found else 0.0
        if not 0 < amount_cny <= left:
            raise ToolFailedError(f"{amount_cny} CNY is more than the {left} CNY left to refund")
        refund_id = "RF" + ctx.idempotency_key[:10].upper()
        conn.execute(
            "INSERT INTO refunds VALUES (?, ?, ?, ?, ?, ?)",
            (
                refund_id,
                order_id,
                reason,
                amount_cny,
                ctx.idempotency_key,
                ctx.received_at.isoformat(),
            ),
        )
    return Refund(refund_id=refund_id, order_id=order_id, amount_cny=amount_cny)


RefundState = Literal["refunded", "partly_refunded", "none", "not_shipped", "canceled"]
"""What a question about a refund is answered with (``refund_status_<state>`` replies):
``not_shipped`` and ``canceled`` have no refund and need none (a cancel pays back)."""


class RefundStatus(BaseModel):
    order_id: str
    state: RefundState
    count: int
    refunded_cny: float
    left_cny: float
    """What may still be refunded (``quote_refund`` refuses more)."""
    latest_refund_id: str | None = None
    latest_amount_cny: float | None = None
    latest_date: date | None = None
    """The latest refund's date in the agent's timezone, as the person counts days."""


def _refund_state(order_status: str, refunds: int, left: float) -> RefundState:
    if refunds:
        return "partly_refunded" if left > 0 else "refunded"
    if order_status == "canceled":
        return "canceled"
    return "not_shipped" if order_status == "pending" else "none"


@tool(policy=ToolPolicy(kind="read", latency_ms=20), summary="{order_id}: {state}, {count}")
def get_refunds(order_id: str, ctx: ToolContext) -> RefundStatus | None:
    """The refunds made on an order, for a question about one: what was refunded and when.

    A question such as "where is my refund" is answered from here, never by a new refund.
    """
    with _connect(ctx) as conn:
        found = _find(conn, order_id)
        if found is None:
            return None
        row = found[0]
        refunds = conn.execute(
            "SELECT refund_id, amount_cny, created_at FROM refunds WHERE order_id = ? "
            "ORDER BY rowid",  # the order they were made in
            (row["order_id"],),
        ).fetchall()
    refunded = sum(float(r["amount_cny"]) for r in refunds)  # the rows read: no second sum
    left = _left_to_refund(float(row["amount_cny"]), refunded)
    latest = refunds[-1] if refunds else None
    made_at = datetime.fromisoformat(latest["created_at"]) if latest else None
    return RefundStatus(
        order_id=row["order_id"],
        state=_refund_state(row["status"], len(refunds), left),
        count=len(refunds),
        refunded_cny=round(refunded, 2),
        left_cny=left,
        latest_refund_id=latest["refund_id"] if latest else None,
        latest_amount_cny=float(latest["amount_cny"]) if latest else None,
        latest_date=made_at.astimezone(ZoneInfo(ctx.timezone)).date() if made_at else None,
    )


class RefundQuote(BaseModel):
    order_id: str
    amount_cny: float


REFUND_SHARES = {
    "一半": 0.5,
    "half": 0.5,
    "a third": 1 / 3,
    "one third": 1 / 3,
    "two thirds": 2 / 3,
    "a quarter": 0.25,
    "one quarter": 0.25,
    "three quarters": 0.75,
}
"""The shares ``refund_share`` (agent.yaml) finds in words; ``share_of`` reads the rest."""

_CHINESE_SHARE = re.compile(
    r"(?P<whole>.+)分之(?P<part>.+)|百分之(?P<percent>.+)"
    r"|(?P<tenths>[^成]+)成(?P<more>.?)|(?P<price>.+)折"
)
"""三分之二 (a fraction), 百分之三十 (a percentage), 三成, 两成半, 一成五 (tenths); 八折 is a
discount, which a refund may mean either way (refund 80 %, or what is left of the price
to pay): not read."""


def share_of(said: str) -> float | None:
    """The fraction a share names ("一半" 0.5, "a third", "30 %" 0.3, "三成" 0.3, "百分之
    二十" 0.2, "三分之二" 2/3); None for one not understood, which is never the whole order.
    """
    words = " ".join(said.lower().replace("％", "%").replace("-", " ").split())
    if words.endswith("%"):
        return _fraction(_number(words[:-1].strip()), 100)
    found = _CHINESE_SHARE.fullmatch(words)
    if found is None:
        return REFUND_SHARES.get(words)
    if found["whole"] is not None:
        whole = _number(found["whole"])
        return None if whole is None else _fraction(_number(found["part"]), whole)
    if found["percent"] is not None:
        return _fraction(_number(found["percent"]), 100)
    if found["tenths"] is not None:
        more = found["more"]  # 两成半: and a half; 一成五: and five hundredths
        hundredths = 5.0 if more == "半" else _number(more) if more else 0.0
        tenths = _number(found["tenths"])
        if tenths is None or hundredths is None or hundredths >= 10:
            return None
        return _fraction(tenths * 10 + hundredths, 100)
    return None  # a discount (八折): which share is refunded is for a person to ask


def _number(text: str) -> float | None:
    """Digits (``30``, ``12.5``), full-width too, or a Chinese numeral (``三十``, ``两``,
    ``二十五点五``)."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    whole, point, decimals = text.partition("点")
    value = chinese_number(whole)
    if value is None or (point and not decimals):
        return None
    digits = [chinese_number(digit) for digit in decimals]
    if any(digit is None or digit > 9 for digit in digits):
        return None
    return float(f"{value}.{''.join(str(digit) for digit in digits)}" if digits else value)


def _fraction(part: float | None, whole: float) -> float | None:
    """``part / whole``, when both are above 0 (more than the price is the rules' to refuse)."""
    if part is None or part <= 0 or whole <= 0:
        return None
    return part / whole


@tool(policy=LOCAL_COMPUTE, summary="{order_id}: {amount_cny} CNY")
def quote_refund(
    order_id: str,
    refundable_cny: float,
    amount_cny: float | None = None,
    paid_cny: float | None = None,
    share: str | None = None,
    written: str | None = None,
) -> RefundQuote:
    """The amount a refund is for: the one asked, a share of what was paid, or all that
    is left to refund.

    Worked out before the confirmation, so the person approves the sum that is refunded;
    an amount over what is left is passed on as asked, for the rules to refuse. A share
    ("退一半", "refund half") is of the price paid, as a person means it; after an earlier
    refund it may be more than is left, and the rules refuse it, saying what is left.
    An amount said with a share is the price paid when it is that ("我付了599元，退一半":
    the share of it); any other is not worked out: the sum is not guessed (a review found
    the price said alongside read as the sum to refund, the whole order for "half").
    A sum ``written`` that the amount reader refused is not read as no sum: the quote
    fails rather than propose all that is left.
    """
    if written is not None and amount_cny is None:
        # a sum was typed ("-50元", "¥1，500") and could not be read: not the whole order
        raise ToolFailedError(f"the refund amount {written.strip()!r} could not be read")
    if amount_cny is not None and share is not None and amount_cny != paid_cny:
        raise ToolFailedError(
            f"both a share ({share!r}) and an amount ({amount_cny:g}) of the refund were given"
        )
    if amount_cny is not None and share is None:
        return RefundQuote(order_id=order_id, amount_cny=amount_cny)
    if share is not None:
        fraction = share_of(share)
        if fraction is None or paid_cny is None:
            # never the whole order for a share that is not understood
            raise ToolFailedError(f"cannot work out the refund share {share!r}")
        return RefundQuote(order_id=order_id, amount_cny=round(paid_cny * fraction, 2))
    return RefundQuote(order_id=order_id, amount_cny=refundable_cny)


class AddressChange(BaseModel):
    order_id: str
    new_address: str


def find_address_change_by_key(order_id: str, ctx: ToolContext) -> AddressChange | None:
    """The address change this run's key made, if any (settles an unknown outcome)."""
    row = _ledger_row(ctx, "address_changes")
    return AddressChange(order_id=order_id, new_address=row["new_address"]) if row else None


@tool(
    policy=ToolPolicy(kind="write", requires_confirmation=True, idempotent=True),
    summary="{order_id} → {new_address}",
    reconcile=find_address_change_by_key,
)
def update_address(order_id: str, new_address: str, ctx: ToolContext) -> AddressChange:
    """Change the delivery address of an order that has not shipped; idempotent."""
    _update_once(
        ctx, "address_changes", order_id, "address = ?", (new_address,), (order_id, new_address)
    )
    return AddressChange(order_id=order_id, new_address=new_address)


def _ledger_row(ctx: ToolContext, ledger: str) -> sqlite3.Row | None:
    """The row this run's key wrote to ``ledger`` (a write's record of its effect), if any."""
    with _connect(ctx) as conn:
        row: sqlite3.Row | None = conn.execute(
            f"SELECT * FROM {ledger} WHERE idempotency_key = ?", (ctx.idempotency_key,)
        ).fetchone()
    return row


def _update_once(
    ctx: ToolContext,
    ledger: str,
    order_id: str,
    assignment: str,
    values: tuple[Any, ...],
    ledger_row: tuple[Any, ...],
) -> None:
    """Apply an update to a pending order and record it in a ledger, once per key.

    The ledger's UNIQUE idempotency key makes a resumed run's second call a no-op. The
    order must still be pending when the update is made, read in the same transaction:
    the business rules read its status when the run planned, and a confirmation given
    later (two cancellations of one order asked side by side, each confirmed) would
    otherwise act on what the order was then, and cancel it twice.
    """
    with _connect(ctx) as conn:
        conn.execute("BEGIN IMMEDIATE")  # the status is read and changed in one go
        done = conn.execute(
            f"SELECT 1 FROM {ledger} WHERE idempotency_key = ?", (ctx.idempotency_key,)
        ).fetchone()
        if done:
            return
        found = _find(conn, order_id)
        if found is None or found[0]["status"] != "pending":
            status = found[0]["status"] if found else "not found"
            raise ToolFailedError(f"order {order_id} is {status}, no longer pending")
        table = found[1]
        conn.execute(f"UPDATE {table} SET {assignment} WHERE order_id = ?", (*values, order_id))
        marks = ", ".join("?" * (len(ledger_row) + 2))
        conn.execute(
            f"INSERT INTO {ledger} VALUES ({marks})",
            (*ledger_row, ctx.idempotency_key, ctx.received_at.isoformat()),
        )


class Cancellation(BaseModel):
    order_id: str
    canceled: bool


def find_cancellation_by_key(order_id: str, ctx: ToolContext) -> Cancellation | None:
    """The cancellation this run's key made, if any (settles an unknown outcome)."""
    return (
        Cancellation(order_id=order_id, canceled=True)
        if _ledger_row(ctx, "cancellations")
        else None
    )


@tool(
    policy=ToolPolicy(kind="write", requires_confirmation=True, idempotent=True),
    summary="{order_id} canceled",
    reconcile=find_cancellation_by_key,
)
def cancel_order(order_id: str, ctx: ToolContext) -> Cancellation:
    """Cancel an order that has not shipped. The only way to cancel: never a status edit."""
    _update_once(ctx, "cancellations", order_id, "status = 'canceled'", (), (order_id,))
    return Cancellation(order_id=order_id, canceled=True)
