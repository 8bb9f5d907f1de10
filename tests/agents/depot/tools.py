"""Tools of the depot test agent, on a SQLite business database in its data folder.

``ship_order`` first records its entry (a row per entry in ``entries``, which has no
unique key), then, while the file ``DEPOT_HOLD`` names exists, waits (a test holds the
write in flight that way for as long as it needs), then makes the shipment under its
idempotency key (UNIQUE in ``shipments``): entered twice, it still ships once.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from corral import ToolContext, ToolPolicy, tool

SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (idempotency_key TEXT NOT NULL, pid INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS shipments (
    idempotency_key TEXT NOT NULL UNIQUE,
    order_id TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS tags (idempotency_key TEXT NOT NULL UNIQUE, order_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS stamps (idempotency_key TEXT NOT NULL, order_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS labels (idempotency_key TEXT NOT NULL UNIQUE, order_id TEXT NOT NULL);
"""


def setup(data_dir: Path) -> dict[str, Any]:
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / "depot.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(SCHEMA)
    return {"db": path}


def _hold() -> None:
    """Wait while the file ``DEPOT_HOLD`` names exists (at most 120 s, so no test hangs)."""
    flag = os.environ.get("DEPOT_HOLD")
    if not flag:
        return
    deadline = time.monotonic() + 120
    while Path(flag).exists() and time.monotonic() < deadline:
        time.sleep(0.01)  # the polling period orders nothing


class Order(BaseModel):
    order_id: str
    status: str


class Stock(BaseModel):
    order_id: str
    in_stock: bool


class Shipment(BaseModel):
    order_id: str
    shipped: bool


@tool(policy=ToolPolicy(kind="read"))
def lookup_order(order_id: str, ctx: ToolContext) -> Order:
    """Look an order up (every order exists and is open)."""
    return Order(order_id=order_id, status="open")


@tool(policy=ToolPolicy(kind="read"))
def check_stock(order_id: str, ctx: ToolContext) -> Stock:
    """Whether the order's goods are in stock (they always are)."""
    return Stock(order_id=order_id, in_stock=True)


def _write_once(ctx: ToolContext, table: str, order_id: str) -> None:
    """Count the entry, wait while held, then make the row of this key (once)."""
    with sqlite3.connect(ctx.deps["db"], timeout=10) as conn:
        conn.execute("INSERT INTO entries VALUES (?, ?)", (ctx.idempotency_key, os.getpid()))
    _hold()
    with sqlite3.connect(ctx.deps["db"], timeout=10) as conn:
        conn.execute(
            f"INSERT OR IGNORE INTO {table} VALUES (?, ?)", (ctx.idempotency_key, order_id)
        )


@tool(policy=ToolPolicy(kind="write", requires_confirmation=True, idempotent=True))
def ship_order(order_id: str, ctx: ToolContext) -> Shipment:
    """Ship an order: once per idempotency key, however often it is entered."""
    _write_once(ctx, "shipments", order_id)
    return Shipment(order_id=order_id, shipped=True)


class Tagged(BaseModel):
    order_id: str
    tagged: bool


@tool(policy=ToolPolicy(kind="write", idempotent=True))
def tag_order(order_id: str, ctx: ToolContext) -> Tagged:
    """Tag an order (no confirmation): once per idempotency key."""
    _write_once(ctx, "tags", order_id)
    return Tagged(order_id=order_id, tagged=True)


class Stamped(BaseModel):
    order_id: str
    stamped: bool


@tool(policy=ToolPolicy(kind="write", idempotent=False))
def stamp_order(order_id: str, ctx: ToolContext) -> Stamped:
    """Stamp an order: not idempotent (each entry stamps again), no reconciler to ask."""
    _write_once(ctx, "stamps", order_id)
    return Stamped(order_id=order_id, stamped=True)


class Labelled(BaseModel):
    order_id: str
    labelled: bool


def find_label(order_id: str, ctx: ToolContext) -> Labelled | None:
    """The label this key made, if any: how an unknown outcome of ``label_order`` is settled."""
    with sqlite3.connect(ctx.deps["db"], timeout=10) as conn:
        found = conn.execute(
            "SELECT 1 FROM labels WHERE idempotency_key = ?", (ctx.idempotency_key,)
        ).fetchone()
    return Labelled(order_id=order_id, labelled=True) if found else None


@tool(policy=ToolPolicy(kind="write", idempotent=True), reconcile=find_label)
def label_order(order_id: str, ctx: ToolContext) -> Labelled:
    """Label an order: idempotent (once per key) and with a reconciler to look it up."""
    _write_once(ctx, "labels", order_id)
    return Labelled(order_id=order_id, labelled=True)
