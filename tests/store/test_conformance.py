"""Every store backend passes the same tests: memory, SQLite (WAL) and PostgreSQL.

PostgreSQL runs when CORRAL_TEST_PG_URL is set (CI starts a server and sets it); with
CORRAL_REQUIRE_PG=1 (or CORRAL_REQUIRE_ALL=1) a missing server is a failure, not a skip.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from corral import Event, EventType, HandoffPacket
from corral.errors import EventConflictError, LeaseLostError, RunBusyError
from corral.store.base import Lease, RunRecord, SessionRecord, Store
from corral.store.sql import SqlStore
from tests.extras import postgres_url

T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def run_id() -> str:
    return f"run_{uuid.uuid4().hex[:12]}"


def tool_attempts(rid: str, attempts: list[dict[str, Any]]) -> list[Event]:
    """One ``tool_attempt`` event per dict of fields (``tool``, ``status``, ``duration_ms``...)."""
    return [
        Event(
            run_id=rid,
            seq=i + 1,
            ts=T0,
            type=EventType.TOOL_ATTEMPT,
            stage="execute",
            data={"step_id": f"s{i}", "attempt": 1} | fields,
        )
        for i, fields in enumerate(attempts)
    ]


def record(rid: str, status: str = "parsing", at: datetime = T0) -> RunRecord:
    return RunRecord(
        run_id=rid,
        trace_id="trace_1",
        agent="test",
        session_id=None,
        status=status,
        created_at=at,
        updated_at=at,
        summary={"status": status},
    )


def events(rid: str, start: int, count: int) -> list[Event]:
    return [
        Event(
            run_id=rid,
            seq=i,
            ts=T0 + timedelta(seconds=i),
            type=EventType.REPLY,
            stage="reply",
            data={"text": f"第{i}条", "template": f"t{i}"},
        )
        for i in range(start, start + count)
    ]


def test_save_and_load_round_trip(store: Store) -> None:
    rid = run_id()
    store.save(record(rid), events(rid, 1, 3))
    loaded = store.load_events(rid)
    assert [e.seq for e in loaded] == [1, 2, 3]
    assert loaded[0].data == {"text": "第1条", "template": "t1"}
    assert loaded[0].ts == T0 + timedelta(seconds=1)
    got = store.get_run(rid)
    assert got is not None and got.status == "parsing" and got.summary == {"status": "parsing"}


def test_appends_and_updates_without_losing_events(store: Store) -> None:
    rid = run_id()
    store.save(record(rid), events(rid, 1, 2))
    store.save(record(rid, "finished"), events(rid, 3, 2))
    store.save(record(rid, "finished"), events(rid, 3, 2))  # a repeated flush is harmless
    assert [e.seq for e in store.load_events(rid)] == [1, 2, 3, 4]
    got = store.get_run(rid)
    assert got is not None and got.status == "finished"


def test_unknown_run(store: Store) -> None:
    assert store.get_run("run_missing") is None
    assert store.load_events("run_missing") == []
    assert store.get_handoff("run_missing") is None


def test_handoff_packet(store: Store) -> None:
    rid = run_id()
    packet = HandoffPacket(
        run_id=rid,
        trace_id="t",
        reason="complaint",
        reason_code="X",
        user_messages=["气死我了"],
        created_at=T0,
    )
    store.save(record(rid, "handed_off"), events(rid, 1, 1), packet)
    assert store.get_handoff(rid) == packet


def test_list_runs_newest_first(store: Store) -> None:
    first, second = run_id(), run_id()
    store.save(record(first, at=T0 + timedelta(days=300)), [])
    store.save(record(second, at=T0 + timedelta(days=301)), [])
    ids = [r.run_id for r in store.list_runs(limit=500)]
    assert ids.index(second) < ids.index(first)


def test_sessions_expire(store: Store) -> None:
    sid = f"s_{uuid.uuid4().hex[:8]}"
    session = SessionRecord(
        session_id=sid,
        agent="test",
        turns=[{"message": "你好"}],
        entities={"order_id": "HD1"},
        open_run_id=None,
        updated_at=T0,
        expires_at=T0 + timedelta(days=7),
    )
    store.save_session(session)
    loaded = store.get_session(sid, T0 + timedelta(days=1))
    assert loaded is not None and loaded.entities == {"order_id": "HD1"}
    assert loaded.turns == [{"message": "你好"}]
    assert store.get_session(sid, T0 + timedelta(days=8)) is None
    store.save_session(SessionRecord(sid, "test", [], {}, "run_x", T0, T0 + timedelta(days=9)))
    replaced = store.get_session(sid, T0 + timedelta(days=8))
    assert replaced is not None and replaced.open_run_id == "run_x"


def test_sqlite_uses_wal(tmp_path: Path) -> None:
    store = SqlStore.open(tmp_path / "x.db")
    with store.engine.connect() as conn:
        mode = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
    assert mode == "wal"


def test_purge_removes_expired_sessions_and_old_ended_runs(store: Store) -> None:
    old_done, old_paused, recent_done = run_id(), run_id(), run_id()
    long_ago = T0 - timedelta(days=40)
    store.save(record(old_done, "finished", at=long_ago), events(old_done, 1, 2))
    store.save(record(old_paused, "awaiting_confirm", at=long_ago), events(old_paused, 1, 1))
    store.save(record(recent_done, "finished", at=T0), events(recent_done, 1, 1))
    sid = f"s_{uuid.uuid4().hex[:8]}"
    store.save_session(
        SessionRecord(sid, "test", [], {}, None, long_ago, long_ago + timedelta(days=7))
    )
    sessions_deleted, runs_deleted = store.purge(T0, timedelta(days=30))
    assert sessions_deleted >= 1 and old_done in runs_deleted
    assert old_paused not in runs_deleted and recent_done not in runs_deleted
    assert store.get_run(old_done) is None and store.load_events(old_done) == []
    assert store.get_run(old_paused) is not None
    assert store.get_run(recent_done) is not None
    assert store.get_session(sid, long_ago) is None


def test_a_taken_seq_is_a_conflict_never_dropped(store: Store) -> None:
    rid = run_id()
    store.save(record(rid), events(rid, 1, 2))
    other = Event(run_id=rid, seq=2, ts=T0, type=EventType.REPLY, stage="reply", data={"text": "B"})
    with pytest.raises(EventConflictError):
        store.save(record(rid, "finished"), [other, *events(rid, 3, 1)])
    stored = store.load_events(rid)
    assert [e.seq for e in stored] == [1, 2]
    assert stored[1].data["text"] == "第2条"
    got = store.get_run(rid)
    assert got is not None and got.status == "parsing"  # the losing save wrote nothing


def test_one_lease_holder_at_a_time(store: Store) -> None:
    rid = run_id()
    mine, theirs = Lease(rid, "me"), Lease(rid, "them")
    store.acquire_lease(mine)
    store.acquire_lease(mine)  # re-entrant for the same owner
    with pytest.raises(RunBusyError):
        store.acquire_lease(theirs)
    holder = store.lease_holder(rid)
    assert holder is not None and holder.owner == "me"
    store.release_lease(theirs)  # not theirs to release
    assert store.lease_holder(rid) is not None
    store.release_lease(mine)
    assert store.lease_holder(rid) is None
    store.acquire_lease(theirs)


def test_an_expired_lease_is_taken_over_and_fences_its_old_owner(store: Store) -> None:
    rid = run_id()
    dead = Lease(rid, "dead")  # a long lease: its save lands however slow the machine
    store.acquire_lease(dead)
    store.save(record(rid), events(rid, 1, 1), lease=dead)
    store.renew_lease(replace(dead, ttl_s=0.01))  # its last heartbeat; then it dies
    time.sleep(0.05)  # a lower bound: the 0.01 s lease has expired however late this ends
    assert store.lease_holder(rid) is None
    alive = Lease(rid, "alive")
    store.acquire_lease(alive)
    with pytest.raises(LeaseLostError):
        store.save(record(rid, "finished"), events(rid, 2, 1), lease=dead)
    with pytest.raises(LeaseLostError):
        store.renew_lease(dead)
    assert [e.seq for e in store.load_events(rid)] == [1]
    store.save(record(rid, "finished"), events(rid, 2, 1), lease=alive)
    assert [e.seq for e in store.load_events(rid)] == [1, 2]


def test_a_save_without_the_lease_is_refused(store: Store) -> None:
    rid = run_id()
    with pytest.raises(LeaseLostError):
        store.save(record(rid), events(rid, 1, 1), lease=Lease(rid, "nobody"))
    assert store.load_events(rid) == [] and store.get_run(rid) is None


def test_a_new_runs_first_save_takes_the_lease_and_the_last_releases_it(store: Store) -> None:
    rid = run_id()
    creating = Lease(rid, "creator", new_run=True)
    store.save(record(rid), events(rid, 1, 1), lease=creating)
    holder = store.lease_holder(rid)
    assert holder is not None and holder.owner == "creator"
    with pytest.raises(RunBusyError):
        store.acquire_lease(Lease(rid, "other"))
    store.save(record(rid, "finished"), events(rid, 2, 1), lease=creating, release=True)
    assert store.lease_holder(rid) is None
    store.acquire_lease(Lease(rid, "other"))
    with pytest.raises(LeaseLostError):  # "new run" never overrides a live owner
        store.save(record(rid), events(rid, 3, 1), lease=creating)


def test_a_renewal_after_a_new_runs_only_save_released_it_does_not_take_it_again(
    store: Store,
) -> None:
    """A heartbeat that renews just after a run's one and final save must not revive it.

    A run that pauses or ends before any other save releases its lease in that save,
    while its lease still says "new run"; a renewal in flight then found no lease row and
    created one, so the next ``resume`` got ``RUN_BUSY`` for a whole lease time.
    """
    rid = run_id()
    creating = Lease(rid, "creator", new_run=True)
    store.renew_lease(creating)  # before the first save: a new run's lease may be made
    store.save(record(rid, "awaiting_confirm"), events(rid, 1, 1), lease=creating, release=True)
    with pytest.raises(LeaseLostError):
        store.renew_lease(creating)
    assert store.lease_holder(rid) is None
    store.acquire_lease(Lease(rid, "resumer"))  # the approval goes through at once


def test_a_new_runs_lease_cannot_save_again_once_its_save_released_it(store: Store) -> None:
    """After its one save released it, a "new run" lease writes nothing more.

    The SQL store no longer looks the run up before a new run's first save (its insert
    of the run's row fails when the run exists), so the refusal comes from the save's
    second try: a lease failure, checked before the events, as in every other save.
    """
    rid = run_id()
    creating = Lease(rid, "creator", new_run=True)
    store.save(record(rid, "awaiting_confirm"), events(rid, 1, 1), lease=creating, release=True)
    with pytest.raises(LeaseLostError):  # new events
        store.save(record(rid, "finished"), events(rid, 2, 1), lease=creating)
    changed = [replace(events(rid, 1, 1)[0], data={"text": "other", "template": "t1"})]
    with pytest.raises(LeaseLostError):  # a different event at a taken seq: the lease first
        store.save(record(rid, "finished"), changed, lease=creating)
    assert [e.data["text"] for e in store.load_events(rid)] == ["第1条"]
    found = store.get_run(rid)
    assert found is not None and found.status == "awaiting_confirm"
    assert store.lease_holder(rid) is None


def test_on_postgresql_a_renewal_during_a_new_runs_only_save_does_not_revive_its_lease(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The heartbeat's renewal may run while the run's one save is still uncommitted.

    PostgreSQL's read committed hides the save's run row from it, and no row lock stands
    between them (neither holds a lease row), so the check "no run yet" passed and the
    renewal made a lease that outlived the save that released it: ``RUN_BUSY`` on the
    next resume for a whole lease time. A renewal before the first save makes nothing.
    """
    sql = SqlStore.open(postgres_url())
    rid = run_id()
    creating = Lease(rid, "creator", new_run=True)
    in_save, renewed = threading.Event(), threading.Event()
    project = SqlStore._project

    def held_open(self: SqlStore, *args: Any) -> None:  # the save's last statement
        project(self, *args)
        in_save.set()
        renewed.wait(30)

    monkeypatch.setattr(SqlStore, "_project", held_open)
    saving = threading.Thread(
        target=sql.save,
        args=(record(rid, "awaiting_confirm"), events(rid, 1, 1)),
        kwargs={"lease": creating, "release": True},
    )
    saving.start()
    try:
        try:
            assert in_save.wait(30)
            sql.renew_lease(creating)  # the heartbeat, while the save is open
        finally:
            renewed.set()
            saving.join(30)
        assert [e.seq for e in sql.load_events(rid)] == [1]
        assert sql.lease_holder(rid) is None
        sql.acquire_lease(Lease(rid, "resumer"))  # the approval goes through at once
    finally:
        sql.engine.dispose()


