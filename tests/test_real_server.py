"""The ``openai:`` provider end to end against a real OpenAI-compatible server.

llama-cpp-python's own server (``python -m llama_cpp.server``, the ``llama-server`` extra)
serves SmolLM2-135M on a free loopback port for the whole session. Through it run intent
fallback and entity extraction (the CLI with ``--model openai:smollm2``) and the model
planner (the public Runtime API). The assertions are about the fence, never about the
quality of a 135M model's answers: every call is a ``model_call`` event with the server's
token usage, no value the user did not give reached a tool, and each run ended in a
status a run may end in.

Without the extra or the model this module skips; CI (``CORRAL_REQUIRE_LOCAL_MODEL=1`` or
``CORRAL_REQUIRE_ALL=1``) fails instead.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from corral import Agent, EventType, MemoryStore, Runtime, parse_config
from corral.agent import model_from_config
from corral.contracts import RunStatus
from corral.errors import ConfigInvalidError
from corral.events import Event, unfolded
from tests.conftest import AFTERSALES
from tests.extras import REQUIRE_LOCAL_MODEL, import_extra, skip_or_fail
from tests.helpers import corral_cli
from tests.test_models import forecast, lookup

import_extra("llama_cpp.server.app", REQUIRE_LOCAL_MODEL)  # needs the [server] extra

ENDED_OR_WAITING = {
    RunStatus.FINISHED,
    RunStatus.HANDED_OFF,
    RunStatus.AWAITING_USER,
    RunStatus.AWAITING_CONFIRM,
}
"""Where a run may stop: a model's answer may be poor, but it never fails or crashes one."""
STARTUP_S = 180.0
"""The longest wait for the server to load the model (a busy CI machine is slow)."""
# Per call and per run: what is asserted is the fence, not the machine's speed. On a loaded
# 2-core runner one completion can take minutes; a run whose wall-clock budget ran out would
# skip the very layers these tests look at.
SLOW_MACHINE_S = 3600.0


def free_port() -> int:
    """A loopback port nothing listens on now (the OS picks it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until_serving(process: subprocess.Popen[bytes], base_url: str, log: Path) -> None:
    """Poll ``/v1/models`` until the server answers; fail with its log if it died."""
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"llama_cpp.server exited ({process.returncode}):\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"llama_cpp.server did not answer in {STARTUP_S:g} s:\n{log.read_text()}")


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL (``http://127.0.0.1:PORT/v1``) of a llama_cpp.server serving SmolLM2."""
    from corral.models.local import smollm2_path

    try:
        model = smollm2_path()
    except ConfigInvalidError as exc:
        skip_or_fail(exc.message, REQUIRE_LOCAL_MODEL)
    port = free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        "smollm2",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "2048",
        "--n_threads",
        "1",  # llama.cpp's spinning threads stall on a loaded 2-core machine
    ]
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_until_serving(process, base_url, log)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def answered_calls(events: list[Event]) -> list[dict[str, Any]]:
    """The data of the ``model_call`` events the server answered (accepted or not)."""
    calls = [e.data for e in events if e.type is EventType.MODEL_CALL]
    return [c for c in calls if c.get("status") in ("success", "rejected")]


def assert_server_usage(calls: list[dict[str, Any]]) -> None:
    """Each answered call carries the server's own token counts, not an estimate."""
    assert calls, "no model call was answered"
    for call in calls:
        usage = call["usage"]
        assert usage["estimated"] is False, call
        assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0, call
        assert call["model"] == "openai:smollm2"


# ------------------------------------------------------------------ intent and extraction


