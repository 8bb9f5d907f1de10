"""A worker is alive while its PostgreSQL session holds its executor id's advisory lock.

These tests hold the locks from this process (no DBOS, no worker): the watcher's
takeover is given a recorder instead of DBOS's recovery, and a session is "killed" the
way a dead process's is, by PostgreSQL ending it (``pg_terminate_backend``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

from corral.errors import (
    ConfigInvalidError,
    InvalidInputError,
    StoreUnavailableError,
    WorkerIdInUseError,
)
from corral.workers import names
from corral.workers.liveness import (
    Liveness,
    Watcher,
    checked_executor_id,
    chosen_settle_s,
    hold,
)
from tests.workers_support import fresh_database


@pytest.fixture
def url() -> Iterator[str]:
    with fresh_database() as store:
        yield names.system_database_url(store)


def terminate(url: str, conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """End ``conn``'s session server-side (waiting until it is gone), as a dead process's."""
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s, 10000)", (conn.info.backend_pid,))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_second_worker_with_a_live_id_is_refused_and_a_closed_one_frees_it(url: str) -> None:
    first = hold(url, "w-a")
    with pytest.raises(WorkerIdInUseError) as refused:
        hold(url, "w-a", wait_s=0.0)
    assert refused.value.code.value == "WORKER_ID_IN_USE"
    assert "corral-worker:w-a" in refused.value.message
    other = hold(url, "w-b")  # another id is another lock
    first.close()
    again = hold(url, "w-a")  # the id is free once its session is gone
    again.close()
    other.close()


def test_an_executor_id_must_fit_application_name_and_a_log_line() -> None:
    assert checked_executor_id("host-1.pid_2") == "host-1.pid_2"
    for bad in ("", "-x", "a b", "x" * 50, "wörker", "a\nb"):
        with pytest.raises(InvalidInputError):
            checked_executor_id(bad)


def test_the_watcher_takes_over_only_dead_executors_and_says_how_long_ago(url: str) -> None:
    mine, alive, dying = hold(url, "w-me"), hold(url, "w-alive"), hold(url, "w-dying")
    taken: list[str] = []
    clock = Clock()
    watcher = Watcher(
        mine,
        lambda: {"w-me", "w-alive", "w-dying", "w-never-seen"},
        lambda executor: taken.append(executor) or 2,
        clock=clock,
    )
    assert watcher.poll() == [] and taken == []  # a new connection settles first
    clock.now += watcher.settle_s
    first = watcher.poll()  # all but the one never seen are alive
    assert [(t.executor_id, t.workflows, t.seen, t.lost_s) for t in first] == [
        ("w-never-seen", 2, False, 0.0)
    ]
    clock.now += 1.5
    terminate(url, dying.conn)
    second = watcher.poll()
    assert taken == ["w-never-seen", "w-dying", "w-never-seen"]
    dead = {t.executor_id: t for t in second}
    assert dead["w-dying"].seen and dead["w-dying"].lost_s == 1.5  # last seen one poll ago
    assert not dead["w-never-seen"].seen and dead["w-never-seen"].lost_s == 1.5
    alive.close()
    mine.close()


def test_a_watcher_whose_first_round_follows_a_restart_calls_no_live_worker_dead(
    url: str,
) -> None:
    """The defect (``test_workers_pg_restart``, about 1 in 50 runs under load, 1 in 6 with
    a busy core beside it): a worker's watcher made its first round just after PostgreSQL
    restarted, before the other worker's keeper took its lock back. Only a reconnect
    settled; a first connection called the live worker dead and handed its drives, in the
    middle of their writes, to new executions, which entered the writes again."""
    mine, other = hold(url, "w-me"), hold(url, "w-other")
    terminate(url, other.conn)  # the restart ended the other worker's session
    taken: list[str] = []
    clock = Clock()
    watcher = Watcher(mine, lambda: {"w-other"}, lambda e: taken.append(e) or 1, clock=clock)
    assert watcher.poll() == [] and taken == []  # its first connection settles too
    assert other.ensure()  # the other worker's keeper takes its lock back at its next poll
    clock.now += watcher.settle_s
    assert watcher.poll() == [] and taken == []  # alive: nothing of it is taken over
    other.close()
    mine.close()


def test_a_mixed_fleet_settles_for_its_slowest_poll_and_never_less_than_its_own() -> None:
    """A watcher cannot see the poll of a worker whose session a restart ended: a worker
    polling every second beside one polling every 10 s is given the slower one's settling
    (``--takeover-settle-s 30``); less than three of its own polls is refused."""
    assert chosen_settle_s(None, 1.0) == 5.0 and chosen_settle_s(None, 10.0) == 30.0
    assert chosen_settle_s(30.0, 1.0) == 30.0
    for short in (4.9, 0.0, -1.0):
        with pytest.raises(ConfigInvalidError, match="at least 5 s"):
            chosen_settle_s(short, 1.0)
    for endless in (float("inf"), float("nan"), 1e308, 3601.0):  # review: inf took none over
        with pytest.raises(ConfigInvalidError, match="longer than 3600 s"):
            chosen_settle_s(endless, 1.0)
    assert chosen_settle_s(3600.0, 1.0) == 3600.0


def test_a_watcher_of_a_slowly_polling_fleet_settles_for_three_of_its_polls(url: str) -> None:
    """Review of 36879d4: the settling was a fixed 5 s, and a keeper polling every 10 s
    (``--takeover-poll-s 10``) takes its lock back up to 10 s after a restart."""
    mine, other = hold(url, "w-me"), hold(url, "w-other")
    terminate(url, other.conn)  # a restart ended its session
    taken: list[str] = []
    clock = Clock()
    watcher = Watcher(
        mine, lambda: {"w-other"}, lambda e: taken.append(e) or 1, poll_s=10.0, clock=clock
    )
    assert watcher.settle_s == 30.0 and Watcher(mine, set, lambda e: 0).settle_s == 5.0
    assert watcher.poll() == []
    clock.now += 10.0  # its keeper's next poll is not yet: still settling
    assert watcher.poll() == [] and taken == []
    assert other.ensure()  # taken back at that poll
    clock.now += 20.0
    assert watcher.poll() == [] and taken == []  # alive
    other.close()
    mine.close()


def test_one_executor_whose_takeover_fails_does_not_keep_the_others_from_theirs(
    url: str,
) -> None:
    """Review of 36879d4: a recovery that raised ended the round, and the watcher closed
    its connection, so the next round settled again: an executor sorted after a failing
    one was never taken over."""
    mine = hold(url, "w-me")
    taken: list[str] = []

    def recover(executor: str) -> int:
        if executor == "w-a":
            raise RuntimeError("its workflows cannot be read")
        taken.append(executor)
        return 1

    clock = Clock()
    watcher = Watcher(mine, lambda: {"w-a", "w-b"}, recover, clock=clock)
    assert watcher.poll() == []  # settling
    clock.now += watcher.settle_s
    assert [t.executor_id for t in watcher.poll()] == ["w-b"] and taken == ["w-b"]
    assert watcher._conn is not None and not watcher._conn.closed  # nothing to settle again
    assert not _holds(url, "w-a")  # its lock let go: the next round tries it again
    mine.close()


def test_a_restarting_worker_cannot_take_its_id_while_a_watcher_takes_over_its_runs(
    url: str,
) -> None:
    mine = hold(url, "w-me")
    during: list[str] = []

    def recover(executor: str) -> int:
        try:
            hold(url, executor, wait_s=0.0).close()
            during.append("started")
        except WorkerIdInUseError as exc:
            during.append(exc.message)
        return 1

    Watcher(mine, lambda: {"w-gone"}, recover, settle_s=0.0).poll()
    assert len(during) == 1 and "corral-watch:w-me" in during[0]  # the watcher held it
    hold(url, "w-gone").close()  # and let it go after
    mine.close()


def test_after_its_own_connection_came_back_a_watcher_waits_before_calling_anyone_dead(
    url: str,
) -> None:
    mine, other = hold(url, "w-me"), hold(url, "w-other")
    taken: list[str] = []
    clock = Clock()
    watcher = Watcher(
        mine, lambda: {"w-other"}, lambda e: taken.append(e) or 1, settle_s=5.0, clock=clock
    )
    assert watcher.poll() == []
    # the server restarted: every session ended, ours and the other worker's
    assert watcher._conn is not None
    terminate(url, watcher._conn)
    terminate(url, other.conn)
    terminate(url, mine.conn)
    with pytest.raises(psycopg.OperationalError):
        watcher.poll()  # the round fails on the dead session; the thread logs it, goes on
    watcher._conn = None
    clock.now += 1.0
    assert watcher.poll() == [] and taken == []  # reconnected: settling
    assert _holds(url, "w-me")  # and it took its own lock again
    clock.now += 5.0
    assert [t.executor_id for t in watcher.poll()] == ["w-other"]  # it never came back
    mine.close()


def test_a_worker_takes_its_lock_again_when_its_session_is_lost(url: str) -> None:
    mine = hold(url, "w-me")
    terminate(url, mine.conn)
    assert not _holds(url, "w-me")
    assert mine.ensure() and _holds(url, "w-me")
    with pytest.raises(WorkerIdInUseError):
        hold(url, "w-me", wait_s=0.0)
    mine.close()


def _holds(url: str, executor_id: str) -> bool:
    """Whether some session holds ``executor_id``'s lock (a probe that lets it go at once)."""
    try:
        probe: Liveness = hold(url, executor_id, wait_s=0.0)
    except WorkerIdInUseError:
        return True
    probe.close()
    return False


