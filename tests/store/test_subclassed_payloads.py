"""A subclass of a payload record is stored as the record itself is.

``RowEncoder`` looks up what it leaves out of a row by the payload's type (one dict lookup
an event). A subclass of a record (a user's own, or a test double) must not fall through
that lookup and be stored with what the record's row leaves out (a template plan's steps,
a sole attempt's repeated fields): the rows must be the same text.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from corral.events import Event, Opaque
from corral.store.codec import RowEncoder
from tests.store.test_implied_attempt_facts import scenario_events


def subclassed(event: Event) -> Event:
    """The same event, its payload an instance of a subclass of its record."""
    record = type(event.payload)
    if record is Opaque:
        return event
    subclass: Any = type(f"My{record.__name__}", (record,), {"__slots__": ()})
    values = {f.name: getattr(event.payload, f.name) for f in dataclasses.fields(record)}
    payload = subclass(**values)
    return Event(event.run_id, event.seq, event.ts, event.type, event.stage, payload=payload)


def rows(events: list[Event]) -> tuple[list[tuple[str, str, str]], dict[str, str]]:
    plans: dict[str, str] = {}
    encoder = RowEncoder(plans)
    return [encoder.columns(e) for e in events], plans


def test_a_subclassed_payload_is_stored_as_its_record_is() -> None:
    events = scenario_events()
    kinds = {type(e.payload).__name__ for e in events}
    assert {"PlanCreated", "ToolAttempt", "StepFinished", "StepStarted"} <= kinds
    mine = [subclassed(e) for e in events]
    assert all(type(e.payload).__name__.startswith("My") for e in mine)
    assert rows(mine) == rows(events)
    assert rows(events)[1]  # a template's steps went to the plan bodies, by hash
