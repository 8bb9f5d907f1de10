"""The five seed 003 metrics, and the three counts that must be zero, over eval cases.

A case is told as a ``Transcript``: what the user said, each tool call with its arguments
and result, what the final reply claims about each write, what it cost, and what the
fault ledger saw at the effects boundary. corral's transcripts are read from the event log
(``transcript_from_events``); the reliability benchmark's naive agent writes its own, so
both are judged by one piece of code.

- **Task success rate**: cases whose expectations held.
- **Partial completion rate**: cases that finished part of their goal and said so.
- **Recoverability**: of the cases that met a fault, those that still succeeded.
- **Verifiability**: of the steps the final reply claims as done, those backed by a
  successful tool result and a check that judged it: a success criterion, a business
  rule before it, or the judge (a result that only fits its output schema is not enough).
- **Cost**: tool calls, model calls, tokens, money and wall time per case (mean, p50, p95).

Must be zero:

- **duplicate effects**: a write entered again for one idempotency key after an entry that
  could have acted (counted by the fault ledger where the tool is entered), unless its
  policy declares it idempotent by key: such a re-entry finds the first effect, and is
  reported apart as an idempotent replay;
- **fabricated outcomes**: a claim that a write happened when it did not, or that it did
  not when it did (a write the reply calls unknown claims neither);
- **invented arguments**: an argument value that the user never gave (in the text, or as
  an entity read from it by code), no earlier tool returned, and the agent's own config
  did not set.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from corral.contracts import StepStatus
from corral.events import (
    EntitiesMerged,
    Event,
    IntentClassified,
    ModelCall,
    PlanCreated,
    StepFinished,
    StepStarted,
    ToolAttempt,
    UserAnswered,
    UserMessage,
    Verified,
)
from corral.intent.grounding import leaves
from corral.runtime.scheduler import idempotency_key
from corral.testing.faults import FaultLedger

Claim = Literal["applied", "not_applied", "none"]


@dataclass(frozen=True)
class CallRecord:
    """One step's tool call as the agent made it, and what the reply says of it."""

    tool: str
    args: dict[str, Any]
    write: bool
    key: str | None
    """The idempotency key a write was entered with (the fault ledger's key)."""
    succeeded: bool
    output: Any = None
    claim: Claim = "none"
    """What the final reply claims: the step's effect happened, did not, or nothing."""
    checked: bool = False
    """A deterministic check (or the judge) passed on its result."""


@dataclass
class Transcript:
    """One case, told in terms any agent can report."""

    case: str
    tier: str
    passed: bool
    partial: bool
    user_texts: list[str]
    calls: list[CallRecord]
    given: list[Any] = field(default_factory=list)
    """Values read from the user's words by code (entities), counted as given."""
    literals: list[Any] = field(default_factory=list)
    """Values the agent's own config set (template plan arguments)."""
    ledger: FaultLedger = field(default_factory=FaultLedger)
    tool_calls: int = 0
    """Tool attempts, retries and reconciler lookups included."""
    model_calls: int = 0
    tokens: int = 0
    money: float = 0.0
    wall_s: float = 0.0

    @property
    def faulted(self) -> bool:
        """Whether any fault struck this case."""
        return bool(self.ledger.faults)

    def fabricated(self) -> int:
        """Claims about writes that the ledger contradicts."""
        count = 0
        for call in self.calls:
            if not call.write or call.key is None or call.claim == "none":
                continue
            acted = self.ledger.acted(call.tool, call.key)
            if acted is not None:  # a write that failed ambiguously: only its reconciler knows
                count += (call.claim == "applied") != acted
        return count

    def invented(self) -> int:
        """Argument values nobody gave: not the user, not a tool before, not the config."""
        texts = " ".join(self.user_texts).casefold()
        known = {_normal(v) for v in (*_leaves(self.given), *_leaves(self.literals))}
        count = 0
        for call in self.calls:
            for value in _leaves(call.args):
                normal = _normal(value)
                if not normal or normal in known or _said(normal, texts):
                    continue
                count += 1
            known.update(_normal(v) for v in _leaves(call.output))
        return count


def _said(value: str, text: str) -> bool:
    """Whether ``value`` is in ``text`` as a whole word or number ("1" is not in "A12").

    Text with no spaces between words (Chinese) is matched as a substring.
    """
    if not value.isascii():
        return value in text
    return re.search(rf"(?<![0-9a-z]){re.escape(value)}(?![0-9a-z])", text) is not None


def _leaves(value: Any) -> Iterable[Any]:
    """The scalar values inside ``value`` (booleans and ``None`` say nothing of origin)."""
    return (v for v in leaves(value) if v is not None and not isinstance(v, bool))


