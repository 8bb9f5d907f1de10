"""The stored form of an event's payload, shared by the stores that write JSON.

Format 2 (``"v": 2`` in each row's data) keeps a row small:

- fields at their default are left out, and restored when the row is read;
- a plan's steps are stored once per store under the hash of their JSON (``PLANS``), and
  ``plan_created`` names them by that hash: a template run a thousand times is one body;
- a step's output is stored once, in the ``tool_attempt`` that produced it; the
  ``step_finished`` result names that attempt (``output_attempt``) instead of repeating it.
  A step whose tool succeeded at its first and only attempt has no ``tool_attempt``
  (``sole_attempt``, any format): its output is stored in its ``step_finished``.

Format 3 leaves out, in addition, what an earlier row of the same save already says
(``RowEncoder``; ``decode_rows`` puts it back, for rows marked 3 only):

- a ``tool_attempt``'s ``tool`` when its step's ``step_started`` named it, and its
  ``attempt`` when it is the first;
- a ``status_changed``'s ``from`` and a ``run_finished``'s ``status`` when they repeat the
  previous ``status_changed``'s ``to``;
- a ``step_finished``'s duration and its result's ``tool``, ``status`` and duration when
  they are those of the attempt that produced the output (written out, even at their
  default, when they are not);
- the ``stage`` column when it is the usual stage of the event's type (``STAGES``).

Format 4 states the version once per save instead of in every row: the first row of a
save carries ``v``, and a row without it has the format of the nearest earlier row of its
run that states one (none: format 1, below). A save's rows are contiguous, so every row
written by this corral follows a row of its own save that says 4. It also leaves out the
usual status of a ``tool_attempt`` (``success``) and of a ``step_finished``
(``succeeded``), which ``decode_rows`` puts back for rows of format 4 and later, and
names the event's type in the ``type`` column by a short code (``TYPE_CODES``) instead of
its name; a type without a code (one added later) is stored by name, and a row of any
format is read with either.

Format 5 leaves out, of a ``step_finished`` that stands for its step's one attempt
(``sole_attempt``: that attempt has no ``tool_attempt`` row, and the output is stored
here), its result's ``status`` (``success``, the only status such a step has), its
``tool`` when the step's ``step_started`` in the same save named it, and its
``duration_ms`` when it is the step's; ``decode_rows`` puts them back for rows of format 5
and later.

Rows before any ``v`` were written before format 2 (corral 0.x up to 8a5b4af): every field
present, plans and outputs inline. They are read by the same code, since later formats
only leave things out. Every row is validated into its payload record when read
(``events.decode``): a row that does not fit is ``STORE_CORRUPT``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from corral.contracts import EventType, ToolStatus
from corral.errors import StoreCorruptError
from corral.events import (
    PAYLOADS,
    Event,
    PlanCreated,
    RunFinished,
    StatusChanged,
    StepFinished,
    StepStarted,
    ToolAttempt,
    compact_json,
    decode,
)
from corral.hashing import text_digest
from corral.json_values import dumps

FORMAT = 5
"""The version of the stored event format this corral writes."""

TYPE_CODES = {
    EventType(name): code
    for code, name in enumerate(
        (
            "step_started",
            "tool_attempt",
            "step_finished",
            "status_changed",
            "run_started",
            "user_message",
            "intent_classified",
            "routed",
            "plan_created",
            "reply",
            "run_finished",
            "entities_merged",
            "model_call",
            "confirmation_requested",
            "confirmation_given",
            "question_asked",
            "user_answered",
            "step_skipped",
            "step_blocked",
            "fact_written",
            "fact_rejected",
            "tool_rewritten",
            "tool_selected",
            "verified",
            "outcome_reconciled",
            "plan_rejected",
            "loop_detected",
            "budget_exceeded",
            "budget_low",
            "entity_rejected",
            "handed_off",
            "need_replan",
            "need_clarification",
            "tool_timeout",
            "stage_started",
            "stage_finished",
        ),
        start=1,
    )
}
"""Event type -> the code a format-4 row's ``type`` column holds (fixed: rows rely on it).

