"""Commands that measure: eval suites and the intent classifier."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from corral.cli.common import (
    HomeOption,
    JsonOption,
    ModelOption,
    StoreOption,
    _fails_cleanly,
    _home,
    _load,
    _pct,
    _print_report,
    app,
    console,
    err_console,
)
from corral.observe.terminal import visible

if TYPE_CHECKING:
    from corral.agent import Agent
    from corral.config import AgentConfig
    from corral.testing.evaluation import EvalSuite
    from corral.testing.faults import FaultProfile


@app.command("eval")
@_fails_cleanly
def eval_suite(
    agent_dir: Annotated[Path, typer.Argument(help="Folder with agent.yaml and tools.py")],
    suite: Annotated[
        Path | None, typer.Option("--suite", help="Default: AGENT_DIR/eval.yaml")
    ] = None,
    model: ModelOption = None,
    faults: Annotated[
        str | None,
        typer.Option(
            "--faults",
            help="Inject faults: none, flaky-10, flaky-30, hostile-model, crashy, or a YAML file",
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the fault schedule")] = 0,
    jobs: Annotated[int, typer.Option("--jobs", min=1, help="Cases run at once")] = 1,
    baseline: Annotated[
        Path | None,
        typer.Option("--baseline", help="A saved `--json` report: list what changed since"),
    ] = None,
    markdown_out: Annotated[
        Path | None, typer.Option("--markdown", help="Also write the report as Markdown here")
    ] = None,
    as_json: JsonOption = False,
    home: HomeOption = None,
    store: StoreOption = None,
) -> None:
    """Run an eval suite and report the seed 003 metrics; exit 1 when it misses a bar.

    The bars: each tier's pass rate (core 100 %, regular 95 %), and the counts that must
    be zero (duplicate effects, fabricated outcomes, invented arguments).
    --model replaces only the agent's model name, as for `corral run`. --faults strikes
    tool calls and model answers at the effects boundary, on a schedule fixed by --seed.
    """
    import tempfile

    from corral.errors import ConfigInvalidError
    from corral.testing.eval_report import compare, load_baseline, markdown
    from corral.testing.evaluation import load_suite
    from corral.testing.faults import load_profile

    folder = _home(home)
    profile = load_profile(faults) if faults else None
    before = load_baseline(baseline) if baseline else None
    if markdown_out is not None and not markdown_out.parent.is_dir():
        raise ConfigInvalidError(f"--markdown: no folder {markdown_out.parent}")
    if markdown_out is not None and markdown_out.is_dir():  # found after the whole run
        raise ConfigInvalidError(f"--markdown: {markdown_out} is a folder; name a file")
    cases = load_suite(suite or agent_dir / "eval.yaml")
    # each case's data (a copy of the business database) lives here, and goes at the end
    with tempfile.TemporaryDirectory(prefix="corral-eval-", ignore_cleanup_errors=True) as kept:
        figures, passed, name = _evaluate(
            agent_dir, folder, Path(kept), cases, model, profile, seed, jobs, store, as_json
        )
    if before is not None:
        figures["since_baseline"] = compare(figures, before)
    if markdown_out is not None:
        markdown_out.write_text(markdown(figures, f"eval {name}"), encoding="utf-8")
    if as_json:
        typer.echo(json.dumps(figures, ensure_ascii=False))
    else:
        _print_eval(figures, name)
    if not passed:
        raise typer.Exit(1)


def _evaluate(
    agent_dir: Path,
    folder: Path,
    scratch: Path,
    cases: EvalSuite,
    model: str | None,
    profile: FaultProfile | None,
    seed: int,
    jobs: int,
    store: str | None,
    quiet: bool,
) -> tuple[dict[str, Any], bool, str]:
    """Run the suite, each case on an agent of its own with data under ``scratch``.

    The report's figures, whether it met every bar, and the agent's name.
    """
    import asyncio
    import tempfile

    from corral.errors import ConfigInvalidError
    from corral.testing.evaluation import run_suite
    from corral.testing.recorded import RecordedCase
    from corral.tools.mcp.listing import McpListingCache

    listings = McpListingCache()  # each MCP server is listed once, not once per case
    config: AgentConfig | None = None  # agent.yaml is read and validated once, not per case

    def fresh_agent() -> Agent:
        data_dir = Path(tempfile.mkdtemp(dir=scratch))
        return _load(
            agent_dir,
            folder,
            model,
            data_dir=data_dir,
            mcp_listings=listings,
            store=store,
            config=config,
        )

    agent = fresh_agent()
    config = agent.config  # --model applied: applied again per load, to no effect
    asyncio.run(agent.aclose())  # read for its tools and name; each case loads its own
    if profile is not None:
        scripted = [t for t in profile.at if ":" not in t]
        missing = sorted(t for t in {*scripted, *profile.only_tools} if t not in agent.tools)
        if missing:  # a typo in only_tools struck nothing, and the eval passed
            raise ConfigInvalidError(
                f"fault profile {profile.name!r} names tools the agent lacks: {missing}",
                hint=f"its tools: {', '.join(agent.tools.names())}",
            )
    started = time.perf_counter()
    with _progress(len(cases.cases), quiet=quiet) as advance:
        report = asyncio.run(
            run_suite(fresh_agent, cases, faults=profile, seed=seed, jobs=jobs, on_case=advance)
        )
    figures = {**report.as_json(), "seconds": round(time.perf_counter() - started, 2)}
    if profile is not None:
        figures.update(fault_profile=profile.name, seed=seed)
        # a recorded case replays its log: its tool results and model answers are the
        # recorded ones, and no fault strikes them; said, not left to look struck
        figures["faults"]["replayed_unstruck"] = sum(
            1 for case in cases.cases if isinstance(case, RecordedCase)
        )
    return figures, report.passed_bars(), agent.name


@contextmanager
def _progress(total: int, *, quiet: bool) -> Iterator[Callable[[object], None]]:
    """A progress bar over the cases (on stderr), or nothing with --json."""
    if quiet:
        yield lambda _result: None
        return
    from rich.progress import Progress

    with Progress(console=err_console, transient=True) as bar:
        task = bar.add_task("cases", total=total)
        yield lambda _result: bar.advance(task)


def _print_eval(figures: dict[str, Any], name: str) -> None:
    from rich.table import Table

    metrics, zero = figures["metrics"], figures["must_be_zero"]
    table = Table(title=f"eval {name}: {figures['cases']} cases", show_header=False)
    if "fault_profile" in figures:
        injected = ", ".join(f"{k} ×{n}" for k, n in figures["faults"]["injected"].items())
        table.add_row("faults", f"{figures['fault_profile']} (seed {figures['seed']}): {injected}")
        unstruck = figures["faults"].get("replayed_unstruck", 0)
        if unstruck:
            table.add_row("", f"not in the {unstruck} recorded cases: they replay their logs")
    table.add_row("pass rate", _pct(figures["pass_rate"]))
    for tier, rate in figures["tiers"].items():
        table.add_row(f"  {tier}", _pct(rate))
    table.add_row("task success rate", _pct(metrics["task_success_rate"]))
    table.add_row("completion rate", _pct(figures["completion_rate"]))
    table.add_row("partial completion rate", _pct(metrics["partial_completion_rate"]))
    table.add_row("recoverability", _pct(metrics["recoverability"]))
    table.add_row("verifiability", _pct(metrics["verifiability"]))
    for cost, spread in metrics["cost"].items():
        values = f"{spread['mean']:g} mean, {spread['p50']:g} p50, {spread['p95']:g} p95"
        table.add_row(f"{cost.replace('_', ' ')} per case", values)
    for count, value in zero.items():
        style = "green" if value == 0 else "bold red"
        table.add_row(count.replace("_", " "), f"[{style}]{value}[/{style}]")
    outcomes = ", ".join(f"{k} ×{n}" for k, n in figures["outcomes"].items()) or "none"
    table.add_row("outcomes", outcomes)
    table.add_row("average steps", f"{figures['average_steps']:.2f}")
    failures = ", ".join(f"{k} ×{n}" for k, n in figures["tool_failures"].items()) or "none"
    table.add_row("tool failures", failures)
    table.add_row("seconds", str(figures["seconds"]))
    console.print(table)
    for change, cases in figures.get("since_baseline", {}).items():
        console.print(visible(f"{change.replace('_', ' ')}: {', '.join(cases) or 'none'}"))
    for failure in figures["failures"]:
        line = f" [{failure['tier']}] {failure['case']}: " + "; ".join(failure["problems"])
        console.print(Text.assemble(("✗", "red"), visible(line)))  # not markup: a tier in []


intent_app = typer.Typer(no_args_is_help=True, help="Train and evaluate the intent classifier.")
app.add_typer(intent_app, name="intent")

DataArgument = Annotated[
    Path, typer.Argument(help="A CSV (text,label), a seq.in/label folder, or a corpus folder")
]


@intent_app.command("train")
@_fails_cleanly
def intent_train(
    data: DataArgument,
    out: Annotated[Path | None, typer.Option("--out", help="Where to write the model")] = None,
    as_json: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Fit on the train split, tune the OOS threshold on valid, save, report on valid."""
    from corral.errors import ConfigInvalidError
    from corral.intent.classifier import IntentClassifierModel
    from corral.intent.compiled import content_hash
    from corral.intent.datasets import read_corpus
    from corral.intent.evaluation import evaluate
    from corral.intent.signed import signing_key

    folder = _home(home)
    if out is not None:  # checked before the training: its missing folders are made
        if out.is_dir():
            raise ConfigInvalidError(f"--out: {out} is a folder; name a file")
        above = next((p for p in out.parents if p.exists()), None)
        if above is not None and not above.is_dir():
            raise ConfigInvalidError(f"--out: {above} is a file, not a folder")
    corpus = read_corpus(data)
    started = time.perf_counter()
    model = IntentClassifierModel.fit(corpus.train)
    model.tune_threshold(corpus.valid)
    seconds = time.perf_counter() - started
    target = out or folder / "models" / f"intent-{content_hash(corpus.train, model.settings)}.pkl"
    try:
        model.save(target, signing_key(folder / "cache"))
    except OSError as exc:  # /proc/version, a read-only disk: after the training, but clean
        raise ConfigInvalidError(f"--out: cannot write {target}: {exc.strerror or exc}") from None
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
            "held_out": corpus.held_out,
        },
    )
    _warn_not_held_out(corpus.held_out)


