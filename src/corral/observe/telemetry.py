"""Whether and where a run's spans go: the ``telemetry:`` block and the ``OTEL_*`` variables.

This module never imports OpenTelemetry. With no exporter configured (the default),
``tracer_for`` returns ``None`` and a run costs nothing extra; only a configured
exporter loads ``corral.observe.otel`` and the SDK (``corral[otel]``).

The standard variables win over the config, as operators expect: ``OTEL_SDK_DISABLED``,
``OTEL_TRACES_EXPORTER`` (``none``, ``console`` or ``otlp``),
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (the full URL), ``OTEL_EXPORTER_OTLP_ENDPOINT``
(a base URL, ``/v1/traces`` added), ``OTEL_SERVICE_NAME`` and ``service.name`` in
``OTEL_RESOURCE_ATTRIBUTES``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import unquote

from corral.config import SamplingConfig, TelemetryConfig
from corral.errors import ConfigInvalidError
from corral.events import Event

EXPORTERS = ("none", "console", "otlp")
DEFAULT_ENDPOINT = "http://localhost:4318"
TRACES_PATH = "/v1/traces"


class RunTracer(Protocol):
    """Exports a run's spans when it pauses or ends (``corral.observe.otel.OtelTracer``)."""

    def export(self, events: Sequence[Event], sampling: SamplingConfig) -> None:
        """Export the spans these events closed since the last pause, if the run is kept."""
        ...


class Untraced:
    """A tracer that exports nothing, whatever the environment says.

    For runs that are not real: replays and evaluation cases, whose run and trace ids
    repeat (fixed effects) and would overwrite real traces in a collector.
    """

    def export(self, events: Sequence[Event], sampling: SamplingConfig) -> None:
        """Export nothing."""
        return None


@dataclass(frozen=True, slots=True)
class TelemetrySettings:
    """What the config and the environment say together (the environment wins)."""

    exporter: str
    endpoint: str
    """The full OTLP/HTTP traces URL."""
    service_name: str


def telemetry_settings(config: TelemetryConfig, environ: Mapping[str, str]) -> TelemetrySettings:
    """The effective settings; an exporter corral does not know is ``CONFIG_INVALID``."""
    given = environ.get("OTEL_TRACES_EXPORTER") or config.exporter or "none"
    exporter = given.strip().lower()  # the spec reads enum values case-insensitively
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        exporter = "none"
    if exporter not in EXPORTERS:
        raise ConfigInvalidError(
            f"OTEL_TRACES_EXPORTER={exporter!r} is not one corral exports to",
            hint="use none, console or otlp",
        )
    endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if not endpoint:
        base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or config.endpoint or DEFAULT_ENDPOINT
        endpoint = base.rstrip("/") + TRACES_PATH
    name = (
        environ.get("OTEL_SERVICE_NAME")
        or _resource_service_name(environ)
        or config.service_name
        or "corral"
    )
    return TelemetrySettings(exporter, endpoint, name)


def _resource_service_name(environ: Mapping[str, str]) -> str | None:
    """``service.name`` in ``OTEL_RESOURCE_ATTRIBUTES`` (``k=v,k=v``, values %-encoded)."""
    for item in environ.get("OTEL_RESOURCE_ATTRIBUTES", "").split(","):
        key, _, value = item.partition("=")
        if key.strip() == "service.name" and value.strip():
            return unquote(value.strip())
    return None


def tracer_for(config: TelemetryConfig, environ: Mapping[str, str]) -> RunTracer | None:
    """The tracer the settings ask for; ``None`` (and no import at all) when they ask none."""
    settings = telemetry_settings(config, environ)
    if settings.exporter == "none":
        return None
    from corral.observe.otel import OtelTracer

    try:
        return OtelTracer.from_settings(settings)
    except ImportError:
        raise ConfigInvalidError(
            f"exporting spans ({settings.exporter}) needs the OpenTelemetry SDK",
            hint="pip install 'corral[otel]'",
        ) from None
