"""Where spans go: the ``telemetry:`` block, and the ``OTEL_*`` variables that win over it."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral import MemoryStore, Runtime, load_agent
from corral.config import TelemetryConfig
from corral.errors import ConfigInvalidError
from corral.observe.telemetry import Untraced, telemetry_settings, tracer_for
from corral.runtime.replay import replay_run
from corral.testing import FixedEffects
from tests.conftest import AFTERSALES
from tests.extras import REQUIRE_ALL, import_extra

REPAIR = "打印机卡纸了，订单 HD20240501"


def test_by_default_nothing_is_exported() -> None:
    settings = telemetry_settings(TelemetryConfig(), {})
    assert (settings.exporter, settings.service_name) == ("none", "corral")
    assert settings.endpoint == "http://localhost:4318/v1/traces"
    assert tracer_for(TelemetryConfig(), {}) is None


def test_the_environment_wins_over_the_config() -> None:
    config = TelemetryConfig(exporter="otlp", endpoint="http://collector:4318/", service_name="a")
    from_config = telemetry_settings(config, {})
    assert from_config.endpoint == "http://collector:4318/v1/traces"
    assert (from_config.exporter, from_config.service_name) == ("otlp", "a")
    env = {
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://other:4318",
        "OTEL_SERVICE_NAME": "desk",
    }
    settings = telemetry_settings(config, env)
    assert (settings.exporter, settings.service_name) == ("console", "desk")
    assert settings.endpoint == "http://other:4318/v1/traces"
    traces = {**env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:9/custom"}
    assert telemetry_settings(config, traces).endpoint == "http://t:9/custom"
    off = {**env, "OTEL_SDK_DISABLED": "true"}
    assert telemetry_settings(config, off).exporter == "none"
    assert tracer_for(config, {"OTEL_TRACES_EXPORTER": "none"}) is None


def test_an_exporter_corral_does_not_know_is_a_config_error() -> None:
    with pytest.raises(ConfigInvalidError, match="none, console or otlp"):
        telemetry_settings(TelemetryConfig(), {"OTEL_TRACES_EXPORTER": "zipkin"})


async def test_replays_export_nothing_even_when_the_environment_asks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """A replay repeats the run's ids: exporting it would overwrite the real trace."""
    import_extra("opentelemetry.sdk", REQUIRE_ALL)
    from corral.observe.otel import OtelTracer

    agent = load_agent(AFTERSALES, data_dir=tmp_path / "business")
    store = MemoryStore()
    summary = await Runtime(agent, store, effects=FixedEffects()).start(REPAIR)
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    assert isinstance(Runtime(agent).tracer, OtelTracer)
    assert Runtime(agent, tracer=Untraced()).tracer is None
    capfd.readouterr()
    report = await replay_run(agent, store.load_events(summary.run_id))
    assert report.same_path, report
    assert "invoke_agent" not in capfd.readouterr().out


def test_an_exporter_without_the_sdk_says_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.resources", None)  # not installed
    with pytest.raises(ConfigInvalidError, match="needs the OpenTelemetry SDK") as raised:
        tracer_for(TelemetryConfig(exporter="console"), {})
    assert raised.value.hint == "pip install 'corral[otel]'"


def test_the_exporter_variable_is_read_without_regard_to_case() -> None:
    """The OTel spec reads enum values case-insensitively (``OTLP`` is ``otlp``)."""
    for given, meant in (("OTLP", "otlp"), (" Console ", "console"), ("NONE", "none")):
        settings = telemetry_settings(TelemetryConfig(), {"OTEL_TRACES_EXPORTER": given})
        assert settings.exporter == meant
    on = TelemetryConfig(exporter="console")
    assert telemetry_settings(on, {"OTEL_SDK_DISABLED": "TRUE"}).exporter == "none"


def test_a_service_name_in_the_resource_attributes_is_not_overridden() -> None:
    """``OTEL_RESOURCE_ATTRIBUTES=service.name=...`` names the service when
    ``OTEL_SERVICE_NAME`` does not; the default ``corral`` hid it."""
    resource = {"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod,service.name=desk%20a"}
    assert telemetry_settings(TelemetryConfig(), resource).service_name == "desk a"
    named = TelemetryConfig(service_name="from-yaml")
    assert telemetry_settings(named, resource).service_name == "desk a"  # the environment wins
    both = {**resource, "OTEL_SERVICE_NAME": "desk-b"}
    assert telemetry_settings(named, both).service_name == "desk-b"  # as the OTel spec says
    assert telemetry_settings(named, {}).service_name == "from-yaml"
