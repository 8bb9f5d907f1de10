"""``corral serve`` stopping with runs that will not end, as a supervisor or a person stops it.

- ``--shutdown-grace`` and ``--stop-timeout`` bound how long a stop waits for runs (before,
  only code could set them: a test of a stubborn tool took at least 30 s, and operators
  could not fit the stop into their supervisor's kill timeout);
- a second Ctrl-C stops the runs at once, also once the app's shutdown has begun (before,
  uvicorn's force exit came too late for that: the runs still got up to 30 s);
- a sync tool whose thread never returns no longer keeps the stopped process alive
  (Python waits for such threads at exit: before, the process never ended), and exiting
  without it does not cut short a run's save still waiting for the database.
"""

from __future__ import annotations

import contextlib
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx

from tests.extras import REQUIRE_ALL, import_extra
from tests.test_server_cli import corral_serve

import_extra("fastapi", REQUIRE_ALL)
import_extra("uvicorn", REQUIRE_ALL)

STUCK = Path(__file__).resolve().parent / "agents" / "stuck"
TOKEN = {"CORRAL_API_TOKEN": "T"}
STOPPING = "stopping: waiting up to"
"""What the server says on stderr once it waits for its runs (the app's shutdown began)."""


@contextlib.contextmanager
def serve_stuck(
    tmp_path: Path, *options: str
) -> Iterator[tuple[str, subprocess.Popen[str], Path, Path]]:
    """``corral serve`` of the stuck agent, its home under ``tmp_path``.

    Yields its address and process, the file its tools create when entered, and the file
    its stderr goes to.
    """
    mark, errors = tmp_path / "mark", tmp_path / "stderr"
    env = {**TOKEN, "STUCK_MARK": str(mark)}
    served = corral_serve(tmp_path / "home", STUCK, env=env, options=options, stderr=errors)
    with served as (base, server):
        yield base, server, mark, errors


def _begin(base: str, message: str, mark: Path, *, wait: bool = False) -> httpx.Response:
    """Start a run of the stuck agent and wait until its tool has been entered."""
    mark.unlink(missing_ok=True)
    with httpx.Client(base_url=base, headers={"Authorization": "Bearer T"}, timeout=60) as http:
        answer = http.post("/agents/stuck/runs", json={"message": message, "wait": wait})
    _until(mark.exists, "the tool was never entered")
    return answer


def _until(condition: Callable[[], bool], what: str, within_s: float = 30) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def _ended_within(
    server: subprocess.Popen[str], seconds: float, errors: Path
) -> tuple[int, str, float]:
    """Wait for the server to exit: its code, its stderr, and how long it took."""
    began = time.monotonic()
    code = server.wait(timeout=seconds)
    took = time.monotonic() - began
    server.communicate()
    return code, errors.read_text(encoding="utf-8").replace("\n", ""), took


def test_the_stop_waits_are_options_and_a_stubborn_run_is_left_after_them(tmp_path: Path) -> None:
    options = ["--shutdown-grace", "0.2", "--stop-timeout", "0.3"]
    with serve_stuck(tmp_path, *options) as (base, server, mark, errors):
        answer = _begin(base, "hang", mark)
        assert answer.status_code == 202
        server.send_signal(signal.SIGTERM)
        code, said, took = _ended_within(server, 30, errors)
    assert code == 0
    assert took < 10  # the grace, two stops of 0.3 s, the loop's close: not 30 s
    assert f"left to their leases: {answer.json()['run_id']}" in said


def test_a_second_ctrl_c_stops_the_runs_at_once_once_the_shutdown_has_begun(
    tmp_path: Path,
) -> None:
    with serve_stuck(tmp_path) as (base, server, mark, errors):  # 10 s, 10 s
        answer = _begin(base, "hang", mark)
        server.send_signal(signal.SIGINT)
        _until(lambda: STOPPING in errors.read_text(encoding="utf-8"), "no stop began")
        server.send_signal(signal.SIGINT)
        code, said, took = _ended_within(server, 20, errors)
    assert code == 0
    assert took < 8  # the hurry (1 s) and the loop's close (2 s): not the 30 s left
    assert f"left to their leases: {answer.json()['run_id']}" in said


def test_a_sync_tool_that_never_returns_does_not_keep_the_stopped_server_alive(
    tmp_path: Path,
) -> None:
    with serve_stuck(tmp_path) as (base, server, mark, errors):
        answer = _begin(base, "block", mark, wait=True)
        assert answer.status_code == 200
        assert answer.json()["status"] == "handed_off"  # timed out at 0.3 s; its thread runs on
        server.send_signal(signal.SIGTERM)
        code, said, took = _ended_within(server, 30, errors)
    assert code == 0
    assert took < 15
    assert "leaving 1 thread(s) that did not end" in said and "corral-serve_" in said


