"""Add the latency index: each agent's successful tool attempts, newest first.

``ix_corral_step_facts_recent`` serves the observed-p95 query every run start of an agent
with equivalent tools sends (``projection.recent_tool_query``): without it, that query
read every past attempt. Partial (a stage row or a failure never touches it), so a save
pays for it only when it stores a successful attempt.

Created only if missing: homes opened by corral between the index's arrival and this
revision gained it on open already. On PostgreSQL, building it holds writes to
``corral_step_facts`` for the time it takes; ``corral db upgrade`` is a deploy step.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_SUCCESS = "kind = 'tool' AND status = 'success'"


def upgrade() -> None:
    """Create the partial index of successful tool attempts."""
    condition = sa.text(_SUCCESS)
    op.create_index(
        "ix_corral_step_facts_recent",
        "corral_step_facts",
        ["agent", "name", "created_at", "run_id", "seq", "duration_ms"],
        sqlite_where=condition,
        postgresql_where=condition,
        if_not_exists=True,
    )


def downgrade() -> None:
    """Drop it: the query still answers, by reading every attempt."""
    op.drop_index("ix_corral_step_facts_recent", table_name="corral_step_facts")
