"""Store faults end as clear errors with a stable code, the run id and what happened.

Never a traceback, never "finished" for a run the store lost, and read-only commands keep
working on a read-only home.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from corral import EventType, load_agent
from corral.errors import StoreFullError
from corral.runtime.runtime import Runtime
from corral.store.codec import stored_type
from corral.store.sql import SqlStore
from tests.helpers import corral_cli
from tests.test_concurrency import LEDGER, ROOT, entries, paused_run

CORRAL = [sys.executable, "-m", "corral"]
NO_OVERRIDE = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner"]
"""Root ignores permission bits; without these capabilities it obeys them like a user."""


def _bound(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    prefix = [*NO_OVERRIDE, "--inh-caps=-all", "--"] if os.geteuid() == 0 else []
    return subprocess.run(
        [*prefix, *CORRAL, *args, "--home", str(home)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )


@pytest.fixture
def read_only_home(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A home with one finished run, then made read-only (folders 0500, files 0400)."""
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("as root this needs setpriv (util-linux) to drop CAP_DAC_OVERRIDE")
    home = tmp_path / "home"
    run_id = paused_run(home)
    corral_cli(home, "resume", run_id, "--approve", "--json")
    for path in [*home.rglob("*"), home]:
        path.chmod(0o500 if path.is_dir() else 0o400)
    yield home, run_id
    for path in [home, *home.rglob("*")]:
        path.chmod(0o700)