Codes are digits and names are not, so a column of old and new rows reads unambiguously."""
_CODE_TYPES = {str(code): kind for kind, code in TYPE_CODES.items()}
_STORED_TYPES = {kind: str(TYPE_CODES.get(kind, kind.value)) for kind in EventType}
"""Event type -> its ``type`` column, made once (every stored event looks one up)."""


def stored_type(kind: EventType) -> str:
    """The ``type`` column of an event of ``kind``: its code, or its name if it has none."""
    return _STORED_TYPES[kind]


def event_type(stored: str) -> EventType:
    """The type a ``type`` column names, by code or (older rows) by name.

    ``ValueError`` if it names none.
    """
    return _CODE_TYPES.get(stored) or EventType(stored)


USUAL_STATUS = {EventType.TOOL_ATTEMPT: "success", EventType.STEP_FINISHED: "succeeded"}
"""The status a format-4 row of these types leaves out (fixed: stored rows rely on it)."""

STAGES = {
    EventType.RUN_STARTED: "run",
    EventType.USER_MESSAGE: "intent",
    EventType.INTENT_CLASSIFIED: "intent",
    EventType.ROUTED: "route",
    EventType.STATUS_CHANGED: "run",
    EventType.PLAN_CREATED: "plan",
    EventType.STEP_STARTED: "execute",
    EventType.TOOL_ATTEMPT: "execute",
    EventType.STEP_FINISHED: "execute",
    EventType.REPLY: "reply",
    EventType.RUN_FINISHED: "run",
}
"""The usual stage of a type: a format-3 row stores ``""`` for it (fixed: stored rows rely
on it). Another stage is stored as it is; an empty one as ``EMPTY_STAGE``."""
EMPTY_STAGE = "~"

_KIND_COLUMNS = {
    kind: (_STORED_TYPES[kind], STAGES.get(kind), USUAL_STATUS.get(kind)) for kind in EventType
}
"""Event type -> its ``type`` column, its usual stage and its usual status (``None``: none)."""

STEPS_REF = "steps_ref"
"""The key that replaces a stored plan's ``steps``: the hash of their JSON body."""


@dataclass
class RowEncoder:
    """Encodes one save's events in order, leaving out what an earlier one of them says.

    ``plans`` collects the plan bodies the rows refer to (stored apart, once per store).
    """

    plans: dict[str, str]
    started: dict[str, str] = field(default_factory=dict)
    """Step id -> the tool its ``step_started`` named, in this save."""
    attempts: dict[tuple[str, int], ToolAttempt] = field(default_factory=dict)
    status: str | None = None
    """The ``to`` of this save's latest ``status_changed``."""
    marked: bool = False
    """Whether a row of this save states the format (only its first does)."""

    def columns(self, event: Event) -> tuple[str, str, str]:
        """The event's stored ``type``, ``stage`` and ``data`` columns.

        What its type implies is looked up once (``_KIND_COLUMNS``): an ``EventType`` is
        hashed in Python, and the stage and the data would look it up in three tables.
        """
        code, usual_stage, usual_status = _KIND_COLUMNS[event.type]
        return code, _stored_stage(event.stage, usual_stage), self._data(event, usual_status)

    def _data(self, event: Event, usual_status: str | None) -> str:
        """The stored JSON of the event's payload, given its type's usual status."""
        payload = event.payload
        data = compact_json(payload)
        leave_out = _LEAVE_OUT.get(type(payload), _UNLISTED)
        if leave_out is _UNLISTED:  # an ``Opaque``, or a subclass of a payload record
            leave_out = _inherited_leave_out(type(payload))
        if leave_out is not None:
            leave_out(self, payload, data)
        if usual_status is not None and data.get("status") == usual_status:
            del data["status"]
        if not self.marked:
            data["v"] = FORMAT
            self.marked = True
        return dumps(data)

    def _plan(self, payload: PlanCreated, data: dict[str, Any]) -> None:
        """A template's steps, stored once per store instead of in the row.

        They are config (references, no user's values). A model's or a caller's own steps
        may hold literal values, so they stay in the run's row and leave with it when the
        run is purged.
        """
        if payload.plan.template is None:
            return
        plan = data["plan"]
        body = dumps(plan.pop("steps", []))
        key = text_digest(body, 32)
        self.plans[key] = body
        plan[STEPS_REF] = key

    def _started(self, payload: StepStarted, data: dict[str, Any]) -> None:
        self.started[payload.step_id] = payload.tool

    def _attempt(self, payload: ToolAttempt, data: dict[str, Any]) -> None:
        self.attempts[(payload.step_id, payload.attempt)] = payload
        if self.started.get(payload.step_id) == payload.tool:
            del data["tool"]
        if payload.attempt == 1:
            del data["attempt"]

    def _status(self, payload: StatusChanged, data: dict[str, Any]) -> None:
        if self.status == payload.from_:
            del data["from"]
        self.status = payload.to

    def _run_finished(self, payload: RunFinished, data: dict[str, Any]) -> None:
        if self.status == payload.status:
            del data["status"]

    def _step_finished(self, payload: StepFinished, data: dict[str, Any]) -> None:
        if payload.output_attempt is not None:
            self._finished(payload, data)
        elif payload.sole_attempt:
            self._sole(payload, data)

    def _finished(self, payload: StepFinished, data: dict[str, Any]) -> None:
        """A step's end whose output is an attempt's: what that attempt says is left out."""
        result = data.get("result")
        if not isinstance(result, dict) or payload.result is None:
            return
        result.pop("data", None)
        attempt = self.attempts.get((payload.step_id, payload.output_attempt or 0))
        kept = payload.result
        if attempt is not None and kept.tool == attempt.tool:
            del result["tool"]
        if attempt is not None and kept.status.value == attempt.status:
            del result["status"]
        if attempt is not None and payload.duration_ms == attempt.duration_ms:
            data.pop("duration_ms", None)
        else:  # written out even at its default: a missing one means "the attempt's"
            data["duration_ms"] = payload.duration_ms
        if kept.duration_ms == payload.duration_ms:
            result.pop("duration_ms", None)
        else:
            result["duration_ms"] = kept.duration_ms

    def _sole(self, payload: StepFinished, data: dict[str, Any]) -> None:
        """A step's end that stands for its one attempt: what it implies is left out."""
        result = data.get("result")
        kept = payload.result
        if not isinstance(result, dict) or kept is None:
            return
        if self.started.get(payload.step_id) == kept.tool:
            del result["tool"]
        result.pop("status", None)  # success: the only status of a sole attempt
        if kept.duration_ms == payload.duration_ms:
            result.pop("duration_ms", None)
        else:  # written out even at its default: a missing one means "the step's"
            result["duration_ms"] = kept.duration_ms


