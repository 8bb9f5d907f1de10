"""``corral stats``: how runs ended, handoffs, tool failures, stage and tool timings, cost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

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
from corral.observe.terminal import visible

if TYPE_CHECKING:
    from corral.observe.stats import RunStats
    from corral.store.sql import SqlStore

SinceOption = Annotated[
    str | None,
    typer.Option("--since", help="Runs created since: 90s, 30m, 1h, 7d, 2w ago, or an ISO time"),
]


@app.command()
@_fails_cleanly
def stats(
    since: SinceOption = None,
    agent: Annotated[str | None, typer.Option("--agent", help="Only this agent's runs")] = None,
    as_json: JsonOption = False,
    home: HomeOption = None,
    store: StoreOption = None,
) -> None:
    """Figures of the stored runs, computed in SQL: completion, handoffs, failures, p50/p95.

    Rates are over runs that ended (finished, failed or handed off); see docs/operations.md.
    """
    from corral.observe.stats import run_stats
    from corral.observe.window import parse_time

    start = parse_time(since) if since is not None else None
    report = run_stats(open_for_queries(_home(home, create=False), store), since=start, agent=agent)
    if as_json:
        typer.echo(json.dumps(report.model_dump(mode="json"), ensure_ascii=False))
        return
    _print(report)


def open_for_queries(home: Path, url: str | None = None) -> SqlStore:
    """The command's store (``--store``), writable if it can be: queries backfill the projection.

    A home that cannot be written is read as it is (runs stored before the projection
    existed are then left out of the figures and of ``traces --intent``); a SQLite file
    that does not exist yet reads as empty, and none is created.
    """
    from corral.errors import StoreReadOnlyError
    from corral.store.sql import SqlStore

    path = _store_target(home, url)
    if not isinstance(path, Path):
        return SqlStore.open(path)
    if not path.exists():
        return SqlStore.open(path, read_only=True)
    try:
        return SqlStore.open(path)
    except StoreReadOnlyError:
        return SqlStore.open(path, read_only=True)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f} %"


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _print(report: RunStats) -> None:
    """Rich tables for a person: the overview, then the timings and failures."""
    from rich.table import Table

    overview = Table(title="runs", show_header=False)
    overview.add_row("runs (ended)", f"{report.runs} ({report.ended})")
    for status, count in report.by_status.items():
        overview.add_row(Text(f"  {visible(status)}"), str(count))
    overview.add_row("completion rate", _pct(report.completion_rate))
    overview.add_row("partial completion rate", _pct(report.partial_completion_rate))
    overview.add_row("handoff rate", _pct(report.handoff_rate))
    for reason, count in report.handoff_reasons.items():
        overview.add_row(Text(f"  {visible(reason)}"), str(count))
    overview.add_row("steps per run", _num(report.avg_steps))
    overview.add_row("tool calls per run", _num(report.avg_tool_calls))
    overview.add_row("model calls", str(report.model_calls))
    overview.add_row("tokens in / out", f"{report.tokens.input} / {report.tokens.output}")
    overview.add_row("cost", f"{report.cost:.4f}")
    console.print(overview)
    stages = Table("stage", "p50 ms", "p95 ms", title="time per stage (per run)")
    for stage, ms in report.stage_p50_ms.items():
        stages.add_row(Text(visible(stage)), f"{ms:.1f}", f"{report.stage_p95_ms[stage]:.1f}")
    console.print(stages)
    tools = Table("tool", "calls", "failed", "p50 ms", "p95 ms", title="tools (per attempt)")
    failures = report.tool_failures
    for tool, calls in report.tool_calls.items():
        tools.add_row(
            Text(visible(tool)),
            str(calls),
            str(failures.by_tool.get(tool, 0)),
            f"{report.tool_p50_ms.get(tool, 0.0):.1f}",
            f"{report.tool_p95_ms.get(tool, 0.0):.1f}",
        )
    console.print(tools)
    if failures.by_error_code:
        codes = Table("error code", "failed attempts", title="tool failures by code")
        for code, count in failures.by_error_code.items():
            codes.add_row(Text(visible(code)), str(count))
        console.print(codes)