def test_tool_latency_is_the_p95_of_each_tools_latest_successful_calls(store: Store) -> None:
    from corral.store.figures import LatencySource, ToolLatency

    def attempts(rid: str, millis: list[float], status: str = "success") -> list[Event]:
        fields = {"tool": "fast", "status": status}
        return tool_attempts(rid, [fields | {"duration_ms": ms} for ms in millis])

    assert isinstance(store, LatencySource)
    # agents of their own: a PostgreSQL database outlives the test (a rerun finds these runs)
    mine, theirs_agent = f"test-{run_id()}", f"other-{run_id()}"

    def mine_record(rid: str, status: str, at: datetime, agent: str = mine) -> RunRecord:
        return replace(record(rid, status, at), agent=agent)

    old, new, failed, other = run_id(), run_id(), run_id(), run_id()
    store.save(mine_record(old, "finished", T0), attempts(old, [900.0] * 5))
    store.save(
        mine_record(new, "finished", T0 + timedelta(hours=1)),
        attempts(new, [10.0 * k for k in range(1, 11)]),
    )
    store.save(
        mine_record(failed, "failed", T0 + timedelta(hours=2)),
        attempts(failed, [5000.0] * 3, "error"),
    )
    theirs = mine_record(other, "finished", T0 + timedelta(hours=3), theirs_agent)
    store.save(theirs, attempts(other, [7000.0] * 3))
    # the latest 10 are the newest run's (failures and the other agent's calls do not count)
    assert store.tool_latency(mine, ["fast", "idle"], 10) == {"fast": ToolLatency(100.0, 10)}
    assert store.tool_latency(mine, ["fast"], 15) == {"fast": ToolLatency(900.0, 15)}
    assert store.tool_latency(theirs_agent, ["fast"], 10) == {"fast": ToolLatency(7000.0, 3)}
    assert store.tool_latency(mine, [], 10) == {}


