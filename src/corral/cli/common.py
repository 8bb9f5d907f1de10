"""Shared pieces of the command line: the app, options, loading agents, printing runs.

State lives under a home folder (``--home``, else ``$CORRAL_HOME``, else ``./.corral``):
``corral.db`` (SQLite, WAL; or the store ``--store``/``CORRAL_STORE_URL`` names) for runs,
events and sessions, ``logs/`` for the JSONL logs, and ``data/<agent>/`` for each example
agent's business database. The home is private (0700, files 0600): it holds personal
data and the key that signs cached models.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Coroutine
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from corral import __version__
from corral.errors import (
    ConfigInvalidError,
    CorralError,
    InvalidInputError,
    RunNotFoundError,
    StoreError,
)
from corral.files import private_dir, tighten
from corral.inputs import require_text
from corral.observe.terminal import visible

if TYPE_CHECKING:
    from corral.agent import Agent
    from corral.config import AgentConfig
    from corral.contracts import RunSummary
    from corral.events import Event
    from corral.runtime.faults import Faults
    from corral.runtime.runtime import Runtime
    from corral.store.sql import SqlStore
    from corral.tools.mcp.listing import McpListingCache

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    # click's own help layout: typer's Rich panels load Rich's Markdown, Markdown-it and
    # traceback modules (~0.16 s of a --help on a 2-core machine, more than the CLI itself)
    rich_markup_mode=None,
    help="corral: task-oriented agents you can trust in production.",
)
PIPED_WIDTH = 240
"""Columns of output that goes to a pipe or a file: Rich's 80 cut a table's ids and
statuses to "awaitin…", and what is piped is read by a program or kept in a log."""


def _console(stderr: bool = False) -> Console:
    """A console as wide as the terminal, or ``PIPED_WIDTH`` when not one (no COLUMNS)."""
    stream = sys.stderr if stderr else sys.stdout
    terminal = stream is not None and hasattr(stream, "isatty") and stream.isatty()
    width = None if terminal or os.environ.get("COLUMNS") else PIPED_WIDTH
    return Console(stderr=stderr, width=width)


console = _console()
err_console = _console(stderr=True)

T = TypeVar("T")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"corral {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit"
        ),
    ] = False,
) -> None:
    """Options before the command: --version."""


MAX_WAIT_S = 3600.0
"""The longest wait a stop option takes (a typo of minutes, not seconds)."""


def wait_option(flag: str, help_text: str) -> Any:
    """A stop's wait in seconds (``serve``, ``worker``): 0 to ``MAX_WAIT_S``."""
    return typer.Option(flag, min=0.0, max=MAX_WAIT_S, help=help_text)


HomeOption = Annotated[Path | None, typer.Option("--home", help="State folder (default .corral)")]
StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        envvar="CORRAL_STORE_URL",
        show_envvar=False,
        help="Where runs are stored: sqlite:///path/corral.db or postgresql://user@host/db "
        "(else CORRAL_STORE_URL, else HOME/corral.db); --home still holds logs and caches",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of text")]
ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="Model name, e.g. openai:deepseek-chat, local:smollm2 or replay:RUN_ID; replaces "
        "only model.name: the agent's base_url, api_key_env, timeout_s and layer switches "
        "still apply (base URL default: OPENAI_BASE_URL)",
    ),
]


def _home(home: Path | None, *, create: bool = True) -> Path:
    """The home folder, created 0700; an existing corral home of ours is tightened to 0700.

    ``create=False``, for the commands that only read (``runs``, ``show``, ``traces``...):
    a home that does not exist is not made (a mistyped ``--home`` left a new folder
    behind); its store then reads as empty.
    """
    folder = home or Path(os.environ.get("CORRAL_HOME", ".corral"))
    require_text(str(folder), "the home path")
    if folder.exists() and not folder.is_dir():
        raise InvalidInputError(
            f"the home {folder} exists and is not a folder",
            hint="pass --home (or set CORRAL_HOME to) a folder, or a path that does not exist",
        )
    if not create and not folder.exists():
        return folder
    try:
        private_dir(folder)
    except OSError as exc:
        raise InvalidInputError(
            f"cannot create the home {folder}: {exc.strerror}",
            hint="pass --home (or set CORRAL_HOME to) a folder you can write",
        ) from None
    if (folder / "corral.db").exists():
        tighten(folder)
    return folder


def _store_target(home: Path, url: str | None) -> str | Path:
    """The store a command uses: ``--store``/``CORRAL_STORE_URL``, else the home's SQLite file.

    An empty ``CORRAL_STORE_URL`` counts as unset; a URL that is not SQLite or PostgreSQL
    is ``CONFIG_INVALID`` (runs must outlive the command, which ``memory:`` does not).
    """
    if url is None or not url.strip():
        return home / "corral.db"
    from corral.store.registry import sql_target

    return sql_target(url.strip())


