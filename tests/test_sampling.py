"""Sampling of the JSONL log and of exported spans (seed 002 §4.4).

The decision comes from the run id and the run's intent, so it is reproducible; critical
intents, failures, handoffs and failed steps are always kept; the event store keeps
every event whatever sampling says.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral import Agent, Runtime, load_agent, tool
from corral.config import SamplingConfig, TelemetryConfig
from corral.contracts import EventType, IntentResult
from corral.errors import ConfigInvalidError
from corral.events import Event, IntentClassified, RunFinished, RunStarted, StepFinished
from corral.observe.sampling import run_fraction, sample
from corral.store.sql import SqlStore
from corral.testing import FixedEffects
from corral.tools.policy import ToolPolicy
from tests.conftest import AFTERSALES
from tests.extras import REQUIRE_ALL, import_extra
from tests.helpers import build_agent

import_extra("opentelemetry.sdk", REQUIRE_ALL)

from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from corral.observe.otel import OtelTracer  # noqa: E402

AT = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def _run(run_id: str, intent: str, *ending: object) -> list[Event]:
    """The events sampling reads: a start, a classification, and what else is given."""
    payloads = [
        RunStarted("trace_000001", "a", AT.isoformat(), "zh"),
        IntentClassified("x", IntentResult(label=intent, confidence=0.9, source="rule")),
        *ending,
    ]
    return [
        Event(run_id, seq, AT, p.kind, "run", payload=p)  # type: ignore[attr-defined]
        for seq, p in enumerate(payloads, 1)
    ]


def test_the_decision_comes_from_the_run_id_and_is_the_same_every_time() -> None:
    config = SamplingConfig(rate=0.5)
    assert run_fraction("run_3f2a9c0e1b7d4a65") == pytest.approx(
        0.487464, abs=1e-6
    )  # sha256: any process
    for number in range(50):
        run_id = f"run_{number:016x}"
        first = sample(_run(run_id, "报修"), config)
        assert first == sample(_run(run_id, "报修"), config)
        assert first.kept is (run_fraction(run_id) < 0.5)


@given(
    rate=st.floats(min_value=0.05, max_value=0.95),
    salt=st.text(alphabet="0123456789abcdef", min_size=1, max_size=8),
)
def test_rates_are_honoured_over_many_runs(rate: float, salt: str) -> None:
    config = SamplingConfig(rate=1.0, rates={"咨询": rate})
    ids = [f"run_{salt}_{number}" for number in range(2000)]
    kept = sum(sample(_run(run_id, "咨询"), config).kept for run_id in ids)
    assert abs(kept / len(ids) - rate) < 0.05
    others = sum(sample(_run(run_id, "报修"), config).kept for run_id in ids[:200])
    assert others == 200  # an intent without a rate of its own takes ``rate``


@pytest.mark.parametrize(
    ("ending", "reason"),
    [
        ((), "critical intent"),
        ((RunFinished("failed", error_code="BUDGET_EXCEEDED"),), "failed"),
        ((RunFinished("handed_off"),), "handed off"),
        ((StepFinished("s1", "failed", error_code="TOOL_FAILED"),), "failed step"),
    ],
)
def test_some_runs_are_always_kept(ending: tuple[object, ...], reason: str) -> None:
    config = SamplingConfig(rate=0.0, critical_intents=["投诉"])
    intent = "投诉" if reason == "critical intent" else "咨询"
    assert sample(_run("run_1", intent, *ending), config).reason == reason
    assert sample(_run("run_1", "咨询", RunFinished("finished")), config).kept is False


def test_sampling_names_only_declared_intents(tmp_path: Path) -> None:
    folder = _aftersales(tmp_path, "critical_intents: [退款]")
    with pytest.raises(ConfigInvalidError, match="undeclared intents"):
        load_agent(folder, data_dir=tmp_path / "business")
    with pytest.raises(ConfigInvalidError, match="rate"):
        load_agent(_aftersales(tmp_path, "rate: 1.5"), data_dir=tmp_path / "business")


def _aftersales(tmp_path: Path, sampling: str) -> Path:
    """A copy of the example whose agent.yaml samples as ``sampling`` says."""
    folder = tmp_path / "agent"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(AFTERSALES, folder)
    with (folder / "agent.yaml").open("a", encoding="utf-8") as handle:
        handle.write(f"\ntelemetry:\n  sampling:\n    {sampling}\n")
    return folder


def _repair_is_critical(
    tmp_path: Path,
) -> tuple[Agent, SqlStore, InMemorySpanExporter, Runtime]:
    """The example keeping no run but those of 报修, and a Runtime logging and tracing it."""
    folder = _aftersales(tmp_path, "{rate: 0.0, critical_intents: [报修]}")
    agent = load_agent(folder, data_dir=tmp_path / "business")
    exporter = InMemorySpanExporter()
    store = SqlStore.open(tmp_path / "corral.db")
    runtime = Runtime(
        agent, store, effects=FixedEffects(), log_dir=tmp_path / "logs", tracer=OtelTracer(exporter)
    )
    return agent, store, exporter, runtime


async def test_dropped_runs_have_no_log_and_no_spans_but_every_event(tmp_path: Path) -> None:
    agent, store, exporter, runtime = _repair_is_critical(tmp_path)
    logs = tmp_path / "logs"

    def traced(run_id: str) -> set[str]:
        return {
            span.name
            for span in exporter.get_finished_spans()
            if span.attributes and span.attributes["corral.run_id"] == run_id
        }

    question = await runtime.start("显示器保修多久？")
    assert question.status.value == "finished"
    assert not (logs / f"{question.run_id}.jsonl").exists() and traced(question.run_id) == set()
    assert store.load_events(question.run_id)[-1].type is EventType.RUN_FINISHED

    repair = await runtime.start("打印机卡纸了，订单 HD20240501")  # critical
    complaint = await runtime.start("你们这个打印机真是气死我了")  # handed off
    assert complaint.status.value == "handed_off"
    for kept in (repair, complaint):
        assert (logs / f"{kept.run_id}.jsonl").is_file()
        assert f"invoke_agent {agent.name}" in traced(kept.run_id)


def _failing_write_agent() -> tuple[Agent, list[int]]:
    calls: list[int] = []

    @tool
    def read_order(order_id: str) -> dict[str, str]:
        """Reads the order."""
        return {"order_id": order_id}

    @tool(policy=ToolPolicy(kind="write", requires_confirmation=True))
    def refund(order_id: str) -> dict[str, str]:
        """Refunds the order; the payment provider refuses it."""
        from corral.errors import ToolFailedError

        calls.append(1)
        raise ToolFailedError("the payment provider refused the refund")

    steps = [
        {"id": "s1", "tool": "read_order", "args": {"order_id": "$entities.order_id"}},
        {
            "id": "s2",
            "tool": "refund",
            "args": {"order_id": "$entities.order_id"},
            "depends_on": ["s1"],
        },
    ]
    built = build_agent([read_order, refund], steps)
    sampled = TelemetryConfig(sampling=SamplingConfig(rate=0.0))
    config = built.config.model_copy(update={"telemetry": sampled})
    return Agent.build(config, [read_order, refund]), calls


async def test_a_dropped_run_that_fails_after_a_pause_gets_its_whole_log_and_trace(
    tmp_path: Path,
) -> None:
    agent, calls = _failing_write_agent()
    db, logs = tmp_path / "corral.db", tmp_path / "logs"
    exporter = InMemorySpanExporter()

    def runtime() -> Runtime:
        return Runtime(
            agent,
            SqlStore.open(db),
            effects=FixedEffects(),
            log_dir=logs,
            tracer=OtelTracer(exporter),
        )

    paused = await runtime().start("go A1")
    assert paused.status.value == "awaiting_confirm"
    assert not (logs / f"{paused.run_id}.jsonl").exists()
    assert exporter.get_finished_spans() == ()

    ended = await runtime().resume(paused.run_id, approve=True)
    assert calls == [1] and ended.status.value in ("failed", "handed_off")
    events = SqlStore.open(db).load_events(paused.run_id)
    import json

    lines = (logs / f"{paused.run_id}.jsonl").read_text("utf-8").splitlines()
    assert [json.loads(line)["seq"] for line in lines] == [e.seq for e in events]
    spans = exporter.get_finished_spans()
    names = [span.name for span in spans]
    assert len({span.context.span_id for span in spans}) == len(spans)
    assert names.count("execute") == 2  # before the pause and after it, both exported now
    assert {"intent", "step s1", "execute_tool read_order", "execute_tool refund"} <= set(names)
    assert names.count("invoke_agent test") == 1


async def test_a_run_plan_of_a_critical_intent_is_kept_and_names_its_intent(
    tmp_path: Path,
) -> None:
    """``run_plan`` classifies nothing: its intent is the one its route records."""
    agent, store, exporter, runtime = _repair_is_critical(tmp_path)
    repair = await runtime.run_plan("repair", entities={"order_id": "HD20240501"})
    assert repair.status.value == "finished"
    assert sample(store.load_events(repair.run_id), agent.config.telemetry.sampling).reason == (
        "critical intent"
    )
    assert (tmp_path / "logs" / f"{repair.run_id}.jsonl").is_file()
    (run,) = [s for s in exporter.get_finished_spans() if s.parent is None]
    assert run.attributes is not None and run.attributes["corral.intent"] == "报修"
    assert "corral.confidence" not in run.attributes  # nothing was classified