_LeaveOut = Callable[[RowEncoder, Any, dict[str, Any]], None]
_LEAVE_OUT: dict[type[Any], _LeaveOut | None] = dict.fromkeys(PAYLOADS.values())
_LEAVE_OUT.update(
    {
        PlanCreated: RowEncoder._plan,
        StepStarted: RowEncoder._started,
        ToolAttempt: RowEncoder._attempt,
        StatusChanged: RowEncoder._status,
        RunFinished: RowEncoder._run_finished,
        StepFinished: RowEncoder._step_finished,
    }
)
"""Payload record -> what ``RowEncoder`` notes of it and leaves out of its row (``None``:
nothing): one lookup by its exact type instead of a chain of ``isinstance`` per event.
Every record is listed, so a type that is not (``_UNLISTED``) is a subclass or an
``Opaque``, and only that one walks its bases."""
_UNLISTED: Any = object()


def _inherited_leave_out(payload_type: type[Any]) -> _LeaveOut | None:
    """What the nearest listed base of ``payload_type`` leaves out (an ``Opaque``: nothing)."""
    for base in payload_type.__mro__:
        if base in _LEAVE_OUT:
            return _LEAVE_OUT[base]
    return None


def _stored_stage(stage: str, usual: str | None) -> str:
    """The stored ``stage`` column: empty for the type's ``usual`` stage."""
    if usual is None:
        return stage
    if stage == usual:
        return ""
    return stage or EMPTY_STAGE


@dataclass(frozen=True, slots=True)
class StoredRow:
    """One event row as a store read it, its data still JSON text."""

    run_id: str
    seq: int
    ts: datetime
    type: str
    stage: str
    data: str


def _parsed(row: StoredRow) -> tuple[EventType, dict[str, Any], int | None]:
    """A row's type, its data, and the format it states (``None``: it states none)."""
    try:
        kind = event_type(row.type)
        data = json.loads(row.data)
    except ValueError as exc:
        raise StoreCorruptError(
            f"event {row.seq} cannot be read: {exc}", run_id=row.run_id
        ) from None
    if not isinstance(data, dict):
        raise StoreCorruptError(f"event {row.seq} holds no object", run_id=row.run_id)
    version = data.pop("v", None)
    if version is None:
        return kind, data, None
    if not isinstance(version, int) or isinstance(version, bool) or version > FORMAT:
        raise StoreCorruptError(
            f"event {row.seq} is in format {version!r}; this corral reads formats up to {FORMAT}",
            run_id=row.run_id,
            hint="read the store with the corral that wrote it, or a newer one",
        )
    return kind, data, version


