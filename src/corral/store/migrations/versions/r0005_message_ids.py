"""Add ``corral_messages``: each session's message ids, kept once.

``Runtime.start(message_id=...)`` (``POST /agents/{agent}/runs`` with ``message_id``)
answers a retried request with the run its first try started or continued, instead of
handling the message again. A save keeps the ids its events hold in this table, keyed by
agent, session (``""``: no session) and id, in the same transaction, so two tries racing
each other cannot both be stored (``MESSAGE_REPEATED``). A new table: no existing row
changes, and the runs stored before it simply have no ids. Created only if missing.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the table of message ids and its index by run (``purge`` deletes by run)."""
    op.create_table(
        "corral_messages",
        sa.Column("agent", sa.String(128), primary_key=True),
        sa.Column("session_key", sa.String(128), primary_key=True),
        sa.Column("message_id", sa.String(128), primary_key=True),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        if_not_exists=True,
    )
    op.create_index("ix_corral_messages_run_id", "corral_messages", ["run_id"], if_not_exists=True)


def downgrade() -> None:
    """Drop it: retried requests are then handled again, as before it."""
    op.drop_table("corral_messages")
