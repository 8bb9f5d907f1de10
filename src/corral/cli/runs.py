"""Commands on runs: run, resume, replay, show, runs, traces, handoff, gc."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from corral.cli.common import (
    HomeOption,
    JsonOption,
    ModelOption,
    StoreOption,
    _closing,
    _fails_cleanly,
    _home,
    _load,
    _open_store,
    _print_summary,
    _run_id,
    _runtime,
    _runtime_for_run,
    _store_target,
    _touch_log,
    app,
    console,
    err_console,
)
from corral.errors import InvalidArgumentError, RunNotFoundError, StoreCorruptError
from corral.inputs import require_one_input, require_words
from corral.observe.terminal import indented, visible

if TYPE_CHECKING:
    from rich.table import Column

    from corral.store.base import RunRecord

MAX_LIST = 10_000
"""The most runs ``corral runs`` lists at once."""

PriorityOption = Annotated[
    str | None,
    typer.Option(
        "--priority",
        help="urgent, normal or budget: how equivalent tools are ranked "
        "(default: from the message's words)",
    ),
]


@app.command()
@_fails_cleanly
def run(
    agent_dir: Annotated[Path, typer.Argument(help="Folder with agent.yaml and tools.py")],
    message: Annotated[str, typer.Argument(help="The user's message")],
    session: Annotated[str | None, typer.Option("--session", help="Session id")] = None,
    model: ModelOption = None,
    as_json: JsonOption = False,
    home: HomeOption = None,
    priority: PriorityOption = None,
    store: StoreOption = None,
    message_id: Annotated[
        str | None,
        typer.Option(
            "--message-id",
            help="The message's id in the session: the same command again shows the run "
            "it started or continued instead of handling the message twice",
        ),
    ] = None,
) -> None:
    """Handle one message with an agent and show the run."""
    require_words(message, "the message")
    if priority is not None:
        from corral.decision.priority import check_priority

        check_priority(priority)
    folder = _home(home)
    runtime = _runtime(_load(agent_dir, folder, model, store=store), folder, store)
    started = runtime.start(message, session_id=session, priority=priority, message_id=message_id)
    summary = _closing(runtime, started)
    _print_summary(summary, runtime, as_json)


@app.command("run-plan")
@_fails_cleanly
def run_plan(
    agent_dir: Annotated[Path, typer.Argument(help="Folder with agent.yaml and tools.py")],
    plan: Annotated[str, typer.Argument(help="A plan template of the agent")],
    entity: Annotated[
        list[str] | None, typer.Option("--entity", help="NAME=VALUE, for $entities.NAME")
    ] = None,
    session: Annotated[str | None, typer.Option("--session", help="Session id")] = None,
    model: ModelOption = None,
    as_json: JsonOption = False,
    home: HomeOption = None,
    priority: PriorityOption = None,
    store: StoreOption = None,
) -> None:
    """Run a plan template directly, without a message (``Runtime.run_plan``)."""
    entities: dict[str, Any] = {}
    for item in entity or []:
        name, equals, value = item.partition("=")
        if not equals or not name:
            raise typer.BadParameter(f"--entity takes NAME=VALUE, not {item!r}")
        if name in entities:  # which one was meant is not for corral to guess
            raise typer.BadParameter(f"--entity gives {name} twice; give it once")
        entities[name] = _entity_value(value)
    if priority is not None:
        from corral.decision.priority import check_priority

        check_priority(priority)
    folder = _home(home)
    runtime = _runtime(_load(agent_dir, folder, model, store=store), folder, store)
    summary = _closing(
        runtime, runtime.run_plan(plan, entities=entities, session_id=session, priority=priority)
    )
    _print_summary(summary, runtime, as_json)


def _entity_value(text: str) -> Any:
    """An entity value from the shell: a JSON object or list as such, anything else as text.

    A ``date_range`` entity is an object; the runtime then checks every value as
    extraction would (``corral.runtime.plan_entry``).
    """
    if text.lstrip().startswith(("{", "[")):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise typer.BadParameter(f"--entity value is not valid JSON: {exc}") from None
    return text


@app.command()
@_fails_cleanly
def resume(
    run_id: Annotated[str, typer.Argument(help="The paused (or interrupted) run")],
    approve: Annotated[bool, typer.Option("--approve", help="Approve the pending step")] = False,
    reject: Annotated[bool, typer.Option("--reject", help="Reject the pending step")] = False,
    answer: Annotated[str | None, typer.Option("--answer", help="Answer the question")] = None,
    agent_dir: Annotated[Path | None, typer.Option("--agent", help="Agent folder")] = None,
    step: Annotated[
        str | None,
        typer.Option("--step", help="The step whose confirmation you answer (pending.step_id)"),
    ] = None,
    call: Annotated[
        str | None,
        typer.Option(
            "--call",
            help="The call you were shown (pending.call, with --step): decide only while "
            "the step asks it",
        ),
    ] = None,
    wait: Annotated[
        bool, typer.Option("--wait", help="If another process drives the run, wait for it")
    ] = False,
    wait_timeout: Annotated[
        float,
        typer.Option("--wait-timeout", min=0, max=3600, help="Longest wait with --wait (s)"),
    ] = 120.0,
    model: ModelOption = None,
    as_json: JsonOption = False,
    home: HomeOption = None,
    store: StoreOption = None,
) -> None:
    """Continue a run: approve or reject a confirmation, answer a question, or recover it.

    One process drives a run at a time: while another one does, this exits 2 with
    RUN_BUSY, or waits for it with --wait. Approving twice (a double click) approves once.
    The run goes on with the model it was started with, unless --model names another.
    """
    if approve and reject:
        raise typer.BadParameter("give --approve or --reject, not both")
    decision = True if approve else False if reject else None
    require_one_input(decision, answer, step, call)  # INVALID_INPUT, as from the HTTP API
    _run_id(run_id)
    if answer is not None:
        require_words(answer, "the answer")
    folder = _home(home, create=False)
    runtime = _runtime_for_run(run_id, folder, agent_dir, model, recorded=True, store=store)
    summary = _closing(
        runtime,
        runtime.resume(
            run_id,
            approve=decision,
            answer=answer,
            step_id=step,
            call=call,
            wait_s=wait_timeout if wait else 0.0,
        ),
    )
    _print_summary(summary, runtime, as_json)


@app.command()
@_fails_cleanly
def replay(
    run_id: Annotated[str, typer.Argument(help="A stored run")],
    agent_dir: Annotated[Path | None, typer.Option("--agent", help="Agent folder")] = None,
    as_json: JsonOption = False,
    home: HomeOption = None,
    store: StoreOption = None,
) -> None:
    """Replay a stored run from its log (inputs, model answers, tool results) and compare.

    Exit 1 when the replay took another path; the first divergent event is printed.
    No tool is called, so the agent's setup() is not run.
    """
    from dataclasses import asdict

    from corral.observe.redact import redactor_for
    from corral.runtime.replay import compare, replay_events
    from corral.testing.recorded import divergence

    folder = _home(home, create=False)
    # every tool result comes from the log: no tool is called, so none is set up
    runtime = _runtime_for_run(run_id, folder, agent_dir, store=store, setup=False)
    events = runtime.store.load_events(run_id)
    new, error = _closing(runtime, replay_events(runtime.agent, events))
    report = compare(events, new, error)
    if as_json:
        typer.echo(json.dumps(asdict(report), ensure_ascii=False, default=str))
    elif report.same_path:
        console.print(f"[green]same path[/green]: {report.replayed_events} events match")
    else:  # said as an eval of a recorded case says it: by seq, naming what differed
        said = redactor_for(events).text(divergence(report, events, new))
        console.print(Text.assemble(("diverged", "red"), f": {visible(said)}"))
    if not report.same_path:
        raise typer.Exit(1)


@app.command()
@_fails_cleanly
def show(
    run_id: str, as_json: JsonOption = False, home: HomeOption = None, store: StoreOption = None
) -> None:
    """Show a stored run as a tree (or its summary as JSON), redacted, with its model calls."""
    from corral.observe.redact import redactor_for
    from corral.observe.tree import run_tree
    from corral.runtime.state import fold

    folder = _home(home, create=False)
    opened = _open_store(folder, store, read_only=True)
    events = opened.load_events(_run_id(run_id))
    if not events:
        raise RunNotFoundError(f"no run {run_id!r}")
    _touch_log(opened, run_id, folder)
    state = fold(run_id, events)
    redactor = redactor_for(events)
    if as_json:
        from corral.runtime.runtime import run_detail

        typer.echo(json.dumps(redactor.value(run_detail(state, events)), ensure_ascii=False))
    else:
        console.print(run_tree(state, redactor=redactor, events=events))


@app.command()
@_fails_cleanly
def runs(
    limit: Annotated[int, typer.Option(min=1, max=MAX_LIST, help="How many runs")] = 20,
    as_json: JsonOption = False,
    home: HomeOption = None,
    store: StoreOption = None,
) -> None:
    """List recent runs."""
    from rich.table import Table

    records = _open_store(_home(home, create=False), store, read_only=True).list_runs(limit)
    if as_json:
        typer.echo(
            json.dumps(
                [
                    {
                        "run_id": r.run_id,
                        "agent": r.agent,
                        "status": r.status,
                        "intent": _intent_of(r),
                        "created_at": r.created_at.isoformat(),
                    }
                    for r in records
                ],
                ensure_ascii=False,
            )
        )
        return
    ids = [r.run_id for r in records]
    table = Table(_id_column("run_id", ids), "agent", "status", "intent", "created")
    for r in records:
        table.add_row(
            *(Text(visible(v)) for v in (r.run_id, r.agent, r.status, _intent_of(r) or "")),
            r.created_at.isoformat(" ", "seconds"),
        )
    console.print(table)


def _intent_of(record: RunRecord) -> str | None:
    """The intent a stored run was classified as, if it got that far."""
    label = (record.summary.get("intent") or {}).get("label")
    return label if isinstance(label, str) else None


def _id_column(header: str, ids: Sequence[str]) -> Column:
    """A column of the run ids ``ids``, shown whole however narrow the terminal.

    They are there to be copied (``corral show``, ``resume``, ``traces``); the other
    columns wrap or shorten instead.
    """
    from rich.table import Column

    return Column(header, no_wrap=True, min_width=max(map(len, ids), default=len(header)))


@app.command()
@_fails_cleanly
def traces(
    run_id: Annotated[
        str | None, typer.Argument(help="A run; without it, the runs the filters find")
    ] = None,
    run: Annotated[str | None, typer.Option("--run", help="This run (as RUN_ID)")] = None,
    trace: Annotated[
        str | None,
        typer.Option("--trace", help="The run of this trace id (corral's, or the OTel one)"),
    ] = None,
    session: Annotated[str | None, typer.Option("--session", help="Runs of this session")] = None,
    intent: Annotated[str | None, typer.Option("--intent", help="Runs of this intent")] = None,
    stage: Annotated[
        str | None,
        typer.Option("--stage", help="Only this stage (run, intent, route, plan, decide, ...)"),
    ] = None,
    level: Annotated[
        str | None, typer.Option("--level", help="Minimum: debug, info, warn or error")
    ] = None,
    status: Annotated[
        str | None, typer.Option("--status", help="Runs in this status (finished, handed_off...)")
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="Runs created since: 30m, 1h, 7d ago, or ISO")
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Runs created before: 30m, 1h, 7d ago, or ISO")
    ] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="Runs of this agent")] = None,
    limit: Annotated[
        int, typer.Option("--limit", min=1, max=MAX_LIST, help="At most this many runs")
    ] = 20,
    as_json: JsonOption = False,
    home: HomeOption = None,
    store: StoreOption = None,
) -> None:
    """Show runs' logs (read from the store, redacted), filtered by run and by line.

    With RUN_ID alone: that run's log, its JSONL file rewritten from the store on the way
    (repairing a cut or lost line). With filters: the newest --limit runs that match all
    of them (found in SQL), oldest first. --stage and --level filter the lines.
    """
    from corral.contracts import RunStatus
    from corral.observe.logs import LEVELS
    from corral.observe.trace_ids import corral_trace_id

    if level is not None and level not in LEVELS:
        raise typer.BadParameter(f"level must be one of {', '.join(LEVELS)}")
    if run_id is not None and run is not None and run_id != run:
        raise typer.BadParameter("give the run as RUN_ID or --run, not two different ones")
    if status is not None and status not in {s.value for s in RunStatus}:
        raise typer.BadParameter(f"status must be one of {', '.join(s.value for s in RunStatus)}")
    target = run_id if run_id is not None else run
    folder = _home(home, create=False)
    filters = (trace, session, intent, status, since, until, agent)
    if target is not None and all(value is None for value in filters):
        _one_trace((folder, store), _run_id(target), stage, level, as_json)
        return
    _many_traces(
        (folder, store),
        {
            "run_id": _run_id(target) if target is not None else None,
            "trace_id": corral_trace_id(trace) if trace is not None else None,
            "session_id": session,
            "intent": intent,
            "status": status,
            "agent": agent,
            "since": since,
            "until": until,
        },
        (stage, level),
        limit,
        as_json,
    )


def _one_trace(
    where: tuple[Path, str | None],
    run_id: str,
    stage: str | None,
    level: str | None,
    as_json: bool,
) -> None:
    """One run's log, as ``corral traces RUN_ID`` always showed it (``where``: home, store)."""
    from corral.observe.logs import keep, log_records

    store = _open_store(*where, read_only=True)
    events = store.load_events(run_id)
    if not events:
        raise RunNotFoundError(f"no run {run_id!r}", hint="see `corral runs`")
    _touch_log(store, run_id, where[0])
    every = log_records(events)
    _check_stage(stage, every)
    records = [r for r in every if keep(r, stage, level)]
    _print_traces(records, as_json, with_run=False)


