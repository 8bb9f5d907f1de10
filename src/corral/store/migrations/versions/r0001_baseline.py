"""Baseline: the schema every store had before migrations.

Runs, events, plans, leases, sessions, and the stats projection's run and step facts.

Written out here, not read from the live ``MetaData``, so that it stays what it was when
later revisions change the tables. Every table and index is created only if missing:
a home made before migrations has all of them, or (older still) some, and is brought to
this revision by the same code as an empty database.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_WHEN = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create the baseline's tables and indexes that are missing."""
    op.create_table(
        "corral_runs",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("trace_id", sa.String(64), nullable=False),
        sa.Column("agent", sa.String(128), nullable=False),
        sa.Column("session_id", sa.String(128)),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("created_at", _WHEN, nullable=False),
        sa.Column("updated_at", _WHEN, nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("handoff", sa.Text),
        if_not_exists=True,
    )
    for column in ("session_id", "status", "created_at"):
        op.create_index(f"ix_corral_runs_{column}", "corral_runs", [column], if_not_exists=True)
    op.create_table(
        "corral_events",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("ts", _WHEN, nullable=False),
        sa.Column("type", sa.String(48), nullable=False),
        sa.Column("stage", sa.String(48), nullable=False),
        sa.Column("data", sa.Text, nullable=False),
        if_not_exists=True,
    )
    op.create_table(
        "corral_plans",
        sa.Column("hash", sa.String(64), primary_key=True),
        sa.Column("body", sa.Text, nullable=False),
        if_not_exists=True,
    )
    op.create_table(
        "corral_leases",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
        if_not_exists=True,
    )
    op.create_table(
        "corral_sessions",
        sa.Column("session_id", sa.String(128), primary_key=True),
        sa.Column("agent", sa.String(128), nullable=False),
        sa.Column("data", sa.Text, nullable=False),
        sa.Column("updated_at", _WHEN, nullable=False),
        sa.Column("expires_at", _WHEN, nullable=False),
        if_not_exists=True,
    )
    op.create_index(
        "ix_corral_sessions_expires_at", "corral_sessions", ["expires_at"], if_not_exists=True
    )
    _facts()


def _facts() -> None:
    """The stats projection (``corral.store.projection``) as it was at the baseline."""
    op.create_table(
        "corral_run_facts",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("agent", sa.String(128), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("intent", sa.String(128)),
        sa.Column("outcome", sa.String(32)),
        sa.Column("error_code", sa.String(64)),
        sa.Column("steps", sa.Integer, nullable=False),
        sa.Column("tool_calls", sa.Integer, nullable=False),
        sa.Column("model_calls", sa.Integer, nullable=False),
        sa.Column("input_tokens", sa.BigInteger, nullable=False),
        sa.Column("output_tokens", sa.BigInteger, nullable=False),
        sa.Column("cost", sa.Float, nullable=False),
        sa.Column("created_at", _WHEN, nullable=False),
        sa.Column("updated_at", _WHEN, nullable=False),
        sqlite_with_rowid=False,
        if_not_exists=True,
    )
    op.create_table(
        "corral_step_facts",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(8), primary_key=True),
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("status", sa.String(32)),
        sa.Column("error_code", sa.String(64)),
        sa.Column("duration_ms", sa.Float, nullable=False),
        sa.Column("agent", sa.String(128), nullable=False),
        sa.Column("created_at", _WHEN, nullable=False),
        sqlite_with_rowid=False,
        if_not_exists=True,
    )
    op.create_index(
        "ix_corral_step_facts_ms",
        "corral_step_facts",
        ["kind", "name", "duration_ms", "created_at", "agent"],
        if_not_exists=True,
    )
    failed = sa.text("status = 'error'")
    op.create_index(
        "ix_corral_step_facts_failed",
        "corral_step_facts",
        ["name", "error_code", "created_at", "agent"],
        sqlite_where=failed,
        postgresql_where=failed,
        if_not_exists=True,
    )


def downgrade() -> None:
    """No way below the baseline: dropping it would drop every stored run."""
    raise NotImplementedError("the baseline is not downgraded: it would drop every run")