def test_tool_latency_reads_only_each_tools_latest_window(store: Store) -> None:
    """Newest run first, then newest attempt; each tool cut at its own ``last``."""
    from corral.store.figures import ToolLatency

    agent = f"window_{uuid.uuid4().hex[:8]}"  # a shared PostgreSQL keeps other tests' runs

    def attempts(rid: str, calls: list[tuple[str, float]]) -> list[Event]:
        fields = [{"tool": tool, "status": "success", "duration_ms": ms} for tool, ms in calls]
        return tool_attempts(rid, fields)

    old, new = run_id(), run_id()
    early = [("fast", 500.0)] * 5 + [("slow", 50.0)] * 4 + [("fast", 10.0)] * 3
    store.save(replace(record(old, "finished", T0), agent=agent), attempts(old, early))
    # the older run's last three fast calls are its latest, whatever came before them
    assert store.tool_latency(agent, ["fast", "slow"], 3) == {
        "fast": ToolLatency(10.0, 3),
        "slow": ToolLatency(50.0, 3),
    }
    later = T0 + timedelta(minutes=1)
    store.save(
        replace(record(new, "finished", later), agent=agent),
        attempts(new, [("fast", 30.0), ("fast", 20.0)]),
    )
    # the newer run's two, then the older run's newest: 10, 20, 30 (not a 500)
    assert store.tool_latency(agent, ["fast"], 3) == {"fast": ToolLatency(30.0, 3)}
    assert store.tool_latency(agent, ["fast"], 6) == {"fast": ToolLatency(500.0, 6)}
    assert store.tool_latency(agent, ["fast", "slow"], 100) == {
        "fast": ToolLatency(500.0, 10),
        "slow": ToolLatency(50.0, 4),
    }


