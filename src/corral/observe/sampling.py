"""Whether a run's JSONL log and spans are kept (seed 002 §4.4: sample by task type).

The decision is a pure function of the run's events and the agent's ``telemetry.sampling``:
the run id, hashed, is compared with the rate of the run's intent (its first
classification; for a ``run_plan`` run, which classifies nothing, the intent its route
records), so it is the same in every process and on every replay. Some runs are
always kept: a critical intent, a failure, a handoff, a failed step. Those conditions only
ever become true as a run goes on, so a run once kept stays kept, and a run dropped while
it was going well is kept in full when it fails. The event store keeps every event.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from corral.config import SamplingConfig
from corral.events import (
    Event,
    HandedOff,
    IntentClassified,
    Routed,
    RunFinished,
    StepFinished,
)
from corral.hashing import text_digest

_BAD_ENDS = frozenset({"failed", "handed_off"})


@dataclass(frozen=True, slots=True)
class Sampled:
    """The decision on one run, and why (shown in docs and tests, never guessed)."""

    kept: bool
    reason: str
    """``sampled``, ``sampled out``, ``critical intent``, ``failed``, ``handed off`` or
    ``failed step``."""


def run_fraction(run_id: str) -> float:
    """Where the run id falls in [0, 1): stable across processes and Python versions."""
    return int(text_digest(run_id, 16), 16) / 2**64


def sample(events: Sequence[Event], config: SamplingConfig) -> Sampled:
    """Whether the run these events tell is kept in the log and in exported spans."""
    if config.rate >= 1.0 and not config.rates:
        return Sampled(True, "sampled")  # the default: keep everything, read nothing
    intents: list[str] = []
    routed: list[str] = []
    for event in events:
        payload = event.payload
        if isinstance(payload, IntentClassified):
            intents.append(payload.result.label or "")  # no label: the default rate
        elif isinstance(payload, Routed) and payload.decision.intent:
            routed.append(payload.decision.intent)
        elif isinstance(payload, HandedOff):
            return Sampled(True, "handed off")
        elif isinstance(payload, StepFinished) and payload.status == "failed":
            return Sampled(True, "failed step")
        elif isinstance(payload, RunFinished) and payload.status in _BAD_ENDS:
            return Sampled(True, payload.status.replace("_", " "))
    intents = intents or routed  # a run_plan run: the intent it was given
    if any(label in config.critical_intents for label in intents):
        return Sampled(True, "critical intent")
    rate = config.rates.get(intents[0], config.rate) if intents else config.rate
    if events and run_fraction(events[0].run_id) < rate:
        return Sampled(True, "sampled")
    return Sampled(False, "sampled out")