def decode_rows(
    rows: Iterable[StoredRow], plan_bodies: Callable[[set[str]], dict[str, str]]
) -> list[Event]:
    """The events of stored rows (one run's, by ``seq``), validated into their payloads.

    A run's events are numbered from 1 without a gap: a row missing or out of its place
    is ``STORE_CORRUPT``, before any is decoded, so nothing runs on from a log short of it.

    ``plan_bodies`` looks the plans the rows refer to up by hash.
    """
    parsed = [(row, *_parsed(row)) for row in rows]
    for expected, (row, *_) in enumerate(parsed, start=1):
        if row.seq != expected:  # a row lost, or moved: the log would go on without it
            raise StoreCorruptError(
                f"event {expected} is missing or out of order (event {row.seq} stands in its "
                "place: rows removed, repeated or moved)",
                run_id=row.run_id,
            )
    wanted = {
        data["plan"][STEPS_REF]
        for _, kind, data, _ in parsed
        if kind is EventType.PLAN_CREATED
        and isinstance(data.get("plan"), dict)
        and STEPS_REF in data["plan"]
    }
    bodies = plan_bodies(wanted) if wanted else {}
    restorer = _Restorer()
    events = []
    version = 1  # rows before any that states a format were written before format 2
    for row, kind, data, stated in parsed:
        version = version if stated is None else stated
        plan = data.get("plan") if kind is EventType.PLAN_CREATED else None
        if isinstance(plan, dict) and STEPS_REF in plan:
            _restore_steps(row, plan, bodies)
        stage = row.stage
        if version >= 4 and kind in USUAL_STATUS:
            data.setdefault("status", USUAL_STATUS[kind])
        if version >= 3:
            restorer.fill(kind, data)
            stage = _stage(kind, stage)
        if version >= 5 and kind is EventType.STEP_FINISHED and data.get("sole_attempt"):
            restorer.fill_sole(data)
        missing = restorer.note(kind, data)
        if missing:
            raise StoreCorruptError(f"event {row.seq} refers to {missing}", run_id=row.run_id)
        try:
            payload = decode(kind, data)
        except StoreCorruptError as exc:
            raise StoreCorruptError(
                f"event {row.seq}: {exc.base_message}", run_id=row.run_id
            ) from None
        events.append(Event(row.run_id, row.seq, row.ts, kind, stage, payload=payload))
    return events


def _stage(kind: EventType, stored: str) -> str:
    """A format-3 row's stage: its type's usual one when stored empty."""
    usual = STAGES.get(kind)
    if usual is None:
        return stored
    if stored == "":
        return usual
    return "" if stored == EMPTY_STAGE else stored


@dataclass
class _Restorer:
    """What earlier rows of a run said, to put back what later rows left out."""

    started: dict[Any, Any] = field(default_factory=dict)
    attempts: dict[tuple[Any, Any], dict[str, Any]] = field(default_factory=dict)
    status: Any = None

    def fill(self, kind: EventType, data: dict[str, Any]) -> None:
        """Put back what a format-3 row left out (``RowEncoder``)."""
        if kind is EventType.TOOL_ATTEMPT:
            if "tool" not in data and data.get("step_id") in self.started:
                data["tool"] = self.started[data.get("step_id")]
            data.setdefault("attempt", 1)
        elif kind is EventType.STATUS_CHANGED:
            if "from" not in data and self.status is not None:
                data["from"] = self.status
        elif kind is EventType.RUN_FINISHED:
            if "status" not in data and self.status is not None:
                data["status"] = self.status
        elif kind is EventType.STEP_FINISHED and data.get("output_attempt") is not None:
            attempt = self.attempts.get((data.get("step_id"), data["output_attempt"]), {})
            result = data.get("result")
            if "duration_ms" not in data and "duration_ms" in attempt:
                data["duration_ms"] = attempt["duration_ms"]
            if isinstance(result, dict):
                for key in ("tool", "status"):
                    if key not in result and key in attempt:
                        result[key] = attempt[key]
                result.setdefault("duration_ms", data.get("duration_ms", 0.0))

    def fill_sole(self, data: dict[str, Any]) -> None:
        """Put back what a format-5 ``step_finished`` of a sole attempt left out."""
        result = data.get("result")
        if not isinstance(result, dict):
            return
        if "tool" not in result and data.get("step_id") in self.started:
            result["tool"] = self.started[data.get("step_id")]
        result.setdefault("status", ToolStatus.SUCCESS.value)
        result.setdefault("duration_ms", data.get("duration_ms", 0.0))

    def note(self, kind: EventType, data: dict[str, Any]) -> str | None:
        """Remember what a row (of any format) says, and give a step its output back.

        Returns what the row refers to that is not stored (``None``: nothing missing).
        """
        if kind is EventType.STEP_STARTED:
            self.started[data.get("step_id")] = data.get("tool")
        elif kind is EventType.TOOL_ATTEMPT:
            attempt = {"duration_ms": 0.0, **data}
            self.attempts[(data.get("step_id"), data.get("attempt"))] = attempt
        elif kind is EventType.STATUS_CHANGED:
            self.status = data.get("to")
        elif kind is EventType.STEP_FINISHED and data.get("output_attempt") is not None:
            result = data.get("result")
            if isinstance(result, dict) and "data" not in result:
                key = (data.get("step_id"), data["output_attempt"])
                if key not in self.attempts:
                    return f"attempt {key[1]!r} of step {key[0]!r}, which is not stored"
                result["data"] = self.attempts[key].get("data")
        return None