def test_tool_latency_counts_calls_that_ran_out_of_their_whole_timeout(store: Store) -> None:
    """Successes and whole timeouts, newest first, in one window per tool; nothing else.

    A timeout that took (about) the tool's timeout was cut off at its deadline: it took at
    least that long. A tool's own short timeout, or another failure, says nothing of how
    long the tool takes.
    """
    from corral.store.figures import ToolLatency

    agent, other = f"timeouts_{uuid.uuid4().hex[:8]}", f"others_{uuid.uuid4().hex[:8]}"

    def attempts(rid: str, calls: list[tuple[str | None, float]]) -> list[Event]:
        """``(error code, ms)`` per attempt of ``fast``: no code is a success."""
        return tool_attempts(
            rid,
            [
                {"tool": "fast", "duration_ms": ms}
                | ({"status": "error", "error_code": code} if code else {"status": "success"})
                for code, ms in calls
            ],
        )

    whole, own = ("TOOL_TIMEOUT", 1000.0), ("TOOL_TIMEOUT", 30.0)
    failed, answered = ("TOOL_TRANSIENT", 1000.0), (None, 20.0)
    old, new, theirs = run_id(), run_id(), run_id()
    store.save(
        replace(record(old, "finished", T0), agent=agent),
        attempts(old, [whole, whole, answered, own, failed]),
    )
    store.save(
        replace(record(new, "finished", T0 + timedelta(minutes=1)), agent=agent),
        attempts(new, [answered, whole, own, answered]),
    )
    store.save(  # another agent's timeouts are its own
        replace(record(theirs, "finished", T0 + timedelta(minutes=2)), agent=other),
        attempts(theirs, [whole] * 5),
    )
    timeout = {"fast": 1000.0}
    # newest first: the newer run's 20, 1000, 20, then the older run's 20, 1000, 1000
    assert store.tool_latency(agent, ["fast"], 100, timeout) == {"fast": ToolLatency(1000.0, 6)}
    assert store.tool_latency(agent, ["fast"], 1, timeout) == {"fast": ToolLatency(20.0, 1)}
    assert store.tool_latency(agent, ["fast"], 3, timeout) == {"fast": ToolLatency(1000.0, 3)}
    assert store.tool_latency(agent, ["fast"], 4, timeout) == {"fast": ToolLatency(1000.0, 4)}
    # a call counts when it took at least 95 % of the timeout it is read against
    assert store.tool_latency(agent, ["fast"], 100, {"fast": 1050.0}) == {
        "fast": ToolLatency(1000.0, 6)
    }
    assert store.tool_latency(agent, ["fast"], 100, {"fast": 1100.0}) == {
        "fast": ToolLatency(20.0, 3)
    }
    # a tool without a timeout given counts its successes only, as before
    assert store.tool_latency(agent, ["fast"], 100) == {"fast": ToolLatency(20.0, 3)}
    assert store.tool_latency(agent, ["fast"], 100, {}) == {"fast": ToolLatency(20.0, 3)}
    assert store.tool_latency(other, ["fast"], 3, timeout) == {"fast": ToolLatency(1000.0, 3)}


