"""``corral serve``: the HTTP API (and the dashboard) over the CLI's home, with uvicorn.

FastAPI and uvicorn come with ``corral[server]`` and are imported inside the command only.
"""

from __future__ import annotations

import os
import sys
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
    _store_target,
    app,
    err_console,
    wait_option,
)
from corral.errors import ConfigInvalidError
from corral.exiting import exit_leaving
from corral.server.stopping import SHUTDOWN_GRACE_S, STOP_S


@app.command()
@_fails_cleanly
def serve(
    agent_dir: Annotated[Path, typer.Argument(help="Folder with agent.yaml and tools.py")],
    agent: Annotated[
        list[Path] | None, typer.Option("--agent", help="Another agent folder to serve (repeat)")
    ] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port")] = 8080,
    max_body: Annotated[
        int, typer.Option("--max-body", min=1024, help="Largest request body (bytes)")
    ] = 64 * 1024,
    enqueue: Annotated[
        bool,
        typer.Option(
            "--enqueue",
            help="Enqueue runs for `corral worker` processes instead of driving them here "
            "(needs a PostgreSQL --store and the dbos extra)",
        ),
    ] = False,
    shutdown_grace: Annotated[
        float,
        wait_option(
            "--shutdown-grace",
            "On stop, how long runs in flight may go on before they are stopped (s)",
        ),
    ] = SHUTDOWN_GRACE_S,
    stop_timeout: Annotated[
        float,
        wait_option(
            "--stop-timeout",
            "How long a stopped run may take to store what it did, twice, before it is "
            "left to its lease (s)",
        ),
    ] = STOP_S,
    home: HomeOption = None,
    store: StoreOption = None,
) -> None:
    """Serve agents over HTTP until stopped (Ctrl-C or SIGTERM).

    The token is CORRAL_API_TOKEN, else the home's api-token file (made on first
    start, 0600). On stop, runs in flight are awaited --shutdown-grace seconds,
    then stopped and left to `corral resume`; a second Ctrl-C stops them at once.
    With --enqueue, workers drive the runs and a stop leaves them going.
    """
    try:
        from corral.server.app import ServerSettings, create_app
        from corral.server.auth import resolve_token
        from corral.server.process import listening, serve_until_stopped, threads_left
    except ImportError as exc:
        raise ConfigInvalidError(
            f"corral serve needs the server extra ({exc.name} is missing)",
            hint="pip install 'corral[server]'",
        ) from None
    sockets = listening(host, port)  # a port in use is refused before anything is said
    port = sockets[0].getsockname()[1]  # the one the system picked for --port 0
    folder = _home(home)
    agents = tuple(_load(path, folder, store=store) for path in [agent_dir, *(agent or [])])
    token = resolve_token(folder, os.environ)
    settings = ServerSettings(
        agents=agents,
        home=folder,
        token=token.value,
        body_limit=max_body,
        store=_store_target(folder, store),
        enqueue=enqueue,
        shutdown_grace_s=shutdown_grace,
        shutdown_stop_s=stop_timeout,
    )
    server_app = create_app(settings)
    where = "CORRAL_API_TOKEN" if token.file is None else str(token.file)
    origin = _origin(host, port)
    err_console.print(f"corral serve: {', '.join(a.name for a in agents)} on {origin}")
    err_console.print(f"token: {where}")
    # The token goes into the address only on a terminal: stderr that is a pipe or a file
    # ends up in log collectors (journald, docker logs), where a token must not be.
    signed_in = f"#token={token.value}" if sys.stderr.isatty() else ""
    err_console.print(f"dashboard: {origin}/ui/{signed_in}", soft_wrap=True)
    _settle_heap()
    served = server_app.state.corral
    serve_until_stopped(server_app, sockets, settings.shutdown_grace_s, served.hub)
    for runtime in served.runtimes.values():  # a forced stop skipped the app's shutdown
        runtime.release_threads()
    left = threads_left()
    if left:  # a sync tool that never returned: Python would wait for it at exit, for ever
        exit_leaving("corral serve", left)


def _origin(host: str, port: int) -> str:
    """The address to open, as a browser takes it: an IPv6 host goes in brackets (RFC 3986)."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}"
