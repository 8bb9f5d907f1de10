"""Stage durations as columns of the run facts; SQLite timestamps as integer microseconds.

Two changes that shrink what every run stores (issue 10: at most 4 KB per 5-step run):

- ``corral_run_facts`` gains one ``stage_<name>_ms`` column per stage of corral's own
  (``projection.STAGE_COLUMNS``), and each run's ``stage`` rows of those stages in
  ``corral_step_facts`` are moved into them and deleted. A row per stage repeated the
  run's id, agent and creation time; a stage outside the list keeps its row.
- On SQLite, the timestamps written with every event and fact (``corral_events.ts``,
  the facts' ``created_at``/``updated_at``) become integer microseconds since the epoch
  (``corral.store.instant``) instead of 26 characters of text. The columns stay declared
  ``DATETIME``; only the values are rewritten, in SQL. PostgreSQL keeps ``timestamptz``.

The stage names and the conversion are written out here, not imported, so that this
revision stays what it is when the live code changes. No downgrade: the events a store
at this revision is given are stored in format 4, which only this corral or a newer reads.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

STAGES = (
    "run",
    "intent",
    "route",
    "plan",
    "decide",
    "execute",
    "verify",
    "reply",
    "memory",
    "handoff",
)

_MICROS = (
    "CAST(strftime('%s', substr({c}, 1, 19)) AS INTEGER) * 1000000"
    " + CAST(substr(substr({c}, 21) || '000000', 1, 6) AS INTEGER)"
)
"""SQLAlchemy's SQLite text ``YYYY-MM-DD HH:MM:SS.ffffff`` (UTC) as microseconds."""

_TIMES = {
    "corral_events": ("ts",),
    "corral_run_facts": ("created_at", "updated_at"),
    "corral_step_facts": ("created_at",),
}


def upgrade() -> None:
    """Add the stage columns, move the stage rows into them, and (SQLite) the timestamps."""
    present = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("corral_run_facts")}
    for stage in STAGES:  # only those missing: a store may have been stamped older by hand
        if f"stage_{stage}_ms" not in present:
            op.add_column("corral_run_facts", sa.Column(f"stage_{stage}_ms", sa.Float))
    moved = ", ".join(
        f"stage_{stage}_ms = COALESCE((SELECT s.duration_ms FROM corral_step_facts AS s"
        " WHERE s.run_id = corral_run_facts.run_id AND s.kind = 'stage'"
        f" AND s.name = '{stage}' AND s.seq = 0), stage_{stage}_ms)"
        for stage in STAGES
    )
    op.execute(f"UPDATE corral_run_facts SET {moved}")
    names = ", ".join(f"'{stage}'" for stage in STAGES)
    op.execute(f"DELETE FROM corral_step_facts WHERE kind = 'stage' AND name IN ({names})")
    if op.get_bind().dialect.name != "sqlite":
        return
    for table, columns in _TIMES.items():
        for column in columns:
            value = _MICROS.format(c=column)
            op.execute(f"UPDATE {table} SET {column} = {value} WHERE typeof({column}) = 'text'")


def downgrade() -> None:
    """None: the events written since are in a format that older corral cannot read."""
    raise NotImplementedError(
        "revision 0003 is not downgraded: the events written since are in stored "
        "format 4, which only this corral or a newer one reads"
    )