def test_tool_latency_windows_agree_across_stores_on_ties_and_many_short_timeouts(
    store: Store,
) -> None:
    """Runs created at the same time: newest id first. A whole timeout counts only among
    the tool's latest ``last`` timeouts (the walk is bounded), and only as an error."""
    from corral.store.figures import ToolLatency

    agent = f"ties_{uuid.uuid4().hex[:8]}"
    first, second = sorted([run_id(), run_id()])
    success = {"tool": "fast", "status": "success"}
    store.save(
        replace(record(first, "finished", T0), agent=agent),
        tool_attempts(first, [success | {"duration_ms": 10.0}]),
    )
    store.save(
        replace(record(second, "finished", T0), agent=agent),
        tool_attempts(second, [success | {"duration_ms": 500.0}]),
    )
    # the same created_at: the greater run id is the newer, whatever the saving order
    assert store.tool_latency(agent, ["fast"], 1) == {"fast": ToolLatency(500.0, 1)}

    later = run_id()
    timeout = {"tool": "fast", "status": "error", "error_code": "TOOL_TIMEOUT"}
    store.save(
        replace(record(later, "finished", T0 + timedelta(minutes=1)), agent=agent),
        tool_attempts(
            later,
            [timeout | {"duration_ms": 1000.0}]  # a whole one, then three of its own
            + [timeout | {"duration_ms": 30.0}] * 3
            + [timeout | {"status": "no_result", "duration_ms": 1000.0}],  # not an error
        ),
    )
    whole = {"fast": 1000.0}
    # among its latest 4 timeouts: counted; among its latest 3: past the walk
    assert store.tool_latency(agent, ["fast"], 4, whole) == {"fast": ToolLatency(1000.0, 3)}
    assert store.tool_latency(agent, ["fast"], 3, whole) == {"fast": ToolLatency(500.0, 2)}
