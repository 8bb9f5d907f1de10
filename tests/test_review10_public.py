"""Review of issue 10: lazy public names keep what ``import corral`` gave before."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("expr", ["corral.errors.ErrorCode", "corral.contracts.Plan"])
def test_submodules_are_reachable_after_a_bare_import_corral(expr: str) -> None:
    """At 8a5b4af ``import corral; corral.errors.ErrorCode`` worked (eager imports)."""
    done = subprocess.run(
        [sys.executable, "-c", f"import corral; print({expr})"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr.strip().splitlines()[-1]


def test_event_still_imports_from_corral_contracts() -> None:
    """At 8a5b4af ``Event`` lived in ``corral.contracts`` (benchmarks/leases_off.py and
    outside code imported it there); it moved to ``corral.events`` without a shim."""
    done = subprocess.run(
        [sys.executable, "-c", "from corral.contracts import Event; print(Event)"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr.strip().splitlines()[-1]