def _check_stage(stage: str | None, records: list[dict[str, Any]]) -> None:
    """Refuse a stage that is none of corral's and that no line shown carries (a typo).

    A gate or verifier of the agent's own may name a stage of its own (``run.emit``):
    found in the lines, it is kept.
    """
    from corral.contracts import STAGES

    if stage is not None and stage not in STAGES and all(r["stage"] != stage for r in records):
        raise typer.BadParameter(
            f"stage must be one of {', '.join(STAGES)}, or one an event of these runs names"
        )


def _many_traces(
    where: tuple[Path, str | None],
    found: dict[str, str | None],
    lines: tuple[str | None, str | None],
    limit: int,
    as_json: bool,
) -> None:
    """The logs of the runs the filters find in SQL, oldest first (``where``: home, store)."""
    from corral.cli.stats import open_for_queries
    from corral.observe.logs import keep, log_records
    from corral.observe.window import parse_time

    since, until = (found.pop(key) for key in ("since", "until"))
    if found["intent"] is None:
        store = _open_store(*where, read_only=True)
    else:  # --intent reads the stats projection, backfilled for runs stored before it
        store = open_for_queries(*where)
    ids = store.find_runs(
        **found,
        since=parse_time(since) if since is not None else None,
        until=parse_time(until) if until is not None else None,
        limit=limit,
    )
    every: list[dict[str, Any]] = []
    damaged: list[StoreCorruptError] = []
    for run_id in reversed(ids):
        try:
            every += log_records(store.load_events(run_id))
        except StoreCorruptError as exc:  # one damaged run hides none of the others
            damaged.append(exc)
    for problem in damaged:  # on stderr, apart from the records (stdout: one record a line)
        err_console.print(
            f"[red]error[/red] [bold]{problem.code.value}[/bold]: ",
            Text(visible(problem.message)),
            sep="",
            soft_wrap=True,
        )
    _check_stage(lines[0], every)
    records = [record for record in every if keep(record, *lines)]
    if not ids and not as_json:
        console.print("no runs match")
        return
    _print_traces(records, as_json, with_run=True)
    if damaged:  # as ``ls`` does: what could be read is shown, and the exit says it was not all
        raise typer.Exit(2)


