"""The spans of a run, built from its event log (no OpenTelemetry import here).

One span for the run (``invoke_agent {agent}``), one per layer and stretch of the run
between pauses (``intent``, ``route``, ``plan``, ``decide``, ``execute``, ``verify``,
``reply``), one per step, one per tool attempt (``execute_tool {tool}``) and one per model
call (``chat {model}``). Times come from the events' clock; a tool attempt or a model call
starts its duration before the event that records it.

Each span records the ``seq`` of the event that closed it, so an export can take just the
spans a stretch of the run finished: a run that pauses exports what it did before the
pause, and the rest (the run's own span last) when it ends, each span once, whichever
process drives it. Every string attribute is redacted as the JSONL log is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from corral.config import SamplingConfig
from corral.contracts import PAUSED_STATUSES
from corral.events import (
    Event,
    IntentClassified,
    ModelCall,
    Routed,
    RunFinished,
    RunStarted,
    StatusChanged,
    StepFinished,
    StepStarted,
    ToolAttempt,
    unfolded,
)
from corral.observe.redact import Redactor, redactor_for
from corral.observe.sampling import sample

AttributeValue = str | int | float | bool
LAYERS = ("intent", "route", "plan", "decide", "execute", "verify", "reply")
"""The stages that are layers; ``run`` and ``memory`` events belong to no layer span."""
_WORK_OF = {"extract": "intent", "judge": "verify"}
"""Model calls are recorded under their purpose; these two are not layers but work done
inside one (entity extraction in ``intent``, the model judge in ``verify``)."""
RUN_KEY = "run"
RUN_ID = "corral.run_id"


@dataclass
class SpanRecord:
    """One span, before it becomes an OpenTelemetry ``ReadableSpan``.

    ``key`` names it within the run (its span id is hashed from it); ``parent`` is the
    key of its parent, ``None`` for the run's span.
    """

    key: str
    name: str
    parent: str | None
    start: datetime
    end: datetime
    closed_at: int
    """The ``seq`` of the event that ended the span."""
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    error: bool = False


def _began(event: Event) -> datetime:
    """When the work an event records began: its time less its duration, if it has one."""
    payload = event.payload
    millis = payload.latency_ms if isinstance(payload, ModelCall) else 0.0
    if isinstance(payload, ToolAttempt | IntentClassified):
        millis = payload.duration_ms
    return event.ts - timedelta(milliseconds=millis) if millis > 0 else event.ts


def _layer_of(event: Event) -> str:
    """The layer whose work the event records (its stage, or the layer of its purpose)."""
    return _WORK_OF.get(event.stage, event.stage)


def _error(attributes: dict[str, AttributeValue], code: str | None, fallback: str) -> None:
    attributes["error.type"] = code or fallback
    if code:
        attributes["corral.error_code"] = code


class _Builder:
    """Walks a run's events once and collects its spans."""

    def __init__(self, events: Sequence[Event], redactor: Redactor) -> None:
        self.events = events
        self.hide = redactor
        self.spans: dict[str, SpanRecord] = {}
        self.segment = 0
        self.open_steps: dict[str, str] = {}
        """Step id -> key of its span, while the step runs."""
        self.run_id = events[0].run_id
        started = events[0].payload
        self.agent = started.agent if isinstance(started, RunStarted) else ""
        self.provider, self.model = _model(
            started.model if isinstance(started, RunStarted) else None
        )

    def attrs(self, **given: AttributeValue | None) -> dict[str, AttributeValue]:
        """Attributes named ``a__b`` -> ``a.b``, with the run id; ``None`` left out."""
        out: dict[str, AttributeValue] = {RUN_ID: self.run_id}
        out.update((name.replace("__", "."), v) for name, v in given.items() if v is not None)
        return out

    def build(self) -> list[SpanRecord]:
        """The spans, every name and string attribute redacted as the JSONL log is.

        The run id alone is left as it is, as in the log: corral made it, and a run id's
        hex digits may look like a phone number.
        """
        for event in unfolded(self.events):  # a span per attempt, with an event or not
            self.visit(event)
        spans = list(self.spans.values())
        for span in spans:
            span.name = self.hide.text(span.name)
            span.attributes = {
                key: self.hide.text(value) if isinstance(value, str) and key != RUN_ID else value
                for key, value in span.attributes.items()
            }
        return spans

    def visit(self, event: Event) -> None:
        payload = event.payload
        if _layer_of(event) in LAYERS:
            self.layer(event)
        if isinstance(payload, StatusChanged) and payload.to in PAUSED_STATUSES:
            self.segment += 1
        elif isinstance(payload, StepStarted):
            self.step_started(event, payload)
        elif isinstance(payload, ToolAttempt) and not payload.in_flight:
            self.tool_attempt(event, payload)
        elif isinstance(payload, StepFinished):
            self.step_finished(event, payload)
        elif isinstance(payload, ModelCall):
            self.model_call(event, payload)
        elif isinstance(payload, RunFinished):
            self.run_finished(event, payload)

    def layer_key(self, stage: str) -> str:
        return f"layer/{stage}/{self.segment}"

    def layer(self, event: Event) -> None:
        stage = _layer_of(event)
        key = self.layer_key(stage)
        span = self.spans.get(key)
        if span is None:
            span = SpanRecord(
                key,
                stage,
                RUN_KEY,
                _began(event),
                event.ts,
                event.seq,
                self.attrs(corral__layer=stage, gen_ai__agent__name=self.agent),
            )
            self.spans[key] = span
        span.start, span.end = min(span.start, _began(event)), max(span.end, event.ts)
        span.closed_at = event.seq
        payload = event.payload
        if isinstance(payload, IntentClassified):
            span.attributes.update(
                self.attrs(
                    corral__intent=payload.result.label,
                    corral__confidence=payload.result.confidence,
                )
            )

    def step_started(self, event: Event, payload: StepStarted) -> None:
        key = f"step/{payload.step_id}/{event.seq}"
        self.open_steps[payload.step_id] = key
        self.spans[key] = SpanRecord(
            key,
            f"step {payload.step_id}",
            self.layer_key(event.stage) if event.stage in LAYERS else RUN_KEY,
            event.ts,
            event.ts,
            event.seq,
            self.attrs(corral__step_id=payload.step_id, gen_ai__tool__name=payload.tool),
        )

    def tool_attempt(self, event: Event, payload: ToolAttempt) -> None:
        attributes = self.attrs(
            gen_ai__operation__name="execute_tool",
            gen_ai__agent__name=self.agent,
            gen_ai__tool__name=payload.tool,
            corral__step_id=payload.step_id,
            corral__attempt=payload.attempt,
            corral__status=payload.status,
            corral__retryable=payload.retryable,
        )
        failed = payload.status == "error"
        if failed:
            _error(attributes, payload.error_code, "tool_error")
        key = f"event/{event.seq}"
        self.spans[key] = SpanRecord(
            key,
            f"execute_tool {payload.tool}",
            self.open_steps.get(payload.step_id, RUN_KEY),
            _began(event),
            event.ts,
            event.seq,
            attributes,
            failed,
        )

    def step_finished(self, event: Event, payload: StepFinished) -> None:
        key = self.open_steps.pop(payload.step_id, None)
        span = self.spans.get(key) if key else None
        if span is None:
            return  # a step that never started (blocked, skipped): no span of its own
        span.end, span.closed_at = event.ts, event.seq
        span.attributes["corral.status"] = payload.status
        if payload.result is not None:  # the tool used: a fallback may have replaced it
            span.attributes["gen_ai.tool.name"] = payload.result.tool
        if payload.status == "failed":
            span.error = True
            _error(span.attributes, payload.error_code, "step_failed")

    def model_call(self, event: Event, payload: ModelCall) -> None:
        usage = payload.usage
        provider, model = _model(payload.model)
        attributes = self.attrs(
            gen_ai__operation__name="chat",
            gen_ai__provider__name=provider,
            gen_ai__request__model=model,
            gen_ai__usage__input_tokens=_count(usage.get("prompt_tokens")),
            gen_ai__usage__output_tokens=_count(usage.get("completion_tokens")),
            corral__purpose=payload.purpose,
            corral__attempt=payload.attempt,
            corral__status=payload.status,
            corral__retryable=payload.retryable,
        )
        failed = payload.status != "success"
        if failed:
            _error(attributes, payload.error_code, payload.status)
        key = f"event/{event.seq}"
        parent = self.layer_key(_layer_of(event))
        self.spans[key] = SpanRecord(
            key,
            f"chat {model}",
            parent if parent in self.spans else RUN_KEY,
            _began(event),
            event.ts,
            event.seq,
            attributes,
            failed,
        )

    def run_finished(self, event: Event, payload: RunFinished) -> None:
        intent = next(
            (
                e.payload.result
                for e in reversed(self.events)
                if isinstance(e.payload, IntentClassified)
            ),
            None,
        )
        routed = next(
            (e.payload.decision.intent for e in self.events if isinstance(e.payload, Routed)),
            None,
        )  # a run_plan run classifies nothing: its intent is the one it was given
        attributes = self.attrs(
            gen_ai__operation__name="invoke_agent",
            gen_ai__agent__name=self.agent,
            gen_ai__provider__name=self.provider,
            gen_ai__request__model=self.model,
            corral__intent=intent.label if intent else routed,
            corral__confidence=intent.confidence if intent else None,
            corral__status=payload.status,
            corral__outcome=payload.outcome,
        )
        failed = payload.status == "failed"
        if failed:
            _error(attributes, payload.error_code, "run_failed")
        elif payload.error_code:
            attributes["corral.error_code"] = payload.error_code
        for key in self.open_steps.values():  # steps the run left unfinished end with it
            self.spans[key].end, self.spans[key].closed_at = event.ts, event.seq
        self.open_steps.clear()
        self.spans[RUN_KEY] = SpanRecord(
            RUN_KEY,
            f"invoke_agent {self.agent}",
            None,
            self.events[0].ts,
            event.ts,
            event.seq,
            attributes,
            failed,
        )


