"""Commands that measure: eval suites and the intent classifier."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from corral.cli.common import (
    HomeOption,
    JsonOption,
    ModelOption,
    _fails_cleanly,
    _home,
    _load,
    _pct,
    _print_report,
    app,
    console,
)
from corral.observe.terminal import visible

if TYPE_CHECKING:
    from corral.agent import Agent


@app.command("eval")
@_fails_cleanly
def eval_suite(
    agent_dir: Annotated[Path, typer.Argument(help="Folder with agent.yaml and tools.py")],
    suite: Annotated[
        Path | None, typer.Option("--suite", help="Default: AGENT_DIR/eval.yaml")
    ] = None,
    model: ModelOption = None,
    as_json: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Run an eval suite; exit 1 when a tier misses its bar (core 100 %, regular 95 %).

    --model replaces only the agent's model name, as for `corral run`.
    """
    import asyncio
    import tempfile

    from rich.table import Table

    from corral.testing.evaluation import load_suite, run_suite

    folder = _home(home)
    scratch = Path(tempfile.mkdtemp(prefix="corral-eval-"))

    def fresh_agent() -> Agent:
        return _load(agent_dir, folder, model, data_dir=Path(tempfile.mkdtemp(dir=scratch)))

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
        table.add_row("partial completion rate", _pct(report.partial_completion_rate))
        outcomes = ", ".join(f"{k} ×{n}" for k, n in figures["outcomes"].items()) or "none"
        table.add_row("outcomes", outcomes)
        table.add_row("average steps", f"{report.average_steps:.2f}")
        failures = ", ".join(f"{k} ×{n}" for k, n in figures["tool_failures"].items()) or "none"
        table.add_row("tool failures", failures)
        table.add_row("seconds", str(figures["seconds"]))
        console.print(table)
        for failure in figures["failures"]:
            line = f" [{failure['tier']}] {failure['case']}: " + "; ".join(failure["problems"])
            console.print(Text.assemble(("✗", "red"), visible(line)))  # not markup: a tier in []
    if not report.tiers_met():
        raise typer.Exit(1)


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
    from corral.intent.classifier import IntentClassifierModel, content_hash
    from corral.intent.datasets import read_corpus
    from corral.intent.evaluation import evaluate
    from corral.intent.signed import signing_key

    folder = _home(home)
    corpus = read_corpus(data)
    started = time.perf_counter()
    model = IntentClassifierModel.fit(corpus.train)
    model.tune_threshold(corpus.valid)
    seconds = time.perf_counter() - started
    target = out or folder / "models" / f"intent-{content_hash(corpus.train, model.settings)}.pkl"
    model.save(target, signing_key(folder / "cache"))
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
    else:
        model = IntentClassifierModel.fit(corpus.train)
        model.tune_threshold(corpus.valid)
    _print_report(
        evaluate(model, corpus.test), "test", as_json, {"model": str(model_path or "trained now")}
    )