def _print_traces(records: list[dict[str, Any]], as_json: bool, *, with_run: bool) -> None:
    if as_json:
        for record in records:
            typer.echo(json.dumps(record, ensure_ascii=False))
        return
    from rich.table import Table

    columns = ("seq", "stage", "event", "level", "status", "input", "output", "ms")
    ids = [r["run_id"] for r in records]
    table = Table(*((_id_column("run", ids), *columns) if with_run else columns))
    for r in records:
        ms = f"{r['duration_ms']:.1f}" if isinstance(r["duration_ms"], int | float) else ""
        cells = [
            str(r["seq"]),
            r["stage"],
            r["event"],
            r["level"],
            Text(visible(r["status"])),
            Text(visible(r["input_summary"][:40])),
            Text(visible(r["output_summary"][:60])),
            ms,
        ]
        table.add_row(*([Text(visible(r["run_id"])), *cells] if with_run else cells))
    console.print(table)


@app.command()
@_fails_cleanly
def handoff(
    run_id: str, as_json: JsonOption = False, home: HomeOption = None, store: StoreOption = None
) -> None:
    """Show the handoff packet of a run that went to a person, redacted."""
    from rich.table import Table

    from corral.observe.redact import redactor_for

    opened = _open_store(_home(home, create=False), store, read_only=True)
    stored = opened.get_handoff(_run_id(run_id))
    if stored is None:
        record = opened.get_run(run_id)
        if record is None:
            raise RunNotFoundError(f"no run {run_id!r}", hint="corral runs lists them")
        said = (
            "was handed off, but no handoff packet of it is stored"
            if record.status == "handed_off"
            else f"was not handed off to a person ({record.status}): it has no handoff packet"
        )
        raise InvalidArgumentError(  # it exists: not RUN_NOT_FOUND
            f"run {run_id!r} {said}", hint=f"corral show {run_id} shows what it did"
        )
    # packets are redacted when made; older ones (and new secrets) are redacted here too
    redactor = redactor_for(opened.load_events(run_id))
    packet = redactor.value(stored.model_dump(mode="json"))
    if as_json:
        typer.echo(json.dumps(packet, ensure_ascii=False))
        return
    console.print(
        Text.assemble(
            ("handoff", "bold"),
            f" {visible(packet['run_id'])}  trace {visible(packet['trace_id'])}",
        )
    )
    console.print(
        Text.assemble(
            "reason: ",
            (visible(packet["reason_code"]), "yellow"),
            " " + indented(packet["reason"], len("reason: ")),
        )
    )
    for message in packet["user_messages"]:
        console.print(Text("user: " + indented(message, len("user: "))))
    table = Table("step", "tool", "status", "input", "output", "error")
    for step in packet["steps"]:
        table.add_row(
            *(
                Text(visible(v))
                for v in (
                    step["id"],
                    step["tool"],
                    step["status"],
                    json.dumps(step["input"], ensure_ascii=False)[:50],
                    json.dumps(step["output"], ensure_ascii=False, default=str)[:60],
                    step["error_code"] or "",
                )
            )
        )
    console.print(table)


