"""Spans built from the event log, exported to the SDK's in-memory exporter.

A run that pauses and is resumed by a new Runtime on the same SQLite store continues one
trace: the spans of each stretch are exported when it pauses or ends, none twice, and
every parent is a span of the same trace (the run's own span arrives last).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from corral import Agent, Runtime, load_agent
from corral.contracts import EventType
from corral.events import Event, ModelCall, RunFinished, RunStarted, UserMessage
from corral.observe.logs import log_records
from corral.observe.spans import run_spans
from corral.observe.trace_ids import otel_trace_id, span_id
from corral.store.sql import SqlStore
from corral.testing import FixedEffects
from tests.conftest import AFTERSALES
from tests.extras import REQUIRE_ALL, import_extra

import_extra("opentelemetry.sdk", REQUIRE_ALL)

from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode  # noqa: E402

from corral.observe.otel import OtelTracer  # noqa: E402

EXCHANGE = "我的打印机上周坏了，订单号 HD20240501，能换新吗？"


def _runtime(agent: Agent, db: Path, exporter: InMemorySpanExporter) -> Runtime:
    """A Runtime of its own on the store file, as another process would make."""
    return Runtime(
        agent,
        SqlStore.open(db),
        effects=FixedEffects(),
        log_dir=db.parent / "logs",
        tracer=OtelTracer(exporter),
    )


def _by_name(spans: list[ReadableSpan]) -> dict[str, list[ReadableSpan]]:
    named: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        named.setdefault(span.name, []).append(span)
    return named


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_a_paused_run_resumed_elsewhere_is_one_trace_exported_once(tmp_path: Path) -> None:
    db = tmp_path / "corral.db"
    exporter = InMemorySpanExporter()
    agent = load_agent(AFTERSALES, data_dir=tmp_path / "business")
    paused = await _runtime(agent, db, exporter).start(EXCHANGE)
    assert paused.status.value == "awaiting_confirm"
    first = list(exporter.get_finished_spans())
    assert first and not any(s.name.startswith("invoke_agent") for s in first)

    again = load_agent(AFTERSALES, data_dir=tmp_path / "business")
    done = await _runtime(again, db, exporter).resume(paused.run_id, approve=True)
    assert done.status.value == "finished"
    spans = list(exporter.get_finished_spans())
    second = spans[len(first) :]

    trace_hex = otel_trace_id(paused.trace_id)
    assert {format(s.context.trace_id, "032x") for s in spans} == {trace_hex}
    events = SqlStore.open(db).load_events(paused.run_id)
    assert {line["trace_id"] for line in log_records(events)} == {trace_hex}

    ids = [s.context.span_id for s in spans]
    assert len(ids) == len(set(ids))  # no span exported twice
    named = _by_name(spans)
    (run,) = named["invoke_agent aftersales"]
    assert run in second and run.parent is None
    assert run.context.span_id == int(span_id(trace_hex, "run"), 16)
    assert all(s.parent is not None and s.parent.span_id in ids for s in spans if s is not run)
    assert all(s.parent.span_id == run.context.span_id for s in first if s.name == "execute")

    attributes = _attrs(run)
    assert attributes["gen_ai.operation.name"] == "invoke_agent"
    assert attributes["gen_ai.agent.name"] == "aftersales"
    assert attributes["corral.run_id"] == paused.run_id
    assert attributes["corral.intent"] == "申请换新"
    assert attributes["corral.confidence"] == paused.intent.confidence  # type: ignore[union-attr]
    assert run.start_time is not None and run.end_time is not None
    assert run.start_time < run.end_time

    tools = named["execute_tool create_exchange_order"] + named["execute_tool query_order"]
    assert [s in second for s in tools] == [True, False]  # each exported in its stretch
    for tool_span in tools:
        tool_attrs = _attrs(tool_span)
        assert tool_attrs["gen_ai.operation.name"] == "execute_tool"
        assert tool_attrs["gen_ai.tool.name"] == tool_span.name.removeprefix("execute_tool ")
        assert tool_attrs["corral.attempt"] == 1
        (step,) = [s for s in spans if s.context.span_id == tool_span.parent.span_id]  # type: ignore[union-attr]
        assert step.name == f"step {tool_attrs['corral.step_id']}"
    layers = {s.name for s in spans if "corral.layer" in _attrs(s)}
    assert {"intent", "route", "plan", "execute", "verify", "decide", "reply"} <= layers
    # each layer has one span per stretch of the run: execute before and after the pause
    assert len(named["execute"]) == 2 and len(named["intent"]) == 1


async def test_a_failing_tool_marks_its_attempts_steps_and_run_as_errors(tmp_path: Path) -> None:
    from corral import tool
    from corral.errors import TransientToolError
    from tests.helpers import build_agent

    calls: list[int] = []

    @tool
    def flaky() -> dict[str, str]:
        """Fails every time, with a retryable error."""
        calls.append(1)
        raise TransientToolError("upstream timed out")

    agent = build_agent([flaky], [{"id": "s1", "tool": "flaky", "args": {}}])
    exporter = InMemorySpanExporter()
    summary = await _runtime(agent, tmp_path / "corral.db", exporter).start("go")
    assert summary.status.value in ("failed", "handed_off")
    named = _by_name(list(exporter.get_finished_spans()))
    attempts = named["execute_tool flaky"]
    assert len(attempts) == len(calls) == 3  # two retries by default
    for span in attempts:
        assert span.status.status_code is StatusCode.ERROR
        assert _attrs(span)["error.type"] == "TOOL_TRANSIENT"
        assert _attrs(span)["corral.retryable"] is True
    assert [a.attributes["corral.attempt"] for a in attempts] == [1, 2, 3]  # type: ignore[index]
    (step,) = named["step s1"]
    assert step.status.status_code is StatusCode.ERROR
    assert _attrs(step)["corral.error_code"] == "TOOL_TRANSIENT"
    (run,) = named["invoke_agent test"]
    assert _attrs(run)["corral.status"] == summary.status.value


def test_a_model_call_is_a_chat_span_with_its_usage_under_its_layer() -> None:
    start = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)

    def event(seq: int, kind: EventType, stage: str, payload: Any) -> Event:
        return Event("run_1", seq, start + timedelta(seconds=seq), kind, stage, payload=payload)

    events = [
        event(1, EventType.RUN_STARTED, "run", RunStarted("trace_000001", "a", "", "en")),
        event(2, EventType.USER_MESSAGE, "intent", UserMessage("hello")),
        event(
            3,
            EventType.MODEL_CALL,
            "intent",
            ModelCall(
                "intent",
                "qwen2.5-7b",
                "f",
                1,
                "success",
                usage={"prompt_tokens": 120, "completion_tokens": 9},
                latency_ms=500.0,
            ),
        ),
        event(
            4,
            EventType.MODEL_CALL,
            "reply",
            ModelCall("reply", "qwen2.5-7b", "f", 1, "error", error_code="MODEL_TIMEOUT"),
        ),
        event(5, EventType.RUN_FINISHED, "run", RunFinished("finished")),
    ]
    spans = {span.key: span for span in run_spans(events)}
    chat = spans["event/3"]
    assert chat.name == "chat qwen2.5-7b" and chat.parent == "layer/intent/0"
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.request.model"] == "qwen2.5-7b"
    assert chat.attributes["gen_ai.usage.input_tokens"] == 120
    assert chat.attributes["gen_ai.usage.output_tokens"] == 9
    assert chat.end - chat.start == timedelta(milliseconds=500) and not chat.error
    failed = spans["event/4"]
    assert failed.error and failed.attributes["error.type"] == "MODEL_TIMEOUT"
    assert failed.parent == "layer/reply/0"
    assert spans["run"].closed_at == 5


async def test_a_run_that_pauses_twice_exports_each_stretch_once(tmp_path: Path) -> None:
    db = tmp_path / "corral.db"
    exporter = InMemorySpanExporter()

    def runtime() -> Runtime:  # a new process each time
        return _runtime(load_agent(AFTERSALES, data_dir=tmp_path / "business"), db, exporter)

    asked = await runtime().start("我想申请换新")
    assert asked.status.value == "awaiting_user"
    sizes = [len(exporter.get_finished_spans())]
    confirm = await runtime().resume(asked.run_id, answer="订单号是 HD20240501")
    assert confirm.status.value == "awaiting_confirm"
    sizes.append(len(exporter.get_finished_spans()))
    done = await runtime().resume(asked.run_id, approve=True)
    assert done.status.value == "finished"
    spans = list(exporter.get_finished_spans())
    assert 0 < sizes[0] < sizes[1] < len(spans)
    ids = [s.context.span_id for s in spans]
    assert len(ids) == len(set(ids))
    assert all(s.parent is None or s.parent.span_id in ids for s in spans)
    named = _by_name(spans)
    assert len(named["invoke_agent aftersales"]) == 1
    assert len(named["route"]) == 2  # asked, then routed again after the answer
    assert len(named["execute_tool query_order"]) == 1
    assert [s.name for s in spans[sizes[1] :]][-1] == "invoke_agent aftersales"


def test_span_kinds_follow_the_genai_conventions() -> None:
    """``chat`` calls a model server (CLIENT); ``execute_tool`` and ``invoke_agent`` run
    in corral's own process (INTERNAL), as the GenAI semantic conventions say."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.trace import SpanKind

    from corral.events import StepFinished, StepStarted, ToolAttempt
    from corral.observe.otel import readable_spans

    start = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
    payloads: list[tuple[EventType, str, Any]] = [
        (EventType.RUN_STARTED, "run", RunStarted("trace_000001", "a", "", "en")),
        (EventType.MODEL_CALL, "intent", ModelCall("intent", "qwen2.5-7b", "f", 1, "success")),
        (EventType.STEP_STARTED, "execute", StepStarted("s1", "lookup")),
        (EventType.TOOL_ATTEMPT, "execute", ToolAttempt("s1", "lookup", 1, "success")),
        (EventType.STEP_FINISHED, "execute", StepFinished("s1", "succeeded")),
        (EventType.RUN_FINISHED, "run", RunFinished("finished")),
    ]
    events = [
        Event("run_1", seq, start + timedelta(seconds=seq), kind, stage, payload=payload)
        for seq, (kind, stage, payload) in enumerate(payloads, 1)
    ]
    spans = readable_spans(run_spans(events), otel_trace_id("trace_000001"), Resource({}))
    kinds = {span.name: span.kind for span in spans}
    assert kinds["chat qwen2.5-7b"] is SpanKind.CLIENT
    assert kinds["execute_tool lookup"] is SpanKind.INTERNAL
    assert kinds["invoke_agent a"] is SpanKind.INTERNAL
    assert kinds["step s1"] is SpanKind.INTERNAL


