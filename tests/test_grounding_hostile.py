"""Hostile inputs to grounding finish: no regex backtracks over a long run (a hang check).

The review of issue 9 found ``"1" + 3999 spaces`` took seconds in ``quantities`` and a
padded 16000-char tool-result row half a minute, synchronously inside the run's event
loop. Each case runs in a real subprocess that is killed after a generous 10 s: on the
base these hung for tens of seconds in total, now they finish. This is a hang check, not a
speed assertion.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[1] / "src")

SCRIPT = """
import sys
from datetime import UTC, datetime
from corral.intent.grounding import (
    Evidence, ground_argument, grounded, said_dates, value_quantities
)
from corral.reply.model_reply import reply_problems
message, row = sys.argv[1], sys.argv[2]
now = datetime(2026, 1, 1, tzinfo=UTC)
evidence = Evidence.of(message, [{"row": row}], now)
grounded(message[:50], evidence)
ground_argument(message[:50], str, evidence)
ground_argument(True, bool, evidence)
said_dates(message, now, "UTC")
list(value_quantities({"row": row}))
reply_problems(message[:400], {"row": row}, message)
print("done")
"""


@pytest.mark.parametrize(
    "message",
    [
        "1" + " " * 3999,
        "1" + " " * 1999 + "-" + " " * 1999,
        "明天 " * 1333,
        "5月3日 " * 800,
        "1" * 4000,
        "三" * 4000,
        "yes? " * 800,
    ],
    ids=["spaces", "dash", "mingtian", "month-day", "digits", "numerals", "questions"],
)
def test_a_hostile_message_and_tool_result_are_grounded_without_hanging(message: str) -> None:
    row = "qty 1" + " " * 16000 + "|"
    env = {**os.environ, "PYTHONPATH": SRC}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, message, row],
        capture_output=True,
        text=True,
        timeout=10,
        env=env,
        check=True,
    )
    assert done.stdout.strip() == "done"
