"""``corral worker``: a worker process that drives agents' runs as DBOS workflows.

DBOS comes with ``corral[dbos]`` and is imported inside the command only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from corral.cli.common import (
    HomeOption,
    StoreOption,
    _fails_cleanly,
    _home,
    _load,
    _settle_heap,
    app,
    err_console,
    wait_option,
)
from corral.errors import ConfigInvalidError
from corral.exiting import exit_within
from corral.workers.stopping import SHUTDOWN_GRACE_S, STOP_MARGIN_S, STOP_S


@app.command()
@_fails_cleanly
def worker(
    agent: Annotated[
        list[Path], typer.Option("--agent", help="An agent folder to drive runs of (repeat)")
    ],
    executor_id: Annotated[
        str | None,
        typer.Option(
            "--executor-id",
            help="This worker's DBOS executor id; a worker restarted with the same id "
            "finishes the drives it had in flight (default: host-pid)",
        ),
    ] = None,
    takeover_poll_s: Annotated[
        float,
        typer.Option(
            "--takeover-poll-s",
            min=0.05,
            max=60.0,
            help="How often to look for dead workers' runs to take over (seconds)",
        ),
    ] = 1.0,
    takeover_settle_s: Annotated[
        float | None,
        typer.Option(
            "--takeover-settle-s",
            help="After connecting, how long to wait before calling any worker dead: "
            "three polls of the fleet's slowest worker (default: three of this one's, "
            "at least 5 s)",
        ),
    ] = None,
    shutdown_grace: Annotated[
        float,
        wait_option(
            "--shutdown-grace",
            "On SIGTERM or Ctrl-C, how long the drives in flight get to end before they "
            "are left to be recovered (s)",
        ),
    ] = SHUTDOWN_GRACE_S,
    stop_timeout: Annotated[
        float,
        wait_option(
            "--stop-timeout",
            "Then how long the process's threads get to end (a sync tool that never "
            "returns cannot be stopped) before it exits without them, naming them (s)",
        ),
    ] = STOP_S,
    home: HomeOption = None,
    store: StoreOption = None,
) -> None:
    """Drive the agents' queued runs as durable DBOS workflows until SIGTERM or Ctrl-C.

    Needs a PostgreSQL store (--store or CORRAL_STORE_URL) and the dbos extra. Runs are
    enqueued by `corral serve --enqueue` or corral.workers.client.RunQueue.
    """
    try:
        import dbos  # noqa: F401
    except ImportError:
        raise ConfigInvalidError(
            "corral worker needs the dbos extra (dbos is missing)",
            hint="pip install 'corral[dbos]'",
        ) from None
    from corral.workers import names
    from corral.workers.liveness import chosen_settle_s
    from corral.workers.worker import default_executor_id, run_worker

    if store is None or not store.strip():
        raise ConfigInvalidError(
            "corral worker needs a PostgreSQL store",
            hint="pass --store postgresql://user@host/db (or set CORRAL_STORE_URL)",
        )
    names.system_database_url(store)  # CONFIG_INVALID before anything loads
    chosen_settle_s(takeover_settle_s, takeover_poll_s)
    folder = _home(home)
    agents = [_load(path, folder, store=store) for path in agent]
    chosen = executor_id or default_executor_id()
    err_console.print(f"corral worker {chosen}: {', '.join(a.name for a in agents)}")
    _settle_heap()
    try:
        run_worker(
            store.strip(),
            agents,
            executor_id=chosen,
            log_dir=folder / "logs",
            takeover_poll_s=takeover_poll_s,
            takeover_settle_s=takeover_settle_s,
            grace_s=shutdown_grace,
            # the whole stop, whatever in it waits for ever: the drives' grace, the
            # threads' time, and the store's and DBOS's own closing (STOP_MARGIN_S)
            on_stop=lambda: exit_within(
                "corral worker", shutdown_grace + stop_timeout + STOP_MARGIN_S, main_too=True
            ),
            on_ready=lambda queues: err_console.print(  # one line, however long: for grep
                f"corral worker {chosen}: ready, listening to {', '.join(queues)}",
                soft_wrap=True,
            ),
        )
    except BaseException:  # its stop failed: the process still ends, with the error's code
        exit_within("corral worker", stop_timeout, code=2)
        raise
    exit_within("corral worker", stop_timeout)  # a tool's thread that never returns