def _normal(value: Any) -> str:
    """A value as text to compare: ``12.0`` and ``"12"`` are the same value."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip().casefold()


def _spread(values: Sequence[float]) -> dict[str, float]:
    """Mean, p50 and p95 (nearest rank) of a cost, rounded for a report."""
    if not values:
        return {"mean": 0.0, "p50": 0.0, "p95": 0.0}
    ordered = sorted(values)
    rank = max(0, math.ceil(0.95 * len(ordered)) - 1)
    return {
        "mean": round(statistics.fmean(ordered), 4),
        "p50": round(statistics.median(ordered), 4),
        "p95": round(ordered[rank], 4),
    }


@dataclass
class ReliabilityReport:
    """The metrics over a suite's transcripts."""

    transcripts: list[Transcript]

    def _share(self, hits: int, total: int) -> float | None:
        return round(hits / total, 4) if total else None

    def metrics(self) -> dict[str, Any]:
        """The five metrics; a rate with nothing to count (no faulted case) is ``None``."""
        runs = self.transcripts
        faulted = [t for t in runs if t.faulted]
        claims = [c for t in runs for c in t.calls if c.claim == "applied"]
        backed = sum(c.succeeded and c.checked for c in claims)
        return {
            "task_success_rate": self._share(sum(t.passed for t in runs), len(runs)),
            "partial_completion_rate": self._share(sum(t.partial for t in runs), len(runs)),
            "recoverability": self._share(sum(t.passed for t in faulted), len(faulted)),
            "verifiability": self._share(backed, len(claims)),
            "cost": {
                "tool_calls": _spread([t.tool_calls for t in runs]),
                "model_calls": _spread([t.model_calls for t in runs]),
                "tokens": _spread([t.tokens for t in runs]),
                "money": _spread([t.money for t in runs]),
                "wall_s": _spread([t.wall_s for t in runs]),
            },
        }

    def must_be_zero(self) -> dict[str, int]:
        """The three counts; any of them above zero fails the eval."""
        return {
            "duplicate_effects": sum(t.ledger.duplicate_effects for t in self.transcripts),
            "fabricated_outcomes": sum(t.fabricated() for t in self.transcripts),
            "invented_arguments": sum(t.invented() for t in self.transcripts),
        }

    def faults(self) -> dict[str, Any]:
        """How many faults struck, by kind, and in how many cases."""
        kinds: dict[str, int] = {}
        for transcript in self.transcripts:
            for fault in transcript.ledger.faults:
                kinds[fault.kind] = kinds.get(fault.kind, 0) + 1
        return {
            "injected": dict(sorted(kinds.items())),
            "cases_with_faults": sum(t.faulted for t in self.transcripts),
            "idempotent_replays": sum(t.ledger.replays for t in self.transcripts),
        }


_CLAIMS: dict[StepStatus, Claim] = {
    StepStatus.SUCCEEDED: "applied",
    StepStatus.FAILED: "not_applied",
    StepStatus.SKIPPED: "not_applied",
    StepStatus.BLOCKED: "not_applied",
    StepStatus.PENDING: "not_applied",
}
"""What corral's reply says of a step in each final status (``unknown``: it says neither)."""


def transcript_from_events(
    events: Sequence[Event],
    *,
    case: str,
    tier: str,
    passed: bool,
    partial: bool,
    writes: frozenset[str],
    ledger: FaultLedger,
    wall_s: float,
) -> Transcript:
    """A corral case's transcript, from the events of every run it made (in order).

    ``writes``: the agent's write tools. Keys are corral's own idempotency keys, the ones
    the fault ledger saw; a step's claim is what its final status tells the user.
    """
    texts: list[str] = []
    given: list[Any] = []
    literals: list[Any] = []
    started: dict[tuple[str, str], StepStarted] = {}
    finished: dict[tuple[str, str], StepFinished] = {}
    checked: set[tuple[str, str]] = set()
    tool_calls = model_calls = tokens = 0
    money = 0.0
    for event in events:
        payload, run = event.payload, event.run_id
        if isinstance(payload, UserMessage | UserAnswered):
            texts.append(payload.text)
        elif isinstance(payload, IntentClassified):
            given.append(payload.result.entities)
        elif isinstance(payload, EntitiesMerged):
            given.append(payload.entities)
        elif isinstance(payload, PlanCreated) and payload.plan.source == "template":
            literals.extend(s.args for s in payload.plan.steps)
        elif isinstance(payload, StepStarted) and payload.args is not None:
            started[(run, payload.step_id)] = payload
        elif isinstance(payload, StepFinished):
            finished[(run, payload.step_id)] = payload
            tool_calls += payload.sole_attempt  # it stands for the step's one attempt
            if payload.verdict is not None and payload.verdict.passed:
                checked.add((run, payload.step_id))
        elif isinstance(payload, Verified) and payload.verdict.passed:
            checked.add((run, payload.step_id))
        elif isinstance(payload, ToolAttempt):
            tool_calls += 1
        elif isinstance(payload, ModelCall):
            model_calls += 1
            usage = payload.usage
            tokens += int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
            money += payload.cost
    calls = []
    for where, start in started.items():
        end = finished.get(where)
        result = end.result if end is not None else None
        status = StepStatus(end.status) if end is not None else StepStatus.PENDING
        tool = result.tool if result is not None else start.tool
        succeeded = status is StepStatus.SUCCEEDED
        calls.append(
            CallRecord(
                tool=tool,
                args=start.args or {},
                write=tool in writes,
                key=idempotency_key(where[0], where[1], start.args or {}),
                succeeded=succeeded,
                output=result.data if result is not None else None,
                claim=_CLAIMS.get(status, "none"),
                # a verdict that says something: a success criterion, a rule, the judge
                checked=succeeded and where in checked,
            )
        )
    return Transcript(
        case, tier, passed, partial, texts, calls, given, literals, ledger,
        tool_calls, model_calls, tokens, money, wall_s,
    )  # fmt: skip
