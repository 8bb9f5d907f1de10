"""Tools of the ticket-triage desk (seed 003), on a SQLite business database.

The priority of a ticket is decided here, by code over facts, never by a model: whether
the customer is a VIP (``lookup_customer``), how bad the fault is (``check_service`` and
the words of the ticket), how many users or orders it hits, and whether a deadline is
near. ``rule_priority`` is the whole rule table; agent.yaml holds the fences around it
(which write tool a priority may use, the business rule that only a P0 pages).
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from corral import LOCAL_COMPUTE, ToolContext, ToolPolicy, tool
from corral.tools.builtin import generate_reply

__all__ = ["generate_reply"]  # registered from corral's built-ins

HERE = Path(__file__).parent
Priority = Literal["P0", "P1", "P2", "P3"]
Category = Literal["fault", "question", "billing", "complaint", "suggestion"]
State = Literal["operational", "degraded", "outage"]
Severity = Literal["outage", "reported_outage", "degraded", "minor", "cosmetic", "none"]
BIG_IMPACT = 100
"""Users or orders hit from which an outage pages even for a customer who is not a VIP."""
_STATES: tuple[State, ...] = ("operational", "degraded", "outage")
_PRIORITIES: dict[str, Priority] = {"P0": "P0", "P1": "P1", "P2": "P2", "P3": "P3"}
_RANK = {"P0": 0, "P1": 1, "P2": 2, "P3": 3}


def setup(data_dir: Path) -> dict[str, Any]:
    """Create (or reuse) the business database under ``data_dir``; returns the tools' deps."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / "triage.db"
    with sqlite3.connect(path) as conn:
        conn.executescript((HERE / "data" / "triage.sql").read_text(encoding="utf-8"))
        for table in ("tickets", "ticket_reports"):  # made before they kept the words
            columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
            if "body" not in columns:
                try:
                    conn.execute(f"ALTER TABLE {table} ADD COLUMN body TEXT")
                except sqlite3.OperationalError as exc:  # another process added it first
                    if "duplicate column" not in str(exc):
                        raise
    return {"db": path}


def _connect(ctx: ToolContext) -> sqlite3.Connection:
    conn = sqlite3.connect(ctx.deps["db"], timeout=5)
    conn.row_factory = sqlite3.Row
    return conn


def _render(ctx: ToolContext, name: str, values: dict[str, Any] | None = None) -> str:
    """One of the agent's templates (agent.yaml), in the run's language."""
    assert ctx.render is not None, "the runtime always sets ToolContext.render"
    return ctx.render(name, values or {})


# --------------------------------------------------------------------------- reads


class Customer(BaseModel):
    customer_id: str
    customer_name: str
    vip: bool
    tier: str
    seats: int


@tool(policy=ToolPolicy(kind="read", latency_ms=20), summary="{customer_id}: {tier}")
def lookup_customer(customer_id: str, ctx: ToolContext) -> Customer | None:
    """Look up a customer by id in the CRM: the tier (VIP or not) and the number of seats."""
    with _connect(ctx) as conn:
        row = conn.execute(
            "SELECT * FROM customers WHERE customer_id = ?", (customer_id.upper(),)
        ).fetchone()
    if row is None:
        return None
    return Customer(
        customer_id=row["customer_id"],
        customer_name=row["name_zh"] if ctx.language == "zh" else row["name_en"],
        vip=row["tier"] == "vip",
        tier=row["tier"],
        seats=row["seats"],
    )


class ServiceStatus(BaseModel):
    product: str
    product_name: str
    state: State
    """The worse of the status page and this customer's own monitoring."""
    failing_users: int
    """Users of this customer failing on this product right now (monitoring)."""


@tool(
    policy=ToolPolicy(kind="read", latency_ms=40),
    summary="{product}: {state}, {failing_users} failing",
)
def check_service(product: str, customer_id: str, ctx: ToolContext) -> ServiceStatus | None:
    """The status of a product, for one customer: status page plus per-customer monitoring."""
    with _connect(ctx) as conn:
        row = conn.execute("SELECT * FROM products WHERE product = ?", (product,)).fetchone()
        if row is None:
            return None
        own = conn.execute(
            "SELECT state, failing_users FROM health WHERE customer_id = ? AND product = ?",
            (customer_id.upper(), product),
        ).fetchone()
    states = [row["state"], own["state"] if own else "operational"]
    return ServiceStatus(
        product=product,
        product_name=row["name_zh"] if ctx.language == "zh" else row["name_en"],
        state=max(states, key=_STATES.index),
        failing_users=own["failing_users"] if own else 0,
    )


