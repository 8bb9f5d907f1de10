"""Damaged rows outside a run's events are ``STORE_CORRUPT``, and a run goes no further.

Two defects, reproduced through ``corral resume`` and ``corral run --session``:

- A run's events with a gap in ``seq`` (a row moved from 4 to 50 by a bad restore) were
  read as a log that went on after its pause: the run was approved, its write entered,
  and new events appended after the moved one. Garbage in one row was already refused;
  a row out of its place was not.
- A session row whose data is not the object corral writes (``{garbage``, ``[]``,
  ``{}``, ``{"turns": 5}``, ``null``) ended ``corral run`` with a Python traceback
  (``JSONDecodeError``, ``KeyError``, ``TypeError``), not an error with a code.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from corral.errors import ErrorCode, StoreCorruptError
from corral.store.sql import SqlStore
from tests.helpers import corral_cli
from tests.test_concurrency import LEDGER, entries, paused_run


def _rows(home: Path, run_id: str) -> list[tuple[int, str]]:
    with sqlite3.connect(home / "corral.db") as db:
        return db.execute(
            "SELECT seq, data FROM corral_events WHERE run_id = ? ORDER BY seq", (run_id,)
        ).fetchall()


def _move(home: Path, run_id: str, seq: int, to: int) -> None:
    with sqlite3.connect(home / "corral.db") as db:
        db.execute(
            "UPDATE corral_events SET seq = ? WHERE run_id = ? AND seq = ?", (to, run_id, seq)
        )


def test_a_gap_in_a_run_s_events_stops_its_resume_before_the_write(tmp_path: Path) -> None:
    home = tmp_path / "home"
    run_id = paused_run(home)
    _move(home, run_id, 4, 50)
    before = _rows(home, run_id)
    done = corral_cli(home, "resume", run_id, "--approve", "--json", ok=False)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "STORE_CORRUPT"
    assert "event 4 is missing or out of order" in error["message"] and run_id in error["message"]
    assert entries(home) == []  # the write was never entered
    assert _rows(home, run_id) == before  # and nothing was written after the damage


@pytest.mark.parametrize(("seq", "says"), [(1, "event 1 is missing"), (3, "event 3 is missing")])
def test_a_missing_row_is_named(tmp_path: Path, seq: int, says: str) -> None:
    home = tmp_path / "home"
    run_id = paused_run(home)
    with sqlite3.connect(home / "corral.db") as db:
        db.execute("DELETE FROM corral_events WHERE run_id = ? AND seq = ?", (run_id, seq))
    store = SqlStore.open(home / "corral.db")
    try:
        with pytest.raises(StoreCorruptError) as caught:
            store.load_events(run_id)
    finally:
        store.engine.dispose()
    assert caught.value.code is ErrorCode.STORE_CORRUPT and says in caught.value.message


def test_a_run_whose_events_are_whole_still_resumes(tmp_path: Path) -> None:
    """The check refuses only a gap: the same run, undamaged, is approved and writes once."""
    home = tmp_path / "home"
    run_id = paused_run(home)
    done = json.loads(corral_cli(home, "resume", run_id, "--approve", "--json").stdout)
    assert done["status"] == "finished"
    assert len(entries(home)) == 1
    seqs = [seq for seq, _ in _rows(home, run_id)]
    assert seqs == list(range(1, len(seqs) + 1))


def _session_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    first = corral_cli(home, "run", str(LEDGER), "please cancel A12", "--session", "S9", "--json")
    assert json.loads(first.stdout)["status"] == "awaiting_confirm"
    return home


@pytest.mark.parametrize(
    "data", ["{garbage", "[]", "{}", '{"turns": 5}', '{"turns": [], "entities": 3}', "null"]
)
def test_a_damaged_session_row_is_store_corrupt(tmp_path: Path, data: str) -> None:
    home = _session_home(tmp_path)
    with sqlite3.connect(home / "corral.db") as db:
        db.execute("UPDATE corral_sessions SET data = ? WHERE session_id = 'S9'", (data,))
    store = SqlStore.open(home / "corral.db")
    try:
        with pytest.raises(StoreCorruptError) as caught:
            store.get_session("S9", datetime.now(UTC))
    finally:
        store.engine.dispose()
    assert "session S9" in caught.value.message
    done = corral_cli(home, "run", str(LEDGER), "cancel A80", "--session", "S9", "--json", ok=False)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert json.loads(done.stdout)["error"]["code"] == "STORE_CORRUPT"
    assert entries(home) == []


def test_one_damaged_run_hides_none_of_the_others_from_traces(tmp_path: Path) -> None:
    """Found by the same review: ``corral traces`` with filters refused every run for the
    damage of one; it now shows the others, names the damaged one and exits 2 (as ``ls``
    does for an entry it cannot read)."""
    home = tmp_path / "home"
    healthy, damaged = paused_run(home), paused_run(home)
    with sqlite3.connect(home / "corral.db") as db:
        db.execute(
            "UPDATE corral_events SET data = '{not json' WHERE run_id = ? AND seq = 2", (damaged,)
        )
    for as_json in (True, False):
        done = corral_cli(
            home, "traces", "--status", "awaiting_confirm", *(["--json"] * as_json), ok=False
        )
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        assert "STORE_CORRUPT" in done.stderr and damaged in done.stderr
        assert healthy in done.stdout and damaged not in done.stdout
        if as_json:  # stdout stays one record a line
            records = [json.loads(line) for line in done.stdout.splitlines()]
            assert {r["run_id"] for r in records} == {healthy}
    # a stage only the damaged run could have named: refused, and the damage said first
    done = corral_cli(home, "traces", "--status", "awaiting_confirm", "--stage", "own", ok=False)
    assert done.returncode == 2 and "STORE_CORRUPT" in done.stderr and damaged in done.stderr


def test_events_lost_from_the_end_of_a_run_stop_its_resume(tmp_path: Path) -> None:
    """Found by the same review: with the last event of a run gone (its write's "entered"
    mark, in the review), no gap shows it, and resume entered the write a second time.
    The run's row now says how many events it was written with."""
    home = tmp_path / "home"
    run_id = paused_run(home)
    with sqlite3.connect(home / "corral.db") as db:
        (last,) = db.execute(
            "SELECT max(seq) FROM corral_events WHERE run_id = ?", (run_id,)
        ).fetchone()
        db.execute("DELETE FROM corral_events WHERE run_id = ? AND seq = ?", (run_id, last))
    before = _rows(home, run_id)
    done = corral_cli(home, "resume", run_id, "--approve", "--json", ok=False)
    assert done.returncode == 2, done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "STORE_CORRUPT"
    assert f"written with {last} events, and {last - 1} are stored" in error["message"]
    assert entries(home) == [] and _rows(home, run_id) == before


def test_a_row_written_before_it_said_its_count_still_reads(tmp_path: Path) -> None:
    home = tmp_path / "home"
    run_id = paused_run(home)
    with sqlite3.connect(home / "corral.db") as db:
        (summary,) = db.execute(
            "SELECT summary FROM corral_runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        older = {k: v for k, v in json.loads(summary).items() if k != "n"}
        assert older != json.loads(summary)  # today's rows say it
        db.execute(
            "UPDATE corral_runs SET summary = ? WHERE run_id = ?", (json.dumps(older), run_id)
        )
    done = json.loads(corral_cli(home, "resume", run_id, "--approve", "--json").stdout)
    assert done["status"] == "finished" and len(entries(home)) == 1
