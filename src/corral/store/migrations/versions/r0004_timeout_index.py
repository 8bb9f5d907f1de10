"""Add the timeout index: each agent's tool attempts that ran out of time, newest first.

The observed p95 an urgent run ranks equivalent tools by counts a call that used up its
tool's whole timeout, not only successes (``projection.recent_tool_query``): a tool that
often times out no longer looks fast. ``ix_corral_step_facts_timeouts`` lets that query
walk each agent's timeouts of one tool backwards and stop after the window, as
``ix_corral_step_facts_recent`` does for successes; the index of failures leads with the
tool and has the agent last, so it would read every other agent's timeouts too.

Partial (only ``TOOL_TIMEOUT`` attempts), so a save pays for it only when it stores one.
Created only if missing. On PostgreSQL, building it holds writes to ``corral_step_facts``
for the time it takes; ``corral db upgrade`` is a deploy step.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_TIMED_OUT = "kind = 'tool' AND status = 'error' AND error_code = 'TOOL_TIMEOUT'"


def upgrade() -> None:
    """Create the partial index of timed-out tool attempts."""
    condition = sa.text(_TIMED_OUT)
    op.create_index(
        "ix_corral_step_facts_timeouts",
        "corral_step_facts",
        ["agent", "name", "created_at", "run_id", "seq", "duration_ms"],
        sqlite_where=condition,
        postgresql_where=condition,
        if_not_exists=True,
    )


def downgrade() -> None:
    """Drop it: the query still answers, by reading more."""
    op.drop_index("ix_corral_step_facts_timeouts", table_name="corral_step_facts")
