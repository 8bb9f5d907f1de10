"""The JSONL log: one line per event, the shape seed 002 asks for, derived from the store.

Each line has ``ts, trace_id, run_id, stage, level, status, input_summary,
output_summary, duration_ms`` plus the event type. Summaries are redacted, then cut to
200 characters. ``trace_id`` is the run's OpenTelemetry trace id (32 hex digits), the one
its exported spans carry.

The event store is the one source of truth. ``<folder>/<run_id>.jsonl`` is an export of
it, brought in line with the store whenever the run is touched (appended to when intact,
else replaced atomically), so a line lost or cut by a crash is repaired the next time;
``corral traces`` reads the store, never the file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corral.contracts import EventType
from corral.events import (
    Event,
    HandedOff,
    IntentClassified,
    ModelCall,
    PlanCreated,
    PlanRejected,
    Routed,
    RunStarted,
    StepFinished,
    StepStarted,
    ToolAttempt,
    UserAnswered,
    UserMessage,
)
from corral.files import private_dir, tighten, write_private
from corral.json_values import one_shot_encoder
from corral.observe.redact import Redactor, redactor_for
from corral.observe.sampling import sample
from corral.observe.trace_ids import otel_trace_id

if TYPE_CHECKING:
    from corral.config import SamplingConfig
    from corral.store.base import Store

SUMMARY_LIMIT = 200
_JSON = one_shot_encoder(", ", ": ")
"""``json.dumps(value, ensure_ascii=False, default=str)``'s text, its encoder built once (a
value JSON cannot hold is written as its text; a line holds none: text, numbers, null)."""
LEVELS = ("debug", "info", "warn", "error")

_ERROR_TYPES = {EventType.PLAN_REJECTED, EventType.LOOP_DETECTED, EventType.BUDGET_EXCEEDED}
_WARN_TYPES = {
    EventType.HANDED_OFF,
    EventType.STEP_SKIPPED,
    EventType.STEP_BLOCKED,
    EventType.FACT_REJECTED,
    # signals: the run left its planned path (a question, a switch, a cheaper path...)
    EventType.NEED_REPLAN,
    EventType.NEED_CLARIFICATION,
    EventType.TOOL_TIMEOUT,
    EventType.BUDGET_LOW,
}
_DEBUG_TYPES = {EventType.STAGE_STARTED, EventType.FACT_WRITTEN, EventType.ENTITIES_MERGED}


def summarize(value: Any) -> str:
    """Compact text of a value, at most 200 characters."""
    if value is None or value == "":
        return ""
    text = value if isinstance(value, str) else _JSON(value)
    return text if len(text) <= SUMMARY_LIMIT else text[: SUMMARY_LIMIT - 3] + "..."


def _level(event: Event) -> str:
    payload = event.payload
    status = getattr(payload, "status", None)
    failed = status in ("failed", "error") or getattr(payload, "to", None) == "failed"
    if isinstance(payload, ToolAttempt):
        if status == "error":
            return "warn" if payload.backoff_s is not None else "error"
    elif event.type in _ERROR_TYPES or failed:
        return "error"
    if event.type in _WARN_TYPES or status == "unknown":
        return "warn"
    if event.type in _DEBUG_TYPES:
        return "debug"
    return "info"


def _io(event: Event) -> tuple[Any, Any]:
    payload = event.payload
    if isinstance(payload, UserMessage | UserAnswered):
        return payload.text, None
    if isinstance(payload, IntentClassified):
        result = payload.result
        brief = {"label": result.label, "confidence": result.confidence, "source": result.source}
        return payload.text, brief
    if isinstance(payload, Routed):
        return payload.decision.intent, payload.decision.action.value
    if isinstance(payload, PlanCreated):
        return payload.plan.template, [s.tool for s in payload.plan.steps]
    if isinstance(payload, PlanRejected):
        return None, payload.problems
    if isinstance(payload, ToolAttempt):
        out = payload.data if payload.status != "error" else payload.error_code
        return {"tool": payload.tool, "attempt": payload.attempt}, out
    if isinstance(payload, StepStarted):
        return payload.args, payload.tool
    if isinstance(payload, StepFinished):
        summary = payload.result.summary if payload.result else ""
        return payload.step_id, summary or payload.reason
    if isinstance(payload, HandedOff):
        return None, payload.packet.reason
    if isinstance(payload, ModelCall):
        return model_call_brief(payload), payload.text or payload.reason
    data = event.data
    return None, {k: v for k, v in data.items() if k not in ("packet", "plan")} or None


def log_record(event: Event, trace_id: str, redactor: Redactor | None = None) -> dict[str, Any]:
    """The JSONL line for one event, with its summaries redacted."""
    shown = redactor or Redactor()
    given, produced = (shown.value(part) for part in _io(event))
    payload = event.payload
    status = getattr(payload, "status", None) or getattr(payload, "to", None)
    return {
        "ts": event.ts.isoformat(),
        "trace_id": trace_id,
        "run_id": event.run_id,
        "seq": event.seq,
        "event": event.type.value,
        "stage": event.stage,
        "level": _level(event),
        "status": shown.text(str(status or event.type.value)),
        "input_summary": summarize(given),
        "output_summary": summarize(produced),
        "duration_ms": _duration_ms(event),
    }


def model_call_brief(call: ModelCall) -> dict[str, Any]:
    """What ``show`` and ``traces`` say about one ``model_call`` event (not its raw text).

    Tokens are the provider's usage, or an estimate marked ``estimated`` when it gave none.
    ``attempt`` is the pipeline's question (a re-ask is the next), ``try`` the call's
    retry of it after a failure (a timeout, a 5xx): three retries are #1 tries 1, 2, 3.
    """
    usage = call.usage
    return {
        "purpose": call.purpose,
        "model": call.model,
        "attempt": call.attempt,
        "try": call.try_,
        "status": call.status,
        "error_code": call.error_code,
        "prompt_tokens": usage.get("prompt_tokens"),
        "completion_tokens": usage.get("completion_tokens"),
        "estimated": bool(usage.get("estimated")),
        "latency_ms": call.latency_ms,
    }


def _duration_ms(event: Event) -> Any:
    """The event's duration: ``duration_ms``, or a model call's latency."""
    payload = event.payload
    if isinstance(payload, ModelCall):
        return payload.latency_ms
    return getattr(payload, "duration_ms", None)


RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
"""Run ids as corral makes them (``run_3f2a...``, ``run_000001``): no dots, no slashes,
so a run id can never name a path outside the log folder."""


def valid_run_id(run_id: str) -> bool:
    """Whether ``run_id`` has the shape of a run id (and so is safe in a file name)."""
    return RUN_ID.fullmatch(run_id) is not None


def log_records(events: Sequence[Event], redactor: Redactor | None = None) -> list[dict[str, Any]]:
    """The redacted log lines of one run's stored events (``redactor``: made from them)."""
    if not events:
        return []
    hide = (redactor or redactor_for(events)).remembering()
    trace_id = _trace_id(events)
    return [log_record(event, trace_id, hide) for event in events]


