"""The JSONL log: one line per event, the shape seed 002 asks for.

Each line has ``ts, trace_id, run_id, stage, level, status, input_summary,
output_summary, duration_ms`` plus the event type. Summaries are cut to 200 characters.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from corral.contracts import Event, EventType

SUMMARY_LIMIT = 200
LEVELS = ("debug", "info", "warn", "error")

_ERROR_TYPES = {EventType.PLAN_REJECTED, EventType.LOOP_DETECTED, EventType.BUDGET_EXCEEDED}
_WARN_TYPES = {
    EventType.HANDED_OFF,
    EventType.STEP_SKIPPED,
    EventType.STEP_BLOCKED,
    EventType.FACT_REJECTED,
}
_DEBUG_TYPES = {EventType.STAGE_STARTED, EventType.FACT_WRITTEN, EventType.ENTITIES_MERGED}


def summarize(value: Any) -> str:
    """Compact text of a value, at most 200 characters."""
    if value is None or value == "":
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= SUMMARY_LIMIT else text[: SUMMARY_LIMIT - 3] + "..."


def _level(event: Event) -> str:
    data = event.data
    failed = data.get("status") in ("failed", "error") or data.get("to") == "failed"
    if event.type in _ERROR_TYPES or (failed and event.type is not EventType.TOOL_ATTEMPT):
        return "error"
    if event.type is EventType.TOOL_ATTEMPT and data.get("status") == "error":
        return "warn" if data.get("backoff_s") is not None else "error"
    if event.type in _WARN_TYPES or data.get("status") == "unknown":
        return "warn"
    if event.type in _DEBUG_TYPES:
        return "debug"
    return "info"


def _io(event: Event) -> tuple[Any, Any]:
    data = event.data
    kind = event.type
    if kind in (EventType.USER_MESSAGE, EventType.USER_ANSWERED):
        return data.get("text"), None
    if kind is EventType.INTENT_CLASSIFIED:
        result = data["result"]
        return data.get("text"), {k: result.get(k) for k in ("label", "confidence", "source")}
    if kind is EventType.ROUTED:
        return data["decision"].get("intent"), data["decision"].get("action")
    if kind is EventType.PLAN_CREATED:
        return data["plan"].get("template"), [s["tool"] for s in data["plan"]["steps"]]
    if kind is EventType.PLAN_REJECTED:
        return None, data.get("problems")
    if kind is EventType.TOOL_ATTEMPT:
        out = data.get("data") if data.get("status") != "error" else data.get("error_code")
        return {"tool": data.get("tool"), "attempt": data.get("attempt")}, out
    if kind is EventType.STEP_STARTED:
        return data.get("args"), data.get("tool")
    if kind is EventType.STEP_FINISHED:
        result = data.get("result") or {}
        return data.get("step_id"), result.get("summary") or data.get("reason")
    if kind is EventType.HANDED_OFF:
        return None, data["packet"].get("reason")
    return None, {k: v for k, v in data.items() if k not in ("packet", "plan")} or None


def log_record(event: Event, trace_id: str) -> dict[str, Any]:
    """The JSONL line for one event."""
    given, produced = _io(event)
    data = event.data
    return {
        "ts": event.ts.isoformat(),
        "trace_id": trace_id,
        "run_id": event.run_id,
        "seq": event.seq,
        "event": event.type.value,
        "stage": event.stage,
        "level": _level(event),
        "status": str(data.get("status") or data.get("to") or event.type.value),
        "input_summary": summarize(given),
        "output_summary": summarize(produced),
        "duration_ms": data.get("duration_ms"),
    }


class JsonlLog:
    """Appends each run's log lines to ``<folder>/<run_id>.jsonl``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, run_id: str) -> Path:
        """The log file of a run."""
        return self.folder / f"{run_id}.jsonl"

    def append(self, trace_id: str, events: Iterable[Event]) -> None:
        """Write one line per event (blocking; the runtime calls it from a worker thread)."""
        grouped: dict[str, list[str]] = {}
        for event in events:
            line = json.dumps(log_record(event, trace_id), ensure_ascii=False)
            grouped.setdefault(event.run_id, []).append(line)
        if not grouped:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        for run_id, lines in grouped.items():
            with self.path(run_id).open("a", encoding="utf-8") as handle:
                handle.write("\n".join(lines) + "\n")

    def read(
        self, run_id: str, *, stage: str | None = None, level: str | None = None
    ) -> Iterator[dict[str, Any]]:
        """Lines of a run, filtered by stage and by minimum level."""
        path = self.path(run_id)
        if not path.is_file():
            return
        minimum = LEVELS.index(level) if level in LEVELS else 0
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                if stage and record["stage"] != stage:
                    continue
                if LEVELS.index(record["level"]) < minimum:
                    continue
                yield record
