"""Shared pieces of the command line: the app, options, loading agents, printing runs.

State lives under a home folder (``--home``, else ``$CORRAL_HOME``, else ``./.corral``):
``corral.db`` (SQLite, WAL) for runs, events and sessions, ``logs/`` for the JSONL logs,
and ``data/<agent>/`` for each example agent's business database.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from corral.agent import Agent, load_agent
from corral.contracts import RunSummary
from corral.errors import CorralError, RunNotFoundError
from corral.observe.tree import run_tree
from corral.runtime.runtime import Runtime
from corral.store.sql import SqlStore

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="corral: task-oriented agents you can trust in production.",
)
console = Console()
err_console = Console(stderr=True)
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

T = TypeVar("T")

HomeOption = Annotated[Path | None, typer.Option("--home", help="State folder (default .corral)")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a tree")]


def _home(home: Path | None) -> Path:
    folder = home or Path(os.environ.get("CORRAL_HOME", ".corral"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _load(agent_dir: Path, home: Path, model: str | None = None) -> Agent:
    chosen = None
    if model is not None:
        from corral.models.replay import ReplayModel
        from corral.models.resolve import resolve_model

        store = SqlStore.open(home / "corral.db")
        chosen = resolve_model(
            model, replay_loader=lambda run_id: ReplayModel.from_events(store.load_events(run_id))
        )
    return load_agent(
        agent_dir,
        data_dir=home / "data" / agent_dir.resolve().name,
        cache_dir=home / "cache",
        model=chosen,
    )


def _runtime(agent: Agent, home: Path) -> Runtime:
    return Runtime(agent, SqlStore.open(home / "corral.db"), log_dir=home / "logs")


def _fails_cleanly(command: Callable[..., T]) -> Callable[..., T]:
    """Print a corral error with its stable code and exit 2, instead of a traceback."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return command(*args, **kwargs)
        except CorralError as exc:
            if kwargs.get("as_json"):
                payload = {
                    "error": {"code": exc.code.value, "message": exc.message, "hint": exc.hint}
                }
                typer.echo(json.dumps(payload, ensure_ascii=False))
            else:
                # escape: a message naming a type such as list[str] is not markup
                message = escape(exc.message)
                err_console.print(f"[red]error[/red] [bold]{exc.code.value}[/bold]: {message}")
                if exc.hint:
                    err_console.print(f"hint: {escape(exc.hint)}")
            raise typer.Exit(2) from None

    return wrapper


def _print_summary(
    summary: RunSummary, runtime: Runtime, as_json: bool, title: str | None = None
) -> None:
    if as_json:
        typer.echo(summary.model_dump_json(exclude={"pending", "outcome"}))
        return
    state = asyncio.run(runtime.load_state(summary.run_id))
    console.print(run_tree(state, title))


def _runtime_for_run(run_id: str, folder: Path, agent_dir: Path | None) -> Runtime:
    store = SqlStore.open(folder / "corral.db")
    events = store.load_events(run_id)
    if not events:
        raise RunNotFoundError(f"no run {run_id!r} in {folder}", hint="see `corral runs`")
    root = agent_dir or events[0].data.get("agent_root")
    if not root:
        raise RunNotFoundError(
            f"run {run_id} does not record its agent folder", hint="pass --agent AGENT_DIR"
        )
    return Runtime(_load(Path(root), folder), store, log_dir=folder / "logs")


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f} %"


def _print_report(report: Any, title: str, as_json: bool, extra: dict[str, Any]) -> None:
    if as_json:
        typer.echo(json.dumps({**extra, **report.as_json()}, ensure_ascii=False))
        return
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
