"""The order-query assistant end to end through the CLI, each command a fresh process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import ORDERS
from tests.helpers import corral_cli, run_cli_json


def corral(
    home: Path, *args: str, stdin: str | None = None, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    return corral_cli(home, *args, stdin=stdin, ok=ok)


def run_json(home: Path, message: str, *extra: str) -> dict[str, Any]:
    return run_cli_json(home, ORDERS, message, *extra)


def test_logistics_asks_for_the_order_id_and_the_next_turn_resumes_it(tmp_path: Path) -> None:
    asked = run_json(tmp_path, "我的快递到哪了", "--session", "u1")
    assert asked["status"] == "awaiting_user" and asked["steps"] == []
    assert "订单号" in asked["reply"]
    done = run_json(tmp_path, "订单号是 OD2611200002", "--session", "u1")
    assert done["run_id"] == asked["run_id"]
    assert done["status"] == "finished"
    assert [s["tool"] for s in done["steps"]] == ["get_order", "get_logistics", "generate_reply"]
    reply = done["reply"]
    assert "已经发货" in reply and "顺丰速运" in reply and "正在派送" in reply
    assert "{" not in reply and "|" not in reply  # colloquial text, no payloads or tables


def test_old_orders_use_the_historical_search(tmp_path: Path) -> None:
    done = run_json(tmp_path, "三个月前买过什么订单")
    assert [s["tool"] for s in done["steps"]] == [
        "resolve_order_params",
        "search_historical_orders",
        "generate_reply",
    ]
    # The live clock decides which month "三个月前" is, so which orders come back varies;
    # eval.yaml (a fixed clock) and test_orders_dates.py pin them.
    assert done["status"] == "finished" and "三个月前" in done["reply"]
    recent = run_json(tmp_path, "查查我上个月的订单")
    assert recent["steps"][1]["tool"] == "search_orders"


def test_cancel_with_confirmation_and_the_rule_for_shipped_orders(tmp_path: Path) -> None:
    paused = run_json(tmp_path, "取消订单 OD2611250001")
    assert paused["status"] == "awaiting_confirm"
    done = json.loads(corral(tmp_path, "resume", paused["run_id"], "--approve", "--json").stdout)
    assert done["status"] == "finished" and "已经取消" in done["reply"]
    again = run_json(tmp_path, "取消订单 OD2611250001")  # now canceled: the rule refuses
    assert again["status"] == "finished" and "不用再取消" in again["reply"]  # not "return it"
    shipped = run_json(tmp_path, "取消订单 OD2611200002")
    assert shipped["status"] == "finished" and "没法直接取消" in shipped["reply"]


def test_classifier_catches_what_the_rules_miss(tmp_path: Path) -> None:
    done = run_json(tmp_path, "我最近买了什么")
    assert done["intent"]["source"] == "classifier" and done["intent"]["label"] == "query_order"
    assert done["intent"]["confidence"] >= 0.8


def test_eval_reports_the_seed_004_metrics(tmp_path: Path) -> None:
    # ~50 s of CPU for its 155 cases: a loaded 2-core CI machine took over 180 s
    done = corral_cli(tmp_path, "eval", str(ORDERS), "--json", timeout=900)
    report = json.loads(done.stdout)
    assert report["cases"] >= 100
    assert report["tiers"]["core"] == 1.0 and report["tiers"]["regular"] >= 0.95
    assert report["tiers_met"] is True
    assert {"completion_rate", "average_steps", "tool_failures"} <= set(report)


def test_chat_shows_the_state_after_each_turn(tmp_path: Path) -> None:
    done = corral(
        tmp_path,
        "chat",
        str(ORDERS),
        "--session",
        "c1",
        stdin="帮我取消订单\nOD2611250001\n好的\n/quit\n",
    )
    out = done.stdout
    assert "订单号" in out
    assert "state: awaiting_confirm" in out and "order_id=OD2611250001" in out
    assert "state: finished" in out and "已经取消" in out


def test_chat_takes_a_confirmation_in_its_own_words(tmp_path: Path) -> None:
    """A walkthrough: "确认取消" to "确认取消订单…吗？" was asked again, then a new message."""
    done = corral(
        tmp_path,
        "chat",
        str(ORDERS),
        "--session",
        "c2",
        stdin="取消 OD2611280008\n确认取消\n/quit\n",
    )
    assert "state: finished" in done.stdout and "已经取消" in done.stdout
    assert "请回答" not in done.stdout  # not asked again


def test_gc_runs(tmp_path: Path) -> None:
    run_json(tmp_path, "你好")
    assert "deleted 0 sessions and 0 runs" in corral(tmp_path, "gc").stdout


def test_each_load_of_the_agent_keeps_one_row_per_tracking_event(tmp_path: Path) -> None:
    """Found by a hostile review: ``setup()`` runs at every load (every ``corral run``,
    ``chat``, ``replay``), and each inserted the demo's 12 tracking events again: a
    customer's tracking history showed each event once per load. A home made before the
    fix has its repeats dropped."""
    import sqlite3

    from corral import load_agent
    from tests.conftest import ORDERS

    sql = (ORDERS / "data" / "orders.sql").read_text(encoding="utf-8")
    fix = [line for line in sql.splitlines() if "logistics_event" in line or "DELETE" in line]
    assert len(fix) == 2  # the two statements of the fix
    before_fix = "\n".join(line for line in sql.splitlines() if line not in fix)
    old = tmp_path / "old"
    old.mkdir()
    with sqlite3.connect(old / "orders.db") as conn:  # two loads before the fix
        conn.executescript(before_fix)
        conn.executescript(before_fix)
        assert conn.execute("SELECT count(*) FROM logistics").fetchone()[0] == 24
    for data_dir in (tmp_path / "new", old):
        for _ in range(3):
            load_agent(ORDERS, data_dir=data_dir)
        with sqlite3.connect(data_dir / "orders.db") as conn:
            count = conn.execute("SELECT count(*) FROM logistics").fetchone()[0]
            distinct = conn.execute(
                "SELECT count(DISTINCT order_id || ts) FROM logistics"
            ).fetchone()[0]
        assert count == distinct == 12
