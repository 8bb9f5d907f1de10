"""The store every backend test runs on: memory, SQLite (WAL) and PostgreSQL.

PostgreSQL runs when CORRAL_TEST_PG_URL is set (CI starts a server and sets it); with
CORRAL_REQUIRE_PG=1 (or CORRAL_REQUIRE_ALL=1) a missing server is a failure, not a skip.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.store.base import Store
from corral.store.memory import MemoryStore
from corral.store.sql import SqlStore
from tests.extras import postgres_url


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "memory":
        yield MemoryStore()
    elif request.param == "sqlite":
        yield SqlStore.open(tmp_path / "corral.db")
    else:
        sql = SqlStore.open(postgres_url())
        yield sql
        sql.engine.dispose()
