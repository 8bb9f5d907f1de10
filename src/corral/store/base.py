"""What the runtime needs from storage: runs, their events, handoffs and sessions.

Every backend (SQLite, PostgreSQL, memory) passes the same conformance tests in
``tests/store/test_conformance.py``. Methods are synchronous; the runtime calls them from
a worker thread so the event loop never blocks on I/O, except a save that a store makes
at once, without waiting, on the caller's thread (``SavesInPlace``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

from corral.contracts import HandoffPacket
from corral.events import Event


@dataclass(frozen=True)
class RunRecord:
    """A run's row: identity, status and the last summary, for listing without a fold."""

    run_id: str
    trace_id: str
    agent: str
    session_id: str | None
    status: str
    created_at: datetime
    updated_at: datetime
    summary: dict[str, Any] = field(default_factory=dict)


TERMINAL_STATUSES = ("finished", "failed", "handed_off")

DEFAULT_LEASE_S = 30.0
"""How long a run's owner may go silent before another process may take the run over."""


@dataclass(frozen=True)
class Lease:
    """The right to drive one run: held by one owner until it is released or expires.

    The owner renews it while it works (a heartbeat) and every save that carries it is
    fenced: it commits only while the lease is still held, so a process that lost its
    lease cannot append events or start a tool.
    """

    run_id: str
    owner: str
    ttl_s: float = DEFAULT_LEASE_S
    new_run: bool = False
    """The owner is creating the run: nobody else knows its id yet, so its first fenced
    save takes the lease instead of a separate round trip to acquire it."""


@dataclass(frozen=True)
class LeaseHolder:
    """Who holds a run's lease now, for a ``RUN_BUSY`` message."""

    owner: str
    expires_in_s: float


@dataclass(frozen=True)
class SessionRecord:
    """A conversation across runs: short turn summaries and what is still open."""

    session_id: str
    agent: str
    turns: list[dict[str, Any]]
    entities: dict[str, Any]
    open_run_id: str | None
    updated_at: datetime
    expires_at: datetime
    earlier_open_runs: list[str] = field(default_factory=list)
    """Runs that waited for the user when a newer one began to (a request typed at a
    question that asked a question of its own), oldest first: when the open run ends, the
    latest of them is the open run again."""


class Store(Protocol):
    """Durable storage for runs. ``save`` is atomic: the row and its events together."""

    blocking: bool
    """True when calls do I/O: the runtime then calls them from a worker thread."""

    def save(
        self,
        run: RunRecord,
        events: Sequence[Event],
        handoff: HandoffPacket | None = None,
        *,
        lease: Lease | None = None,
        release: bool = False,
    ) -> None:
        """Upsert the run row, append events and store a handoff, in one transaction.

        An event whose ``seq`` is already stored with other content raises
        ``EventConflictError`` and nothing is written (an identical repeat is harmless).
        With ``lease``, the save is fenced: it raises ``LeaseLostError`` and writes
        nothing unless that lease is still held, and it extends the lease (or, with
        ``release``, gives it up in the same transaction: the drive is over).
        """
        ...

    def acquire_lease(self, lease: Lease, *, replacing: str | None = None) -> str | None:
        """Take (or renew) the run's lease; ``RunBusyError`` while another owner holds it.

        An expired lease is taken over, and its owner is returned: it went silent, but it
        is only presumed dead (it may be frozen and wake up). ``replacing`` takes the lease
        from that owner even before expiry (the caller proved the owner dead), and only if
        that owner still holds it. ``None``: the lease was free, ours, or ``replacing``.
        """
        ...

    def renew_lease(self, lease: Lease) -> None:
        """Extend a held lease; ``LeaseLostError`` when it expired and was taken over."""
        ...

    def release_lease(self, lease: Lease) -> None:
        """Give the lease up if ``lease.owner`` still holds it (else do nothing)."""
        ...

    def lease_holder(self, run_id: str) -> LeaseHolder | None:
        """The live holder of a run's lease, or ``None`` when it is free or expired."""
        ...

    def get_run(self, run_id: str) -> RunRecord | None:
        """The run row, or ``None``."""
        ...

    def list_runs(self, limit: int = 50) -> list[RunRecord]:
        """The most recent runs first."""
        ...

    def load_events(self, run_id: str) -> list[Event]:
        """Every event of a run, in ``seq`` order."""
        ...

    def get_handoff(self, run_id: str) -> HandoffPacket | None:
        """The run's handoff packet, if it was handed off."""
        ...

    def get_session(self, session_id: str, now: datetime) -> SessionRecord | None:
        """The session, unless it is unknown or expired at ``now``."""
        ...

    def save_session(self, session: SessionRecord) -> None:
        """Create or replace a session."""
        ...

    def purge(self, now: datetime, task_ttl: timedelta) -> tuple[int, list[str]]:
        """Delete expired sessions, and ended runs (with their events) older than the TTL.

        Returns (sessions deleted, ids of the runs deleted), so that files derived from
        those runs (their JSONL logs) can go too. Paused runs are kept: a person may still
        answer them.
        """
        ...