# --------------------------------------------------------------------------- the rules


@dataclass(frozen=True)
class Facts:
    """What the priority is decided on: every field comes from a tool or the ticket's text."""

    category: Category
    vip: bool
    severity: Severity
    impact: int
    deadline: bool


def severity_of(
    category: Category, state: State | None, outage: bool, degraded: bool, cosmetic: bool
) -> Severity:
    """Outage > reported outage > degraded > minor > cosmetic: monitoring, then the words.

    An outage is confirmed only by ``check_service``; one only the ticket claims is a
    ``reported_outage``, which never pages (text is easy to inflate). Only a fault has a
    severity: a question about a product that is down is still a question.
    """
    if category != "fault":
        return "none"
    if state == "outage":
        return "outage"
    if outage:
        return "reported_outage"
    if state == "degraded" or degraded:
        return "degraded"
    return "cosmetic" if cosmetic else "minor"


def rule_priority(facts: Facts) -> Priority:
    """The rule table (seed 003: high priority = VIP + fault + wide impact).

    P0 only for an outage the monitoring confirms, at a VIP or hitting ``BIG_IMPACT``
    users or orders. The customer's tone never counts, nor a priority the ticket asks for.
    """
    big = facts.impact >= BIG_IMPACT
    vip, deadline = facts.vip, facts.deadline
    match facts.category:
        case "fault":
            table: dict[Severity, Priority] = {
                "outage": "P0" if vip or big else "P1",
                "reported_outage": "P1",
                "degraded": "P1" if vip or big or deadline else "P2",
                "minor": "P2" if vip or big or deadline else "P3",
                "cosmetic": "P2" if deadline else "P3",
                "none": "P3",
            }
            return table[facts.severity]
        case "billing":
            return "P1" if vip and (deadline or big) else "P2"
        case "complaint":
            return "P1" if vip else "P2"
        case "question":
            return "P2" if vip or deadline else "P3"
        case _:
            return "P3"


def queue_for(category: Category, priority: Priority) -> str:
    """P0 is on-call (paged); P1 the urgent queue; the rest by category."""
    if priority == "P0":
        return "oncall"
    if priority == "P1":
        return "urgent"
    return {
        "fault": "tech",
        "question": "desk",
        "billing": "billing",
        "complaint": "care",
        "suggestion": "product",
    }[category]


def _reasons(facts: Facts, ctx: ToolContext) -> list[str]:
    """Why the rules chose the priority, in the agent's words (templates ``why_*``)."""
    names = []
    if facts.vip:
        names.append("why_vip")
    if facts.severity != "none":
        names.append(f"why_{facts.severity}")
    else:
        names.append(f"why_category_{facts.category}")
    reasons = [_render(ctx, name) for name in names]
    if facts.impact:
        reasons.append(_render(ctx, "why_impact", {"impact": facts.impact}))
    if facts.deadline:
        reasons.append(_render(ctx, "why_deadline"))
    return reasons


def _count(text: str | None) -> int:
    digits = re.sub(r"\D", "", text or "")
    return int(digits[:9]) if digits else 0


class Assessment(BaseModel):
    category: Category
    priority: Priority
    queue: str
    severity: Severity
    impact: int
    why: str
    """The reasons in words, for the reply."""
    claimed: str | None
    proposed: Priority
    """What the ticket asks for (the rules' priority when it asks for none): the proposal
    that agent.yaml's rewrite ``priority_follows_rules`` checks and corrects."""
    claim_overruled: bool
    """The ticket asked for a priority the rules do not give it."""