def test_exiting_without_a_stuck_thread_still_lets_a_run_save(tmp_path: Path) -> None:
    """A run stopped while the database is locked saves once it is free, before the exit.

    The server exits without the stuck thread of a sync tool, but only after every other
    thread it has: here the store thread whose save waits (busy timeout) for another
    writer. Leaving that too would lose a run the server had accepted (202).
    """
    home = tmp_path / "home"
    options = ["--shutdown-grace", "0.2", "--stop-timeout", "0.3"]
    with serve_stuck(tmp_path, *options) as (base, server, mark, errors):
        assert _begin(base, "block", mark, wait=True).json()["status"] == "handed_off"
        accepted = _begin(base, "wait", mark)
        assert accepted.status_code == 202
        run_id = accepted.json()["run_id"]
        writer = sqlite3.connect(home / "corral.db", isolation_level=None)
        writer.execute("BEGIN IMMEDIATE")  # another writer (a worker, `corral resume`)
        try:
            server.send_signal(signal.SIGTERM)
            # past the stops, the app's close and the 2 s for the loop's threads; within
            # the store's 10 s busy timeout, so the save goes on once this writer is done
            time.sleep(8)
        finally:
            writer.execute("ROLLBACK")
            writer.close()
        code, said, _ = _ended_within(server, 30, errors)
    assert code == 0 and "leaving 1 thread(s)" in said
    with sqlite3.connect(home / "corral.db") as db:
        row = db.execute("SELECT status FROM corral_runs WHERE run_id = ?", (run_id,)).fetchone()
    assert row == ("executing",)  # stored by its stop: `corral resume` can finish it


def test_a_forced_stop_with_a_stuck_thread_and_a_request_in_flight_still_exits(
    tmp_path: Path,
) -> None:
    """A second Ctrl-C while uvicorn waits for a request skips the app's shutdown.

    Then nothing had shut the runtime's store threads down, and waiting for every other
    thread before leaving the stuck one waited for an idle store thread, for ever.
    """
    with serve_stuck(tmp_path) as (base, server, mark, errors):
        assert _begin(base, "block", mark, wait=True).json()["status"] == "handed_off"
        mark.unlink()
        waiting = threading.Thread(target=_begin_quietly, args=(base,), daemon=True)
        waiting.start()  # a `wait: true` start of a run that waits an hour
        _until(mark.exists, "the second tool was never entered")
        server.send_signal(signal.SIGINT)
        time.sleep(1)  # uvicorn waits for the request in flight (up to 11 s)
        server.send_signal(signal.SIGINT)
        code, said, took = _ended_within(server, 30, errors)
        waiting.join(timeout=30)
    assert code == 0
    assert took < 10  # the loop's close and its threads' 2 s: not for ever
    assert "leaving 1 thread(s) that did not end" in said and "corral-store" not in said
    # the request and the lifespan it cancelled: one line, not two ERROR tracebacks
    assert "stopped: cancelled 1 request(s) still in flight" in said
    assert "Traceback" not in said and "ERROR" not in said


def _begin_quietly(base: str) -> None:
    with contextlib.suppress(httpx.HTTPError):
        httpx.post(
            f"{base}/agents/stuck/runs",
            json={"message": "wait", "wait": True},
            headers={"Authorization": "Bearer T"},
            timeout=60,
        )


def test_a_graceful_stop_that_cuts_a_request_short_says_so_in_one_line(tmp_path: Path) -> None:
    """SIGTERM, with a ``wait: true`` start that outlives uvicorn's wait for requests.

    uvicorn cancels it after the grace and logs an ``ERROR`` and a page of traceback
    ending in ``CancelledError`` for it: on the usual stop of a supervisor (Kubernetes).
    """
    options = ("--shutdown-grace", "0.5", "--stop-timeout", "0.5")
    with serve_stuck(tmp_path, *options) as (base, server, mark, errors):
        waiting = threading.Thread(target=_begin_quietly, args=(base,), daemon=True)
        waiting.start()  # a `wait: true` start of a run that waits an hour
        _until(mark.exists, "the tool was never entered")
        server.send_signal(signal.SIGTERM)
        code, said, _ = _ended_within(server, 30, errors)
        waiting.join(timeout=30)
    assert code == 0
    assert "stopped: cancelled 1 request(s) still in flight" in said
    assert "Traceback" not in said and "ERROR" not in said
