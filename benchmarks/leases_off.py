"""A store whose leases are no-ops: the baseline that shows what one owner per run buys.

Only benchmarks use it. Without leases nothing stops two processes from driving one run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from corral.contracts import HandoffPacket
from corral.events import Event
from corral.store.base import Lease, RunRecord
from corral.store.sql import SqlStore


class LeasesOff:
    """Delegates to a SQL store; acquiring, renewing and fencing always succeed."""

    blocking = True

    def __init__(self, inner: SqlStore) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def saves_in_place(self) -> bool:
        """As the store's: its saves are made where the store's would be."""
        return self.inner.saves_in_place

    def acquire_lease(self, lease: Lease, *, replacing: str | None = None) -> str | None:
        return None

    def renew_lease(self, lease: Lease) -> None:
        return None

    def release_lease(self, lease: Lease) -> None:
        return None

    def save(
        self,
        run: RunRecord,
        events: Sequence[Event],
        handoff: HandoffPacket | None = None,
        *,
        lease: Lease | None = None,
        release: bool = False,
        wait: bool = True,
    ) -> None:
        self.inner.save(run, events, handoff, wait=wait)
