"""Spans of a run as OpenTelemetry ``ReadableSpan``s, handed to a ``SpanExporter``.

The only module that imports the SDK (``corral[otel]``), inside its functions, so it
imports without the extra; ``corral.observe.telemetry`` uses it only when an exporter is
configured. Spans are not recorded live through a
tracer: they are rebuilt from the event log (``corral.observe.spans``) with ids derived
from the run's trace id, so a run resumed in another process continues the same trace
and its children point at the run's span before that span is exported (when the run
ends).

Exporting never fails a run: its events are already stored, and a collector that is
down costs the spans of that export only (logged as a warning).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from corral.config import SamplingConfig
from corral.events import Event, RunStarted
from corral.observe.spans import SpanRecord, spans_to_export
from corral.observe.telemetry import TelemetrySettings
from corral.observe.trace_ids import otel_trace_id, span_id

if TYPE_CHECKING:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter

logger = logging.getLogger(__name__)

OPERATION = "gen_ai.operation.name"

EXPORT_TIMEOUT_S = 5.0
"""How long one OTLP export may hold up the end of a run before its spans are given up."""
COOL_DOWN_S = 30.0
"""After an export fails, how long exports are skipped (their spans dropped, logged): runs
of one Runtime queue for its exporter, so a collector that is down would otherwise hold
up every run by its retries, one after another."""


def run_trace_id(events: Sequence[Event]) -> str:
    """The OTel trace id (32 hex) of a stored run."""
    started = events[0].payload if events else None
    return otel_trace_id(started.trace_id if isinstance(started, RunStarted) else "")


def _nanos(moment: datetime) -> int:
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1_000


def readable_spans(
    records: Sequence[SpanRecord], trace_hex: str, resource: Resource
) -> list[ReadableSpan]:
    """The records as SDK spans, their ids derived from ``trace_hex`` and their keys."""
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

    scope = InstrumentationScope("corral")
    trace_id = int(trace_hex, 16)

    def context(key: str) -> SpanContext:
        return SpanContext(
            trace_id, int(span_id(trace_hex, key), 16), False, TraceFlags(TraceFlags.SAMPLED)
        )

    def kind(record: SpanRecord) -> SpanKind:
        """CLIENT for a model call, else INTERNAL, as the GenAI conventions say.

        A tool runs in corral's own process (``execute_tool``), as does the run itself
        (``invoke_agent``); only a model call goes to a server.
        """
        chat = record.attributes.get(OPERATION) == "chat"
        return SpanKind.CLIENT if chat else SpanKind.INTERNAL

    return [
        ReadableSpan(
            name=record.name,
            context=context(record.key),
            parent=context(record.parent) if record.parent is not None else None,
            resource=resource,
            attributes=record.attributes,
            kind=kind(record),
            status=Status(StatusCode.ERROR) if record.error else Status(StatusCode.UNSET),
            start_time=_nanos(record.start),
            end_time=_nanos(max(record.end, record.start)),
            instrumentation_scope=scope,
        )
        for record in records
    ]


class OtelTracer:
    """Exports each stretch of a run's spans to one ``SpanExporter`` (``RunTracer``)."""

    def __init__(
        self,
        exporter: SpanExporter,
        service_name: str = "corral",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from opentelemetry.sdk.resources import Resource

        self.exporter = exporter
        self.clock = clock
        self._skip_until = -math.inf
        """Until when exports are skipped, after a failed one (``COOL_DOWN_S``)."""
        self._one_export = threading.Lock()
        """The SDK's contract: ``export`` is never called concurrently on one exporter, and
        runs of one Runtime end in several store threads at once."""
        self.resource = Resource.create({"service.name": service_name})

    @classmethod
    def from_settings(cls, settings: TelemetrySettings) -> OtelTracer:
        """The console exporter (stdout) or OTLP over HTTP, as the settings say."""
        if settings.exporter == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            return cls(ConsoleSpanExporter(), settings.service_name)
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=settings.endpoint, timeout=EXPORT_TIMEOUT_S)
        return cls(exporter, settings.service_name)

    def export(self, events: Sequence[Event], sampling: SamplingConfig) -> None:
        """Export the spans the run closed since its last pause, if sampling keeps it."""
        run_id = events[0].run_id if events else ""
        try:
            records = spans_to_export(events, sampling)
            if not records:
                return
            spans = readable_spans(records, run_trace_id(events), self.resource)
            with self._one_export:
                if self.clock() < self._skip_until:
                    logger.warning("the spans of %s are dropped: an export just failed", run_id)
                    return
                exported = False
                try:
                    exported = self.exporter.export(spans).name == "SUCCESS"
                finally:  # refused or raised: leave the collector alone for a while
                    if not exported:
                        self._skip_until = self.clock() + COOL_DOWN_S
            if not exported:
                logger.warning("the collector refused the spans of %s", run_id)
        except Exception:  # a broken collector or exporter never fails a stored run
            logger.warning("exporting the spans of %s failed", run_id, exc_info=True)
