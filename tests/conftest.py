from __future__ import annotations

from pathlib import Path

import pytest

from corral import Agent, MemoryStore, Runtime, load_agent
from corral.testing import FixedEffects

ROOT = Path(__file__).resolve().parents[1]
AFTERSALES = ROOT / "examples" / "aftersales"
ORDERS = ROOT / "examples" / "orders"


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
