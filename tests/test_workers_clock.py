"""A drive taken over by a worker on another host measures time on one clock (workers).

A monotonic clock counts from its host's boot: two hosts' readings share no origin. A
drive re-executed elsewhere replays the dead worker's recorded clock readings, then reads
its own: a duration measured across the takeover (the write's latency, the run's active
time, the wall-clock budget) must not be the difference between two hosts' boot times.
Real worker processes, a database each; the first worker's monotonic clock is shifted
(``sitecustomize``) as another host's would be.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from corral.events import Event, EventType, RunFinished, ToolAttempt, tool_attempts
from corral.workers import names
from corral.workers.client import RunQueue
from tests.test_workers_drive import stored_events
from tests.workers_support import business, until, worker_pool

BOOTED_EARLIER = """\
import time

_mono, _perf = time.monotonic, time.perf_counter
time.monotonic = lambda: _mono() - 1_000_000.0  # this host booted 11 days later
time.perf_counter = lambda: _perf() - 1_000_000.0
"""


AN_HOUR_AHEAD = """\
from datetime import timedelta

from corral.effects import LiveEffects

_now = LiveEffects.now
LiveEffects.now = lambda self: _now(self) + timedelta(hours=1)  # this host's clock is ahead
"""


def taken_over(tmp_path: Path, other_host: str) -> tuple[dict[str, Any], list[Event]]:
    """A label run whose worker, on a host whose clocks ``other_host`` sets, is SIGKILLed in
    its write; a worker of this host's clocks takes it over: its answer and its events."""
    (tmp_path / "other_host").mkdir()
    (tmp_path / "other_host" / "sitecustomize.py").write_text(other_host)
    hold = tmp_path / "hold"
    hold.touch()
    with worker_pool(tmp_path) as workers:
        workers.env["DEPOT_HOLD"] = str(hold)
        plain = os.environ.get("PYTHONPATH", "")
        paths = [str(tmp_path / "other_host"), plain]
        workers.env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
        first = workers.start("w1")
        with RunQueue(workers.store_url) as queue:
            run_id = queue.start("depot", "please label A8")
            entered = "SELECT count(*) FROM entries"
            until(lambda: business(workers.home, entered) == [(1,)], "the write to be entered")
            workers.stop(first, signal.SIGKILL)
            hold.unlink()
            workers.env["PYTHONPATH"] = plain  # the drive goes on on a host of its own clock
            workers.start("w2")
            done = queue.wait(names.workflow_id(run_id, 0), timeout_s=90)
        return done, stored_events(workers.store_url, run_id)


def test_a_drive_taken_over_on_another_host_measures_its_write_and_run_on_one_clock(
    tmp_path: Path,
) -> None:
    done, events = taken_over(tmp_path, BOOTED_EARLIER)
    assert done["status"] == "finished", done
    # a write entered once by its new host is its step's sole attempt: read them all
    attempts = list(tool_attempts(e.payload for e in events))
    assert attempts and all(isinstance(a, ToolAttempt) for a in attempts)
    assert all(0 <= a.duration_ms < 60_000 for a in attempts), [a.duration_ms for a in attempts]
    finished = [e.payload for e in events if e.type is EventType.RUN_FINISHED]
    assert isinstance(finished[-1], RunFinished)
    assert 0 <= finished[-1].active_s < 60, finished[-1].active_s
    times = [e.ts for e in events]
    assert times == sorted(times) and len(set(times)) == len(times)


def test_a_drive_taken_over_by_a_host_whose_clock_is_behind_keeps_its_times_increasing(
    tmp_path: Path,
) -> None:
    done, events = taken_over(tmp_path, AN_HOUR_AHEAD)
    assert done["status"] == "finished", done
    times = [e.ts for e in events]
    assert times == sorted(times) and len(set(times)) == len(times)


def test_a_resume_on_a_host_whose_clock_is_behind_the_starts_keeps_the_runs_times_increasing(
    tmp_path: Path,
) -> None:
    (tmp_path / "other_host").mkdir()
    (tmp_path / "other_host" / "sitecustomize.py").write_text(AN_HOUR_AHEAD)
    with worker_pool(tmp_path) as workers:
        plain = os.environ.get("PYTHONPATH", "")
        paths = [str(tmp_path / "other_host"), plain]
        workers.env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
        first = workers.start("w1")
        with RunQueue(workers.store_url) as queue:
            run_id = queue.start("depot", "please ship A1")
            paused = queue.wait(names.workflow_id(run_id, 0), timeout_s=60)
            assert paused["status"] == "awaiting_confirm"
            workers.stop(first)
            workers.env["PYTHONPATH"] = plain
            workers.start("w2")
            done = queue.wait(queue.resume("depot", run_id, approve=True), timeout_s=60)
        events = stored_events(workers.store_url, run_id)
    assert done["status"] == "finished", done
    times = [e.ts for e in events]
    assert times == sorted(times) and len(set(times)) == len(times)