def test_a_worker_whose_server_is_unreachable_says_so_with_a_code() -> None:
    with pytest.raises(StoreUnavailableError) as refused:
        hold("postgresql://postgres@127.0.0.1:1/none?connect_timeout=2", "w-me")
    assert refused.value.code.value == "STORE_UNAVAILABLE"


def test_a_worker_takes_its_lock_back_while_its_watcher_is_held_up(url: str) -> None:
    """A takeover scan blocked on DBOS (it retries while the server is away) must not keep
    the worker from taking its own lock back: another watcher would call it dead."""

    mine = hold(url, "w-me")
    stopping, scanning, release = threading.Event(), threading.Event(), threading.Event()

    def blocked_scan() -> set[str]:
        scanning.set()
        release.wait(30)
        return set()

    watcher = Watcher(mine, blocked_scan, lambda e: 0, poll_s=0.05, settle_s=0.0)
    threads = [mine.keeper(stopping, 0.05), watcher.thread(stopping)]
    for thread in threads:
        thread.start()
    try:
        assert scanning.wait(10)  # the watcher is inside its scan, and stays there
        terminate(url, mine.conn)  # the server ended the worker's session
        deadline = time.monotonic() + 10
        while not _holds(url, "w-me") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _holds(url, "w-me")  # taken back by the keeper, the watcher still blocked
        assert not release.is_set()
    finally:
        release.set()
        stopping.set()
        for thread in threads:
            thread.join(5)
        mine.close()