@app.command()
@_fails_cleanly
def gc(home: HomeOption = None, store: StoreOption = None) -> None:
    """Delete expired sessions (7 days) and ended runs older than 30 days (seed 002)."""
    from datetime import UTC, datetime

    from corral.observe.logs import JsonlLog
    from corral.runtime.runtime import TASK_TTL

    folder = _home(home, create=False)
    target = _store_target(folder, store)
    if isinstance(target, Path) and not target.exists():  # nothing stored: make nothing
        console.print("deleted 0 sessions and 0 runs (0 log files)")
        return
    opened = _open_store(folder, store)
    now = datetime.now(UTC)
    sessions_deleted, runs_deleted = opened.purge(now, TASK_TTL)
    logs = JsonlLog(folder / "logs")
    # A log no store row backs is an orphan only once it is as old as a purged run's: the
    # home's logs folder also holds the logs of runs kept in another store (--store)
    aged = (now - TASK_TTL).timestamp()
    orphans = [
        p.stem
        for p in logs.folder.glob("*.jsonl")
        if p.stat().st_mtime < aged and opened.get_run(p.stem) is None
    ]
    logs_deleted = logs.remove({*runs_deleted, *orphans})
    console.print(
        f"deleted {sessions_deleted} sessions and {len(runs_deleted)} runs "
        f"({logs_deleted} log files)"
    )
