"""The OpenTelemetry ids of a run, derived from what its log records.

A run's ``run_started`` event records corral's trace id (``trace_3f2a9c0e1b7d4a65``, or
``trace_000001`` under fixed effects). Its OTel trace id is 32 hex digits: a hash of that
id, then the id's own 16 hex digits (``<16 hashed>3f2a9c0e1b7d4a65``), so the one is found
from the other (``corral traces --trace`` takes either) and the whole is as random as the
id; any other id is hashed whole. (Zero padding would put a run of zeros in every log
line, which the leak tests rightly take for a zero-digit secret.) Span ids are hashed from
the trace id and a key that names the span within the run. Nothing is random, so a run
resumed in another process continues the same trace, and its spans keep the ids they had.
"""

from __future__ import annotations

import re

from corral.hashing import text_digest

_LIVE_ID = re.compile(r"trace_([0-9a-f]{16})")
_OTEL_ID = re.compile(r"[0-9a-f]{32}")


def otel_trace_id(trace_id: str) -> str:
    """The 32-hex OTel trace id of a corral trace id (the id the JSONL log shows)."""
    found = _LIVE_ID.fullmatch(trace_id)
    if found is not None:
        return text_digest(trace_id)[:16] + found.group(1)
    return text_digest(trace_id)[:32]


def corral_trace_id(given: str) -> str:
    """The corral trace id a user means: ``given`` itself, or the run's id of an OTel id.

    An OTel id that no ``trace_<16 hex>`` id gives (a hashed one) is returned unchanged,
    and so matches nothing. The console exporter prints one as ``0x`` and 32 hex digits,
    which is taken as it is printed (in either case).
    """
    otel = given.lower().removeprefix("0x")
    if _OTEL_ID.fullmatch(otel) is None:
        return given
    candidate = f"trace_{otel[16:]}"
    return candidate if otel_trace_id(candidate) == otel else otel


def span_id(trace_hex: str, key: str) -> str:
    """The 16-hex id of the span called ``key`` in the trace (never all zeros)."""
    digest = text_digest(f"{trace_hex}/{key}", 16)
    return digest if int(digest, 16) else "1" * 16
