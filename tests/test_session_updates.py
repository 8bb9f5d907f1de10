"""Two runs of one session that end together both keep their turn."""

from __future__ import annotations

import asyncio
import threading
from contextlib import suppress
from datetime import datetime
from pathlib import Path
from typing import Any

from corral import Agent, Runtime, SqlStore
from corral.effects import FixedEffects
from corral.store.base import SessionRecord, SessionUpdater

REPAIR = "订单 HD20240501 的打印机坏了，要报修"
HELLO = "你好"


class MeetingStore(SqlStore):
    """Holds each session read of the two runs' ends until both have read (or 1 s passes).

    Without the runtime's lock both ends read the session before either writes it, and
    the later write drops the other run's turn; with it, the second read waits for the
    first write, so the barrier times out and the reads come one after the other.
    """

    meeting: threading.Barrier
    reads: int

    def get_session(self, session_id: str, now: datetime) -> SessionRecord | None:
        self.reads += 1
        found = super().get_session(session_id, now)
        if self.reads > 2:  # the first two are the runs' starts
            with suppress(threading.BrokenBarrierError):
                self.meeting.wait()  # both have read before either writes
        return found


class TwoStepSessions:
    """A store of one's own without ``update_session`` (no ``SessionUpdater``): a run's
    end reads the session, then writes it, and only the runtime's lock keeps two runs'
    turns. The rest is the wrapped store's."""

    def __init__(self, inner: SqlStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "update_session":
            raise AttributeError(name)
        return getattr(self._inner, name)


async def test_two_runs_of_a_session_ending_together_both_keep_their_turn(
    aftersales: Agent, tmp_path: Path
) -> None:
    store = MeetingStore.open(tmp_path / "corral.db")
    store.meeting, store.reads = threading.Barrier(2, timeout=1.0), 0
    assert not isinstance(TwoStepSessions(store), SessionUpdater)
    runtime = Runtime(aftersales, TwoStepSessions(store), effects=FixedEffects())  # type: ignore[arg-type]
    first, second = await asyncio.gather(
        runtime.start(REPAIR, session_id="s1"), runtime.start(HELLO, session_id="s1")
    )
    session = store.get_session("s1", FixedEffects().now())
    assert session is not None
    assert sorted(t["run_id"] for t in session.turns) == sorted([first.run_id, second.run_id])
