"""A write that must not be entered twice is marked with the execution of its drive.

The defect (found with ``test_workers_pg_restart``): the mark named the process, not the
execution. A drive taken over while its write ran (a worker called dead while alive, a
recovery) and executed again in the same process found its own process's mark, and
entered a write that is not idempotent a second time. Each execution of a drive now
draws its own mark (``DbosEffects.for_drive``): another execution's mark means the
write may have happened, and it is not entered again (``OUTCOME_UNKNOWN`` then follows,
as for a write whose process died).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from corral import ToolContext, ToolPolicy, tool
from corral.runtime.replay import RecordedToolError
from tests.extras import REQUIRE_ALL, import_extra

import_extra("dbos", REQUIRE_ALL)

from corral.workers.effects import DbosEffects  # noqa: E402


class Stamped(BaseModel):
    n: int


def test_a_write_entered_by_an_earlier_execution_of_its_drive_is_not_entered_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dbos import DBOS

    calls: list[int] = []

    @tool(policy=ToolPolicy(kind="write"))
    def stamp(n: int) -> Stamped:
        """A write that is not idempotent."""
        calls.append(n)
        return Stamped(n=n)

    marks: list[str] = []  # the mark step's recorded output: the first execution's

    async def run_step_async(options: Any, func: Any, *args: Any) -> Any:
        if options["name"].startswith("corral.enter."):
            if not marks:
                marks.append(func())
            return marks[0]  # a step executed again answers what it recorded
        return await func(*args)  # the tool's step: its record was lost to the takeover

    monkeypatch.setattr(DBOS, "run_step_async", run_step_async)
    shared = DbosEffects()
    first, again = shared.for_drive(), shared.for_drive()  # one drive, twice, one process
    at = datetime(2026, 1, 1, tzinfo=UTC)
    context = ToolContext.of_call("run_1", "s1", "key", {}, {}, "en", at, None, "UTC")
    args = stamp.input_model(n=1)
    try:
        assert asyncio.run(first.call_tool(stamp, args, context, 5.0)) == {"n": 1}
        with pytest.raises(RecordedToolError) as refused:
            asyncio.run(again.call_tool(stamp, args, context, 5.0))
    finally:
        shared.close()
    assert calls == [1]  # entered once
    assert "may or may not have happened" in refused.value.message
