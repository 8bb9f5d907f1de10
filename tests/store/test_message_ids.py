"""Every store that keeps message ids (``MessageLog``) keeps each one once per session.

The guarantee behind ``Runtime.start(message_id=...)``: two tries of one request that
both found the id free (they raced) cannot both be stored. The second's save raises
``MESSAGE_REPEATED`` and writes nothing, neither its events nor its run row.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from corral import Event, EventType
from corral.errors import ErrorCode, MessageRepeatedError
from corral.store.base import MessageLog, RunRecord, Store

T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def record(session_id: str | None, status: str = "finished", agent: str = "desk") -> RunRecord:
    """A run of ``agent`` (PostgreSQL's database is shared by the tests: an agent each)."""
    return RunRecord(
        run_id=f"run_{uuid.uuid4().hex[:12]}",
        trace_id="trace_1",
        agent=agent,
        session_id=session_id,
        status=status,
        created_at=T0,
        updated_at=T0,
        summary={"status": status},
    )


def said(run: RunRecord, seq: int, text: str, message_id: str | None) -> Event:
    data = {"text": text} | ({"message_id": message_id} if message_id else {})
    return Event(run.run_id, seq, T0, EventType.USER_MESSAGE, "intent", data)


def answered(run: RunRecord, seq: int, message_id: str) -> Event:
    data = {"text": "HD20240501", "message_id": message_id}
    return Event(run.run_id, seq, T0, EventType.USER_ANSWERED, "intent", data)


def test_a_message_id_is_kept_once_per_session(store: Store) -> None:
    assert isinstance(store, MessageLog)
    desk = f"desk_{uuid.uuid4().hex[:8]}"
    first = record("s1", agent=desk)
    store.save(first, [said(first, 1, "退款 599", "m1")])
    assert store.run_of_message(desk, "s1", "m1") == first.run_id
    assert store.run_of_message(desk, "s2", "m1") is None  # another session's id
    assert store.run_of_message("other", "s1", "m1") is None  # another agent's
    assert store.run_of_message(desk, None, "m1") is None  # the sessionless runs'
    store.save(first, [said(first, 1, "退款 599", "m1")])  # a retried save: harmless

    racer = record("s1", agent=desk)
    with pytest.raises(MessageRepeatedError) as repeated:
        store.save(racer, [said(racer, 1, "退款 599", "m1"), said(racer, 2, "x", None)])
    assert repeated.value.code is ErrorCode.MESSAGE_REPEATED
    assert repeated.value.run_id == first.run_id
    assert store.get_run(racer.run_id) is None and store.load_events(racer.run_id) == []

    elsewhere = record("s2", agent=desk)  # the same id in another session: another message
    store.save(elsewhere, [said(elsewhere, 1, "退款 599", "m1")])
    assert store.run_of_message(desk, "s2", "m1") == elsewhere.run_id


def test_an_answer_keeps_its_id_and_a_later_turn_may_not_reuse_it(store: Store) -> None:
    assert isinstance(store, MessageLog)
    desk = f"desk_{uuid.uuid4().hex[:8]}"
    run = record(None, status="awaiting_user", agent=desk)
    store.save(run, [said(run, 1, "换货", "m1")])
    store.save(replace(run, status="finished"), [answered(run, 2, "m2")])
    assert store.run_of_message(desk, None, "m2") == run.run_id
    with pytest.raises(MessageRepeatedError):  # the same run, another event: a reuse
        store.save(run, [answered(run, 3, "m1")])
    assert [e.seq for e in store.load_events(run.run_id)] == [1, 2]


def test_a_purged_run_takes_its_message_ids_with_it(store: Store) -> None:
    assert isinstance(store, MessageLog)
    desk = f"desk_{uuid.uuid4().hex[:8]}"
    run = record("s1", agent=desk)
    store.save(run, [said(run, 1, "查订单", "m1")])
    store.purge(T0 + timedelta(days=30), timedelta(days=7))
    assert store.get_run(run.run_id) is None
    assert store.run_of_message(desk, "s1", "m1") is None


def test_a_bounded_memory_store_drops_an_evicted_runs_ids_with_it() -> None:
    from corral import MemoryStore

    store = MemoryStore(max_ended_runs=1)
    old, new = record("s1"), record("s1")
    store.save(old, [said(old, 1, "查订单", "m1")])
    store.save(new, [said(new, 1, "查订单", "m2")])  # the older ended run is dropped
    assert store.get_run(old.run_id) is None
    assert store.run_of_message("desk", "s1", "m1") is None
    assert store.run_of_message("desk", "s1", "m2") == new.run_id
    assert list(store.messages_of) == [new.run_id]
