"""The store's schema revisions: Alembic's migrations and the plain-SQL check on open agree.

A new store is made by ``create_all`` and stamped at ``schema.HEAD``; an older one by the
migrations. Both must give the same schema, and the head the package knows as a constant
must be Alembic's. PostgreSQL runs with CORRAL_TEST_PG_URL, in a schema of its own.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, inspect, text

from corral.errors import StoreSchemaNewerError, StoreSchemaOlderError
from corral.store import migrate, schema
from corral.store.registry import sql_target
from corral.store.sql import SqlStore, schema_state
from tests.extras import postgres_url


def test_the_head_constant_is_alembics_head() -> None:
    assert migrate.head() == schema.HEAD
    assert tuple(migrate.revisions()) == schema.REVISIONS


def test_opening_a_store_does_not_import_alembic(tmp_path: Path) -> None:
    """Tests and commands open many stores: only an older one pays for Alembic."""
    script = (
        "import sys\n"
        "from corral.store.sql import SqlStore\n"
        f"SqlStore.open({str(tmp_path / 'c.db')!r})\n"
        f"SqlStore.open({str(tmp_path / 'c.db')!r})\n"
        f"SqlStore.open({str(tmp_path / 'c.db')!r}, read_only=True)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert schema_state(tmp_path / "c.db") == schema.SchemaState(schema.HEAD, empty=False)


def where(index: Any) -> str:
    """A partial index's condition, as text ("" for a whole index)."""
    options = index.get("dialect_options") or {}
    return " ".join(f"{key}={value}" for key, value in sorted(options.items()))


def shape(engine: Engine) -> dict[str, Any]:
    """Every table's columns, primary key and indexes (with their conditions), as reflected."""
    look = inspect(engine)
    found: dict[str, Any] = {}
    for table in sorted(look.get_table_names()):
        if table == schema.VERSION_TABLE:
            continue
        indexes = sorted(
            (i["name"], tuple(i["column_names"]), bool(i["unique"]), where(i))
            for i in look.get_indexes(table)
        )
        columns = [(c["name"], str(c["type"]), c["nullable"]) for c in look.get_columns(table)]
        primary = look.get_pk_constraint(table)["constrained_columns"]
        found[table] = (columns, primary, indexes)
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT name, sql FROM sqlite_master WHERE type='table'"))
            found["without rowid"] = sorted(n for n, sql in rows if "WITHOUT ROWID" in sql)
    return found


@pytest.fixture(params=["sqlite", "postgres"])
def two_databases(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Two empty databases (SQLite files, or PostgreSQL schemas) as ``SqlStore.open`` targets."""
    if request.param == "sqlite":
        yield str(tmp_path / "a.db"), str(tmp_path / "b.db")
        return
    url = str(sql_target(postgres_url()))
    names = [f"corral_mig_{uuid.uuid4().hex[:12]}" for _ in range(2)]
    admin = create_engine(url)
    with admin.begin() as conn:
        for name in names:
            conn.execute(text(f"CREATE SCHEMA {name}"))
    joiner = "&" if "?" in url else "?"
    yield tuple(f"{url}{joiner}options=-csearch_path%3D{n}" for n in names)  # type: ignore[misc]
    with admin.begin() as conn:
        for name in names:
            conn.execute(text(f"DROP SCHEMA {name} CASCADE"))
    admin.dispose()


def engine_of(target: str) -> Engine:
    return create_engine(target if "://" in target else f"sqlite:///{target}")


def test_the_migrations_build_the_schema_a_new_store_gets(two_databases: tuple[str, str]) -> None:
    made, migrated = two_databases
    SqlStore.open(made).engine.dispose()
    engine = engine_of(migrated)
    with engine.begin() as conn:
        migrate.upgrade(conn)
    assert schema_state(migrated) == schema.SchemaState(schema.HEAD, empty=False)
    expected = shape(engine_of(made))
    assert "corral_step_facts" in expected and expected == shape(engine)


def test_a_store_made_before_migrations_is_upgraded_or_refused(tmp_path: Path) -> None:
    """Unstamped, an index missing (an older home): upgraded on open unless told not to."""
    path = tmp_path / "c.db"
    SqlStore.open(path).engine.dispose()
    engine = engine_of(str(path))
    with engine.begin() as conn:
        conn.execute(text(f"DROP TABLE {schema.VERSION_TABLE}"))
        conn.execute(text("DROP INDEX ix_corral_step_facts_ms"))
    assert schema_state(path).label == "older"
    with pytest.raises(StoreSchemaOlderError, match="older schema") as refused:
        SqlStore.open(path, upgrade=False)  # PostgreSQL's default
    assert refused.value.hint is not None and "corral db upgrade" in refused.value.hint
    assert schema_state(path).revision is None  # refused: nothing written
    SqlStore.open(path).engine.dispose()  # SQLite's default: upgraded
    assert schema_state(path) == schema.SchemaState(schema.HEAD, empty=False)
    assert shape(engine) == shape(engine_of(str(migrated_copy(tmp_path))))


def migrated_copy(tmp_path: Path) -> Path:
    path = tmp_path / "fresh.db"
    SqlStore.open(path).engine.dispose()
    return path


def test_a_newer_store_is_refused_for_reading_and_writing(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    SqlStore.open(path).engine.dispose()
    with engine_of(str(path)).begin() as conn:
        conn.execute(text(f"UPDATE {schema.VERSION_TABLE} SET version_num = 'zz_next'"))
    for read_only in (False, True):
        with pytest.raises(StoreSchemaNewerError, match="zz_next"):
            SqlStore.open(path, read_only=read_only)
    with pytest.raises(StoreSchemaNewerError):
        SqlStore.open(path, upgrade=True)
    assert schema_state(path).revision == "zz_next"


@pytest.mark.parametrize("two_databases", ["postgres"], indirect=True)
def test_a_postgresql_store_is_not_upgraded_on_open(two_databases: tuple[str, str]) -> None:
    """The policy of a shared database (SQLite homes are upgraded on open: tested above)."""
    target, _ = two_databases
    SqlStore.open(target).engine.dispose()
    engine = engine_of(target)
    with engine.begin() as conn:
        conn.execute(text(f"DROP TABLE {schema.VERSION_TABLE}"))
    with pytest.raises(StoreSchemaOlderError):
        SqlStore.open(target)
    SqlStore.open(target, upgrade=True).engine.dispose()
    assert schema_state(target).label == "current"
