"""Run ids start with the time, so a save's rows land at the right edge of each index."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import httpx
from rich.console import Console

from corral import Agent, Runtime, SqlStore, parse_config
from corral.effects import LiveEffects
from corral.observe.redact import Redactor, keeping_ids, redact_builtin
from corral.observe.trace_ids import corral_trace_id, otel_trace_id
from corral.observe.tree import run_tree
from corral.runtime.state import RunState

RUN_ID = re.compile(r"run_([0-9a-f]{12})([0-9a-f]{16})")


def test_a_run_id_is_the_time_in_milliseconds_then_64_random_bits() -> None:
    effects = LiveEffects()
    before = time.time_ns() // 1_000_000
    ids = [effects.new_id("run") for _ in range(5_000)]
    after = time.time_ns() // 1_000_000
    parts = [RUN_ID.fullmatch(run_id) for run_id in ids]
    assert all(parts), ids[:3]
    stamps = [int(found.group(1), 16) for found in parts if found]
    assert all(before <= stamp <= after for stamp in stamps)
    assert len(set(ids)) == len(ids)  # many in one millisecond: the random part tells them apart
    assert len({found.group(2) for found in parts if found}) == len(ids)


def test_other_ids_keep_16_random_digits_and_a_trace_id_its_otel_round_trip() -> None:
    effects = LiveEffects()
    trace_id = effects.new_id("trace")
    assert re.fullmatch(r"trace_[0-9a-f]{16}", trace_id)
    assert corral_trace_id(otel_trace_id(trace_id)) == trace_id
    # as the console exporter prints it (a walkthrough: --trace 0x... found no run)
    assert corral_trace_id("0x" + otel_trace_id(trace_id)) == trace_id
    assert corral_trace_id("0X" + otel_trace_id(trace_id).upper()) == trace_id
    assert corral_trace_id("0xnothex") == "0xnothex"
    assert re.fullmatch(r"plan_[0-9a-f]{16}", effects.new_id("plan"))


def test_a_run_id_is_shown_as_it_is_by_the_redactor() -> None:
    run_id = LiveEffects().new_id("run")
    assert Redactor().value({"run_id": run_id, "open_run_id": run_id}) == {
        "run_id": run_id,
        "open_run_id": run_id,
    }


def _agent() -> Agent:
    config = parse_config(
        {
            "name": "ids",
            "intents": [
                {
                    "name": "hello",
                    "rules": [{"keywords": ["hello"], "confidence": 0.95}],
                    "route": "reply",
                    "reply": "hi",
                }
            ],
            "templates": {"hi": {"zh": "你好", "en": "hi"}},
        }
    )
    return Agent.build(config, [])


def test_stored_runs_sort_by_id_in_the_order_they_began(tmp_path: Path) -> None:
    async def three() -> list[str]:
        runtime = Runtime(_agent(), SqlStore.open(tmp_path / "corral.db"))
        made = []
        for _ in range(3):
            made.append((await runtime.start("hello")).run_id)
            await asyncio.sleep(0.003)  # a new millisecond
        return made

    made = asyncio.run(three())
    assert all(RUN_ID.fullmatch(run_id) for run_id in made)
    assert sorted(made) == made
    stored = SqlStore.open(tmp_path / "corral.db").list_runs()
    assert sorted(run.run_id for run in stored) == made


PHONE_LIKE = "run_01a2346154f13812345678a41a"
"""A run id whose time prefix and random digits read as a phone number."""


def test_a_named_run_id_is_kept_in_free_text_where_anything_else_is_redacted() -> None:
    text = f"run {PHONE_LIKE} has ended; call 13812345678 or see run_13812345678"
    assert PHONE_LIKE not in redact_builtin(text)  # what a run id in a message used to get
    kept = keeping_ids(redact_builtin, text, [PHONE_LIKE, None])
    assert kept.startswith(f"run {PHONE_LIKE} has ended")
    assert "13812345678 " not in kept and "run_13812345678" not in kept  # not named: redacted
    assert keeping_ids(redact_builtin, "call 13812345678", ["13812345678"]) != "call 13812345678"


def test_the_run_tree_shows_its_run_id_as_it_is() -> None:
    console = Console(width=200, record=True)
    console.print(run_tree(RunState(run_id=PHONE_LIKE)))
    assert PHONE_LIKE in console.export_text()


def test_an_http_error_about_a_run_shows_the_run_id_the_request_named(tmp_path: Path) -> None:
    from tests.serving import AUTH, serving

    with serving(_agent(), home=tmp_path) as base:
        answer = httpx.get(f"{base}/runs/{PHONE_LIKE}", headers=AUTH, timeout=10)
    assert answer.status_code == 404
    assert PHONE_LIKE in answer.json()["error"]["message"], answer.json()
