"""``corral serve`` stopping with runs that will not end, as a supervisor or a person stops it.

- ``--shutdown-grace`` and ``--stop-timeout`` bound how long a stop waits for runs (before,
  only code could set them: a test of a stubborn tool took at least 30 s, and operators
  could not fit the stop into their supervisor's kill timeout);
- a second Ctrl-C stops the runs at once, also once the app's shutdown has begun (before,
  uvicorn's force exit came too late for that: the runs still got up to 30 s);
- a sync tool whose thread never returns no longer keeps the stopped process alive
  (Python waits for such threads at exit: before, the process never ended).
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import httpx

from tests.extras import REQUIRE_ALL, import_extra
from tests.test_server_cli import corral_serve

import_extra("fastapi", REQUIRE_ALL)
import_extra("uvicorn", REQUIRE_ALL)

STUCK = Path(__file__).resolve().parent / "agents" / "stuck"
TOKEN = {"CORRAL_API_TOKEN": "T"}


def _begin(base: str, message: str, mark: Path, *, wait: bool = False) -> httpx.Response:
    """Start a run of the stuck agent and wait until its tool has been entered."""
    with httpx.Client(base_url=base, headers={"Authorization": "Bearer T"}, timeout=60) as http:
        answer = http.post("/agents/stuck/runs", json={"message": message, "wait": wait})
    deadline = time.monotonic() + 30
    while not mark.exists():
        assert time.monotonic() < deadline, "the tool was never entered"
        time.sleep(0.02)
    return answer


def _ended_within(server: subprocess.Popen[str], seconds: float) -> tuple[int, str, float]:
    """Wait for the server to exit: its code, its stderr, and how long it took."""
    began = time.monotonic()
    code = server.wait(timeout=seconds)
    took = time.monotonic() - began
    _, errors = server.communicate()
    return code, errors, took


def test_the_stop_waits_are_options_and_a_stubborn_run_is_left_after_them(tmp_path: Path) -> None:
    mark = tmp_path / "mark"
    env = {**TOKEN, "STUCK_MARK": str(mark)}
    options = ["--shutdown-grace", "0.2", "--stop-timeout", "0.3"]
    with corral_serve(tmp_path / "home", STUCK, env=env, options=options) as (base, server):
        answer = _begin(base, "hang", mark)
        assert answer.status_code == 202
        server.send_signal(signal.SIGTERM)
        code, errors, took = _ended_within(server, 30)
    assert code == 0
    assert took < 10  # the grace, two stops of 0.3 s, the loop's close: not 30 s
    assert f"left to their leases: {answer.json()['run_id']}" in errors.replace("\n", "")


def test_a_second_ctrl_c_stops_the_runs_at_once_once_the_shutdown_has_begun(
    tmp_path: Path,
) -> None:
    mark = tmp_path / "mark"
    env = {**TOKEN, "STUCK_MARK": str(mark)}
    with corral_serve(tmp_path / "home", STUCK, env=env) as (base, server):  # 10 s, 10 s
        answer = _begin(base, "hang", mark)
        server.send_signal(signal.SIGINT)
        time.sleep(1.5)  # no request in flight: the app's shutdown waits out its grace
        server.send_signal(signal.SIGINT)
        code, errors, took = _ended_within(server, 20)
    assert code == 0
    assert took < 8  # the hurry (1 s) and the loop's close (2 s): not the 28 s left
    # the runs' stop ran, and was cut short (a force exit before it would skip it)
    assert f"left to their leases: {answer.json()['run_id']}" in errors.replace("\n", "")


def test_a_sync_tool_that_never_returns_does_not_keep_the_stopped_server_alive(
    tmp_path: Path,
) -> None:
    mark = tmp_path / "mark"
    env = {**TOKEN, "STUCK_MARK": str(mark)}
    with corral_serve(tmp_path / "home", STUCK, env=env) as (base, server):
        answer = _begin(base, "block", mark, wait=True)
        assert answer.status_code == 200
        assert answer.json()["status"] == "handed_off"  # timed out at 0.3 s; its thread runs on
        server.send_signal(signal.SIGTERM)
        code, errors, took = _ended_within(server, 30)
    assert code == 0
    assert took < 15
    assert "leaving 1 thread(s) that did not end" in errors.replace("\n", "")