@tool(policy=LOCAL_COMPUTE, summary="{priority} → {queue}: {why}")
def assess_priority(
    category: Category,
    vip: bool,
    seats: int,
    ctx: ToolContext,
    service_state: State | None = None,
    failing_users: int = 0,
    outage_words: str | None = None,
    degraded_words: str | None = None,
    cosmetic_words: str | None = None,
    affected: str | None = None,
    all_users: str | None = None,
    deadline: str | None = None,
    claimed: str | None = None,
) -> Assessment:
    """Decide a ticket's priority and queue from facts, by the rule table (no model).

    Impact is the largest of: users or orders the ticket names, the customer's seats when
    it says "all users", and the failing users the monitoring counts.
    """
    facts = Facts(
        category=category,
        vip=vip,
        severity=severity_of(
            category, service_state, bool(outage_words), bool(degraded_words), bool(cosmetic_words)
        ),
        impact=max(_count(affected), seats if all_users else 0, failing_users),
        deadline=bool(deadline),
    )
    priority = rule_priority(facts)
    reasons = _reasons(facts, ctx)
    proposed = _PRIORITIES.get((claimed or "").upper(), priority)
    overruled = proposed != priority
    if overruled:
        reasons.append(_render(ctx, "why_claim_overruled", {"claimed": claimed}))
    separator = "，" if ctx.language == "zh" else "; "
    return Assessment(
        category=category,
        priority=priority,
        queue=queue_for(category, priority),
        severity=facts.severity,
        impact=facts.impact,
        why=separator.join(reasons),
        claimed=claimed,
        proposed=proposed,
        claim_overruled=overruled,
    )


class OpenTicket(BaseModel):
    duplicate: bool
    """An open ticket of this customer, category and product is at least as urgent."""
    existing_ticket: str | None
    existing_priority: str | None


@tool(policy=ToolPolicy(kind="read", latency_ms=20), summary="duplicate: {duplicate}")
def find_open_ticket(
    customer_id: str,
    category: Category,
    priority: Priority,
    ctx: ToolContext,
    product: str | None = None,
) -> OpenTicket:
    """The business-level dedup: an open ticket on the same matter that is as urgent.

    The same report sent twice is the same matter, whatever its wording; a report that
    is now more urgent than the open ticket is not a duplicate (it may need a page).
    """
    with _connect(ctx) as conn:
        rows = conn.execute(
            "SELECT ticket_id, priority FROM tickets WHERE customer_id = ? AND category = ? "
            "AND product = ? AND status = 'open' ORDER BY priority, created_at",
            (customer_id.upper(), category, product or ""),
        ).fetchall()
    same = [r for r in rows if _RANK[r["priority"]] <= _RANK[priority]]
    if not same:
        return OpenTicket(duplicate=False, existing_ticket=None, existing_priority=None)
    return OpenTicket(
        duplicate=True, existing_ticket=same[0]["ticket_id"], existing_priority=same[0]["priority"]
    )


# --------------------------------------------------------------------------- writes


FilingKind = Literal["paged", "queued", "duplicate"]


class Filing(BaseModel):
    ticket_id: str
    priority: Priority
    queue: str
    queue_name: str
    filing: FilingKind
    page_id: str | None = None
    created: bool = True
    """False when the idempotency key found the effect of an earlier call."""


def _filing(
    ctx: ToolContext, row: sqlite3.Row, kind: FilingKind, page_id: str | None = None
) -> Filing:
    return Filing(
        ticket_id=row["ticket_id"],
        priority=row["priority"],
        queue=row["queue"],
        queue_name=_render(ctx, f"queue_{row['queue']}"),
        filing=kind,
        page_id=page_id,
    )


def find_ticket_by_key(ctx: ToolContext) -> Filing | None:
    """The ticket this call's key filed, if any: settles an enqueue whose outcome is unknown."""
    with _connect(ctx) as conn:
        row = conn.execute(
            "SELECT * FROM tickets WHERE idempotency_key = ?", (ctx.idempotency_key,)
        ).fetchone()
    return _filing(ctx, row, "queued") if row else None


def find_page_by_key(ctx: ToolContext) -> Filing | None:
    """The page this call's key sent, if any: settles a page whose outcome is unknown."""
    with _connect(ctx) as conn:
        found = conn.execute(
            "SELECT t.*, p.page_id FROM pages p JOIN tickets t ON t.ticket_id = p.ticket_id "
            "WHERE p.idempotency_key = ?",
            (ctx.idempotency_key,),
        ).fetchone()
    return _filing(ctx, found, "paged", found["page_id"]) if found else None