def _open_store(home: Path, url: str | None, *, read_only: bool = False) -> SqlStore:
    """The command's store (``_store_target``), opened for writing unless ``read_only``."""
    from corral.store.sql import SqlStore

    return SqlStore.open(_store_target(home, url), read_only=read_only)


def _run_id(run_id: str) -> str:
    """``run_id`` if it has the shape of a run id; anything else never reaches a path."""
    from corral.observe.logs import valid_run_id

    require_text(run_id, "the run id")
    if not valid_run_id(run_id):
        raise InvalidInputError(
            f"{run_id!r} is not a run id",
            hint="run ids look like run_019ad3f2a1b03f2a9c0e1b7d4a65; see `corral runs`",
        )
    return run_id


def _touch_log(store: SqlStore, run_id: str, home: Path) -> None:
    """Rewrite the run's JSONL file from the store if it is missing, cut or stale.

    Not in a home that does not exist (a reading command given ``--store`` and a new
    ``--home``): the log is the home's, and a read does not make one.
    """
    from corral.observe.logs import JsonlLog

    if home.is_dir():
        JsonlLog(home / "logs").export(store, run_id, check_all=True)


def _load(
    agent_dir: Path,
    home: Path,
    model: str | None = None,
    *,
    data_dir: Path | None = None,
    mcp_listings: McpListingCache | None = None,
    store: str | None = None,
    config: AgentConfig | None = None,
    setup: bool = True,
) -> Agent:
    """The agent in ``agent_dir``; ``model`` (``--model``) replaces only its model's name.

    Its business data lives in ``data_dir``, by default ``HOME/data/<agent folder>``.
    A command that loads it many times passes one ``mcp_listings`` and one ``config``
    (its ``agent.yaml``, read once) to every load.
    ``store`` (``--store``) is where a ``replay:RUN_ID`` model reads its run.
    ``setup=False``: its tools.py's ``setup`` is not run (``load_agent``), for a command
    that calls no tool.
    """
    from corral.agent import load_agent
    from corral.models.replay import ReplayModel

    def replay_loader(run_id: str) -> ReplayModel:
        checked = _run_id(run_id)  # INVALID_INPUT for a path, as `corral show` says
        return ReplayModel.of_run(checked, _open_store(home, store).load_events(checked))

    if model is not None:
        require_text(model, "the model name")
    return load_agent(
        agent_dir,
        data_dir=data_dir or home / "data" / agent_dir.resolve().name,
        cache_dir=home / "cache",
        model_name=model,
        replay_loader=replay_loader,
        mcp_listings=mcp_listings,
        config=config,
        setup=setup,
    )


def recorded_model(events: list[Event]) -> str | None:
    """The model name a stored run was started with (``run_started``), if it used one."""
    from corral.events import RunStarted

    started = events[0].payload if events else None
    return started.model or None if isinstance(started, RunStarted) else None


def _faults() -> Faults:
    """Crash points for durability tests (``CORRAL_FAULTS``); none in normal use."""
    from corral.runtime.faults import Faults

    try:
        return Faults.from_env(os.environ)
    except ValueError as exc:
        raise ConfigInvalidError(str(exc)) from None


def _runtime(agent: Agent, home: Path, store: str | None = None) -> Runtime:
    """A runtime on the command's store (``--store``), logging under the home."""
    from corral.runtime.runtime import Runtime

    return Runtime(agent, _open_store(home, store), log_dir=home / "logs", faults=_faults())


def _closing(runtime: Runtime, work: Coroutine[Any, Any, T]) -> T:
    """Run ``work``, then close the runtime, in one event loop, whether it succeeded or not.

    Closing ends the agent's transports (opened in this loop) and its generator setup.
    A failure to close is a warning on stderr: the run's own outcome (done and stored,
    perhaps a write) is still shown, or its own error raised, never hidden behind it.
    """
    import asyncio

    async def run() -> T:
        try:
            return await work
        finally:
            try:
                await runtime.aclose()
            except Exception as exc:  # reported; the outcome stands
                err_console.print("warning: closing the agent failed: ", Text(visible(str(exc))))

    return asyncio.run(run())


