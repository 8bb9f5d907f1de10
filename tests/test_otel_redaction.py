"""No secret corral redacts reaches a span: not an attribute, an event, a name or a resource.

Each kind is put into the user's message and into a tool's result (and a ``Sensitive``
argument): a phone number, a Chinese ID number, a card number, an e-mail address, an API
key, a value after ``password:``, and a match of the agent's own ``redaction.patterns``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from corral import Agent, Runtime, Sensitive, tool
from corral.observe.logs import log_records
from corral.store.sql import SqlStore
from corral.testing import FixedEffects
from tests.extras import REQUIRE_ALL, import_extra
from tests.helpers import SECRETS, build_agent

import_extra("opentelemetry.sdk", REQUIRE_ALL)

from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from corral.observe.otel import OtelTracer  # noqa: E402


@tool
def lookup(order_id: str, voucher: Annotated[str, Sensitive()]) -> dict[str, str]:
    """Returns the customer record, secrets and all."""
    return {
        "order_id": order_id,
        "contact": f"call {SECRETS['phone']} or mail {SECRETS['email']}",
        "id": SECRETS["id_number"],
        "card": SECRETS["card"],
        "note": f"key {SECRETS['api_key']}, password: {SECRETS['password']}",
        "tier": SECRETS["pattern"],
        "voucher": voucher,
    }


def _agent() -> Agent:
    steps = [
        {
            "id": "s1",
            "tool": "lookup",
            "args": {"order_id": "$entities.order_id", "voucher": SECRETS["sensitive"]},
        }
    ]
    built = build_agent([lookup], steps)
    redaction = built.config.redaction.model_copy(update={"patterns": [r"VIP-\d{6}"]})
    config = built.config.model_copy(update={"redaction": redaction})
    return Agent.build(config, [lookup])


async def test_no_secret_appears_in_any_span(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    store = SqlStore.open(tmp_path / "corral.db")
    runtime = Runtime(_agent(), store, effects=FixedEffects(), tracer=OtelTracer(exporter))
    message = "go A1 " + " ".join(
        f"{kind} {value}" for kind, value in SECRETS.items() if kind != "password"
    )
    summary = await runtime.start(message + f" password: {SECRETS['password']}")
    assert summary.status.value == "finished", summary
    events = store.load_events(summary.run_id)
    stored = str([e.data for e in events])
    assert all(value in stored for value in SECRETS.values())  # the store keeps them all

    spans = exporter.get_finished_spans()
    assert {span.name for span in spans} >= {"invoke_agent test", "execute_tool lookup"}
    dumped = "\n".join(span.to_json() for span in spans)
    leaked = [kind for kind, value in SECRETS.items() if value in dumped]
    assert leaked == []
    logged = str(log_records(events))
    assert [kind for kind, value in SECRETS.items() if value in logged] == []


def test_every_string_attribute_goes_through_the_runs_redactor() -> None:
    from datetime import UTC, datetime

    from corral.events import Event, RunFinished, RunStarted, ToolAttempt
    from corral.observe.spans import run_spans

    at = datetime(2026, 11, 29, tzinfo=UTC)
    started = RunStarted(
        "trace_1", f"desk {SECRETS['email']}", "", "en", redact={"patterns": [r"VIP-\d{6}"]}
    )
    attempt = ToolAttempt("s1", f"tool_{SECRETS['pattern']}", 1, "error", error_code="TOOL_FAILED")
    payloads = [started, attempt, RunFinished("failed", error_code=SECRETS["phone"])]
    events = [
        Event("run_1", seq, at, p.kind, "execute" if seq == 2 else "run", payload=p)
        for seq, p in enumerate(payloads, 1)
    ]
    shown = str([span.attributes for span in run_spans(events)])
    assert "desk [EMAIL]" in shown and "tool_[REDACTED]" in shown and "[PHONE]" in shown
    assert [kind for kind, value in SECRETS.items() if value in shown] == []