@intent_app.command("eval")
@_fails_cleanly
def intent_eval(
    data: DataArgument,
    model_path: Annotated[
        Path | None,
        typer.Option("--model", help="A model trained by `corral intent train` with this home"),
    ] = None,
    as_json: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Report on the test split; without --model, train on train and tune on valid first."""
    from corral.intent.classifier import IntentClassifierModel
    from corral.intent.datasets import read_corpus
    from corral.intent.evaluation import evaluate
    from corral.intent.signed import signing_key

    corpus = read_corpus(data)
    if model_path is not None:
        model = IntentClassifierModel.load(model_path, signing_key(_home(home) / "cache"))
        held_out = True  # trained on other data, as far as this command knows
    else:
        model = IntentClassifierModel.fit(corpus.train)
        model.tune_threshold(corpus.valid)
        held_out = corpus.held_out
    _print_report(
        evaluate(model, corpus.test),
        "test",
        as_json,
        {"model": str(model_path or "trained now"), "held_out": held_out},
    )
    _warn_not_held_out(held_out)


def _warn_not_held_out(held_out: bool) -> None:
    """Say so when the figures were measured on the data the model was fitted to."""
    if not held_out:
        err_console.print(
            "warning: one split was used to train, tune and score: these figures are on the "
            "training data (and the OOS threshold was tuned on it); give a corpus folder "
            "(train/, valid/, test/) for held-out figures"
        )
