"""``corral workers``: the live workers, their queues, the runs in flight and those recovered.

It only reads (``corral.workers.status``): PostgreSQL's sessions and DBOS's workflow
table, in the store's database. It needs no dbos package and launches nothing.
"""

from __future__ import annotations

from datetime import UTC
from typing import TYPE_CHECKING

import typer

from corral.cli.common import (
    HomeOption,
    JsonOption,
    StoreOption,
    _fails_cleanly,
    _home,
    _store_target,
    app,
    console,
)
from corral.errors import ConfigInvalidError

if TYPE_CHECKING:
    from corral.workers.status import WorkersStatus


@app.command()
@_fails_cleanly
def workers(
    as_json: JsonOption = False, home: HomeOption = None, store: StoreOption = None
) -> None:
    """Show the live workers, each agent's queue, runs in flight and runs recovered.

    Needs the PostgreSQL store the workers share (--store or CORRAL_STORE_URL).
    """
    from corral.store.sql import SqlStore
    from corral.workers.status import workers_status

    target = _store_target(_home(home, create=False), store)
    if not isinstance(target, str):
        raise ConfigInvalidError(
            "corral workers needs the PostgreSQL store the workers share",
            hint="pass --store postgresql://user@host/db (or set CORRAL_STORE_URL)",
        )
    opened = SqlStore.open(target, read_only=True)
    try:
        found = workers_status(opened.engine)
    finally:
        opened.engine.dispose()
    if as_json:
        typer.echo(found.model_dump_json())
    else:
        _print(found)


def _print(found: WorkersStatus) -> None:
    """Three tables: workers, queues, recovered runs (rich escapes every value as text)."""
    from rich.table import Table

    live = Table(title=f"workers: {len(found.workers)} live")
    for column in ("executor id", "since", "host", "backend pid", "runs in flight"):
        live.add_column(column, no_wrap=column == "since")
    for worker in found.workers:
        since = worker.since.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
        live.add_row(
            worker.executor_id, since, worker.host, str(worker.backend_pid), str(worker.in_flight)
        )
    for orphan in found.orphaned:
        live.add_row(orphan.executor_id, "gone", "-", "-", f"{orphan.in_flight} (to take over)")
    queues = Table(title="queues")
    for column in ("queue", "enqueued", "in flight", "finished", "failed"):
        queues.add_column(column)
    for queue in found.queues:
        queues.add_row(
            f"{queue.kind} {queue.name}",
            str(queue.enqueued),
            str(queue.in_flight),
            str(queue.finished),
            str(queue.failed),
        )
    recovered = Table(title=f"runs recovered: {found.recovered_total}")
    for column in ("run", "drive", "status", "last executor", "dispatches"):
        recovered.add_column(column)
    for run in found.recovered:
        recovered.add_row(
            run.run_id, str(run.drive), run.status, run.executor_id or "-", str(run.dispatches)
        )
    for table in (live, queues, recovered):
        console.print(table)
