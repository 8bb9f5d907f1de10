"""The ``corral`` command line: demo, run, resume, runs, show, traces, handoff.

State lives under a home folder (``--home``, else ``$CORRAL_HOME``, else ``./.corral``):
``corral.db`` (SQLite, WAL) for runs, events and sessions, ``logs/`` for the JSONL logs,
and ``data/<agent>/`` for each example agent's business database.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from corral.agent import Agent, load_agent
from corral.contracts import RunStatus, RunSummary
from corral.errors import CorralError, RunNotFoundError
from corral.observe.logs import LEVELS, JsonlLog
from corral.observe.tree import run_tree
from corral.runtime.runtime import Runtime
from corral.runtime.state import fold
from corral.store.sql import SqlStore

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="corral: task-oriented agents you can trust in production.",
)
console = Console()
err_console = Console(stderr=True)
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

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
                err_console.print(f"[red]error[/red] [bold]{exc.code.value}[/bold]: {exc.message}")
                if exc.hint:
                    err_console.print(f"hint: {exc.hint}")
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


@app.command()
@_fails_cleanly
def resume(
    run_id: Annotated[str, typer.Argument(help="The paused (or interrupted) run")],
    approve: Annotated[bool, typer.Option("--approve", help="Approve the pending step")] = False,
    reject: Annotated[bool, typer.Option("--reject", help="Reject the pending step")] = False,
    answer: Annotated[str | None, typer.Option("--answer", help="Answer the question")] = None,
    agent_dir: Annotated[Path | None, typer.Option("--agent", help="Agent folder")] = None,
    as_json: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Continue a run: approve or reject a confirmation, answer a question, or recover it."""
    if approve and reject:
        raise typer.BadParameter("give --approve or --reject, not both")
    decision = True if approve else False if reject else None
    folder = _home(home)
    runtime = _runtime_for_run(run_id, folder, agent_dir)
    summary = asyncio.run(runtime.resume(run_id, approve=decision, answer=answer))
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
    store = SqlStore.open(_home(home) / "corral.db")
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
    records = SqlStore.open(_home(home) / "corral.db").list_runs(limit)
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
    packet = SqlStore.open(_home(home) / "corral.db").get_handoff(run_id)
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


