"""A run's turn goes into its session in the transaction of the run's last save.

It was a write of its own, after the save, in a store thread: one commit and one hop more
per chat turn, and a process that died between the two left the session without the
turn. ``SqlStore`` declares ``saves_sessions``; a store that does not (or whose ``save``
takes no ``session``) is updated on its own, as before.
"""

from __future__ import annotations

import signal
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

import corral.runtime.runtime
from corral import Agent, Runtime, SqlStore
from corral.contracts import HandoffPacket
from corral.effects import FixedEffects
from corral.events import Event
from corral.store.base import Lease, RunRecord
from tests.conftest import AFTERSALES
from tests.helpers import corral_cli

HELLO = "你好"
REPAIR = "订单 HD20240501 的打印机坏了，要报修"


def _writes(store: SqlStore) -> list[str]:
    """The write transactions the store begins from now on (``BEGIN IMMEDIATE``)."""
    begun: list[str] = []

    def listen(_c: Any, _cur: Any, statement: str, _p: Any, _ctx: Any, _many: bool) -> None:
        if statement.startswith("BEGIN IMMEDIATE"):
            begun.append(statement)

    event.listen(store.engine, "before_cursor_execute", listen)
    return begun


async def test_a_turn_is_one_write_with_its_session(aftersales: Agent, tmp_path: Path) -> None:
    store = SqlStore.open(tmp_path / "corral.db")
    runtime = Runtime(aftersales, store, effects=FixedEffects())
    await runtime.start(HELLO, session_id="warm")  # the kept connection is opened
    begun = _writes(store)
    summary = await runtime.start(HELLO, session_id="s1")
    assert begun == ["BEGIN IMMEDIATE"]  # the run's save, its session's update in it
    session = store.get_session("s1", FixedEffects().now())
    assert session is not None and [t["run_id"] for t in session.turns] == [summary.run_id]
    await runtime.aclose()


def test_a_process_killed_after_the_save_kept_the_turn(tmp_path: Path) -> None:
    """Killed right after the run's last commit (``after_commit``): the turn is there."""
    killed = corral_cli(
        tmp_path,
        "chat",
        str(AFTERSALES),
        "--session",
        "s1",
        stdin=f"{HELLO}\n",
        ok=False,
        env={"CORRAL_FAULTS": "after_commit"},
    )
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    store = SqlStore.open(tmp_path / "corral.db")
    (run_id,) = store.find_runs(session_id="s1")
    session = store.get_session("s1", datetime.now().astimezone())
    assert session is not None and [t["run_id"] for t in session.turns] == [run_id]


async def test_a_merge_that_raises_leaves_the_run_saved_and_is_raised(
    aftersales: Agent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in making the session's record must not cost the run its last events."""

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("a bug in the session's merge")

    monkeypatch.setattr(corral.runtime.runtime, "_merged_session", broken)
    store = SqlStore.open(tmp_path / "corral.db")
    runtime = Runtime(aftersales, store, effects=FixedEffects())
    with pytest.raises(RuntimeError, match="session's merge"):
        await runtime.start(HELLO, session_id="s1")
    (run_id,) = store.find_runs(session_id="s1")
    record = store.get_run(run_id)
    assert record is not None and record.status == "finished"
    assert store.get_session("s1", FixedEffects().now()) is None
    await runtime.aclose()


class OwnSave(SqlStore):
    """A store of one's own whose ``save`` predates ``session``: updated on its own."""

    def save(  # type: ignore[override]
        self,
        run: RunRecord,
        new_events: list[Event],
        handoff: HandoffPacket | None = None,
        *,
        lease: Lease | None = None,
        release: bool = False,
        wait: bool = True,
    ) -> None:
        super().save(run, new_events, handoff, lease=lease, release=release, wait=wait)


async def test_a_save_that_takes_no_session_is_followed_by_the_update(
    aftersales: Agent, tmp_path: Path
) -> None:
    store = OwnSave.open(tmp_path / "corral.db")
    runtime = Runtime(aftersales, store, effects=FixedEffects())
    await runtime.start(HELLO, session_id="warm")
    begun = _writes(store)
    first = await runtime.start(REPAIR, session_id="s1")
    second = await runtime.start(HELLO, session_id="s1")
    assert len(begun) >= 4  # each run's save, then its session's update
    session = store.get_session("s1", FixedEffects().now())
    assert session is not None
    assert [t["run_id"] for t in session.turns] == [first.run_id, second.run_id]
    await runtime.aclose()


class OwnUpdate(SqlStore):
    """A store of one's own whose ``update_session`` does more: it is called, as before."""

    def update_session(self, session_id: str, now: datetime, merge: Any) -> None:
        super().update_session(session_id, now, merge)


def test_only_a_writable_sqlite_file_folds_the_session(tmp_path: Path) -> None:
    """On PostgreSQL a session row another transaction holds would hold the run's own
    save, and fail it: there the session is updated on its own, as before."""
    from tests.extras import postgres_url

    writable = SqlStore.open(tmp_path / "corral.db")
    assert writable.saves_sessions is True
    assert SqlStore.open(tmp_path / "corral.db", read_only=True).saves_sessions is False
    assert OwnUpdate.open(tmp_path / "corral.db").saves_sessions is False
    assert OwnSave.open(tmp_path / "corral.db").saves_sessions is True  # but see its save
    served = SqlStore.open(postgres_url())
    assert served.saves_sessions is False
    served.engine.dispose()
