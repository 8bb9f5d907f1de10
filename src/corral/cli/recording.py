"""``corral record``: stored runs into recorded cases of an eval suite (seed 000 §5.6)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from corral.cli.common import (
    HomeOption,
    JsonOption,
    StoreOption,
    _fails_cleanly,
    _home,
    _open_store,
    _run_id,
    app,
    console,
)
from corral.errors import InvalidInputError, RunNotFoundError
from corral.observe.terminal import visible


@app.command()
@_fails_cleanly
def record(
    run_id: Annotated[
        str | None, typer.Argument(help="The stored run to record (or --failed)")
    ] = None,
    suite: Annotated[
        Path | None, typer.Option("--suite", help="Suite file to append to (created if missing)")
    ] = None,
    failed: Annotated[
        bool, typer.Option("--failed", help="Every failed or handed-off run of --since")
    ] = False,
    since: Annotated[
        str | None, typer.Option("--since", help="With --failed: 30m, 1h, 1d, 7d... (default 1d)")
    ] = None,
    expect_status: Annotated[
        str | None,
        typer.Option("--expect-status", help="The status to expect (default: the run's own)"),
    ] = None,
    tier: Annotated[str, typer.Option("--tier", help="core, regular or exploratory")] = "regular",
    name: Annotated[str | None, typer.Option("--name", help="The case's name")] = None,
    as_json: JsonOption = False,
    home: HomeOption = None,
    store: StoreOption = None,
) -> None:
    """Turn a stored run into a recorded case of a suite; `corral eval --suite` replays it.

    The case replays the run's own inputs, model answers and tool results (its log goes to
    recorded/RUN_ID.json beside the suite), with no model and no live tool, and fails
    when the code takes another path. A run already in the suite is not added twice.
    """
    from datetime import UTC, datetime

    from corral.testing.recording import (
        check_choices,
        failed_runs,
        parse_since,
        record_run,
        recorded_run_ids,
    )

    if suite is None:
        raise InvalidInputError("give the suite file to append to: --suite FILE")
    if failed == (run_id is not None):
        raise InvalidInputError("give a RUN_ID or --failed, not both or neither")
    if not failed and since is not None:
        raise InvalidInputError("--since goes with --failed")
    if failed and (name is not None or expect_status is not None):
        raise InvalidInputError("--name and --expect-status go with one RUN_ID, not --failed")
    check_choices(tier, expect_status)
    period = parse_since(since or "1d") if failed else None
    opened = _open_store(_home(home, create=False), store, read_only=True)
    if period is not None:
        wanted = [r.run_id for r in failed_runs(opened, period, datetime.now(UTC))]
    else:
        wanted = [_run_id(run_id or "")]
    present = recorded_run_ids(suite)
    added: list[dict[str, str]] = []
    skipped = [w for w in wanted if w in present]
    for wanted_id in (w for w in wanted if w not in present):
        events = opened.load_events(wanted_id)
        if not events:
            raise RunNotFoundError(f"no run {wanted_id!r}", hint="see `corral runs`")
        case = record_run(events, suite, tier=tier, name=name, expect_status=expect_status)
        added.append({"run_id": wanted_id, "case": case.name, "log": str(case.log)})
    if as_json:
        typer.echo(
            json.dumps(
                {"suite": str(suite), "recorded": added, "skipped": skipped}, ensure_ascii=False
            )
        )
        return
    for item in added:
        console.print(Text(visible(f"recorded {item['run_id']} as {item['case']!r}")))
    for skipped_id in skipped:
        console.print(Text(f"skipped {skipped_id}: already recorded in {visible(str(suite))}"))
    if not wanted:
        console.print(f"no failed or handed-off run in the last {since or '1d'}")
