"""The schema revision of a SQL store, checked on every open with plain SQL.

The schema is versioned by Alembic (``corral/store/migrations``): ``alembic_version``
holds the revision a database is at. Opening a store must stay cheap (tests and CLI
commands open many), so an open never imports Alembic. It reads ``alembic_version``
and compares it with ``HEAD``, the revision this package ships, kept here as a constant
(a test checks it against Alembic's own head):

- at ``HEAD``: nothing to do (no ``create_all``, no inspection of every table);
- a new, empty database: ``create_all`` and stamp ``HEAD``, in one transaction;
- a revision this code does not know: a newer corral migrated it, refuse
  (``STORE_SCHEMA_NEWER``); this code could misread or damage what it wrote;
- older (a known revision before ``HEAD``, or a home made before migrations existed,
  which has corral's tables and no ``alembic_version``): upgraded by the migrations when
  the caller allows it, else refused (``STORE_SCHEMA_OLDER``) with the command to run.

Who may upgrade implicitly is ``SqlStore``'s policy: a SQLite home belongs to one user
and the processes of one machine, so it is upgraded on open, as homes always gained new
tables; a PostgreSQL database is shared by servers and workers that may run different
versions during a deploy, so it is upgraded only by ``corral db upgrade``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection, inspect, text

from corral.errors import StoreSchemaNewerError, StoreSchemaOlderError

REVISIONS = ("0001", "0002", "0003", "0004", "0005")
"""The package's migrations, oldest first (their Alembic revision ids)."""

HEAD = REVISIONS[-1]
"""The revision this code reads and writes; ``alembic heads`` in the package says the same."""

VERSION_TABLE = "alembic_version"
MARKER_TABLE = "corral_runs"
"""A table every corral store has had since the first release: its presence without a
``VERSION_TABLE`` means a store made before migrations (the baseline's schema, or part of it)."""

UPGRADE_HINT = "run `corral db upgrade --store URL` (the same URL), then open it again"


@dataclass(frozen=True)
class SchemaState:
    """Where a database stands: its revision (``None``: unstamped) and whether it is empty."""

    revision: str | None
    empty: bool

    @property
    def label(self) -> str:
        """``current``, ``older``, ``newer`` or ``empty``, for ``corral db current``."""
        if self.empty:
            return "empty"
        if self.revision == HEAD:
            return "current"
        if self.revision is None or self.revision in REVISIONS:
            return "older"
        return "newer"


def state(conn: Connection) -> SchemaState:
    """The revision stamped in the database (plain SQL: one look at the catalogue, one read)."""
    look = inspect(conn)
    if look.has_table(VERSION_TABLE):
        row = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).first()
        if row is not None:
            return SchemaState(str(row[0]), empty=False)
    return SchemaState(None, empty=not look.has_table(MARKER_TABLE))


def stamp(conn: Connection, revision: str = HEAD) -> None:
    """Record ``revision`` as Alembic does (one row in ``alembic_version``)."""
    conn.execute(
        text(
            f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} "
            "(version_num VARCHAR(32) NOT NULL, "
            f"CONSTRAINT {VERSION_TABLE}_pkc PRIMARY KEY (version_num))"
        )
    )
    conn.execute(text(f"DELETE FROM {VERSION_TABLE}"))
    conn.execute(text(f"INSERT INTO {VERSION_TABLE} (version_num) VALUES (:v)"), {"v": revision})


def refuse_newer(found: SchemaState, where: str) -> None:
    """``STORE_SCHEMA_NEWER`` if ``found`` is a revision this code does not know."""
    if found.label == "newer":
        raise StoreSchemaNewerError(
            f"the store {where} is at schema revision {found.revision}, which this corral "
            f"does not know (it knows up to {HEAD}): a newer corral migrated it",
            hint="run the same corral version as the store's other users; "
            "`corral db current` shows the revisions",
        )


def prepare(
    conn: Connection,
    where: str,
    *,
    create: Callable[[Connection], None],
    upgrade: Callable[[Connection], None] | None,
) -> None:
    """Inside a write transaction: bring the database to ``HEAD``, or refuse.

    ``create`` makes the whole schema of a new database; ``upgrade`` runs the migrations
    on an older one (``None``: refuse instead, ``STORE_SCHEMA_OLDER``).
    """
    found = state(conn)
    if found.label == "current":
        return
    refuse_newer(found, where)
    if found.empty:
        create(conn)
        stamp(conn)
        return
    if upgrade is None:
        at = found.revision or "one made before schema migrations"
        raise StoreSchemaOlderError(
            f"the store {where} has an older schema ({at}; this corral needs {HEAD}) and "
            "a shared database is not migrated implicitly",
            hint=UPGRADE_HINT,
        )
    upgrade(conn)
