"""The chaos run of benchmarks/scale_out in small: 2 workers, 100 runs, 3 SIGKILLs.

``chaos.py --pg-url`` runs on the test server, in fresh databases it drops afterwards:
every run ends finished (or waiting for a person), one exchange order per approved run, no
run stuck, no gap in any run's event seqs, and every killed worker's drives taken over by
a live one. No speed is asserted. The checker itself is tested on a store and a business
database seeded with a duplicate, a gap and a stuck run, so a zero means what it says.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import psycopg
import pytest

from tests.conftest import ROOT
from tests.extras import REQUIRE_PG, import_extra, postgres_url

SCALE_OUT = ROOT / "benchmarks" / "scale_out"
HEAD = ["runs", "finished_or_waiting", "duplicate_effects", "stuck", "seq_gaps", "takeover_s_max"]


def test_two_workers_lose_three_to_sigkill_and_every_run_ends_once() -> None:
    url = postgres_url()
    import_extra("dbos", REQUIRE_PG)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, str(SCALE_OUT / "chaos.py"), "--workers", "2", "--runs", "100"]
    command += ["--kills", "3", "--json", "--pg-url", url]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert list(result)[: len(HEAD)] == HEAD
    assert result["runs"] == 100
    assert result["finished_or_waiting"] == 100, result["statuses"]
    assert (result["stuck"], result["duplicate_effects"], result["seq_gaps"]) == (0, 0, 0)
    # every run paused for its confirmation, was approved, and wrote its order once
    assert result["approved"] == 100 and result["exchange_orders"] == 100
    assert result["missing_effects"] == 0 and result["approved_not_finished"] == 0
    assert result["drive_errors"] == 0
    assert result["kills"] == 3 and result["takeovers_open"] == 0
    for takeover in result["takeovers"]:  # by a live worker, not the dead one's own id
        assert takeover["executor_id"] not in takeover["by"], takeover
    assert result["takeover_s_max"] is not None and result["takeover_s_max"] >= 0


@pytest.fixture
def harness(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(SCALE_OUT))
    import harness

    return harness


def test_the_checks_count_a_duplicate_a_gap_and_a_stuck_run(harness: Any) -> None:
    server = harness.Server(postgres_url())
    with harness.databases(server, "scale_out_checks") as dbs:
        with psycopg.connect(harness.plain(dbs.store_url), autocommit=True) as conn:
            conn.execute("CREATE TABLE corral_runs (run_id TEXT PRIMARY KEY, status TEXT)")
            conn.execute("CREATE TABLE corral_events (run_id TEXT, seq INTEGER)")
            conn.execute(
                "INSERT INTO corral_runs VALUES ('a', 'finished'), ('b', 'awaiting_confirm'), "
                "('c', 'executing'), ('d', 'finished')"
            )
            conn.execute(
                "INSERT INTO corral_events VALUES ('a', 1), ('a', 2), ('b', 1), ('b', 3), "
                "('c', 1), ('d', 1)"
            )
        with psycopg.connect(harness.plain(dbs.business_url), autocommit=True) as conn:
            insert = (
                "INSERT INTO exchanges (exchange_id, order_id, reason, idempotency_key, run_id) "
                "VALUES (%s, 'HD20240501', 'test', %s, %s)"
            )
            made = (("E1", "k1", "a"), ("E2", "k2", "a"), ("E3", "k3", "b"), ("E4", "k4", "c"))
            for exchange, key, run in made:
                conn.execute(insert, (exchange, key, run))
            conn.execute(
                "INSERT INTO exchange_entries (idempotency_key, run_id) "
                "VALUES ('k1', 'a'), ('k1', 'a'), ('k2', 'a'), ('k3', 'b')"
            )
        # a, b and d approved; c wrote an order without an approval; e never reached the store
        found = harness.invariants(dbs, ["a", "b", "c", "d", "e"], {"a", "b", "d"})
    assert found["runs"] == 5
    assert found["finished_or_waiting"] == 3  # a, d finished; b waits for a person
    assert found["stuck"] == 2  # c still executing, e missing
    assert found["duplicate_effects"] == 2  # a's second order, c's unapproved one
    assert found["seq_gaps"] == 1  # b: 1, 3
    assert found["missing_effects"] == 1  # d finished approved with no order
    assert found["approved_not_finished"] == 1  # b still waits after its approval
    assert (found["exchange_orders"], found["write_entries"]) == (4, 4)
    assert found["statuses"] == {
        "finished": 2,
        "awaiting_confirm": 1,
        "executing": 1,
        "missing": 1,
    }