def test_intent_fallback_and_extraction_through_the_cli(llama_server: str, tmp_path: Path) -> None:
    """``corral run --model openai:smollm2``: the rules know neither intent nor entities."""
    from corral.store.sql import SqlStore

    agent = tmp_path / "agent"
    shutil.copytree(AFTERSALES, agent, ignore=shutil.ignore_patterns(".data"))
    config = yaml.safe_load((agent / "agent.yaml").read_text("utf-8"))
    config["model"] = {
        **config.get("model", {}),
        "base_url": llama_server,
        "timeout_s": SLOW_MACHINE_S,
        "intent_fallback": True,
        "extract_entities": True,
        "replies": False,
    }
    config["budget"] = {**config.get("budget", {}), "max_wall_clock_s": SLOW_MACHINE_S}
    (agent / "agent.yaml").write_text(yaml.safe_dump(config, allow_unicode=True), "utf-8")
    home = tmp_path / "home"
    message = "the thing I bought from you last spring, what about it"
    done = corral_cli(
        home,
        "run",
        str(agent),
        message,
        "--json",
        "--model",
        "openai:smollm2",
        # only the agent's base_url leads to the server: the SDK's default goes nowhere
        env={"OPENAI_API_KEY": "not-needed", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"},
    )
    summary = json.loads(done.stdout)
    assert RunStatus(summary["status"]) in ENDED_OR_WAITING
    events = SqlStore.open(home / "corral.db", read_only=True).load_events(summary["run_id"])
    assert events[0].data["model"] == "openai:smollm2"  # the run records its model
    calls = answered_calls(events)
    assert_server_usage(calls)
    every = [
        (e.data["purpose"], e.data.get("status"), e.data.get("error_code"), e.data.get("reason"))
        for e in events
        if e.type is EventType.MODEL_CALL
    ]
    assert {"extract", "intent"} <= {c["purpose"] for c in calls}, every
    # the fence: no entity the message does not contain, and so no tool with one
    said = message.lower()
    for event in events:
        if event.type is EventType.ENTITIES_MERGED:
            for value in event.data["entities"].values():
                text = value["text"] if isinstance(value, dict) else value
                assert str(text).lower() in said, event.data
    assert not [e for e in events if e.type is EventType.STEP_STARTED]


# ------------------------------------------------------------------ the model planner


def planner_agent(base_url: str) -> Agent:
    config = parse_config(
        {
            "name": "real-server-planner",
            "entities": {"order_id": {"kind": "pattern", "patterns": [r"\b(A\d+)\b"]}},
            "intents": [
                {
                    "name": "weather_at_delivery",
                    "description": "Tomorrow's weather where an order will be delivered.",
                    "rules": [{"keywords": ["weather"], "confidence": 0.95}],
                    "route": "plan",
                    "planner": "model",
                    "tools": ["lookup", "forecast"],
                    "requires": ["order_id"],
                    "reply": "done",
                }
            ],
            "templates": {"done": {"zh": "好了", "en": "done"}},
            "budget": {"max_model_calls": 6, "max_wall_clock_s": SLOW_MACHINE_S},
            # one re-ask: the pipeline's repair loop runs, and the test stays a few calls
            "model": {
                "name": "openai:smollm2",
                "base_url": base_url,
                "timeout_s": SLOW_MACHINE_S,
                "max_reasks": 1,
            },
        }
    )
    return Agent.build(config, [lookup, forecast], model=model_from_config(config))


async def test_model_planner_through_openai(llama_server: str) -> None:
    """A model plan reaches the tools only validated and grounded, or the run is handed off."""
    runtime = Runtime(planner_agent(llama_server), MemoryStore())
    message = "What will the weather be tomorrow where order A17 is delivered?"
    summary = await runtime.start(message)
    assert summary.status in ENDED_OR_WAITING
    events = await runtime.events(summary.run_id)
    calls = answered_calls(events)
    assert_server_usage(calls)
    assert {c["purpose"] for c in calls} == {"plan"}
    # the fence: each argument a tool got was said by the user or came from a tool
    known: set[Any] = {"A17"}
    started = []
    for event in unfolded(events):  # each attempt an event, with one of its own or not
        if event.type is EventType.STEP_STARTED and event.data["args"] is not None:
            started.append(event.data["tool"])
            for value in event.data["args"].values():
                assert value in known, (event.data, known)
        elif event.type is EventType.TOOL_ATTEMPT and event.data.get("status") == "success":
            known.update((event.data.get("data") or {}).values())
    kinds = [e.type for e in events]
    if started:  # only a plan that passed validation and grounding runs
        assert EventType.PLAN_CREATED in kinds
    if EventType.PLAN_CREATED not in kinds:
        assert summary.status is RunStatus.HANDED_OFF and not started
