"""Run the package's Alembic migrations on a store's connection (imported only to migrate).

``corral.store.schema`` decides, with plain SQL on every open, whether a store needs this;
Alembic is imported here only, so an open of an up-to-date store never loads it.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Connection

MIGRATIONS = Path(__file__).with_name("migrations")
"""Shipped in the package (``env.py``, ``versions/``)."""


def config(connection: Connection | None = None) -> Config:
    """An Alembic config on the package's migrations, handing over ``connection``."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def upgrade(connection: Connection, revision: str = "head") -> None:
    """Migrate the database ``connection`` is on, inside the caller's transaction."""
    command.upgrade(config(connection), revision)


def revisions() -> list[str]:
    """The package's revision ids, oldest first, as Alembic reads them from ``versions/``."""
    script = ScriptDirectory.from_config(config())
    return [each.revision for each in reversed(list(script.walk_revisions()))]


def head() -> str | None:
    """Alembic's single head: ``corral.store.schema.HEAD`` must equal it."""
    return ScriptDirectory.from_config(config()).get_current_head()
