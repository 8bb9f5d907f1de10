"""Runs, events, handoffs and sessions in SQLite (WAL) or PostgreSQL, via SQLAlchemy Core."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Column,
    DateTime,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    delete,
    event,
    insert,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from corral.contracts import Event, EventType, HandoffPacket
from corral.store.base import TERMINAL_STATUSES, RunRecord, SessionRecord

metadata = MetaData()

runs = Table(
    "corral_runs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("trace_id", String(64), nullable=False),
    Column("agent", String(128), nullable=False),
    Column("session_id", String(128), index=True),
    Column("status", String(32), nullable=False, index=True),
    Column("created_at", DateTime(timezone=True), nullable=False, index=True),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("summary", Text, nullable=False),
    Column("handoff", Text),
)

events = Table(
    "corral_events",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("ts", DateTime(timezone=True), nullable=False),
    Column("type", String(48), nullable=False),
    Column("stage", String(48), nullable=False),
    Column("data", Text, nullable=False),
)

sessions = Table(
    "corral_sessions",
    metadata,
    Column("session_id", String(128), primary_key=True),
    Column("agent", String(128), nullable=False),
    Column("data", Text, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False, index=True),
)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _aware(value: datetime) -> datetime:
    """SQLite returns naive datetimes; everything corral stores is UTC."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _enable_wal(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()


def sqlite_url(path: Path) -> str:
    """The SQLAlchemy URL of a SQLite file (its folder is created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


class SqlStore:
    """The default store. ``SqlStore.open(".corral/corral.db")`` or any SQLAlchemy URL."""

    blocking = True

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        if engine.dialect.name == "sqlite":
            event.listen(engine, "connect", _enable_wal)
        metadata.create_all(engine)

    @classmethod
    def open(cls, target: str | Path) -> SqlStore:
        """A store on a URL (``postgresql+psycopg://...``) or a SQLite file path."""
        text = str(target)
        url = text if "://" in text else sqlite_url(Path(text))
        return cls(create_engine(url, future=True))

    def _insert_ignoring_duplicates(self, table: Table) -> Any:
        if self.engine.dialect.name == "postgresql":
            return pg_insert(table).on_conflict_do_nothing()
        if self.engine.dialect.name == "sqlite":
            return sqlite_insert(table).on_conflict_do_nothing()
        return insert(table)

    def save(
        self, run: RunRecord, new_events: Sequence[Event], handoff: HandoffPacket | None = None
    ) -> None:
        """Upsert the run row and append events in one transaction."""
        row = {
            "trace_id": run.trace_id,
            "agent": run.agent,
            "session_id": run.session_id,
            "status": run.status,
            "updated_at": run.updated_at,
            "summary": _dumps(run.summary),
        }
        if handoff is not None:
            row["handoff"] = handoff.model_dump_json()
        with self.engine.begin() as conn:
            updated = conn.execute(update(runs).where(runs.c.run_id == run.run_id).values(**row))
            if updated.rowcount == 0:
                conn.execute(
                    insert(runs).values(run_id=run.run_id, created_at=run.created_at, **row)
                )
            if new_events:
                conn.execute(
                    self._insert_ignoring_duplicates(events),
                    [
                        {
                            "run_id": e.run_id,
                            "seq": e.seq,
                            "ts": e.ts,
                            "type": e.type.value,
                            "stage": e.stage,
                            "data": _dumps(e.data),
                        }
                        for e in new_events
                    ],
                )

    def _record(self, row: Any) -> RunRecord:
        return RunRecord(
            run_id=row.run_id,
            trace_id=row.trace_id,
            agent=row.agent,
            session_id=row.session_id,
            status=row.status,
            created_at=_aware(row.created_at),
            updated_at=_aware(row.updated_at),
            summary=json.loads(row.summary),
        )

    def get_run(self, run_id: str) -> RunRecord | None:
        """The run row, or ``None``."""
        with self.engine.connect() as conn:
            row = conn.execute(select(runs).where(runs.c.run_id == run_id)).first()
        return self._record(row) if row else None

    def list_runs(self, limit: int = 50) -> list[RunRecord]:
        """Most recent first."""
        query = select(runs).order_by(runs.c.created_at.desc()).limit(limit)
        with self.engine.connect() as conn:
            return [self._record(row) for row in conn.execute(query)]

    def load_events(self, run_id: str) -> list[Event]:
        """Every event of the run, by ``seq``."""
        query = select(events).where(events.c.run_id == run_id).order_by(events.c.seq)
        with self.engine.connect() as conn:
            return [
                Event(
                    run_id=row.run_id,
                    seq=row.seq,
                    ts=_aware(row.ts),
                    type=EventType(row.type),
                    stage=row.stage,
                    data=json.loads(row.data),
                )
                for row in conn.execute(query)
            ]

    def get_handoff(self, run_id: str) -> HandoffPacket | None:
        """The stored handoff packet, if any."""
        with self.engine.connect() as conn:
            value = conn.execute(select(runs.c.handoff).where(runs.c.run_id == run_id)).scalar()
        return HandoffPacket.model_validate_json(value) if value else None

    def get_session(self, session_id: str, now: datetime) -> SessionRecord | None:
        """The session unless unknown or expired."""
        with self.engine.connect() as conn:
            row = conn.execute(select(sessions).where(sessions.c.session_id == session_id)).first()
        if row is None or _aware(row.expires_at) <= now:
            return None
        data = json.loads(row.data)
        return SessionRecord(
            session_id=row.session_id,
            agent=row.agent,
            turns=data["turns"],
            entities=data["entities"],
            open_run_id=data.get("open_run_id"),
            updated_at=_aware(row.updated_at),
            expires_at=_aware(row.expires_at),
        )

    def purge(self, now: datetime, task_ttl: timedelta) -> tuple[int, list[str]]:
        """Delete expired sessions and ended runs older than the TTL, in one transaction."""
        cutoff = now - task_ttl
        with self.engine.begin() as conn:
            sessions_deleted = conn.execute(
                delete(sessions).where(sessions.c.expires_at <= now)
            ).rowcount
            old = select(runs.c.run_id).where(
                runs.c.status.in_(TERMINAL_STATUSES), runs.c.updated_at < cutoff
            )
            old_ids = [row.run_id for row in conn.execute(old)]
            for start in range(0, len(old_ids), 500):
                chunk = old_ids[start : start + 500]
                conn.execute(delete(events).where(events.c.run_id.in_(chunk)))
                conn.execute(delete(runs).where(runs.c.run_id.in_(chunk)))
        return sessions_deleted, old_ids

    def save_session(self, session: SessionRecord) -> None:
        """Create or replace a session row."""
        data = _dumps(
            {
                "turns": session.turns,
                "entities": session.entities,
                "open_run_id": session.open_run_id,
            }
        )
        values = {
            "agent": session.agent,
            "data": data,
            "updated_at": session.updated_at,
            "expires_at": session.expires_at,
        }
        with self.engine.begin() as conn:
            updated = conn.execute(
                update(sessions).where(sessions.c.session_id == session.session_id).values(**values)
            )
            if updated.rowcount == 0:
                conn.execute(insert(sessions).values(session_id=session.session_id, **values))
