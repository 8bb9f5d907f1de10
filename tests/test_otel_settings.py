"""Where spans go: the ``telemetry:`` block, and the ``OTEL_*`` variables that win over it."""

from __future__ import annotations

import pytest

from corral.config import TelemetryConfig
from corral.errors import ConfigInvalidError
from corral.observe.telemetry import telemetry_settings, tracer_for


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
