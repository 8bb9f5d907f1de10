"""Review of the ops example (issue 13) as a user meets it: `corral run examples/ops ...`.

Each test is a defect a user saw in the reply, pinned through the CLI in a fresh process
on the example's real services (nothing mocked).
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.extras import REQUIRE_ALL, import_extra
from tests.test_example_ops import no_process_left, run_ops, tools_of

import_extra("fastapi", REQUIRE_ALL)
import_extra("mcp", REQUIRE_ALL)


def test_a_morning_flight_search_quotes_only_morning_flights(tmp_path: Path) -> None:
    """ "明天上午" is tomorrow morning: the reply once quoted a 20:50 flight as the cheapest."""
    summary = run_ops(tmp_path, "明天上午去上海的航班，急！")
    assert tools_of(summary) == ["resolve_trip", "search_flights_fast", "generate_reply"]
    reply = summary["reply"]
    assert "明天上午" in reply, reply
    departures = re.findall(r"(\d\d):(\d\d) 起飞", reply)
    assert len(departures) == 2, reply  # the earliest and the cheapest
    assert all(6 <= int(hour) < 12 for hour, _ in departures), reply
    no_process_left(tmp_path)
