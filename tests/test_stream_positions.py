"""The SSE ``id`` of an event and the check of a reconnecting client's ``Last-Event-ID``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from corral.events import Event, EventType
from corral.server.positions import Position, event_id

T0 = datetime(2026, 12, 2, 9, 30, tzinfo=UTC)


def started(seq: int, ts: datetime = T0, step: str = "s1") -> Event:
    data = {"step_id": step, "tool": "lookup", "args": {"n": seq}}
    return Event("run_1", seq, ts, EventType.STEP_STARTED, "execute", data)


def test_an_events_own_id_is_held_by_a_log_that_holds_it() -> None:
    log = [started(1), started(2, T0 + timedelta(seconds=1))]
    seen = Position.parse(event_id(log[1]))
    assert seen is not None and seen.seq == 2 and seen.mark is not None
    assert seen.holds(log)
    assert seen.holds([], log)  # in any of the logs (stored, live)


def test_an_event_written_again_at_its_seq_is_told_apart() -> None:
    lost = started(2, T0 + timedelta(seconds=1))
    again = started(2, T0 + timedelta(seconds=5))  # the resumed drive's event 2
    seen = Position.parse(event_id(lost))
    assert seen is not None
    assert seen.holds([started(1), again]) is False
    assert seen.holds([started(1)]) is None  # not written yet at all (or not saved yet)
    # one microsecond apart is another event
    assert seen.holds([started(2, T0 + timedelta(seconds=1, microseconds=1))]) is False


def test_a_naive_time_reads_as_utc() -> None:
    aware = started(3, T0)
    naive = started(3, T0.replace(tzinfo=None))
    assert event_id(aware) == event_id(naive)


def test_a_bare_seq_is_believed() -> None:
    seen = Position.parse("7")
    assert seen == Position(7, None)
    assert seen.holds([]) and seen.holds([started(1)])


@given(st.text(max_size=40))
def test_any_header_parses_to_a_position_or_none(header: str) -> None:
    seen = Position.parse(header)
    if seen is not None:
        assert 0 <= seen.seq < 10**18
        assert seen.mark is None or len(seen.mark) == 8
