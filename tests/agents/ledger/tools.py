"""Tools of the ledger test agent. ``cancel_order`` appends one line per entry to
``entries.log`` before it does anything else, so tests count entries, not rows."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from corral import ToolContext, ToolPolicy, tool


def setup(data_dir: Path) -> dict[str, Any]:
    data_dir.mkdir(parents=True, exist_ok=True)
    return {"entries": data_dir / "entries.log", "effects": data_dir / "effects.log"}


def _hold_until(path: str | None) -> None:
    """With ``LEDGER_HOLD_UNTIL`` set, stay in the write until that file exists.

    A test holds the write open this way for exactly as long as it needs, instead of
    guessing how long is enough. The limit only ends a test that never releases it.
    """
    if not path:
        return
    deadline = time.monotonic() + 120
    while not Path(path).exists() and time.monotonic() < deadline:
        time.sleep(0.01)  # the polling period orders nothing


class Order(BaseModel):
    order_id: str
    status: str


class Cancelled(BaseModel):
    order_id: str
    cancelled: bool


@tool(policy=ToolPolicy(kind="read"))
def lookup_order(order_id: str, ctx: ToolContext) -> Order:
    """Look an order up (every order exists and is open)."""
    doomed = os.environ.get("LEDGER_DELETE_ON_LOOKUP")
    if doomed:
        Path(doomed).unlink()
    return Order(order_id=order_id, status="open")


@tool(policy=ToolPolicy(kind="write", requires_confirmation=True, idempotent=True))
def cancel_order(order_id: str, ctx: ToolContext) -> Cancelled:
    """Cancel an order. Finds its own earlier effect by the idempotency key."""
    with open(ctx.deps["entries"], "a", encoding="utf-8") as handle:
        handle.write(f"{os.getpid()} {ctx.idempotency_key}\n")
    # A slow write, so that approvers racing for the run arrive while it is entered. Its
    # length decides no test: one owner enters it once however long it takes.
    time.sleep(float(os.environ.get("LEDGER_WRITE_S", "0.3")))
    _hold_until(os.environ.get("LEDGER_HOLD_UNTIL"))
    effects: Path = ctx.deps["effects"]
    done = effects.read_text(encoding="utf-8").split() if effects.exists() else []
    if ctx.idempotency_key not in done:
        with open(effects, "a", encoding="utf-8") as handle:
            handle.write(ctx.idempotency_key + "\n")
    return Cancelled(order_id=order_id, cancelled=True)


class Refunded(BaseModel):
    order_id: str
    refunded: bool


@tool(policy=ToolPolicy(kind="write", requires_confirmation=True, idempotent=True))
def refund_order(order_id: str, ctx: ToolContext) -> Refunded:
    """Refund an order (an entry line starting with "refund")."""
    with open(ctx.deps["entries"], "a", encoding="utf-8") as handle:
        handle.write(f"refund {os.getpid()} {ctx.idempotency_key}\n")
    return Refunded(order_id=order_id, refunded=True)
