"""What a run's JSONL log costs to write, and that the cheaper way writes the same lines.

A run's log is made from its events after each save, for every run ``corral run`` and
``corral serve`` handle. Three things it did for nothing: rendering every payload to look
for sensitive values when nothing is marked sensitive, running every detector again on
texts that come back line after line, and an fsync per file, for a file derived from the
store and rewritten from it.
"""

from __future__ import annotations

import json
import tempfile
import threading
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
from tests.extras import REQUIRE_ALL, import_extra

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


def _export_threads(runtime: Runtime) -> list[str]:
    """The threads the runtime's log exports run on from now on."""
    log = runtime.log
    assert log is not None
    threads: list[str] = []
    export = log.export

    def noted(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return export(*args, **kwargs)

    log.export = noted  # type: ignore[method-assign]
    return threads


async def test_after_a_save_made_on_the_loops_thread_the_log_is_written_there(
    tmp_path: Path,
) -> None:
    """A store thread per run cost more than the export (``docs/performance.md``)."""
    store = SqlStore.open(tmp_path / "c.db")
    runtime = Runtime(_agent(), store, effects=FixedEffects(), log_dir=tmp_path / "logs")
    await runtime.start("card please")  # the store's first save opens its kept connection
    threads = _export_threads(runtime)
    summary = await runtime.start("card please")
    assert summary.status.value == "finished"
    assert threads == [threading.current_thread().name]
    lines = (tmp_path / "logs" / f"{summary.run_id}.jsonl").read_text().splitlines()
    assert [json.loads(line)["seq"] for line in lines] == list(range(1, len(lines) + 1))
    assert "Ada Lovelace" not in "".join(lines)  # redacted as ever


async def test_spans_to_export_send_the_export_to_a_thread(tmp_path: Path) -> None:
    """An exporter may do network I/O where it is called: never on the event loop."""
    import_extra("opentelemetry.sdk", REQUIRE_ALL)
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from corral.observe.otel import OtelTracer

    exporter = InMemorySpanExporter()
    store = SqlStore.open(tmp_path / "c.db")
    runtime = Runtime(
        _agent(),
        store,
        effects=FixedEffects(),
        log_dir=tmp_path / "logs",
        tracer=OtelTracer(exporter),
    )
    await runtime.start("card please")
    threads = _export_threads(runtime)
    await runtime.start("card please")
    assert threads and threading.current_thread().name not in threads
    assert exporter.get_finished_spans()


async def test_a_log_on_another_file_system_is_written_in_a_thread(tmp_path: Path) -> None:
    """A file system the store does not use could stall the loop where the save would not."""
    elsewhere = Path("/dev/shm")
    if not elsewhere.is_dir() or elsewhere.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("no second file system to put the log on")
    with tempfile.TemporaryDirectory(dir=elsewhere) as folder:
        store = SqlStore.open(tmp_path / "c.db")
        runtime = Runtime(_agent(), store, effects=FixedEffects(), log_dir=Path(folder) / "logs")
        await runtime.start("card please")
        threads = _export_threads(runtime)
        summary = await runtime.start("card please")
        assert threads and threading.current_thread().name not in threads
        assert (Path(folder) / "logs" / f"{summary.run_id}.jsonl").is_file()


async def test_a_log_folder_that_cannot_be_looked_at_leaves_the_runs_as_they_were(
    tmp_path: Path,
) -> None:
    """A reviewer's case: its check raised after the save, and every later run failed."""
    folder = tmp_path / ("x" * 300) / "logs"  # a name the file system refuses
    runtime = Runtime(_agent(), SqlStore.open(tmp_path / "c.db"), log_dir=folder)
    for _ in range(3):
        assert (await runtime.start("card please")).status.value == "finished"
    assert runtime._log_beside_store is False
