"""The JSONL log is derived from the event store: cut, lost or stale files are repaired."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

from corral import Agent, Runtime, SqlStore
from corral.observe.logs import JsonlLog
from corral.observe.trace_ids import corral_trace_id
from corral.testing import FixedEffects
from tests.conftest import AFTERSALES
from tests.helpers import corral_cli

EXCHANGE = "我的打印机上周坏了，订单号 HD20240501，能换新吗？"
MONITOR_EXCHANGE = "我的显示器坏了，订单号 HD20250920，能换新吗？"


def run_json(home: Path, message: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        corral_cli(home, "run", str(AFTERSALES), message, "--json").stdout
    )
    return data


def stored_seqs(home: Path, run_id: str) -> list[int]:
    with sqlite3.connect(home / "corral.db") as conn:
        rows = conn.execute(
            "SELECT seq FROM corral_events WHERE run_id = ? ORDER BY seq", (run_id,)
        ).fetchall()
    return [int(seq) for (seq,) in rows]


def file_seqs(path: Path) -> list[int]:
    return [json.loads(line)["seq"] for line in path.read_text("utf-8").splitlines()]


def finished_run(home: Path, message: str = EXCHANGE) -> str:
    """A finished exchange (an order is exchanged once: another run needs another order)."""
    paused = run_json(home, message)
    corral_cli(home, "resume", paused["run_id"], "--approve")
    return str(paused["run_id"])


def test_a_cut_line_does_not_break_traces_and_is_repaired(tmp_path: Path) -> None:
    run_id = finished_run(tmp_path)
    log = tmp_path / "logs" / f"{run_id}.jsonl"
    text = log.read_text("utf-8")
    # a SIGKILL mid-append: the last line is cut in half, and a stray fragment is left
    log.write_text(text[: len(text) - 40] + '\n{"seq": 9', "utf-8")
    done = corral_cli(tmp_path, "traces", run_id, "--json")
    traced = [json.loads(line)["seq"] for line in done.stdout.splitlines()]
    assert traced == stored_seqs(tmp_path, run_id)
    assert file_seqs(log) == stored_seqs(tmp_path, run_id)
    assert "step_finished" in corral_cli(tmp_path, "traces", run_id).stdout


def test_a_deleted_log_is_rebuilt_when_the_run_is_shown(tmp_path: Path) -> None:
    run_id = finished_run(tmp_path)
    log = tmp_path / "logs" / f"{run_id}.jsonl"
    log.unlink()
    corral_cli(tmp_path, "show", run_id)
    assert file_seqs(log) == stored_seqs(tmp_path, run_id)


def test_lines_lost_before_a_resume_are_written_by_the_resume(tmp_path: Path) -> None:
    paused = run_json(tmp_path, EXCHANGE)
    log = tmp_path / "logs" / f"{paused['run_id']}.jsonl"
    lines = log.read_text("utf-8").splitlines(keepends=True)
    log.write_text("".join(lines[: len(lines) // 2]), "utf-8")  # the tail never reached disk
    corral_cli(tmp_path, "resume", paused["run_id"], "--approve")
    assert file_seqs(log) == stored_seqs(tmp_path, paused["run_id"])


def test_traces_read_the_store_even_without_a_log_file(tmp_path: Path) -> None:
    run_id = finished_run(tmp_path)
    (tmp_path / "logs" / f"{run_id}.jsonl").unlink()
    (tmp_path / "logs").chmod(0o500)  # the export cannot be written: traces still answer
    try:
        done = corral_cli(tmp_path, "traces", run_id, "--json")
    finally:
        (tmp_path / "logs").chmod(0o700)
    assert [json.loads(x)["seq"] for x in done.stdout.splitlines()] == stored_seqs(tmp_path, run_id)


def test_gc_removes_the_logs_of_the_runs_it_deletes(tmp_path: Path) -> None:
    old, recent = finished_run(tmp_path), finished_run(tmp_path, MONITOR_EXCHANGE)
    with sqlite3.connect(tmp_path / "corral.db") as conn:
        conn.execute(
            "UPDATE corral_runs SET updated_at = '2000-01-01 00:00:00.000000' WHERE run_id = ?",
            (old,),
        )
    assert (tmp_path / "logs" / f"{old}.jsonl").is_file()
    done = corral_cli(tmp_path, "gc")
    assert "1 runs" in done.stdout
    assert not (tmp_path / "logs" / f"{old}.jsonl").exists()
    assert (tmp_path / "logs" / f"{recent}.jsonl").is_file()
    assert stored_seqs(tmp_path, old) == []


def test_gc_keeps_the_fresh_logs_of_runs_another_store_keeps(tmp_path: Path) -> None:
    """Found by a walkthrough: ``corral gc --home H --store URL`` deleted the log of a run
    the home's own store keeps, finished a minute earlier: every log the other store had
    no row for was an orphan. An orphan is one as old as a purged run's."""
    import os
    import time

    mine = finished_run(tmp_path)
    other = tmp_path / "other.db"
    corral_cli(tmp_path, "db", "upgrade", "--store", f"sqlite:///{other}")  # another store
    done = corral_cli(tmp_path, "gc", "--store", f"sqlite:///{other}")
    assert "(0 log files)" in done.stdout
    assert (tmp_path / "logs" / f"{mine}.jsonl").is_file()
    stale = tmp_path / "logs" / "run_0123456789abcdef.jsonl"  # a purged run's, 40 days old
    stale.write_text("{}\n", encoding="utf-8")
    forty_days_ago = time.time() - 40 * 86400
    os.utime(stale, (forty_days_ago, forty_days_ago))
    done = corral_cli(tmp_path, "gc", "--store", f"sqlite:///{other}")
    assert "(1 log files)" in done.stdout and not stale.exists()
    assert (tmp_path / "logs" / f"{mine}.jsonl").is_file()