@app.command("eval")
@_fails_cleanly
def eval_suite(
    agent_dir: Annotated[Path, typer.Argument(help="Folder with agent.yaml and tools.py")],
    suite: Annotated[
        Path | None, typer.Option("--suite", help="Default: AGENT_DIR/eval.yaml")
    ] = None,
    as_json: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Run an eval suite; exit 1 when a tier misses its bar (core 100 %, regular 95 %)."""
    from corral.testing.evaluation import load_suite, run_suite

    folder = _home(home)
    scratch = Path(tempfile.mkdtemp(prefix="corral-eval-"))

    def fresh_agent() -> Agent:
        return load_agent(
            agent_dir, data_dir=Path(tempfile.mkdtemp(dir=scratch)), cache_dir=folder / "cache"
        )

    agent = fresh_agent()
    started = time.perf_counter()
    report = asyncio.run(run_suite(fresh_agent, load_suite(suite or agent_dir / "eval.yaml")))
    figures = {**report.as_json(), "seconds": round(time.perf_counter() - started, 2)}
    if as_json:
        typer.echo(json.dumps(figures, ensure_ascii=False))
    else:
        table = Table(title=f"eval {agent.name}: {figures['cases']} cases", show_header=False)
        table.add_row("pass rate", _pct(report.pass_rate()))
        for tier, rate in figures["tiers"].items():
            table.add_row(f"  {tier}", _pct(rate))
        table.add_row("completion rate", _pct(report.completion_rate))
        table.add_row("average steps", f"{report.average_steps:.2f}")
        failures = ", ".join(f"{k} ×{n}" for k, n in figures["tool_failures"].items()) or "none"
        table.add_row("tool failures", failures)
        table.add_row("seconds", str(figures["seconds"]))
        console.print(table)
        for failure in figures["failures"]:
            console.print(
                f"[red]✗[/red] [{failure['tier']}] {failure['case']}: "
                + "; ".join(failure["problems"])
            )
    if not report.tiers_met():
        raise typer.Exit(1)


@app.command()
@_fails_cleanly
def gc(home: HomeOption = None) -> None:
    """Delete expired sessions (7 days) and ended runs older than 30 days (seed 002)."""
    from datetime import UTC, datetime

    from corral.runtime.runtime import TASK_TTL

    store = SqlStore.open(_home(home) / "corral.db")
    sessions_deleted, runs_deleted = store.purge(datetime.now(UTC), TASK_TTL)
    console.print(f"deleted {sessions_deleted} sessions and {runs_deleted} runs")


YES = {
    "是",
    "是的",
    "好",
    "好的",
    "确认",
    "可以",
    "行",
    "嗯",
    "对",
    "y",
    "yes",
    "ok",
    "okay",
    "sure",
}
NO = {"不", "不要", "不用", "否", "取消", "算了", "n", "no", "nope", "cancel"}


@app.command()
@_fails_cleanly
def chat(
    agent_dir: Annotated[Path, typer.Argument(help="Folder with agent.yaml and tools.py")],
    session: Annotated[str | None, typer.Option("--session", help="Session id")] = None,
    home: HomeOption = None,
) -> None:
    """Talk to an agent in the terminal; the state is shown after each turn.

    Answer a confirmation with yes/no (是/不); /quit or an empty line ends the chat.
    """
    folder = _home(home)
    runtime = _runtime(_load(agent_dir, folder), folder)
    session_id = session or f"chat-{int(time.time())}"
    console.print(f"[dim]session {session_id} — /quit to leave[/dim]")
    waiting: RunSummary | None = None
    while True:
        try:
            line = input("you> ").strip()
        except EOFError:
            break
        if not line or line in ("/quit", "/exit"):
            break
        if waiting is not None and waiting.pending and waiting.pending.kind == "confirm":
            word = line.lower().rstrip("。.!！")
            if word not in YES | NO:
                console.print("agent> 请回答 是 或 不 (yes / no)")
                continue
            summary = asyncio.run(runtime.resume(waiting.run_id, approve=word in YES))
        else:
            summary = asyncio.run(runtime.start(line, session_id=session_id))
        console.print(f"agent> {summary.reply}")
        state = asyncio.run(runtime.load_state(summary.run_id))
        intent = summary.intent.label if summary.intent else None
        entities = ", ".join(
            f"{k}={v['text'] if isinstance(v, dict) else v}" for k, v in state.entities.items()
        )
        console.print(
            f"[dim]  state: {summary.status.value} · intent {intent} · "
            f"entities {entities or '-'} · run {summary.run_id}[/dim]"
        )
        waiting = summary if summary.status is RunStatus.AWAITING_CONFIRM else None


intent_app = typer.Typer(no_args_is_help=True, help="Train and evaluate the intent classifier.")
app.add_typer(intent_app, name="intent")

DataArgument = Annotated[
    Path, typer.Argument(help="A CSV (text,label), a seq.in/label folder, or a corpus folder")
]


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


@intent_app.command("train")
@_fails_cleanly
def intent_train(
    data: DataArgument,
    out: Annotated[Path | None, typer.Option("--out", help="Where to write the model")] = None,
    as_json: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Fit on the train split, tune the OOS threshold on valid, save, report on valid."""
    from corral.intent.classifier import IntentClassifierModel, content_hash
    from corral.intent.datasets import read_corpus
    from corral.intent.evaluation import evaluate

    corpus = read_corpus(data)
    started = time.perf_counter()
    model = IntentClassifierModel.fit(corpus.train)
    model.tune_threshold(corpus.valid)
    seconds = time.perf_counter() - started
    target = (
        out or _home(home) / "models" / f"intent-{content_hash(corpus.train, model.settings)}.pkl"
    )
    model.save(target)
    _print_report(
        evaluate(model, corpus.valid),
        "validation",
        as_json,
        {
            "model": str(target),
            "train_examples": len(corpus.train),
            "train_seconds": round(seconds, 2),
            "calibrated": model.calibrated,
            "temperature": round(model.temperature, 3),
        },
    )


@intent_app.command("eval")
@_fails_cleanly
def intent_eval(
    data: DataArgument,
    model_path: Annotated[Path | None, typer.Option("--model", help="A trained model")] = None,
    as_json: JsonOption = False,
) -> None:
    """Report on the test split; without --model, train on train and tune on valid first."""
    from corral.intent.classifier import IntentClassifierModel
    from corral.intent.datasets import read_corpus
    from corral.intent.evaluation import evaluate

    corpus = read_corpus(data)
    if model_path is not None:
        model = IntentClassifierModel.load(model_path)
    else:
        model = IntentClassifierModel.fit(corpus.train)
        model.tune_threshold(corpus.valid)
    _print_report(
        evaluate(model, corpus.test), "test", as_json, {"model": str(model_path or "trained now")}
    )


DEMO_SCRIPT: list[tuple[str, str, list[tuple[str, Any]]]] = [
    (
        "exchange in warranty, confirmed",
        "我的打印机上周坏了，订单号 HD20240501，能换新吗？",
        [("approve", True)],
    ),
    (
        "exchange out of warranty, refused",
        "Can I get a replacement for my scanner? Order HD20230315.",
        [],
    ),
    (
        "missing order id, asked for; then declined",
        "我想申请换新，显示器突然黑屏了",
        [("answer", "订单号是 HD20250920"), ("approve", False)],
    ),
    ("complaint, handed off with no tool", "你们这个打印机真是气死我了！", []),
    ("chit-chat, canned reply", "Hello! Nice weather today, isn't it?", []),
    ("gibberish, clarified", "asdfgh 啊啊啊 ？？？", []),
]


@app.command()
@_fails_cleanly
def demo(as_json: JsonOption = False, home: HomeOption = None) -> None:
    """Run the after-sales agent on scripted Chinese and English messages, offline."""
    folder = home or Path(tempfile.mkdtemp(prefix="corral-demo-"))
    folder.mkdir(parents=True, exist_ok=True)
    agent = _load(EXAMPLES / "aftersales", folder)
    runtime = _runtime(agent, folder)
    results: list[dict[str, Any]] = []
    started = time.perf_counter()
    for title, message, follow_ups in DEMO_SCRIPT:
        summary = asyncio.run(runtime.start(message))
        if not as_json:
            _print_summary(summary, runtime, False, title)
        for kind, value in follow_ups:
            if kind == "approve":
                summary = asyncio.run(runtime.resume(summary.run_id, approve=bool(value)))
                label = "operator approves" if value else "user declines"
            else:
                summary = asyncio.run(runtime.resume(summary.run_id, answer=str(value)))
                label = f"user answers: {value}"
            if not as_json:
                _print_summary(summary, runtime, False, f"  ↳ {label}")
        results.append(
            {"case": title, **summary.model_dump(mode="json", exclude={"pending", "handoff"})}
        )
    elapsed = time.perf_counter() - started
    if as_json:
        typer.echo(json.dumps({"cases": results, "wall_s": round(elapsed, 3)}, ensure_ascii=False))
        return
    statuses = ", ".join(f"{r['case'].split(',')[0]}: {r['status']}" for r in results)
    console.print(
        f"\n[bold]{len(results)} scenarios in {elapsed * 1000:.0f} ms[/bold] "
        f"(state in {folder})\n{statuses}"
    )
    console.print(f"Try: corral traces <run_id> --home {folder}")


def main() -> None:
    """Console-script entry point."""
    app()