def test_read_only_home_reads_work_and_writes_fail_cleanly(
    read_only_home: tuple[Path, str],
) -> None:
    home, run_id = read_only_home
    listed = _bound(home, "runs", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [r["run_id"] for r in json.loads(listed.stdout)] == [run_id]
    shown = _bound(home, "show", run_id, "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["status"] == "finished"
    traced = _bound(home, "traces", run_id, "--json")
    assert traced.returncode == 0, traced.stderr
    assert '"run_finished"' in traced.stdout
    handed = _bound(home, "handoff", run_id, "--json")
    # it finished: it exists, and was not handed off
    assert handed.returncode == 2 and "INVALID_ARGUMENT" in handed.stdout
    written = _bound(home, "run", str(LEDGER), "cancel A7", "--json")
    assert written.returncode == 2, written.stderr
    assert "Traceback" not in written.stderr
    assert json.loads(written.stdout)["error"]["code"] == "STORE_READ_ONLY"


def test_a_corrupt_database_is_store_corrupt(tmp_path: Path) -> None:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "corral.db").write_bytes(b"this is not a database" * 100)
    for command in (["runs", "--json"], ["run", str(LEDGER), "cancel A1", "--json"]):
        done = corral_cli(tmp_path, *command, ok=False)
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        assert json.loads(done.stdout)["error"]["code"] == "STORE_CORRUPT"


def test_a_database_deleted_mid_run_is_never_reported_finished(tmp_path: Path) -> None:
    run_id = paused_run(tmp_path)
    corral_cli(tmp_path, "resume", run_id, "--approve")
    doomed = tmp_path / "corral.db"
    done = corral_cli(
        tmp_path,
        *("run", str(LEDGER), "cancel A9", "--json"),
        ok=False,
        env={"LEDGER_DELETE_ON_LOOKUP": str(doomed)},
    )
    assert done.returncode == 2, done.stdout + done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "STORE_UNAVAILABLE"
    assert "removed or replaced" in error["message"]
    assert error.get("run_id")


def _fail_saving(store: SqlStore, kind: EventType) -> None:
    """Make the save that holds an event of ``kind`` fail as a full disk would."""
    marker = repr(stored_type(kind))  # the row's type column, as the parameters show it

    def full(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO CORRAL_EVENTS") and marker in str(
            params
        ):
            raise sqlite3.OperationalError("database or disk is full")

    event.listen(store.engine, "before_cursor_execute", full)


def _approve_failing(tmp_path: Path, kind: EventType) -> tuple[str, StoreFullError]:
    """A paused run approved while the save holding an event of ``kind`` fails."""
    run_id = paused_run(tmp_path)
    agent = load_agent(LEDGER, data_dir=tmp_path / "data" / "ledger")
    store = SqlStore.open(tmp_path / "corral.db")
    _fail_saving(store, kind)
    runtime = Runtime(agent, store, log_dir=tmp_path / "logs")
    with pytest.raises(StoreFullError) as caught:
        asyncio.run(runtime.resume(run_id, approve=True))
    return run_id, caught.value


def test_a_failed_save_after_the_write_says_what_already_happened(tmp_path: Path) -> None:
    run_id, caught = _approve_failing(tmp_path, EventType.RUN_FINISHED)
    message = caught.message
    assert caught.code.value == "STORE_FULL" and caught.run_id == run_id
    assert "cancel_order succeeded" in message and f"corral resume {run_id}" in message
    assert len(entries(tmp_path)) == 1
    # the disk has room again: resume finishes the run, and the write happened once
    finished = corral_cli(tmp_path, "resume", run_id, "--json")
    assert json.loads(finished.stdout)["status"] == "finished"
    effects = (tmp_path / "data" / "ledger" / "effects.log").read_text().split()
    assert len(effects) == 1


def test_a_failed_save_before_the_write_says_it_was_not_entered_and_to_approve_again(
    tmp_path: Path,
) -> None:
    """Found by a walkthrough: the save before the write (the approval, the write's start)
    failed, and the error said "already happened: cancel_order was started; `corral resume
    RUN` finishes the run": no write had been entered, the approval was lost, and that
    command then said RUN_NOT_RESUMABLE (it waits for a confirmation)."""
    run_id, caught = _approve_failing(tmp_path, EventType.CONFIRMATION_GIVEN)
    message = caught.message
    assert "was started" not in message and "no write had been made" in message
    assert f"the decision may not have been kept: `corral resume {run_id} --approve`" in message
    assert entries(tmp_path) == []
    # the disk has room again: the approval, given again as told, makes the write once
    finished = corral_cli(tmp_path, "resume", run_id, "--approve", "--json")
    assert json.loads(finished.stdout)["status"] == "finished"
    assert len(entries(tmp_path)) == 1


def test_a_write_entered_by_a_process_that_died_still_counts_as_started(
    tmp_path: Path,
) -> None:
    """Review of 48eb1d0: a resume starts the write again (a new ``step_started``); when
    that save fails, the write had been entered by the process that died, and the message
    must still say so, not "no write had been made"."""
    run_id = paused_run(tmp_path)
    crashed = corral_cli(
        tmp_path, "resume", run_id, "--approve", ok=False, env={"CORRAL_FAULTS": "after_tool"}
    )
    assert crashed.returncode != 0 and len(entries(tmp_path)) == 1  # entered, then killed
    agent = load_agent(LEDGER, data_dir=tmp_path / "data" / "ledger")
    store = SqlStore.open(tmp_path / "corral.db")
    _fail_saving(store, EventType.STEP_STARTED)
    with pytest.raises(StoreFullError) as caught:
        asyncio.run(Runtime(agent, store, log_dir=tmp_path / "logs").resume(run_id))
    assert "cancel_order was started" in caught.value.message
    assert "no write had been made" not in caught.value.message


def test_a_read_only_home_shows_what_a_crash_left_in_the_wal(tmp_path: Path) -> None:
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("as root this needs setpriv (util-linux) to drop CAP_DAC_OVERRIDE")
    home = tmp_path / "home"
    run_id = paused_run(home)
    killed = corral_cli(
        home,
        "resume",
        run_id,
        "--approve",
        "--json",
        ok=False,
        env={"CORRAL_FAULTS": "before_tool"},
    )
    assert killed.returncode == -9
    wal = home / "corral.db-wal"
    assert wal.exists() and wal.stat().st_size > 0  # the crash left events in the WAL only
    writable = json.loads(corral_cli(home, "show", run_id, "--json").stdout)
    assert writable["status"] == "executing"
    for path in [*home.rglob("*"), home]:
        path.chmod(0o500 if path.is_dir() else 0o400)
    try:
        shown = _bound(home, "show", run_id, "--json")
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["status"] == "executing"
        assert json.loads(shown.stdout)["steps"] == writable["steps"]
    finally:
        for path in [home, *home.rglob("*")]:
            path.chmod(0o700)


def test_a_store_file_not_in_wal_mode_is_read_by_read_only_commands(tmp_path: Path) -> None:
    """Found by a walkthrough: a backup made with ``VACUUM INTO`` (or a restored dump) is
    not in WAL mode, and ``runs``, ``show`` and ``traces`` refused it as STORE_READ_ONLY
    (they tried to switch it to WAL on a read-only connection) until a write command ran."""
    home = tmp_path / "home"
    run_id = paused_run(home)
    backup = tmp_path / "backup"
    backup.mkdir()
    with sqlite3.connect(home / "corral.db") as source:
        source.execute(f"VACUUM INTO '{backup / 'corral.db'}'")
    with sqlite3.connect(backup / "corral.db") as copy:
        assert copy.execute("PRAGMA journal_mode").fetchone()[0] != "wal"
    listed = corral_cli(backup, "runs", "--json")
    assert [r["run_id"] for r in json.loads(listed.stdout)] == [run_id]
    shown = corral_cli(backup, "show", run_id, "--json")
    assert json.loads(shown.stdout)["status"] == "awaiting_confirm"
    with sqlite3.connect(backup / "corral.db") as copy:  # reading changed nothing
        assert copy.execute("PRAGMA journal_mode").fetchone()[0] != "wal"


def test_a_store_path_that_cannot_exist_is_unavailable_not_full(tmp_path: Path) -> None:
    """Found by a walkthrough: ``--store sqlite:////proc/x.db`` said STORE_FULL ("free
    space"), because /proc reports no free blocks; the file simply cannot be made."""
    done = corral_cli(
        tmp_path,
        "run",
        str(LEDGER),
        "cancel A1",
        "--json",
        "--store",
        "sqlite:////proc/x.db",
        ok=False,
    )
    assert done.returncode == 2, done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "STORE_UNAVAILABLE", error
    assert "No such file or directory" in error["message"]


def test_a_full_disk_is_still_told_from_a_plain_io_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from corral.errors import StoreUnavailableError
    from corral.store import faults

    full = os.statvfs_result((4096, 4096, 100, 0, 0, 10, 0, 0, 0, 255))
    monkeypatch.setattr(os, "statvfs", lambda _path: full)
    plain_io = sqlite3.OperationalError("disk I/O error")
    assert faults.classify(plain_io, tmp_path) is StoreFullError
    assert faults.classify(OSError(5, "Input/output error"), tmp_path) is StoreFullError
    missing = FileNotFoundError(2, "No such file or directory")
    assert faults.classify(missing, tmp_path) is StoreUnavailableError


def test_a_run_whose_first_save_failed_is_not_sent_to_corral_resume(tmp_path: Path) -> None:
    """Found by a hostile review: a 503 ``STORE_UNAVAILABLE`` (a locked database) said
    "no write had been made; `corral resume RUN` finishes the run" of a run never stored:
    that command, the HTTP resume and ``GET /runs/RUN`` all answered ``RUN_NOT_FOUND``."""
    agent = load_agent(LEDGER, data_dir=tmp_path / "data" / "ledger")
    store = SqlStore.open(tmp_path / "corral.db")
    _fail_saving(store, EventType.RUN_STARTED)
    runtime = Runtime(agent, store, log_dir=tmp_path / "logs")
    with pytest.raises(StoreFullError) as caught:
        asyncio.run(runtime.start("cancel A9"))
    message, run_id = caught.value.message, caught.value.run_id
    assert run_id is not None and store.get_run(run_id) is None
    assert "corral resume" not in message
    assert "the run was never stored and no write had been made: start it again" in message
    assert entries(tmp_path) == []
    again = corral_cli(tmp_path, "run", str(LEDGER), "cancel A9", "--json")  # as it says
    assert json.loads(again.stdout)["status"] == "awaiting_confirm"
