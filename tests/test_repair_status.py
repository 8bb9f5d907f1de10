"""How a repair is going is a question: answered from the order's open repair, never booked.

Found by a walkthrough: "HD20240501 维修进度怎么样" and "where is my repair?" were read as
报修, and booked a repair the customer never asked for (no confirmation: a booking is
harmless, but a second ticket calls the customer twice).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from corral import load_agent
from tests.conftest import AFTERSALES
from tests.helpers import corral_cli


def _say(home: Path, message: str) -> dict[str, Any]:
    done = corral_cli(home, "run", str(AFTERSALES), message, "--session", "r1", "--json")
    reply: dict[str, Any] = json.loads(done.stdout)
    return reply


def _repairs(home: Path) -> list[tuple[str, str]]:
    agent = load_agent(AFTERSALES, data_dir=home / "data" / "aftersales")
    with sqlite3.connect(agent.deps["db"]) as conn:
        return conn.execute("SELECT repair_id, order_id FROM repairs").fetchall()


def test_a_progress_question_books_nothing_and_names_the_open_repair(tmp_path: Path) -> None:
    asked = _say(tmp_path, "HD20240501 维修进度怎么样")
    assert asked["intent"]["label"] == "维修进度" and asked["status"] == "finished"
    assert "没有处理中的报修单" in asked["reply"]
    booked = _say(tmp_path, "打印机坏了 HD20240501")
    assert booked["intent"]["label"] == "报修"
    again = _say(tmp_path, "where is my repair?")
    assert again["intent"]["label"] == "维修进度" and again["status"] == "finished"
    repairs = _repairs(tmp_path)
    assert len(repairs) == 1 and repairs[0][1] == "HD20240501"  # booked once, by 报修
    assert f"Repair {repairs[0][0]}" in again["reply"] and "in progress" in again["reply"]


@pytest.mark.parametrize(
    ("message", "intent"),
    [
        ("HD20240501 维修进度怎么样", "维修进度"),
        ("HD20240501 修好了吗", "维修进度"),
        ("status of my repair HD20240501", "维修进度"),
        # a review: fault reports with progress words in them are repairs
        ("HD20240501 报修情况：屏幕不亮，请安排维修", "报修"),
        ("HD20240501 维修状态灯一直闪", "报修"),
        ("什么时候修好都行，先帮我报修 HD20240501", "报修"),
        ("where is my repair shop? HD20240501 broke", "报修"),
    ],
)
def test_only_a_question_about_a_repair_is_its_progress(
    message: str, intent: str, tmp_path: Path
) -> None:
    assert _say(tmp_path, message)["intent"]["label"] == intent
