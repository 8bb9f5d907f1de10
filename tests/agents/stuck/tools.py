"""Tools that never end. Each first creates the file ``STUCK_MARK`` names, so a test knows
the call has begun."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from pydantic import BaseModel

from corral import RetryPolicy, ToolPolicy, tool


class Done(BaseModel):
    n: int


def _mark() -> None:
    Path(os.environ["STUCK_MARK"]).write_text("begun", encoding="utf-8")


@tool(policy=ToolPolicy(timeout_s=3600.0, retry=RetryPolicy(max_retries=0)))
async def hang(n: int) -> Done:
    """Waits for ever, swallowing every cancellation (a badly written tool)."""
    _mark()
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            continue


@tool(policy=ToolPolicy(timeout_s=0.3, retry=RetryPolicy(max_retries=0)))
def block(n: int) -> Done:
    """Never returns (a socket read with no timeout): its thread cannot be stopped."""
    _mark()
    time.sleep(3600)
    return Done(n=n)


@tool(policy=ToolPolicy(timeout_s=3600.0, retry=RetryPolicy(max_retries=0)))
async def wait(n: int) -> Done:
    """Waits an hour, unless cancelled (a well-behaved tool)."""
    _mark()
    await asyncio.sleep(3600)
    return Done(n=n)
