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


def test_a_settling_time_shorter_than_three_polls_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    """``--takeover-settle-s`` sets a mixed fleet's settling to its slowest poll; less
    than three of this worker's own polls would call live workers dead after a restart."""
    done = corral_cli(
        tmp_path,
        "worker",
        "--agent",
        str(DEPOT),
        "--store",
        "postgresql://nobody@127.0.0.1:9/nothing",  # refused before any connection
        "--takeover-poll-s",
        "4",
        "--takeover-settle-s",
        "6",
        ok=False,
    )
    assert done.returncode == 2
    assert "CONFIG_INVALID" in done.stderr and "at least 12 s" in done.stderr
