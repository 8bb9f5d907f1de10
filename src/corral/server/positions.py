"""Where a reconnecting SSE client stands in a run's log, and whether its copy still holds.

A live run's events are streamed as they are applied, before the store has them. If the
server dies before the next save, a resume (here or on another server) writes the run
again from its last saved event, under the same ``seq`` numbers: a client that saw the
lost events and reconnects with ``Last-Event-ID: 12`` would be sent the new 13 onwards,
and keep an old 9 to 12 that the run's log no longer holds.

So each message's ``id`` is ``<seq>-<mark>``: the mark is a checksum of the event's time
(to the microsecond), type and stage. A rewritten event is written by another drive,
later: its time differs from the lost one's, unless both drives' clocks read the same
microsecond (a clock that stands still, as a test's may). On reconnection the server
looks the event up. Another event at that ``seq`` means the client's copy has diverged:
it is told to drop it (``event: reset``) and is sent the log from the start. No event
there yet is diverged only when the log cannot grow elsewhere (this server drives the
run, it has paused or ended, or no live lease is held on it); otherwise another server
may be driving it and not have saved that event yet, and the client is believed.

An ``id`` of digits alone (a client of an earlier version, or one that builds its own) is
taken at its word, as before; anything else is no position at all: a reset.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from corral.events import Event
from corral.store.instant import to_micros

_LAST_EVENT_ID = re.compile(r"([0-9]{1,18})(?:-([0-9a-f]{8}))?")
"""What this server sends as an ``id`` (and its bare ``seq``). ``str.isdigit`` is not
enough: it accepts ``²``; and a seq of thousands of digits is beyond what ``int`` parses."""


def event_id(event: Event) -> str:
    """The SSE ``id`` of ``event``: ``<seq>-<mark>``."""
    return f"{event.seq}-{_mark(event)}"


def _mark(event: Event) -> str:
    text = f"{to_micros(event.ts)}:{event.type.value}:{event.stage}"
    return f"{zlib.crc32(text.encode()):08x}"


@dataclass(frozen=True, slots=True)
class Position:
    """The last event a client says it saw: its ``seq``, and its mark when it sent one."""

    seq: int
    mark: str | None

    @classmethod
    def parse(cls, last_event_id: str | None) -> Position | None:
        """The position in a ``Last-Event-ID`` header; ``None`` for anything else."""
        if last_event_id is None:
            return None
        found = _LAST_EVENT_ID.fullmatch(last_event_id)
        if found is None:
            return None
        return cls(int(found[1]), found[2])

    def holds(self, *logs: Iterable[Event]) -> bool | None:
        """Whether the run's log holds the event the client saw; ``None``: no event there.

        ``logs``: the stored events and the live ones. A bare ``seq`` is believed.
        """
        if self.mark is None:
            return True
        for log in logs:
            for event in log:
                if event.seq == self.seq:
                    return _mark(event) == self.mark
        return None


DIVERGED = (
    "the last event this client saw is not in the run's log (another event holds its seq, "
    "or the log ended before it): the drive that sent it stopped before saving it. Drop "
    "every event held after after_seq; the log follows from there"
)
"""The ``reason`` of an ``event: reset`` for a client whose copy diverged."""

NO_POSITION = (
    "the Last-Event-ID is not an id this server sends. Drop every event held after "
    "after_seq; the log follows from there"
)
"""The ``reason`` of an ``event: reset`` for a ``Last-Event-ID`` that names no event."""
