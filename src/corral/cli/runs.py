"""Commands on runs: run, resume, replay, show, runs, traces, handoff, gc."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from corral.cli.common import (
    HomeOption,
    JsonOption,
    _fails_cleanly,
    _home,
    _load,
    _print_summary,
    _runtime,
    _runtime_for_run,
    app,
    console,
)
from corral.errors import RunNotFoundError
from corral.observe.logs import LEVELS, JsonlLog
from corral.observe.tree import run_tree
from corral.runtime.state import fold
from corral.store.sql import SqlStore


@app.command()
@_fails_cleanly
def run(
    agent_dir: Annotated[Path, typer.Argument(help="Folder with agent.yaml and tools.py")],
    message: Annotated[str, typer.Argument(help="The user's message")],
    session: Annotated[str | None, typer.Option("--session", help="Session id")] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="e.g. openai:deepseek-chat (base URL: OPENAI_BASE_URL)"),
    ] = None,
    as_json: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Handle one message with an agent and show the run."""
    folder = _home(home)
    runtime = _runtime(_load(agent_dir, folder, model), folder)
    summary = asyncio.run(runtime.start(message, session_id=session))
    _print_summary(summary, runtime, as_json)


@app.command()
@_fails_cleanly
def resume(
    run_id: Annotated[str, typer.Argument(help="The paused (or interrupted) run")],
    approve: Annotated[bool, typer.Option("--approve", help="Approve the pending step")] = False,
    reject: Annotated[bool, typer.Option("--reject", help="Reject the pending step")] = False,
    answer: Annotated[str | None, typer.Option("--answer", help="Answer the question")] = None,
    agent_dir: Annotated[Path | None, typer.Option("--agent", help="Agent folder")] = None,
    wait: Annotated[
        bool, typer.Option("--wait", help="If another process drives the run, wait for it")
    ] = False,
    wait_timeout: Annotated[
        float,
        typer.Option("--wait-timeout", min=0, max=3600, help="Longest wait with --wait (s)"),
    ] = 120.0,
    as_json: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Continue a run: approve or reject a confirmation, answer a question, or recover it.

    One process drives a run at a time: while another one does, this exits 2 with
    RUN_BUSY, or waits for it with --wait. Approving twice (a double click) approves once.
    """
    if approve and reject:
        raise typer.BadParameter("give --approve or --reject, not both")
    decision = True if approve else False if reject else None
    folder = _home(home)
    runtime = _runtime_for_run(run_id, folder, agent_dir)
    summary = asyncio.run(
        runtime.resume(
            run_id, approve=decision, answer=answer, wait_s=wait_timeout if wait else 0.0
        )
    )
    _print_summary(summary, runtime, as_json)


@app.command()
@_fails_cleanly
def replay(
    run_id: Annotated[str, typer.Argument(help="A stored run")],
    agent_dir: Annotated[Path | None, typer.Option("--agent", help="Agent folder")] = None,
    as_json: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Replay a stored run from its log (inputs, model answers, tool results) and compare.

    Exit 1 when the replay took another path; the first divergent event is printed.
    """
    from dataclasses import asdict

    from corral.runtime.replay import replay_run

    folder = _home(home)
    runtime = _runtime_for_run(run_id, folder, agent_dir)
    events = runtime.store.load_events(run_id)
    report = asyncio.run(replay_run(runtime.agent, events))
    if as_json:
        typer.echo(json.dumps(asdict(report), ensure_ascii=False, default=str))
    elif report.same_path:
        console.print(f"[green]same path[/green]: {report.replayed_events} events match")
    else:
        console.print(f"[red]diverged[/red] at event {report.divergence_index}")
        console.print(f"  recorded: {report.original}")
        console.print(f"  replayed: {report.replayed}")
        if report.error:
            console.print(f"  error: {report.error}")
    if not report.same_path:
        raise typer.Exit(1)


@app.command()
@_fails_cleanly
def show(run_id: str, as_json: JsonOption = False, home: HomeOption = None) -> None:
    """Show a stored run as a tree (or its summary as JSON)."""
    store = SqlStore.open(_home(home) / "corral.db", read_only=True)
    events = store.load_events(run_id)
    if not events:
        raise RunNotFoundError(f"no run {run_id!r}")
    state = fold(run_id, events)
    if as_json:
        from corral.runtime.runtime import summarize_run

        typer.echo(summarize_run(state).model_dump_json())
    else:
        console.print(run_tree(state))


@app.command()
@_fails_cleanly
def runs(limit: int = 20, as_json: JsonOption = False, home: HomeOption = None) -> None:
    """List recent runs."""
    records = SqlStore.open(_home(home) / "corral.db", read_only=True).list_runs(limit)
    if as_json:
        typer.echo(
            json.dumps(
                [
                    {
                        "run_id": r.run_id,
                        "agent": r.agent,
                        "status": r.status,
                        "created_at": r.created_at.isoformat(),
                    }
                    for r in records
                ]
            )
        )
        return
    table = Table("run_id", "agent", "status", "intent", "created")
    for r in records:
        intent = (r.summary.get("intent") or {}).get("label") or ""
        table.add_row(r.run_id, r.agent, r.status, intent, r.created_at.isoformat(" ", "seconds"))
    console.print(table)


@app.command()
@_fails_cleanly
def traces(
    run_id: str,
    stage: Annotated[str | None, typer.Option("--stage", help="Only this stage")] = None,
    level: Annotated[str | None, typer.Option("--level", help=f"Minimum: {LEVELS}")] = None,
    as_json: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Show a run's JSONL log, filtered by stage and minimum level."""
    if level is not None and level not in LEVELS:
        raise typer.BadParameter(f"level must be one of {', '.join(LEVELS)}")
    log = JsonlLog(_home(home) / "logs")
    if not log.path(run_id).is_file():
        raise RunNotFoundError(f"no log for run {run_id!r}")
    records = list(log.read(run_id, stage=stage, level=level))
    if as_json:
        for record in records:
            typer.echo(json.dumps(record, ensure_ascii=False))
        return
    table = Table("seq", "stage", "event", "level", "status", "input", "output", "ms")
    for r in records:
        ms = f"{r['duration_ms']:.1f}" if isinstance(r["duration_ms"], int | float) else ""
        table.add_row(
            str(r["seq"]),
            r["stage"],
            r["event"],
            r["level"],
            r["status"],
            r["input_summary"][:40],
            r["output_summary"][:60],
            ms,
        )
    console.print(table)


@app.command()
@_fails_cleanly
def handoff(run_id: str, as_json: JsonOption = False, home: HomeOption = None) -> None:
    """Show the handoff packet of a run that went to a person."""
    packet = SqlStore.open(_home(home) / "corral.db", read_only=True).get_handoff(run_id)
    if packet is None:
        raise RunNotFoundError(f"run {run_id!r} has no handoff packet")
    if as_json:
        typer.echo(packet.model_dump_json())
        return
    console.print(f"[bold]handoff[/bold] {packet.run_id}  trace {packet.trace_id}")
    console.print(f"reason: [yellow]{packet.reason_code}[/yellow] {packet.reason}")
    for message in packet.user_messages:
        console.print(f"user: {message}")
    table = Table("step", "tool", "status", "input", "output", "error")
    for step in packet.steps:
        table.add_row(
            step.id,
            step.tool,
            step.status.value,
            json.dumps(step.input, ensure_ascii=False)[:50],
            json.dumps(step.output, ensure_ascii=False, default=str)[:60],
            step.error_code or "",
        )
    console.print(table)


@app.command()
@_fails_cleanly
def gc(home: HomeOption = None) -> None:
    """Delete expired sessions (7 days) and ended runs older than 30 days (seed 002)."""
    from datetime import UTC, datetime

    from corral.runtime.runtime import TASK_TTL

    store = SqlStore.open(_home(home) / "corral.db")
    sessions_deleted, runs_deleted = store.purge(datetime.now(UTC), TASK_TTL)
    console.print(f"deleted {sessions_deleted} sessions and {len(runs_deleted)} runs")
