"""Recorded cases: a stored run replayed as an eval case (seed 000 §5.6, 录下每一次翻车现场).

A suite case with a ``recorded`` key names the log of a real run (``recorded_log``). It is
not played from its messages: it is replayed (``corral.runtime.replay``) with the run's
own inputs, its model answers and its tool results, so it needs no model and calls no
tool. It passes when the replay takes the recorded path, event for event, and the run
ends as its ``expect`` says; it fails when today's code takes another path, naming the
first event that differs.

The suite's ``now`` does not apply: a replay runs on the recorded run's own clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corral.contracts import RunStatus, RunSummary
from corral.errors import ConfigInvalidError, ErrorCode
from corral.events import Event, ToolAttempt, UserAnswered, UserMessage
from corral.observe.redact import redactor_for
from corral.runtime.replay import (
    SIGNATURE_FIELDS,
    ReplayReport,
    compare,
    replay_events,
    signature,
)
from corral.runtime.runtime import summarize_run
from corral.runtime.state import fold
from corral.testing.evaluation import (
    _EXPECT_KEYS,
    TIER_BARS,
    CaseResult,
    EvalCase,
    Expectations,
    _check,
    checked,
    tools_selected,
)
from corral.testing.recorded_log import read_log

if TYPE_CHECKING:
    from corral.agent import Agent

CASE_KEYS = frozenset({"name", "tier", "run_id", "recorded", "expect"})
"""The keys of a recorded case: no messages (they are in the log) and no ``approve``."""


@dataclass(frozen=True)
class RecordedCase(EvalCase):
    """An eval case whose conversation is a recorded run's log."""

    run_id: str
    log: Path
    events: tuple[Event, ...]


def recorded_case(raw: dict[str, Any], index: int, suite: Path) -> RecordedCase:
    """The case ``raw`` of ``suite``, its log read (a path relative to the suite's folder)."""
    name = str(raw.get("name") or f"{index:03d} recorded {raw.get('run_id', '')}")
    expect = raw.get("expect") or {}
    if not isinstance(expect, dict) or not isinstance(raw.get("recorded"), str):
        raise ConfigInvalidError(
            f"recorded case {name!r}: `recorded` must be a path and `expect` a mapping"
        )
    unknown = sorted(set(raw) - CASE_KEYS) + sorted(
        f"expect.{key}" for key in set(expect) - set(_EXPECT_KEYS)
    )
    if unknown:
        raise ConfigInvalidError(
            f"recorded case {name!r}: unknown keys {unknown}",
            hint=f"a recorded case has {sorted(CASE_KEYS)}; expect takes {list(_EXPECT_KEYS)}",
        )
    tier = raw.get("tier", "regular")
    if not isinstance(tier, str) or tier not in TIER_BARS:  # a list is no tier, nor hashable
        raise ConfigInvalidError(
            f"recorded case {name!r}: tier {tier!r} is not one of {', '.join(TIER_BARS)}"
        )
    expect = checked(Expectations, expect, f"{suite}: recorded case {name!r}: expect").given()
    log = Path(raw["recorded"])
    events = read_log(log if log.is_absolute() else suite.parent / log)
    if raw.get("run_id") not in (None, events[0].run_id):
        raise ConfigInvalidError(
            f"recorded case {name!r} names run {raw['run_id']!r}, its log holds "
            f"{events[0].run_id!r}"
        )
    inputs = [e.payload.text for e in events if isinstance(e.payload, UserMessage | UserAnswered)]
    return RecordedCase(
        name,
        str(raw.get("tier", "regular")),
        inputs,
        None,
        dict(expect),
        events[0].run_id,
        log,
        tuple(events),
    )


async def replay_case(agent: Agent, case: RecordedCase) -> CaseResult:
    """Replay the case's run with ``agent`` (no model, no live tool) and judge it."""
    recorded = list(case.events)
    new, error = await replay_events(agent, recorded)
    report = compare(recorded, new, error)
    problems = [] if report.same_path else [divergence(report, recorded, new)]
    summary = summarize_run(fold(new[0].run_id, new)) if new else _stopped(case)
    tools = tools_selected(new)
    failures = [
        (a.tool, a.error_code or ErrorCode.TOOL_FAILED.value)
        for a in (e.payload for e in new)
        if isinstance(a, ToolAttempt) and a.status == "error"
    ]
    problems += _check(case, summary, tools)
    hide = redactor_for(recorded)
    return CaseResult(case, [hide.text(p) for p in problems], summary, tools, failures)


def divergence(report: ReplayReport, recorded: list[Event], new: list[Event]) -> str:
    """The first divergent event, by its recorded ``seq`` and type, and what differed."""
    index = report.divergence_index
    before, now = report.original, report.replayed
    if before is not None and index is not None:
        where = f"event seq {recorded[index].seq} {_named(before)}"
        if now is None:
            what = "the replay ended before it"
        else:
            what = ", ".join(
                f"{field} {old!r} recorded, {new_value!r} now"
                for field, old, new_value in zip(SIGNATURE_FIELDS, before, now, strict=True)
                if old != new_value
            )
    elif now is not None and index is not None:
        where = f"replayed event seq {new[index].seq} {_named(now)}"
        what = "the recorded run has no such event"
    else:
        return f"the replay stopped: {report.error}"
    text = f"took another path at {where}: {what}"
    replayed = next((e.payload for e in new if now and signature(e) == now), None)
    if isinstance(replayed, ToolAttempt) and replayed.error_message:
        text += f" ({replayed.error_message})"  # e.g. the tool was called with other arguments
    return f"{text}; replay error: {report.error}" if report.error else text


def _named(items: tuple[Any, ...]) -> str:
    """An event's type, step and tool, as its signature holds them: ``(tool_attempt s3 x)``."""
    return "(" + " ".join(str(item) for item in items[:3] if item is not None) + ")"


def _stopped(case: RecordedCase) -> RunSummary:
    """The summary of a replay that stopped before its run began (no event at all)."""
    return RunSummary(
        run_id=case.run_id,
        trace_id="",
        status=RunStatus.FAILED,
        intent=None,
        steps=[],
        reply=None,
        handoff=None,
        error_code=ErrorCode.REPLAY_DIVERGED.value,
    )