def _model(spec: str | None) -> tuple[str | None, str | None]:
    """The provider and the model name of ``PROVIDER:NAME``, how corral names a model.

    The endpoint is asked for ``NAME``, so that is ``gen_ai.request.model`` (GenAI
    conventions); the provider is ``gen_ai.provider.name``.
    """
    if spec is None or ":" not in spec:
        return None, spec
    provider, _, name = spec.partition(":")
    return provider, name


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def run_spans(events: Sequence[Event], redactor: Redactor | None = None) -> list[SpanRecord]:
    """Every span the run has closed so far (the run's own once it has ended)."""
    if not events:
        return []
    return _Builder(events, redactor or redactor_for(events)).build()


def spans_to_export(events: Sequence[Event], sampling: SamplingConfig) -> list[SpanRecord]:
    """The spans to export now that the run has paused or ended, each exported once.

    They are those closed since the pause before this stretch of the run. A run that was
    dropped by sampling until now (it just failed or was handed off) exports all its
    spans at once; a run that is dropped exports none.
    """
    if not events or not sample(events, sampling).kept:
        return []
    pauses = [
        e.seq
        for e in events
        if isinstance(e.payload, StatusChanged) and e.payload.to in PAUSED_STATUSES
    ]
    last = next(
        (e.payload.to for e in reversed(events) if isinstance(e.payload, StatusChanged)), None
    )
    earlier = pauses[:-1] if last in PAUSED_STATUSES else pauses
    after = earlier[-1] if earlier else 0
    if after and not sample([e for e in events if e.seq <= after], sampling).kept:
        after = 0  # nothing was exported before: export the whole run now
    return [span for span in run_spans(events) if span.closed_at > after]