def test_extraction_and_judge_calls_sit_under_the_layers_that_make_them() -> None:
    """A model call is recorded under its purpose: ``extract`` is the intent layer's work,
    ``judge`` the verify layer's; neither is a layer of its own nor the run's direct child."""
    from corral.events import StepFinished, StepStarted, ToolAttempt

    start = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)

    def call(purpose: str) -> ModelCall:
        return ModelCall(purpose, "qwen2.5-7b", "f", 1, "success", latency_ms=200.0)

    payloads: list[tuple[EventType, str, Any]] = [
        (EventType.RUN_STARTED, "run", RunStarted("trace_000001", "a", "", "en")),
        (EventType.USER_MESSAGE, "intent", UserMessage("hello")),
        (EventType.MODEL_CALL, "extract", call("extract")),
        (EventType.STEP_STARTED, "execute", StepStarted("s1", "lookup")),
        (EventType.TOOL_ATTEMPT, "execute", ToolAttempt("s1", "lookup", 1, "success")),
        (EventType.MODEL_CALL, "judge", call("judge")),
        (EventType.STEP_FINISHED, "execute", StepFinished("s1", "succeeded")),
        (EventType.RUN_FINISHED, "run", RunFinished("finished")),
    ]
    events = [
        Event("run_1", seq, start + timedelta(seconds=seq), kind, stage, payload=payload)
        for seq, (kind, stage, payload) in enumerate(payloads, 1)
    ]
    spans = {span.key: span for span in run_spans(events)}
    assert spans["event/3"].parent == "layer/intent/0"
    assert spans["event/6"].parent == "layer/verify/0"
    verify = spans["layer/verify/0"]
    judged = spans["event/6"]
    assert (verify.name, verify.start, verify.end) == ("verify", judged.start, judged.end)
    assert spans["layer/intent/0"].start <= spans["event/3"].start
    assert not any(key.startswith(("layer/judge", "layer/extract")) for key in spans)


def test_a_model_string_gives_the_provider_and_the_model_name_apart() -> None:
    """corral names a model ``PROVIDER:NAME``; the endpoint is asked for ``NAME``, which is
    what ``gen_ai.request.model`` and the span name carry (Ollama's ``qwen2.5:7b`` too)."""
    start = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
    model = "openai:qwen2.5:7b"
    payloads: list[tuple[EventType, str, Any]] = [
        (EventType.RUN_STARTED, "run", RunStarted("trace_000001", "a", "", "en", model=model)),
        (EventType.MODEL_CALL, "reply", ModelCall("reply", model, "f", 1, "success")),
        (EventType.RUN_FINISHED, "run", RunFinished("finished")),
    ]
    events = [
        Event("run_1", seq, start + timedelta(seconds=seq), kind, stage, payload=payload)
        for seq, (kind, stage, payload) in enumerate(payloads, 1)
    ]
    spans = {span.key: span for span in run_spans(events)}
    chat, run = spans["event/2"], spans["run"]
    assert chat.name == "chat qwen2.5:7b"
    for span in (chat, run):
        assert span.attributes["gen_ai.request.model"] == "qwen2.5:7b"
        assert span.attributes["gen_ai.provider.name"] == "openai"
