"""A bounded MemoryStore keeps the latest ended runs only: a long process need not hold
every log. The default keeps every run."""

from __future__ import annotations

import pytest

from corral.store.memory import DEFAULT_MAX_ENDED_RUNS, MemoryStore
from tests.store.test_conformance import events, record, run_id


def test_only_the_latest_ended_runs_are_kept() -> None:
    store = MemoryStore(max_ended_runs=2)
    paused, handed_off = run_id(), run_id()
    store.save(record(paused, "awaiting_confirm"), events(paused, 1, 2))
    store.save(record(handed_off, "handed_off"), events(handed_off, 1, 2))
    ended = [run_id() for _ in range(4)]
    for rid in ended:
        store.save(record(rid, "parsing"), events(rid, 1, 2))
        store.save(record(rid, "finished"), events(rid, 3, 1))
    for rid in ended[:2]:  # dropped as purge drops a run: row, events, lease
        assert store.get_run(rid) is None and store.load_events(rid) == []
    for rid in ended[2:]:
        assert [e.seq for e in store.load_events(rid)] == [1, 2, 3]
    assert [e.seq for e in store.load_events(paused)] == [1, 2]  # never dropped
    assert [e.seq for e in store.load_events(handed_off)] == [1, 2]  # a person acts on it
    assert {r.run_id for r in store.list_runs()} == {paused, handed_off, *ended[2:]}


def test_the_default_keeps_every_run_and_a_bound_is_positive() -> None:
    assert MemoryStore().max_ended_runs is DEFAULT_MAX_ENDED_RUNS is None
    for bad in (0, -1):
        with pytest.raises(ValueError, match="at least 1"):
            MemoryStore(max_ended_runs=bad)
    store = MemoryStore()
    ended = [run_id() for _ in range(3)]
    for rid in ended:
        store.save(record(rid, "failed"), events(rid, 1, 1))
    assert all(store.get_run(rid) is not None for rid in ended)


def test_a_batch_before_what_is_stored_still_loads_in_order() -> None:
    store = MemoryStore()
    rid = run_id()
    store.save(record(rid), events(rid, 3, 2))
    store.save(record(rid), events(rid, 1, 2))
    assert [e.seq for e in store.load_events(rid)] == [1, 2, 3, 4]
