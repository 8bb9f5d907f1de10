"""What a worker hands DBOS for a tool or model step shows no argument in a log.

The defect (reproduced with a real worker stopped mid-call): DBOS logs a cancelled
step's call, ``Asyncio task cancelled for workflow or step {func}``, and that call's
repr held the tool's arguments (a ``Sensitive`` card number), its context (the tools'
``deps``: a database password) and the run's facts, in clear text.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from corral import ToolContext, tool
from corral.models import ModelRequest, ScriptedModel
from corral.models.base import Message
from corral.tools.sensitive import Sensitive
from tests.extras import REQUIRE_ALL, import_extra

import_extra("dbos", REQUIRE_ALL)

from corral.workers.effects import DbosEffects  # noqa: E402

CARD = "4111111111111111"
SECRET = "hunter2-deps-secret"


class Checked(BaseModel):
    ok: bool


@tool
def verify_card(card_number: Annotated[str, Sensitive()], ctx: ToolContext) -> Checked:
    """Check a card."""
    return Checked(ok=True)


def test_a_tool_or_model_step_call_shows_no_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    from dbos import DBOS

    logged: list[str] = []

    async def run_step_async(options: Any, func: Any, *args: Any) -> Any:
        logged.append(repr(func) + repr(args))  # what DBOS's warning would print
        if "tool" in options["name"]:
            return {"data": {"ok": True}}
        usage = {"prompt_tokens": 1, "completion_tokens": 1}
        return {"response": {"text": "ok", "usage": usage, "model": "m"}}

    monkeypatch.setattr(DBOS, "run_step_async", run_step_async)
    effects = DbosEffects()
    context = ToolContext.of_call(
        "run_1",
        "s1",
        "key",
        {"DB_PASSWORD": SECRET},
        {"card": CARD},
        "en",
        datetime(2026, 1, 1, tzinfo=UTC),
        None,
        "UTC",
    )
    args = verify_card.input_model(card_number=CARD)
    request = ModelRequest("reply", (Message("user", f"my card is {CARD}"),))
    try:
        asyncio.run(effects.call_tool(verify_card, args, context, 5.0))
        asyncio.run(effects.call_model(ScriptedModel([]), request))
    finally:
        effects.close()
    assert len(logged) == 2
    for line in logged:
        assert CARD not in line and SECRET not in line, line
        assert "<arguments hidden>" in line
