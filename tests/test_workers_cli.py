"""``corral worker`` refuses what cannot work, with a stable code, before it starts DBOS."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import corral_cli
from tests.workers_support import DEPOT


@pytest.mark.parametrize("store", [None, "sqlite:///runs.db"])
def test_a_worker_needs_a_postgresql_store(tmp_path: Path, store: str | None) -> None:
    given = ["--store", store] if store else []
    done = corral_cli(
        tmp_path, "worker", "--agent", str(DEPOT), *given, ok=False, env={"CORRAL_STORE_URL": ""}
    )
    assert done.returncode == 2
    assert "CONFIG_INVALID" in done.stderr and "PostgreSQL" in done.stderr
