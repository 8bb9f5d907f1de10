"""Each example's ``setup()`` may run at every load and leaves its demo data as it was.

``corral run``, ``chat``, ``resume`` and ``eval`` each load the agent, so ``setup()``
runs again on the same data folder. Found by hostile reviews: the orders example added
its 12 tracking events again at every load (a customer's tracking history showed each
event once per load), and the aftersales example its evidence (``check_evidence``
listed each kind once per load).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from corral import load_agent
from tests.conftest import ROOT

EXAMPLES = sorted(p.parent.parent.name for p in (ROOT / "examples").glob("*/data/*.sql"))


def counts(data_dir: Path) -> dict[str, int]:
    found: dict[str, int] = {}
    for db in sorted(data_dir.glob("*.db")):
        with sqlite3.connect(db) as conn:
            tables = [
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
            for table in tables:
                found[f"{db.name}:{table}"] = conn.execute(
                    f"SELECT count(*) FROM {table}"
                ).fetchone()[0]
    return found


@pytest.mark.parametrize("example", EXAMPLES)
def test_loading_an_example_again_adds_no_rows(example: str, tmp_path: Path) -> None:
    assert {"aftersales", "orders"} <= set(EXAMPLES)
    load_agent(ROOT / "examples" / example, data_dir=tmp_path)
    first = counts(tmp_path)
    assert first and any(first.values())  # demo data, and tables the writes fill
    for _ in range(2):
        load_agent(ROOT / "examples" / example, data_dir=tmp_path)
    assert counts(tmp_path) == first
