"""The stored form of an event's payload, shared by the stores that write JSON.

Format 2 (``"v": 2`` in each row's data) keeps a row small:

- fields at their default are left out, and restored when the row is read;
- a plan's steps are stored once per store under the hash of their JSON (``PLANS``), and
  ``plan_created`` names them by that hash: a template run a thousand times is one body;
- a step's output is stored once, in the ``tool_attempt`` that produced it; the
  ``step_finished`` result names that attempt (``output_attempt``) instead of repeating it.

Rows without ``v`` were written before format 2 (corral 0.x up to 8a5b4af): every field
present, plans and outputs inline. They are read by the same code, since format 2 only
leaves things out. Every row is validated into its payload record when read
(``events.decode``): a row that does not fit is ``STORE_CORRUPT``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from corral.contracts import EventType
from corral.errors import StoreCorruptError
from corral.events import Event, PlanCreated, StepFinished, compact_json, decode

FORMAT = 2
"""The version of the stored event format this corral writes."""

STEPS_REF = "steps_ref"
"""The key that replaces a stored plan's ``steps``: the hash of their JSON body."""


def dumps(value: Any) -> str:
    """Compact JSON text, as stores write it (non-JSON values as their ``str``)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def encode(event: Event, plans: dict[str, str]) -> str:
    """The stored JSON of an event's payload; plan bodies it refers to are added to ``plans``."""
    payload = event.payload
    data = compact_json(payload)
    if isinstance(payload, PlanCreated) and payload.plan.template is not None:
        # a template's steps are config (references, no user's values): stored once per
        # store. A model's or a caller's own steps may hold literal values, so they stay
        # in the run's row and leave with it when the run is purged.
        plan = data["plan"]
        body = dumps(plan.pop("steps", []))
        key = hashlib.sha256(body.encode()).hexdigest()[:32]
        plans[key] = body
        plan[STEPS_REF] = key
    elif isinstance(payload, StepFinished) and payload.output_attempt is not None:
        result = data.get("result")
        if isinstance(result, dict):
            result.pop("data", None)
    data["v"] = FORMAT
    return dumps(data)


@dataclass(frozen=True, slots=True)
class StoredRow:
    """One event row as a store read it, its data still JSON text."""

    run_id: str
    seq: int
    ts: datetime
    type: str
    stage: str
    data: str


def _parsed(row: StoredRow) -> tuple[EventType, dict[str, Any]]:
    try:
        kind = EventType(row.type)
        data = json.loads(row.data)
    except ValueError as exc:
        raise StoreCorruptError(
            f"event {row.seq} cannot be read: {exc}", run_id=row.run_id
        ) from None
    if not isinstance(data, dict):
        raise StoreCorruptError(f"event {row.seq} holds no object", run_id=row.run_id)
    version = data.pop("v", 1)
    if not isinstance(version, int) or version > FORMAT:
        raise StoreCorruptError(
            f"event {row.seq} is in format {version!r}; this corral reads formats up to {FORMAT}",
            run_id=row.run_id,
            hint="read the store with the corral that wrote it, or a newer one",
        )
    return kind, data


def decode_rows(
    rows: Iterable[StoredRow], plan_bodies: Callable[[set[str]], dict[str, str]]
) -> list[Event]:
    """The events of stored rows (one run's, by ``seq``), validated into their payloads.

    ``plan_bodies`` looks the plans the rows refer to up by hash.
    """
    parsed = [(row, *_parsed(row)) for row in rows]
    wanted = {
        data["plan"][STEPS_REF]
        for _, kind, data in parsed
        if kind is EventType.PLAN_CREATED
        and isinstance(data.get("plan"), dict)
        and STEPS_REF in data["plan"]
    }
    bodies = plan_bodies(wanted) if wanted else {}
    outputs: dict[tuple[Any, Any], Any] = {}
    events = []
    for row, kind, data in parsed:
        if kind is EventType.TOOL_ATTEMPT:
            outputs[(data.get("step_id"), data.get("attempt"))] = data.get("data")
        elif kind is EventType.PLAN_CREATED:
            plan = data.get("plan")
            if isinstance(plan, dict) and STEPS_REF in plan:
                _restore_steps(row, plan, bodies)
        elif kind is EventType.STEP_FINISHED and data.get("output_attempt") is not None:
            result = data.get("result")
            if isinstance(result, dict) and "data" not in result:
                key = (data.get("step_id"), data["output_attempt"])
                if key not in outputs:
                    raise StoreCorruptError(
                        f"event {row.seq} refers to attempt {key[1]!r} of step {key[0]!r},"
                        " which is not stored",
                        run_id=row.run_id,
                    )
                result["data"] = outputs[key]
        try:
            payload = decode(kind, data)
        except StoreCorruptError as exc:
            raise StoreCorruptError(
                f"event {row.seq}: {exc.base_message}", run_id=row.run_id
            ) from None
        events.append(Event(row.run_id, row.seq, row.ts, kind, row.stage, payload=payload))
    return events


def _restore_steps(row: StoredRow, plan: dict[str, Any], bodies: dict[str, str]) -> None:
    key = plan.pop(STEPS_REF)
    body = bodies.get(key)
    if body is None:
        raise StoreCorruptError(
            f"event {row.seq} refers to plan {key}, which is not stored",
            run_id=row.run_id,
        )
    plan["steps"] = json.loads(body)
