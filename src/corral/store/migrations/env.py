"""Alembic's entry point: run the migrations on the connection corral hands over.

``corral.store.migrate`` puts an open connection (inside its write transaction, under
the store's lock) in ``config.attributes["connection"]``; without one, the URL of the
Alembic config's ``sqlalchemy.url`` is opened, so that ``alembic -c`` works for a developer.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=None)
    with context.begin_transaction():
        context.run_migrations()


def main() -> None:
    """Migrate the handed-over connection, else the configured URL."""
    connection = context.config.attributes.get("connection")
    if isinstance(connection, Connection):
        _run(connection)
        return
    url = context.config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("set sqlalchemy.url, or run `corral db upgrade --store URL`")
    with create_engine(url).connect() as conn:
        _run(conn)
        conn.commit()


main()
