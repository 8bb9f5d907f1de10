"""Turning stored runs into recorded cases of a suite (``corral record``).

A case is appended to the suite file as text, after its existing cases, so the comments
and layout of a hand-written suite stay as they were; the result is parsed again before
it is written, and a suite whose ``cases:`` list is not its last block is refused rather
than rewritten. The run's log goes beside the suite (``recorded_log``). A run already
recorded in the suite is never added twice.
"""

from __future__ import annotations

import re
import stat
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from corral.contracts import RunStatus
from corral.errors import ConfigInvalidError, InvalidInputError
from corral.events import UserAnswered, UserMessage
from corral.files import write_private
from corral.observe.redact import redactor_for
from corral.observe.window import parse_period
from corral.runtime.runtime import summarize_run
from corral.runtime.state import fold
from corral.safe_yaml import MAX_YAML_BYTES, load_yaml_text
from corral.testing.evaluation import TIER_BARS, SuiteFile
from corral.testing.recorded_log import log_path, write_log

if TYPE_CHECKING:
    from corral.events import Event
    from corral.store.base import RunRecord, Store

RECORDED_STATUSES = (RunStatus.FAILED.value, RunStatus.HANDED_OFF.value)
"""What ``--failed`` collects: runs that failed, or went to a person."""

_HEADER = (
    "# Recorded regressions (`corral record`): each case replays a stored run from its log\n"
    "# under recorded/, with no model and no live tool. Run: corral eval AGENT --suite FILE\n"
    "cases:\n"
)
_FIRST_LIST_PAGE = 256
"""How many runs ``failed_runs`` lists first; it lists four times more until it has all."""


def parse_since(text: str) -> timedelta:
    """The period of ``--failed --since`` (``30m``, ``1d``...): the one parser of periods."""
    return parse_period(text)


def failed_runs(store: Store, since: timedelta, now: datetime) -> list[RunRecord]:
    """The runs created in the ``since`` before ``now`` that failed or were handed off.

    Oldest first, so a suite lists them in the order they happened.
    """
    cutoff = now - since
    limit = _FIRST_LIST_PAGE
    while True:  # newest first: stop once the page reaches past the cutoff or the end
        records = store.list_runs(limit)
        if len(records) < limit or records[-1].created_at < cutoff:
            break
        limit *= 4
    chosen = [r for r in records if r.created_at >= cutoff and r.status in RECORDED_STATUSES]
    return sorted(chosen, key=lambda r: r.created_at)


def recorded_run_ids(suite: Path) -> set[str]:
    """The runs the suite already holds a recorded case of."""
    data = _read(suite)
    return {
        str(case.get("run_id") or Path(str(case["recorded"])).stem)
        for case in data.get("cases") or []
        if isinstance(case, dict) and "recorded" in case
    }


@dataclass(frozen=True)
class NewCase:
    """What ``record_run`` wrote: the case's name and its log file."""

    name: str
    log: Path


def record_run(
    events: list[Event],
    suite: Path,
    *,
    tier: str = "regular",
    name: str | None = None,
    expect_status: str | None = None,
) -> NewCase:
    """Append a recorded case of the run ``events`` to ``suite`` (created if missing).

    It expects the run's own final status and outcome, or ``expect_status`` (then the
    outcome only if the status is the recorded one).
    """
    check_choices(tier, expect_status)
    run_id = events[0].run_id
    summary = summarize_run(fold(run_id, events))
    expect: dict[str, Any] = {"status": expect_status or summary.status.value}
    if summary.outcome is not None and expect["status"] == summary.status.value:
        expect["outcome"] = summary.outcome
    # the suite is committed and read: its name and notes hide what logs hide (a phone,
    # an email); the log beside it keeps the words, which the replay feeds the run again
    hide = redactor_for(events)
    inputs = [
        hide.text(e.payload.text)
        for e in events
        if isinstance(e.payload, UserMessage | UserAnswered)
    ]
    title = name or f"recorded {run_id}: {' / '.join(inputs)[:50]}".rstrip(": ")
    before = _read(suite)
    named = {str(c.get("name")) for c in before.get("cases") or [] if isinstance(c, dict)}
    if title in named:  # ``load_suite`` refuses two cases of one name: the whole suite
        raise ConfigInvalidError(
            f"{suite} has a case named {title!r} already",
            hint="give this one a name of its own (--name)",
        )
    log = log_path(suite, run_id)
    case = {
        "name": title,
        "tier": tier,
        "run_id": run_id,
        "recorded": log.relative_to(suite.parent).as_posix(),
        "expect": expect,
    }
    notes = [f"user: {text}" for text in inputs] + [f"reply: {hide.text(summary.reply or '')}"]
    existed = log.exists()
    write_log(log, events)  # first: a case never names a log that is not there
    try:
        _append(suite, before, case, notes)
    except BaseException:  # a refused case leaves no log of the user's words behind
        if not existed:
            log.unlink(missing_ok=True)
        raise
    return NewCase(title, log)


