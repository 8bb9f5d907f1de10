"""SIGKILL at every named durability point, then recovery in a new process.

The crash points are armed with ``CORRAL_FAULTS`` (see ``corral.runtime.faults``). After
each crash ``corral resume`` must finish the run with every event in order, one
``run_finished``, and the write's effect made once.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from corral.runtime.faults import POINTS
from corral.store.sql import SqlStore
from tests.helpers import corral_cli
from tests.test_concurrency import entries, paused_run


def effects_made(home: Path) -> list[str]:
    path = home / "data" / "ledger" / "effects.log"
    return path.read_text(encoding="utf-8").split() if path.exists() else []


@pytest.mark.parametrize("point", POINTS)
def test_recovers_after_sigkill_at(point: str, tmp_path: Path) -> None:
    run_id = paused_run(tmp_path)
    killed = corral_cli(
        tmp_path, "resume", run_id, "--approve", "--json", ok=False, env={"CORRAL_FAULTS": point}
    )
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    recovered = corral_cli(tmp_path, "resume", run_id, "--json", ok=False)
    if recovered.returncode != 0:  # the approval itself was lost with the crash
        assert point == "before_commit", recovered.stdout
        assert json.loads(recovered.stdout)["error"]["code"] == "RUN_NOT_RESUMABLE"
        recovered = corral_cli(tmp_path, "resume", run_id, "--approve", "--json")
    summary = json.loads(recovered.stdout)
    assert summary["status"] == "finished", summary
    assert len(effects_made(tmp_path)) == 1
    entered_before_crash = point == "after_tool"
    assert len(entries(tmp_path)) == (2 if entered_before_crash else 1)
    events = SqlStore.open(tmp_path / "corral.db").load_events(run_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    kinds = [e.type.value for e in events]
    assert kinds.count("run_finished") == 1 and kinds.count("confirmation_given") == 1
    log = tmp_path / "logs" / f"{run_id}.jsonl"
    logged = [json.loads(line)["seq"] for line in log.read_text(encoding="utf-8").splitlines()]
    assert logged == [e.seq for e in events]  # the JSONL export caught up with the store


def test_unknown_crash_point_is_a_clear_error(tmp_path: Path) -> None:
    run_id = paused_run(tmp_path)
    done = corral_cli(
        tmp_path, "resume", run_id, "--approve", ok=False, env={"CORRAL_FAULTS": "nowhere"}
    )
    assert done.returncode == 2 and "CONFIG_INVALID" in done.stderr
