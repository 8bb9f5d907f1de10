"""The file a recorded run's log is kept in, next to the suite that replays it.

A recorded case needs the whole event log of its run: the user's inputs, every model
answer and every tool result. It is kept out of the suite YAML, in
``recorded/<run_id>.json`` beside the suite, so the suite stays a short list a reviewer
reads, and the log is data that a diff shows one event per line.

The events are written exactly as a store writes them (``corral.store.codec``: the
``RowEncoder`` rows, the first marked with its format ``v``, and the plan bodies they refer
to; each row's type by name, which the decoder reads as it reads a code),
and read back by the store's own decoder, so a log is read as strictly as a stored run,
and a log written by an older corral keeps reading as old stored rows do. No second
encoding of events exists to drift from the first.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from corral.contracts import EventType
from corral.errors import ConfigInvalidError, StoreCorruptError
from corral.events import Event
from corral.files import write_private
from corral.json_values import dumps
from corral.store.codec import FORMAT, RowEncoder, StoredRow, decode_rows

LAYOUT = 1
"""The version of this file's own layout (the keys below); each row carries its ``v``."""
MARK = "corral_recorded_run"
"""The key that names the file for what it is, holding ``LAYOUT``."""
MAX_LOG_BYTES = 64 * 1024 * 1024
"""The largest log file read: larger is no run corral writes."""


class _Row(BaseModel):
    """One stored event row, its data as JSON values rather than text."""

    model_config = ConfigDict(extra="forbid")

    seq: int
    ts: datetime
    type: str
    stage: str
    data: dict[str, Any]


class _Log(BaseModel):
    """The file: which run, in which format, the plan bodies and the rows."""

    model_config = ConfigDict(extra="forbid")

    layout: int
    run_id: str
    format: int
    plans: dict[str, Any]
    events: list[_Row]


def log_path(suite: Path, run_id: str) -> Path:
    """Where ``run_id``'s log is kept for ``suite``: ``recorded/<run_id>.json`` beside it."""
    return suite.parent / "recorded" / f"{run_id}.json"


def log_text(events: list[Event]) -> str:
    """The file's text: a header, then one stored row a line (reviewable, diffable)."""
    plans: dict[str, str] = {}
    encoder = RowEncoder(plans)
    rows = []
    for e in events:
        _, stage, data = encoder.columns(e)  # the type by name here, not its stored code
        row = {"seq": e.seq, "ts": e.ts.isoformat(), "type": e.type.value, "stage": stage}
        rows.append(dumps({**row, "data": json.loads(data)}))
    header = {MARK: LAYOUT, "run_id": events[0].run_id, "format": FORMAT}
    bodies = {key: json.loads(body) for key, body in sorted(plans.items())}
    return (
        dumps(header)[:-1]
        + ',\n "plans": '
        + dumps(bodies)
        + ',\n "events": [\n  '
        + ",\n  ".join(rows)
        + "\n ]}\n"
    )


def write_log(path: Path, events: list[Event]) -> None:
    """Write ``events`` (one run's whole log) to ``path``, atomically and private (0600).

    Private because the log holds what the user said and what the tools returned: the
    suite that refers to it belongs in a repository only once that is acceptable.
    """
    write_private(path, log_text(events).encode())


def read_log(path: Path) -> list[Event]:
    """The events of a log file, decoded and validated as a store decodes its rows.

    ``CONFIG_INVALID`` (naming the file) when it is missing, not a recorded log, in a
    newer layout, or holds a row that does not decode.
    """
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_LOG_BYTES + 1)
    except OSError as exc:
        raise ConfigInvalidError(
            f"cannot read the recorded log {path}: {exc.strerror or exc}",
            hint="record the run again with `corral record RUN_ID --suite FILE`",
        ) from None
    if len(raw) > MAX_LOG_BYTES:
        raise ConfigInvalidError(f"the recorded log {path} is over {MAX_LOG_BYTES} bytes")
    try:
        data = json.loads(raw)
        if not isinstance(data, dict) or not isinstance(data.get(MARK), int):
            raise ConfigInvalidError(f"{path} is not a recorded log (no {MARK!r} key)")
        layout = data.pop(MARK)
        log = _Log.model_validate({**data, "layout": layout})
    except (ValueError, ValidationError) as exc:  # JSONDecodeError is a ValueError
        raise ConfigInvalidError(f"the recorded log {path} cannot be read: {exc}") from None
    if log.layout > LAYOUT:
        raise ConfigInvalidError(
            f"the recorded log {path} is in layout {log.layout}; this corral reads up to {LAYOUT}",
            hint="run the suite with the corral that recorded it, or a newer one",
        )
    rows = [StoredRow(log.run_id, r.seq, r.ts, r.type, r.stage, dumps(r.data)) for r in log.events]
    bodies = {key: dumps(body) for key, body in log.plans.items()}
    try:
        events = decode_rows(rows, lambda keys: {k: bodies[k] for k in keys if k in bodies})
    except StoreCorruptError as exc:
        raise ConfigInvalidError(
            f"the recorded log {path}: {exc.base_message}",
            hint="record the run again with `corral record RUN_ID --suite FILE`",
        ) from None
    if not events:
        raise ConfigInvalidError(f"the recorded log {path} holds no event")
    _check_whole(path, log.format, events)
    return events


def _check_whole(path: Path, stated: int, events: list[Event]) -> None:
    """``CONFIG_INVALID`` for a log no run could have written: it was cut or edited.

    A replay of it would fail mid-suite with a traceback, or pass with divergences
    reported at positions that are not the run's.
    """
    from corral.runtime.plan_entry import recorded_entry  # with the first recorded case

    problem = None
    if stated > FORMAT:
        problem = f"is in format {stated}; this corral reads up to {FORMAT}"
    elif events[0].type is not EventType.RUN_STARTED:
        problem = "does not begin with the run's run_started event"
    elif recorded_entry(events) is None and not any(
        e.type is EventType.USER_MESSAGE for e in events
    ):
        problem = "holds no message that started the run (nor a plan it was given)"
    if problem is not None:
        raise ConfigInvalidError(
            f"the recorded log {path} {problem}",
            hint="record the run again with `corral record RUN_ID --suite FILE`",
        )