SUMMARY_MARK = "~v"
"""Marks a run row's summary stored in its short form (``pack_summary``)."""
_SUMMARY_KEYS = (
    "run_id",
    "trace_id",
    "status",
    "intent",
    "steps",
    "reply",
    "pending",
    "outcome",
    "error_code",
    "signals",
)
_KEPT_IF_SET = ("intent", "reply", "pending", "outcome", "error_code")
_STEP_KEYS = ("id", "tool", "status", "attempts", "duration_ms", "error_code")


EVENTS_KEY = "n"
"""In a short summary: how many events the run had when its row was written."""


def pack_summary(
    run_id: str, trace_id: str, status: str, summary: dict[str, Any], events: int | None = None
) -> Any:
    """The stored form of a run row's summary: without what the row's columns hold.

    A ``RunSummary`` dump loses its ``run_id``, ``trace_id`` and ``status`` (columns of
    the row), its unset fields, and its steps' keys (each step is a list in the order
    of ``StepBrief``). Any other dict is stored as it is. ``unpack_summary`` restores
    exactly what was given.

    ``events``: the run's last ``seq``, written with the row in the save that stored it:
    events lost from the end of a run (no gap shows it) are found by it
    (``claimed_events``).
    """
    steps = summary.get("steps")
    if (
        tuple(summary) != _SUMMARY_KEYS
        or (summary["run_id"], summary["trace_id"], summary["status"]) != (run_id, trace_id, status)
        or not isinstance(steps, list)
        or not all(isinstance(s, dict) and tuple(s) == _STEP_KEYS for s in steps)
    ):
        return summary
    short: dict[str, Any] = {SUMMARY_MARK: 1}
    if events is not None:
        short[EVENTS_KEY] = events
    short.update((key, summary[key]) for key in _KEPT_IF_SET if summary[key] is not None)
    if summary["signals"]:
        short["signals"] = summary["signals"]
    if steps:
        short["steps"] = [
            [s[key] for key in _STEP_KEYS[:-1]]
            + ([s["error_code"]] if s["error_code"] is not None else [])
            for s in steps
        ]
    return short


def claimed_events(stored: str | None) -> int | None:
    """How many events a run row's stored summary says the run had (``None``: it says not)."""
    if not stored or EVENTS_KEY not in stored:  # most rows say it; older ones do not
        return None
    try:
        short = json.loads(stored)
    except ValueError:  # a damaged summary: the run is rebuilt from its events
        return None
    if not isinstance(short, dict) or short.get(SUMMARY_MARK) != 1:
        return None
    count = short.get(EVENTS_KEY)
    return count if isinstance(count, int) and not isinstance(count, bool) else None


def unpack_summary(run_id: str, trace_id: str, status: str, stored: Any) -> Any:
    """A run row's summary as it was given to ``pack_summary`` (older rows: as stored)."""
    if not isinstance(stored, dict) or stored.get(SUMMARY_MARK) != 1:
        return stored
    columns = {"run_id": run_id, "trace_id": trace_id, "status": status}
    summary: dict[str, Any] = {key: columns.get(key, stored.get(key)) for key in _SUMMARY_KEYS}
    summary["signals"] = stored.get("signals", [])
    summary["steps"] = [
        dict(zip(_STEP_KEYS, [*step, None][: len(_STEP_KEYS)], strict=True))
        for step in stored.get("steps", [])
    ]
    return summary


def _restore_steps(row: StoredRow, plan: dict[str, Any], bodies: dict[str, str]) -> None:
    key = plan.pop(STEPS_REF)
    body = bodies.get(key)
    if body is None:
        raise StoreCorruptError(
            f"event {row.seq} refers to plan {key}, which is not stored",
            run_id=row.run_id,
        )
    plan["steps"] = json.loads(body)
