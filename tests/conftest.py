from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from corral import Agent, MemoryStore, Runtime, load_agent
from corral.testing import FixedEffects
from tests.extras import REQUIRE_ALL, database_of_worker, drop_database, required

# Property tests check what is true, never how fast: hypothesis's default 200 ms deadline and
# its too-slow health check are speed assertions that fail on a loaded machine (issue 8:
# the suite must pass under two busy loops on 2 cores).
settings.register_profile(
    "corral", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("corral")

ROOT = Path(__file__).resolve().parents[1]
AFTERSALES = ROOT / "examples" / "aftersales"
ORDERS = ROOT / "examples" / "orders"


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, each worker gets a PostgreSQL database of its own.

    The tests share one server; two workers in one database would race to create the
    store's tables and see each other's runs. The worker's database is made afresh (named
    after the test run and the worker) and ``CORRAL_TEST_PG_URL`` points there, for this
    process and the CLI subprocesses it starts; it is dropped when the worker ends.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")[:12]
    url = os.environ.get("CORRAL_TEST_PG_URL")
    if worker and url:
        os.environ["CORRAL_TEST_PG_URL"] = database_of_worker(url, worker, run or "run")
        config.stash[_WORKER_DATABASE] = (url, os.environ["CORRAL_TEST_PG_URL"])


def pytest_unconfigure(config: pytest.Config) -> None:
    made = config.stash.get(_WORKER_DATABASE, None)
    if made is not None:
        drop_database(*made)


_WORKER_DATABASE = pytest.StashKey[tuple[str, str]]()
"""The server's URL and the worker's database's, to drop it when the worker ends."""


@pytest.fixture
def effects() -> FixedEffects:
    return FixedEffects()


@pytest.fixture
def aftersales(tmp_path: Path) -> Agent:
    return load_agent(AFTERSALES, data_dir=tmp_path / "business")


@pytest.fixture(scope="session")
def orders_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("classifier-cache")


@pytest.fixture
def orders(tmp_path: Path, orders_cache: Path) -> Agent:
    return load_agent(ORDERS, data_dir=tmp_path / "shop", cache_dir=orders_cache)


@pytest.fixture
def runtime(aftersales: Agent, effects: FixedEffects) -> Runtime:
    return Runtime(aftersales, MemoryStore(), effects=effects)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Under ``CORRAL_REQUIRE_ALL=1`` (CI) a skipped test is a failed one: nothing hides."""
    outcome = yield
    _fail_a_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    """A module skipped at import (a missing extra) fails too under ``CORRAL_REQUIRE_ALL=1``."""
    outcome = yield
    _fail_a_skip(outcome.get_result())


def _fail_a_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    if report.skipped and required(REQUIRE_ALL) and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"{REQUIRE_ALL}=1 forbids skips, and this one was skipped: {reason}"