def test_the_file_is_exactly_what_traces_read_from_the_store(tmp_path: Path) -> None:
    paused = run_json(tmp_path, EXCHANGE)  # written, then appended to by the resume
    corral_cli(tmp_path, "resume", paused["run_id"], "--approve")
    log = tmp_path / "logs" / f"{paused['run_id']}.jsonl"
    written = log.read_text("utf-8")
    shown = {json.loads(line)["trace_id"] for line in written.splitlines()}
    assert len(shown) == 1  # one OTel trace id for the whole run, which leads back to it
    (otel_id,) = shown
    assert re.fullmatch(r"[0-9a-f]{32}", otel_id)
    assert corral_trace_id(otel_id) == paused["trace_id"]
    assert written == corral_cli(tmp_path, "traces", paused["run_id"], "--json").stdout


async def test_a_log_written_from_a_runs_first_save_is_the_one_the_store_gives(
    aftersales: Agent, tmp_path: Path
) -> None:
    """A run's first save holds the whole run: its log is written from those events, not
    read back. Byte for byte what the store's events give, redaction included (a phone
    number), for runs that end, pause for a confirmation and go on, and hand off."""
    store = SqlStore.open(tmp_path / "corral.db")
    logs = tmp_path / "logs"
    runtime = Runtime(aftersales, store, effects=FixedEffects(), log_dir=logs)
    messages = [
        EXCHANGE,  # pauses for a confirmation: one save, then the resume's
        "我的订单 HD20250920 到哪了？电话 13812345678",
        "我要投诉你们的客服，太差了",
        "hello",
    ]
    runs = [await runtime.start(message) for message in messages]
    resumed = await runtime.resume(runs[0].run_id, approve=True)
    assert resumed.status.value == "finished"
    rebuilt = JsonlLog(tmp_path / "rebuilt")
    for summary in runs:
        written = (logs / f"{summary.run_id}.jsonl").read_bytes()
        path = rebuilt.export(store, summary.run_id)
        assert path is not None and path.read_bytes() == written
    assert b"13812345678" not in (logs / f"{runs[1].run_id}.jsonl").read_bytes()
