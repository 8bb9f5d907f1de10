"""The OpenTelemetry ids of a run, derived from what its log records.

A run's ``run_started`` event records corral's trace id (``trace_3f2a9c0e1b7d4a65``, or
``trace_000001`` under fixed effects). Its OTel trace id is that id's hex digits padded to
32 (``00000000000000003f2a9c0e1b7d4a65``), so the one can be found from the other by eye;
an id without such digits is hashed. Span ids are hashed from the trace id and a key that
names the span within the run. Nothing is random, so a run resumed in another process
continues the same trace, and its spans keep the ids they had.
"""

from __future__ import annotations

import hashlib
import re

_HEX_TAIL = re.compile(r"(?:[A-Za-z]+_)?([0-9a-f]{1,32})")


def otel_trace_id(trace_id: str) -> str:
    """The 32-hex OTel trace id of a corral trace id (the id the JSONL log shows)."""
    found = _HEX_TAIL.fullmatch(trace_id)
    if found is not None and int(found.group(1), 16):
        return found.group(1).rjust(32, "0")
    return hashlib.sha256(trace_id.encode("utf-8")).hexdigest()[:32]


def span_id(trace_hex: str, key: str) -> str:
    """The 16-hex id of the span called ``key`` in the trace (never all zeros)."""
    digest = hashlib.sha256(f"{trace_hex}/{key}".encode()).hexdigest()[:16]
    return digest if int(digest, 16) else "1" * 16
