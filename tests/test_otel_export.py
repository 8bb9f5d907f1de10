"""Exporting spans as a user would: ``corral run`` with the standard ``OTEL_*`` variables.

The console exporter prints to stdout; the OTLP exporter posts protobuf to a receiver this
test runs on loopback, decoded with opentelemetry-proto. With no exporter configured,
nothing from OpenTelemetry is even imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from corral.observe.trace_ids import otel_trace_id
from tests.conftest import AFTERSALES, ROOT
from tests.extras import REQUIRE_ALL, import_extra
from tests.helpers import corral_cli

import_extra("opentelemetry.proto", REQUIRE_ALL)

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)

REPAIR = "打印机卡纸了，订单 HD20240501"
EXCHANGE = "我的打印机上周坏了，订单号 HD20240501，能换新吗？"
NO_OTEL = {key: "" for key in os.environ if key.startswith("OTEL_")}


def _console_spans(stdout: str) -> list[dict[str, Any]]:
    """The JSON objects the console exporter printed, in order, before corral's own output."""
    decoder, spans, at = json.JSONDecoder(), [], 0
    while True:
        at = stdout.find("{", at)
        if at < 0:
            return spans
        try:
            found, at = decoder.raw_decode(stdout, at)
        except ValueError:
            return spans
        spans.append(found)


def test_the_console_exporter_prints_the_runs_spans_to_stdout(tmp_path: Path) -> None:
    console = {"OTEL_TRACES_EXPORTER": "console"}
    done = corral_cli(tmp_path, "run", str(AFTERSALES), REPAIR, env=console)
    spans = _console_spans(done.stdout)
    names = [span["name"] for span in spans]
    assert names[-1] == "invoke_agent aftersales"  # the run's own span, when it ends
    assert "execute_tool query_order" in names and "intent" in names
    run = spans[-1]
    assert run["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert run["attributes"]["gen_ai.agent.name"] == "aftersales"
    assert run["attributes"]["corral.intent"] == "报修"
    assert run["resource"]["attributes"]["service.name"] == "corral"
    tool = spans[names.index("execute_tool query_order")]
    assert tool["attributes"]["gen_ai.tool.name"] == "query_order"
    assert {span["context"]["trace_id"] for span in spans} == {run["context"]["trace_id"]}
    (log,) = (tmp_path / "logs").glob("*.jsonl")
    line = json.loads(log.read_text("utf-8").splitlines()[0])
    assert run["context"]["trace_id"] == "0x" + line["trace_id"]  # the log's id is the trace's


class _Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP collector of one route: keeps what is posted to /v1/traces."""

    bodies: list[tuple[str, bytes]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.bodies.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    bodies: list[tuple[str, bytes]] = []
    handler = type("Receiver", (_Receiver,), {"bodies": bodies})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    finally:
        server.shutdown()
        server.server_close()


def test_otlp_over_http_reaches_a_collector_with_the_genai_attributes(
    tmp_path: Path, receiver: tuple[str, list[tuple[str, bytes]]]
) -> None:
    endpoint, bodies = receiver
    env = {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_SERVICE_NAME": "aftersales-desk",
    }
    paused = json.loads(
        corral_cli(tmp_path, "run", str(AFTERSALES), EXCHANGE, "--json", env=env).stdout
    )
    corral_cli(tmp_path, "resume", paused["run_id"], "--approve", env=env)
    assert [path for path, _ in bodies] == ["/v1/traces", "/v1/traces"]  # pause, then end
    spans, services = [], set()
    for _, body in bodies:
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            for attribute in resource_spans.resource.attributes:
                if attribute.key == "service.name":
                    services.add(attribute.value.string_value)
            for scope_spans in resource_spans.scope_spans:
                spans.extend(scope_spans.spans)
    assert services == {"aftersales-desk"}
    assert {span.trace_id.hex() for span in spans} == {otel_trace_id(paused["trace_id"])}
    assert len({span.span_id for span in spans}) == len(spans)
    by_name = {span.name: span for span in spans}
    run = by_name["invoke_agent aftersales"]
    assert all(span.parent_span_id == run.span_id for span in spans if span.name == "intent")
    write = by_name["execute_tool create_exchange_order"]
    attributes = {a.key: a.value for a in write.attributes}
    assert attributes["gen_ai.operation.name"].string_value == "execute_tool"
    assert attributes["gen_ai.tool.name"].string_value == "create_exchange_order"
    assert attributes["corral.step_id"].string_value == "s4"
    assert attributes["corral.attempt"].int_value == 1
    assert write.end_time_unix_nano >= write.start_time_unix_nano > 0


def test_without_an_exporter_nothing_from_opentelemetry_is_imported(tmp_path: Path) -> None:
    script = f"""
import asyncio, sys
from pathlib import Path
from corral import Runtime, load_agent
from corral.store.sql import SqlStore
home = Path({str(tmp_path)!r})
agent = load_agent(Path({str(AFTERSALES)!r}), data_dir=home / "business")
runtime = Runtime(agent, SqlStore.open(home / "corral.db"), log_dir=home / "logs")
summary = asyncio.run(runtime.start({REPAIR!r}))
assert summary.status.value == "finished", summary
print(sorted(name for name in sys.modules if name.startswith("opentelemetry")))
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, **NO_OTEL, "PYTHONPATH": str(ROOT / "src")},
        timeout=180,
        cwd=ROOT,
        check=True,
    )
    assert done.stdout.strip() == "[]"
    assert list((tmp_path / "logs").glob("*.jsonl"))  # the run did run, with its log


def test_a_collector_that_is_down_never_fails_the_run(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
    }
    done = corral_cli(tmp_path, "run", str(AFTERSALES), REPAIR, "--json", env=env)
    assert json.loads(done.stdout)["status"] == "finished"
    assert list((tmp_path / "logs").glob("*.jsonl"))


async def test_after_a_failed_export_the_next_runs_do_not_wait_for_the_collector(
    tmp_path: Path,
) -> None:
    """Runs of one Runtime queue for its exporter, and a collector that is down holds
    each export for its retries: without a pause after a failure, every run waits."""
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    from corral import Runtime, load_agent
    from corral.observe.otel import COOL_DOWN_S, OtelTracer
    from corral.store.sql import SqlStore
    from corral.testing import FixedEffects

    class Down(SpanExporter):
        def __init__(self) -> None:
            self.calls = 0

        def export(self, spans: Any) -> SpanExportResult:
            self.calls += 1
            return SpanExportResult.FAILURE

    now = [100.0]
    exporter = Down()
    tracer = OtelTracer(exporter, clock=lambda: now[0])
    agent = load_agent(AFTERSALES, data_dir=tmp_path / "business")
    store = SqlStore.open(tmp_path / "corral.db")
    runtime = Runtime(agent, store, effects=FixedEffects(), tracer=tracer)
    for _ in range(3):
        assert (await runtime.start(REPAIR)).status.value == "finished"
    assert exporter.calls == 1  # the two runs after the failure skipped the collector
    now[0] += COOL_DOWN_S
    assert (await runtime.start(REPAIR)).status.value == "finished"
    assert exporter.calls == 2  # tried again once the pause is over
