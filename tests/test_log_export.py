"""What a run's JSONL log costs to write, and that the cheaper way writes the same lines.

A run's log is made from its events after each save, for every run ``corral run`` and
``corral serve`` handle. Three things it did for nothing: rendering every payload to look
for sensitive values when nothing is marked sensitive, running every detector again on
texts that come back line after line, and an fsync per file, for a file derived from the
store and rewritten from it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import corral.events
import corral.files
import corral.observe.redact
from corral import Agent, Runtime, SqlStore, parse_config, tool
from corral.json_values import dumps, one_shot_encoder
from corral.observe.logs import JsonlLog, log_records
from corral.observe.redact import Redactor, redactor_for
from corral.testing import FixedEffects
from corral.tools.sensitive import Sensitive

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text() | st.integers() | st.booleans(), inner, max_size=4)
    ),
    max_leaves=20,
)
"""What a log line or a stored row may hold, and what ``json.dumps`` takes besides (NaN,
tuples, keys that are not text), each written the same way."""


@given(JSON_VALUES)
def test_a_prebuilt_encoder_writes_what_json_dumps_writes(value: Any) -> None:
    spaced = one_shot_encoder(", ", ": ")
    assert spaced(value) == json.dumps(value, ensure_ascii=False, default=str)
    compact = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    assert dumps(value) == compact


def test_a_value_json_cannot_write_is_written_as_its_text() -> None:
    assert one_shot_encoder(", ", ": ")({"at": Path("/x")}) == '{"at": "/x"}'


TEXTS = st.text() | st.sampled_from(
    ["13812345678", "电话 138-1234-5678", "password: hunter22", "a.b@example.com", "go", ""]
)


@given(st.lists(TEXTS, max_size=8))
def test_a_remembering_redactor_hides_what_a_plain_one_hides(texts: list[str]) -> None:
    plain = Redactor(literals=("VIP-123456",))
    remembering = plain.remembering()
    for text in [*texts, *texts]:  # the second time, from what it kept
        assert remembering.text(text) == plain.text(text)
    assert remembering == plain  # what it keeps is no part of what it is


def test_a_remembering_redactor_runs_the_detectors_once_per_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[str] = []
    detect = corral.observe.redact.redact_builtin

    def counted(text: str) -> str:
        seen.append(text)
        return detect(text)

    monkeypatch.setattr(corral.observe.redact, "redact_builtin", counted)
    remembering = Redactor().remembering()
    shown = [remembering.text(t) for t in ("电话 13812345678", "succeeded", "电话 13812345678")]
    assert shown == ["电话 [PHONE]", "succeeded", "电话 [PHONE]"]
    assert seen == ["电话 13812345678", "succeeded"]


@tool
def find_card(holder: Annotated[str, Sensitive()]) -> dict[str, str]:
    """Finds a card by its holder's name."""
    return {"card": "on file", "holder": holder}


def _agent() -> Agent:
    config = parse_config(
        {
            "name": "cards",
            "intents": [
                {
                    "name": "card",
                    "rules": [{"keywords": ["card"], "confidence": 0.95}],
                    "route": "plan",
                    "plan": "p",
                    "reply": "done",
                }
            ],
            "plans": {
                "p": {
                    "steps": [{"id": "s1", "tool": "find_card", "args": {"holder": "Ada Lovelace"}}]
                }
            },
            "templates": {"done": {"en": "done", "zh": "完成"}},
        }
    )
    return Agent.build(config, [find_card])


async def _events(tmp_path: Path) -> list[corral.events.Event]:
    runtime = Runtime(_agent(), SqlStore.open(tmp_path / "c.db"), effects=FixedEffects())
    summary = await runtime.start("card please, my number is 13812345678")
    assert summary.status.value == "finished"
    return list(runtime.store.load_events(summary.run_id))


async def test_nothing_is_rendered_to_learn_from_when_nothing_is_sensitive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = await _events(tmp_path)
    marked = redactor_for(events)
    assert marked.fields == {"holder"} and marked.literals == ("Ada Lovelace",)

    started = events[0].payload
    assert isinstance(started, corral.events.RunStarted)
    nothing_marked = replace(started, redact={"fields": [], "patterns": []})
    unmarked = [replace(events[0], payload=nothing_marked), *events[1:]]

    def refused(_payload: object) -> dict[str, Any]:
        raise AssertionError("a payload was rendered to learn sensitive values from")

    monkeypatch.setattr(corral.events, "as_json", refused)
    assert redactor_for(unmarked) == Redactor()


async def test_a_runs_log_is_written_without_an_fsync_and_keeps_its_redaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = await _events(tmp_path)
    synced: list[int] = []
    monkeypatch.setattr(corral.files.os, "fsync", lambda fd: synced.append(fd))
    store = SqlStore.open(tmp_path / "c.db")
    path = JsonlLog(tmp_path / "logs").export(store, events[0].run_id)
    assert path is not None and synced == []
    text = path.read_text("utf-8")
    assert "13812345678" not in text and "Ada Lovelace" not in text and "[PHONE]" in text
    assert [json.loads(line) for line in text.splitlines()] == log_records(events)
    corral.files.write_private(tmp_path / "token", b"secret")  # other private files: synced
    assert len(synced) == 1
