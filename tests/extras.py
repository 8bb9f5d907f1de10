"""Tests of optional parts skip where the part is missing, and fail where it is required.

A laptop without PostgreSQL or the local model still runs the rest of the suite; CI sets
``CORRAL_REQUIRE_ALL=1`` (or one flag per part), so a part that failed to install is a red
test there, never a quiet skip.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from urllib.parse import urlsplit, urlunsplit

import pytest

REQUIRE_ALL = "CORRAL_REQUIRE_ALL"
REQUIRE_PG = "CORRAL_REQUIRE_PG"
REQUIRE_LOCAL_MODEL = "CORRAL_REQUIRE_LOCAL_MODEL"
REQUIRE_EMBEDDINGS = "CORRAL_REQUIRE_EMBEDDINGS"


def required(flag: str) -> bool:
    """Whether ``flag`` (or ``CORRAL_REQUIRE_ALL``) says this part must be present."""
    return "1" in (os.environ.get(flag), os.environ.get(REQUIRE_ALL))


def skip_or_fail(reason: str, flag: str) -> None:
    """Skip the test for ``reason``, unless ``flag`` requires the part: then fail it."""
    if required(flag):
        pytest.fail(f"{flag}=1 (or {REQUIRE_ALL}=1), but {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def import_extra(module: str, flag: str) -> ModuleType:
    """Import ``module`` of an optional extra, skipping or failing (per ``flag``) without it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        skip_or_fail(f"{module} cannot be imported ({error})", flag)
        raise  # unreachable: skip_or_fail always raises


def postgres_url() -> str:
    """The test server's URL (``CORRAL_TEST_PG_URL``); skips or fails without one."""
    url = os.environ.get("CORRAL_TEST_PG_URL")
    if not url:
        skip_or_fail("no PostgreSQL (set CORRAL_TEST_PG_URL)", REQUIRE_PG)
        raise AssertionError("unreachable")
    return url


_DROP = 'DROP DATABASE IF EXISTS "{}" WITH (FORCE)'
"""Drops a worker's database, even while a connection left open still holds it."""


def database_of_worker(url: str, worker: str, run: str) -> str:
    """A fresh database for ``worker`` of test run ``run`` on the server of ``url``; its URL.

    The name carries the run's id, so two test runs against one server (two checkouts)
    never drop each other's databases; ``drop_database`` removes it when the worker ends.
    Only the URL's path changes: its query (``?options=-c%20...``) is kept as written.
    """
    name = f"corral_test_{run}_{worker}".lower()
    if not name.replace("_", "").isalnum():
        raise ValueError(f"unexpected xdist worker or run id {worker!r}, {run!r}")
    _on_server(url, _DROP.format(name), f'CREATE DATABASE "{name}"')
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def drop_database(server_url: str, worker_url: str) -> None:
    """Drop the database of ``worker_url`` (``database_of_worker``'s), from ``server_url``."""
    name = urlsplit(worker_url).path.lstrip("/")
    _on_server(server_url, _DROP.format(name))


def _on_server(url: str, *statements: str) -> None:
    from sqlalchemy import create_engine, text

    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            for statement in statements:
                conn.execute(text(statement))
    finally:
        engine.dispose()