@runtime_checkable
class MessageLog(Protocol):
    """A store that keeps a session's message ids once (``Runtime.start(message_id=...)``).

    Its ``save`` keeps each id ``events.message_ids`` finds in the events it stores, by
    the run's agent and session (no session: the agent's runs without one), in the same
    transaction. An id another event holds already makes the save raise
    ``MessageRepeatedError`` and write nothing: a retried request that raced its
    original (both past ``run_of_message``) stops at its first save, which comes before
    any write tool. Ids are dropped with their run (``purge``).
    """

    def run_of_message(self, agent: str, session_id: str | None, message_id: str) -> str | None:
        """The run whose events hold this message id, or ``None``."""
        ...


SessionMerge = Callable[[SessionRecord | None], SessionRecord]
"""What a run makes of its session: the stored one (``None``: unknown or expired) -> the new."""


@runtime_checkable
class SessionUpdater(Protocol):
    """A store that updates a session atomically: read, merge and write in one transaction.

    Two processes ending runs of one session (two servers, two workers) each read the
    session, add their turn and write it back; without this, the later write drops the
    earlier turn. A store without it is read and written in two steps, which one process
    serializes by itself (``Runtime`` holds a lock) but two cannot.
    """

    def update_session(self, session_id: str, now: datetime, merge: SessionMerge) -> None:
        """Replace the session with ``merge`` of it, no other writer of it in between."""
        ...


@dataclass
class SessionUpdate:
    """A session's read, merge and write, to be made in a run's save (``SavesSessions``)."""

    session_id: str
    now: datetime
    merge: SessionMerge
    written: SessionRecord | None = None
    """What the save that committed wrote of the session; ``None``: nothing (the store
    sets it, after that commit, and only then)."""


class SavesSessions(Protocol):
    """A store whose ``save`` can update a session in the same transaction.

    A run's last save and its session's update were two write transactions, the second
    in a store thread of its own: one commit and one hop more per chat turn, and a crash
    between them left the session without the turn. With ``session`` the store reads,
    merges and writes the session as ``SessionUpdater.update_session`` does, after the
    run's rows, and sets ``session.written`` once that commits. Whatever keeps it from
    the session (a merge that raises) writes nothing of the session, and the save goes
    on: the caller, finding nothing written, updates the session on its own (where the
    error is seen). The runtime asks only a store whose ``saves_sessions`` is true and
    whose class's ``save`` names ``session``.
    """

    saves_sessions: bool

    def save(
        self,
        run: RunRecord,
        events: Sequence[Event],
        handoff: HandoffPacket | None = None,
        *,
        lease: Lease | None = None,
        release: bool = False,
        session: SessionUpdate | None = None,
    ) -> None:
        """``Store.save``; with ``session``, that session's update in its transaction."""
        ...


class SaveWouldWait(Exception):
    """A save asked not to wait (``SavesInPlace``) would have: nothing was written.

    Not an error anyone sees: the runtime tries again in a moment (``locked``), or makes
    the same save in a store thread.
    """

    def __init__(self, reason: str, *, locked: bool = False) -> None:
        super().__init__(reason)
        self.locked = locked
        """A lock was taken (a write, the kept connection): it is likely free again soon."""


class CallsInPlace(Protocol):
    """A blocking store that can make a run's reads and lease calls on the caller's thread.

    When nothing is in their way (``SqlStore.in_place``): the reads and lease calls of a
    run's start or resume. Inside ``in_place()`` those calls are made at once, or raise
    ``SaveWouldWait`` having done nothing; the runtime then makes them in a store thread.
    The runtime asks only a store whose class declares ``calls_in_place`` and ``in_place``.
    """

    calls_in_place: bool
    """False: every call goes to a store thread."""

    def in_place(self) -> AbstractContextManager[None]:
        """A block in which this thread's reads and lease calls never wait."""
        ...


class SavesInPlace(Protocol):
    """A blocking store that can make a save on the caller's thread when nothing is in its way.

    A save handed to a thread pays for the hop: on a 2-core machine, a 5-step run on
    SQLite cost 1.15 to 1.7× the CPU with its save in a thread (``docs/performance.md``).
    A save asked with ``wait=False`` is made at once, or raises ``SaveWouldWait`` having
    written nothing: when it would wait for a lock, a connection, or slow I/O of its own.
    The runtime asks only a store whose class declares ``saves_in_place`` and whose
    ``save`` names ``wait``.
    """

    saves_in_place: bool
    """False turns it off: every save goes to a store thread."""

    def save(
        self,
        run: RunRecord,
        events: Sequence[Event],
        handoff: HandoffPacket | None = None,
        *,
        lease: Lease | None = None,
        release: bool = False,
        wait: bool = True,
    ) -> None:
        """``Store.save``; with ``wait=False``, at once or ``SaveWouldWait``."""
        ...
