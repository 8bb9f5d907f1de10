"""The OTel trace id of a run: 32 hex digits, found from corral's id and leading back to it."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from corral.observe.trace_ids import corral_trace_id, otel_trace_id, span_id

HEX16 = st.text("0123456789abcdef", min_size=16, max_size=16)


@given(HEX16)
def test_a_live_trace_id_and_its_otel_id_lead_to_each_other(digits: str) -> None:
    ours = f"trace_{digits}"
    theirs = otel_trace_id(ours)
    assert re.fullmatch(r"[0-9a-f]{32}", theirs) and theirs.endswith(digits)
    assert corral_trace_id(theirs) == ours
    assert corral_trace_id(ours) == ours  # corral's own form is taken as it is


def test_the_otel_id_carries_no_padding() -> None:
    """Zero padding put ``0000000000000000`` in every log line: a leak test's false alarm."""
    assert "00000000" not in otel_trace_id("trace_6d1943d750fe4d37")
    assert otel_trace_id("trace_000001") != otel_trace_id("trace_000002")
    assert re.fullmatch(r"[0-9a-f]{32}", otel_trace_id("trace_000001"))


def test_an_id_no_run_has_is_left_to_match_nothing() -> None:
    forged = "f" * 16 + "6d1943d750fe4d37"  # the right tail, the wrong hashed half
    assert corral_trace_id(forged) == forged
    assert corral_trace_id("not-an-id") == "not-an-id"


def test_span_ids_are_16_hex_and_never_zero() -> None:
    ids = {span_id(otel_trace_id("trace_000001"), f"step/{n}") for n in range(500)}
    assert len(ids) == 500 and all(re.fullmatch(r"[0-9a-f]{16}", i) for i in ids)
    assert "0" * 16 not in ids