def _trace_id(events: Iterable[Event]) -> str:
    """The run's OTel trace id, derived from the one ``run_started`` records."""
    started = next((e.payload for e in events if isinstance(e.payload, RunStarted)), None)
    return otel_trace_id(started.trace_id) if started else ""


def _lines(records: Iterable[dict[str, Any]]) -> bytes:
    return "".join(_JSON(r) + "\n" for r in records).encode("utf-8")


def _last_seq(path: Path) -> int | None:
    """The ``seq`` of the file's last line, if that line is complete and well formed."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - 65536))
            tail = handle.read()
    except OSError:
        return None
    if not tail.endswith(b"\n"):
        return None
    try:
        seq = json.loads(tail.splitlines()[-1])["seq"]
    except (ValueError, KeyError, TypeError, IndexError):
        return None
    return seq if isinstance(seq, int) else None


def keep(record: dict[str, Any], stage: str | None, level: str | None) -> bool:
    """Whether a log line passes the stage filter and the minimum level."""
    minimum = LEVELS.index(level) if level in LEVELS else 0
    found = record.get("level")
    rank = LEVELS.index(found) if found in LEVELS else len(LEVELS) - 1
    return (not stage or record.get("stage") == stage) and rank >= minimum


class JsonlLog:
    """The per-run JSONL files under ``folder`` (0700; files 0600).

    With ``sampling`` (the agent's ``telemetry.sampling``), a run that sampling drops
    gets no file, until it fails or is handed off: then its file is written in full.
    """

    def __init__(self, folder: Path, sampling: SamplingConfig | None = None) -> None:
        self.folder = folder
        self.sampling = sampling

    def path(self, run_id: str) -> Path:
        """The log file of a run; ``ValueError`` for an id that is not a run id."""
        if not valid_run_id(run_id):
            raise ValueError(f"not a run id: {run_id!r}")
        return self.folder / f"{run_id}.jsonl"

    def export(
        self,
        store: Store,
        run_id: str,
        *,
        check_all: bool = False,
        events: Sequence[Event] | None = None,
    ) -> Path | None:
        """Bring the run's file in line with the store (idempotent; crash-safe).

        When the file's last line is complete and the lines before it need no new
        redaction, only the missing lines are appended. Otherwise, or with ``check_all``,
        the file is compared whole and replaced atomically if it differs. A line cut or
        lost by a crash is therefore rewritten the next time the run is touched.

        ``events``: the run's stored events, when the caller has just loaded them.

        Returns the path, or ``None`` when there is nothing to write or the folder cannot
        be written: the file is derived, and a later touch repairs it.
        """
        if not valid_run_id(run_id):
            return None
        if events is None:
            events = store.load_events(run_id)
        if not events or (self.sampling is not None and not sample(events, self.sampling).kept):
            return None
        path = self.path(run_id)
        redactor = redactor_for(events)
        try:
            last = None if check_all else _last_seq(path)
            if last is not None and any(e.seq == last for e in events):
                written = [e for e in events if e.seq <= last]
                if redactor_for(written).literals == redactor.literals:
                    trace_id = _trace_id(events)
                    hide = redactor.remembering()
                    new = [log_record(e, trace_id, hide) for e in events if e.seq > last]
                    if new:
                        with path.open("ab") as handle:
                            handle.write(_lines(new))
                    return path
            content = _lines(log_records(events, redactor))
            if path.is_file() and path.read_bytes() == content:
                tighten(path)  # a file written by an older corral may still be 0644
                return path
            private_dir(self.folder)
            # no fsync: appends never had one, and the store's own commits (WAL, NORMAL)
            # are not synced one by one either; a file an OS crash cut is rewritten from
            # the store when the run is next touched (``corral show``, ``traces``)
            write_private(path, content, sync=False)
        except OSError:
            return None
        return path

    def remove(self, run_ids: Iterable[str]) -> int:
        """Delete the files of these runs (``corral gc``); returns how many were deleted."""
        removed = 0
        for run_id in run_ids:
            if valid_run_id(run_id):
                try:
                    self.path(run_id).unlink()
                    removed += 1
                except FileNotFoundError:
                    continue
        return removed

    def read(
        self, run_id: str, *, stage: str | None = None, level: str | None = None
    ) -> Iterator[dict[str, Any]]:
        """Lines of a run's file, filtered; a malformed line is skipped, never fatal."""
        path = self.path(run_id)
        if not path.is_file():
            return
        with path.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and keep(record, stage, level):
                    yield record