def _reconnecting(
    url: str, mine: Liveness, monkeypatch: pytest.MonkeyPatch
) -> tuple[threading.Event, threading.Thread, list[bool]]:
    """``mine``'s session ended by the server, and its reconnect (``ensure``, in a thread)
    held at a connect that answers once the test sets ``answer``: (answer, thread, the
    list ``ensure``'s result goes into)."""
    from corral.workers import liveness

    connecting, answer = threading.Event(), threading.Event()
    real = liveness._connect

    def slow_connect(target: str, name: str) -> psycopg.Connection[tuple[object, ...]]:
        connecting.set()
        answer.wait(30)
        return real(target, name)

    monkeypatch.setattr(liveness, "_connect", slow_connect)
    terminate(url, mine.conn)
    outcome: list[bool] = []
    reconnect = threading.Thread(target=lambda: outcome.append(mine.ensure()))
    reconnect.start()
    assert connecting.wait(10)
    return answer, reconnect, outcome


def test_a_stop_does_not_wait_for_a_reconnect_to_a_server_that_does_not_answer(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review of 2d357d4: the keeper held the connection's lock across its reconnect, so
    ``keep`` and ``close`` (a worker's stop, its exit) waited for a connect to a lost
    server to give up (minutes). And a reconnect that ends after the close keeps no lock."""
    mine = hold(url, "w-me")
    answer, reconnect, outcome = _reconnecting(url, mine, monkeypatch)
    stopped = threading.Thread(target=lambda: (mine.keep(), mine.close()))
    stopped.start()
    stopped.join(5)
    assert not stopped.is_alive()  # keep and close did not wait for the connect
    answer.set()
    reconnect.join(30)
    assert outcome == [False]  # it let the lock go again: the worker had closed
    assert not _holds(url, "w-me")


def test_a_session_taken_again_during_a_stop_is_kept_however_quiet(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review of a8d6c0f: ``keep`` (a stop begins) ran on the lost connection while a
    reconnect was under way; the new session carried the idle timeout with nobody left to
    talk on it, so PostgreSQL ended it and the lock lapsed while drives still ran."""
    mine = hold(url, "w-me", idle_s=1.0)
    answer, reconnect, outcome = _reconnecting(url, mine, monkeypatch)
    mine.keep()  # the stop begins; the process lives on while its drives end
    answer.set()
    reconnect.join(30)
    assert outcome == [True]
    timeout = mine.conn.execute("SHOW idle_session_timeout").fetchone()
    assert timeout is not None and timeout[0] == "0"
    time.sleep(2.5)  # longer than the idle timeout the session was made with
    assert _holds(url, "w-me")
    mine.close()