def _fails_cleanly(command: Callable[..., T]) -> Callable[..., T]:
    """Print a corral error with its stable code and exit 2, instead of a traceback."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return command(*args, **kwargs)
        except CorralError as exc:
            if kwargs.get("as_json"):
                error: dict[str, Any] = {
                    "code": exc.code.value,
                    "message": visible(exc.message),
                    "hint": visible(exc.hint) if exc.hint else exc.hint,
                }
                if isinstance(exc, StoreError) and exc.run_id:
                    error["run_id"] = exc.run_id
                payload = {"error": error}
                typer.echo(json.dumps(payload, ensure_ascii=False))
            else:
                # one line each, as long as it is (the terminal wraps it): a message cut at
                # the console's width split a file's path or a name a program greps for
                err_console.print(
                    f"[red]error[/red] [bold]{exc.code.value}[/bold]: ",
                    Text(visible(exc.message)),
                    sep="",
                    soft_wrap=True,
                )
                if exc.hint:
                    err_console.print("hint: ", Text(visible(exc.hint)), sep="", soft_wrap=True)
            raise typer.Exit(2) from None

    return wrapper


def _print_summary(
    summary: RunSummary, runtime: Runtime, as_json: bool, title: str | None = None
) -> None:
    if as_json:
        typer.echo(summary.model_dump_json())
        return
    import asyncio

    from corral.observe.redact import redactor_for
    from corral.observe.tree import run_tree
    from corral.runtime.state import fold

    events = asyncio.run(runtime.events(summary.run_id))
    state = fold(summary.run_id, events)
    console.print(run_tree(state, title, redactor_for(events), events))


def _runtime_for_run(
    run_id: str,
    folder: Path,
    agent_dir: Path | None,
    model: str | None = None,
    *,
    recorded: bool = False,
    store: str | None = None,
    setup: bool = True,
) -> Runtime:
    """A runtime for a stored run's agent.

    ``folder`` need not exist yet: it is made only once the run is found (a mistyped
    ``--home`` or run id leaves nothing behind).
    ``model`` names the model (``--model``); without it and with ``recorded``, the one the
    run was started with (so a resumed run keeps asking the model it began with).
    ``setup=False`` for a replay, which takes every tool result from the log: the agent's
    ``setup`` (a database seeded, a service started) is not run for it.
    """
    from corral.events import RunStarted
    from corral.runtime.runtime import Runtime

    _run_id(run_id)
    target = _store_target(folder, store)
    if isinstance(target, Path) and not target.exists():  # no store, so no run: make none
        raise RunNotFoundError(f"no run {run_id!r} in {target}", hint="see `corral runs`")
    opened = _open_store(folder, store)
    events = opened.load_events(run_id)
    if not events:
        raise RunNotFoundError(f"no run {run_id!r} in {opened.where()}", hint="see `corral runs`")
    _home(folder)  # found: its logs are written here
    started = events[0].payload
    root = agent_dir or (started.agent_root if isinstance(started, RunStarted) else None)
    if not root:
        raise RunNotFoundError(
            f"run {run_id} does not record its agent folder", hint="pass --agent AGENT_DIR"
        )
    if agent_dir is None and not (Path(root) / "agent.yaml").is_file():
        raise ConfigInvalidError(
            f"run {run_id} was started with the agent folder {root}, which has no "
            f"agent.yaml from here ({Path.cwd()})",
            hint="pass --agent AGENT_DIR, the folder of the agent the run started with",
        )
    if model is None and recorded:
        model = recorded_model(events)
    agent = _load(Path(root), folder, model, store=store, setup=setup)
    if isinstance(started, RunStarted) and agent.config.name != started.agent:
        raise ConfigInvalidError(
            f"run {run_id} was started by agent {started.agent!r}; the agent in {root} is "
            f"{agent.config.name!r}",
            hint=f"pass --agent with the folder of agent {started.agent!r}",
        )
    return Runtime(
        agent,
        opened,
        log_dir=folder / "logs",
        faults=_faults(),
    )


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f} %"


def _print_report(report: Any, title: str, as_json: bool, extra: dict[str, Any]) -> None:
    if as_json:
        typer.echo(json.dumps({**extra, **report.as_json()}, ensure_ascii=False))
        return
    from rich.table import Table

    table = Table(title=title, show_header=False)
    for key, value in extra.items():
        table.add_row(key, str(value))
    table.add_row(
        "examples",
        f"{report.examples} ({report.in_scope} in scope, {report.out_of_scope} out of scope)",
    )
    table.add_row("in-scope accuracy", _pct(report.accuracy))
    table.add_row("OOS recall", _pct(report.oos_recall))
    table.add_row("OOS precision", _pct(report.oos_precision))
    table.add_row("OOS threshold", f"{report.threshold:.2f}")
    table.add_row("calibration error (ECE)", f"{report.calibration_error:.3f}")
    table.add_row("latency per message", f"{report.latency_ms:.2f} ms")
    for true, predicted, count in report.confusions:
        table.add_row("confused", f"{true} → {predicted}: {count}")
    console.print(table)


def _settle_heap() -> None:
    """Keep what start-up built (modules, agents, schemas) out of later collections.

    For the long-lived commands only (``serve``, ``worker``), once their agents are
    loaded: a full collection otherwise walks every object that start-up made, for as
    long as the process serves, though none of it is ever garbage. ``gc.freeze`` moves
    those objects to a generation the collector does not scan; nothing else changes (the
    thresholds stay as they are, and a library user's process is never touched).
    """
    import gc

    gc.collect()
    gc.freeze()