def check_choices(tier: str, expect_status: str | None) -> None:
    """``INVALID_INPUT`` unless ``tier`` is a tier and ``expect_status`` a run status."""
    if tier not in TIER_BARS:
        raise InvalidInputError(f"--tier must be one of {', '.join(TIER_BARS)}, not {tier!r}")
    statuses = [s.value for s in RunStatus]
    if expect_status is not None and expect_status not in statuses:
        raise InvalidInputError(
            f"--expect-status must be one of {', '.join(statuses)}, not {expect_status!r}"
        )


def _read(suite: Path) -> dict[str, Any]:
    """The suite's YAML, ``{}`` when the file does not exist yet.

    A mapping with a key no suite has (``SuiteFile``: ``now``, ``cases``) is another file,
    an agent's ``agent.yaml`` most likely: a case appended to it broke the agent.
    """
    if not suite.exists():
        return {}
    data = load_yaml_text(suite.read_text(encoding="utf-8"), str(suite)) or {}
    if not isinstance(data, dict) or not isinstance(data.get("cases") or [], list):
        raise ConfigInvalidError(f"{suite} is not an eval suite (a mapping with `cases:`)")
    foreign = sorted(str(key) for key in data if key not in SuiteFile.model_fields)
    if foreign:
        raise ConfigInvalidError(
            f"{suite} is not an eval suite: a suite has only `now:` and `cases:`, "
            f"not {', '.join(foreign[:5])}",
            hint="record to the agent's eval.yaml, or to a new file",
        )
    return data


def _append(suite: Path, before: dict[str, Any], case: dict[str, Any], notes: list[str]) -> None:
    """Append ``case`` (with ``notes`` as comments above it) after the suite's last case.

    ``before``: the suite as ``_read`` gave it (``record_run`` read it for its names).
    """
    text = suite.read_text(encoding="utf-8") if suite.exists() else ""
    indent = _item_indent(text)
    block = "".join(f"{indent}# {_one_line(note)}\n" for note in notes)
    dumped = yaml.safe_dump([case], allow_unicode=True, sort_keys=False, width=1000)
    block += _indented(dumped, indent)
    if not text.strip():
        text = _HEADER
    elif "cases" not in before:
        text = text.rstrip("\n") + "\ncases:\n"
    elif not text.endswith("\n"):
        text += "\n"
    text += block
    if len(text.encode()) > MAX_YAML_BYTES:  # ``corral eval`` would refuse the whole suite
        raise ConfigInvalidError(
            f"cannot append a case to {suite}: it would grow past {MAX_YAML_BYTES:,} bytes, "
            "the most an eval suite may hold",
            hint="record to a new suite (--suite another.yaml)",
        )
    try:
        after = load_yaml_text(text, str(suite))
    except ConfigInvalidError:
        after = None
    cases = after.get("cases") if isinstance(after, dict) else None
    old_cases = before.get("cases") or []
    if not isinstance(cases, list) or cases[:-1] != old_cases or cases[-1] != case:
        raise ConfigInvalidError(
            f"cannot append a case to {suite}: its `cases:` list is not its last block",
            hint="move `cases:` to the end of the file (block style), or record to a new suite",
        )
    mode = stat.S_IMODE(suite.stat().st_mode) if suite.exists() else None
    write_private(suite, text.encode())
    if mode is not None:  # a suite in a repository keeps its mode; a new one is private
        suite.chmod(mode)


def _item_indent(text: str) -> str:
    """The indentation of the suite's list items under ``cases:`` (two spaces if none)."""
    found = re.search(r"^cases:[ \t]*(?:#.*)?\n(?:[ \t]*(?:#.*)?\n)*([ \t]*)- ", text, re.M)
    return found.group(1) if found else "  "


def _indented(text: str, indent: str) -> str:
    return "".join(f"{indent}{line}\n" for line in text.splitlines())


def _one_line(text: str) -> str:
    """A comment's text: one line, control characters shown, at most 100 characters."""
    flat = " ".join(text.split())
    flat = "".join(c if c.isprintable() else "?" for c in flat)
    return flat if len(flat) <= 100 else flat[:99] + "…"