def _insert_ticket(
    conn: sqlite3.Connection,
    ctx: ToolContext,
    fields: tuple[str, str, str | None, str, str, str | None],
) -> sqlite3.Row:
    """Insert the ticket this call's key files, and return its row."""
    customer_id, category, product, priority, queue, body = fields
    ticket_id = "TK" + ctx.idempotency_key[:8].upper()
    conn.execute(
        "INSERT INTO tickets (ticket_id, customer_id, category, product, priority, queue, "
        "status, idempotency_key, created_at, body) VALUES (?, ?, ?, ?, ?, ?, 'open', ?, ?, ?)",
        (
            ticket_id,
            customer_id.upper(),
            category,
            product or "",
            priority,
            queue,
            ctx.idempotency_key,
            ctx.received_at.isoformat(),
            body,
        ),
    )
    row: sqlite3.Row = conn.execute(
        "SELECT * FROM tickets WHERE ticket_id = ?", (ticket_id,)
    ).fetchone()
    return row


@tool(
    policy=ToolPolicy(kind="write", idempotent=True, timeout_s=10),
    summary="{ticket_id} {priority} → {queue}",
    reconcile=find_ticket_by_key,
)
def enqueue_ticket(
    customer_id: str,
    category: Category,
    priority: Priority,
    queue: str,
    ctx: ToolContext,
    product: str | None = None,
    body: str | None = None,
) -> Filing:
    """File a P1-P3 ticket in its queue. Idempotent: the same key never files a second one.

    ``body``: the customer's own words (``$message?`` in agent.yaml), kept with the ticket
    for whoever works it; none for a ticket filed from a plan (``corral run-plan``).
    """
    existing = find_ticket_by_key(ctx)
    if existing is not None:
        return existing.model_copy(update={"created": False})
    with _connect(ctx) as conn:
        row = _insert_ticket(conn, ctx, (customer_id, category, product, priority, queue, body))
    return _filing(ctx, row, "queued")


@tool(
    policy=ToolPolicy(kind="write", idempotent=True, timeout_s=10),
    summary="page {page_id} for {ticket_id}",
    reconcile=find_page_by_key,
)
def page_oncall(
    customer_id: str,
    category: Category,
    priority: Priority,
    queue: str,
    ctx: ToolContext,
    product: str | None = None,
    body: str | None = None,
) -> Filing:
    """File a P0 ticket and page the on-call engineer, with no confirmation (policy: auto).

    Idempotent: the key finds the page it sent, so a retry or a resumed run never pages
    twice. agent.yaml's rule ``page_only_p0`` refuses any call whose facts are not P0.
    """
    existing = find_page_by_key(ctx)
    if existing is not None:
        return existing.model_copy(update={"created": False})
    with _connect(ctx) as conn:
        row = _insert_ticket(conn, ctx, (customer_id, category, product, priority, queue, body))
        page_id = "PG" + ctx.idempotency_key[:8].upper()
        conn.execute(
            "INSERT INTO pages VALUES (?, ?, ?, ?)",
            (page_id, row["ticket_id"], ctx.idempotency_key, ctx.received_at.isoformat()),
        )
    return _filing(ctx, row, "paged", page_id)


def find_report_by_key(ticket_id: str, ctx: ToolContext) -> Filing | None:
    """The report this call's key merged, if any: settles a merge whose outcome is unknown."""
    with _connect(ctx) as conn:
        found = conn.execute(
            "SELECT t.* FROM ticket_reports r JOIN tickets t ON t.ticket_id = r.ticket_id "
            "WHERE r.idempotency_key = ?",
            (ctx.idempotency_key,),
        ).fetchone()
    return _filing(ctx, found, "duplicate") if found else None


@tool(
    policy=ToolPolicy(kind="write", idempotent=True, timeout_s=10),
    summary="merged into {ticket_id}",
    reconcile=find_report_by_key,
)
def link_duplicate(ticket_id: str, ctx: ToolContext, body: str | None = None) -> Filing | None:
    """Merge a repeated report into the open ticket: no new ticket, no new page.

    ``body``: the report's own words, kept beside the ticket (the rewrite from
    ``enqueue_ticket`` carries them over).
    """
    existing = find_report_by_key(ticket_id, ctx)
    if existing is not None:
        return existing.model_copy(update={"created": False})
    with _connect(ctx) as conn:
        row = conn.execute("SELECT * FROM tickets WHERE ticket_id = ?", (ticket_id,)).fetchone()
        if row is None:
            return None
        conn.execute(
            "INSERT INTO ticket_reports (ticket_id, idempotency_key, created_at, body) "
            "VALUES (?, ?, ?, ?)",
            (ticket_id, ctx.idempotency_key, ctx.received_at.isoformat(), body),
        )
    return _filing(ctx, row, "duplicate")
