"""Text no one typed that UTF-8 cannot encode (a lone surrogate) never loses a run.

Found by a hostile review: a tool's result, a tool's error or a model's answer holding
``"\\ud800"`` (a service's or server's broken decoding; JSON's ``\\ud800`` escape makes one
of plain ASCII) reached the store, whose save failed with ``UnicodeEncodeError``: nothing
of the run was stored, a 202 run was then 404, and a run stopped after a write entered
that write again at every resume. A tool's result is now refused at the tool boundary
(``TOOL_OUTPUT_INVALID``: its data is not made up), a model's answer and any error's text
carry U+FFFD instead, and an HTTP answer quoting one is never a 500.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from corral import (
    Agent,
    EventType,
    Runtime,
    SqlStore,
    ToolPolicy,
    load_agent,
    parse_config,
    tool,
)
from corral.contracts import RunStatus
from corral.errors import ConfigInvalidError, RunNotResumableError
from corral.inputs import lone_surrogate_at, unicode_safe, unicode_safe_value
from corral.models import ModelRequest, ScriptedModel
from corral.models.structured import parse_json
from corral.testing import FixedEffects
from tests.helpers import build_agent
from tests.one_intent import one_intent
from tests.serving import AUTH, serving

BROKEN = "Shanghai\ud800"
ENTERED: list[str] = []


class Order(BaseModel):
    order_id: str
    city: str


@tool
def lookup(order_id: str) -> Order:
    """An order, as a service with broken decoding sends it."""
    return Order(order_id=order_id, city=BROKEN)


@tool(policy=ToolPolicy(kind="write", idempotent=True))
def ship(order_id: str) -> Order:
    """A write whose answer holds a lone surrogate."""
    ENTERED.append(order_id)
    return Order(order_id=order_id, city=BROKEN)


@tool
def failing(order_id: str) -> Order:
    """A tool whose error quotes what broke it."""
    raise ValueError(f"cannot parse {BROKEN!s}")


EXTRACTING = one_intent(
    "weather",
    steps=[{"id": "s1", "tool": "lookup", "args": {"order_id": "$entities.order_id"}}],
    entities={"order_id": {"kind": "pattern", "patterns": [r"\b(A\d+)\b"]}},
    requires=["order_id"],
    model={"extract_entities": True},
)
"""An agent that asks a model for the entities its rules did not find."""


def _store(tmp_path: Path) -> SqlStore:
    return SqlStore.open(f"sqlite:///{tmp_path / 'runs.db'}")


async def _run(tmp_path: Path, spec: Any) -> tuple[Runtime, Any]:
    agent = build_agent([spec], [{"id": "s1", "tool": spec.name, "args": {"order_id": "A1"}}])
    runtime = Runtime(agent, _store(tmp_path), effects=FixedEffects())
    return runtime, await runtime.start("go A1")


async def test_a_tool_result_with_a_lone_surrogate_is_refused_and_the_run_is_stored(
    tmp_path: Path,
) -> None:
    runtime, summary = await _run(tmp_path, lookup)
    assert not summary.status.paused and summary.status is not RunStatus.EXECUTING
    stored = runtime.store.load_events(summary.run_id)
    finished = [e for e in stored if e.type is EventType.STEP_FINISHED]
    assert finished and finished[0].data["result"]["error_code"] == "TOOL_OUTPUT_INVALID"
    assert "lone surrogate) at city" in finished[0].data["result"]["error_message"]


async def test_a_write_whose_result_holds_one_is_entered_once_and_the_run_ends(
    tmp_path: Path,
) -> None:
    ENTERED.clear()
    runtime, summary = await _run(tmp_path, ship)
    assert ENTERED == ["A1"]
    assert summary.status is not RunStatus.EXECUTING
    assert runtime.store.load_events(summary.run_id)  # stored
    assert summary.status is RunStatus.HANDED_OFF  # the write's answer was refused
    with pytest.raises(RunNotResumableError, match="has already ended"):
        await Runtime(runtime.agent, runtime.store, effects=FixedEffects()).resume(summary.run_id)
    assert ENTERED == ["A1"]  # never entered again


async def test_a_tool_error_quoting_one_is_stored_with_u_fffd(tmp_path: Path) -> None:
    runtime, summary = await _run(tmp_path, failing)
    stored = runtime.store.load_events(summary.run_id)
    finished = [e for e in stored if e.type is EventType.STEP_FINISHED]
    assert "cannot parse Shanghai\ufffd" in finished[0].data["result"]["error_message"]


@pytest.mark.parametrize("answer", [f'{{"entities": {{"city": "{BROKEN}"}}}}', None])
async def test_a_model_answer_with_one_is_kept_as_u_fffd_and_the_run_is_stored(
    tmp_path: Path, answer: str | None
) -> None:
    """Raw in the answer, or as JSON's escape of plain ASCII (``None``: ``\\ud800``)."""

    def reply(request: ModelRequest) -> str:
        return answer if answer is not None else json.dumps({"entities": {"city": BROKEN}})

    config = EXTRACTING
    if answer is None:
        escaped = json.dumps({"entities": {"city": BROKEN}})
        assert "\\ud800" in escaped and escaped.isascii()
    agent = Agent.build(parse_config(config), [lookup], model=ScriptedModel([reply]))
    runtime = Runtime(agent, _store(tmp_path), effects=FixedEffects())
    summary = await runtime.start("weather please")
    assert summary.status is RunStatus.AWAITING_USER  # asks for the order id
    stored = runtime.store.load_events(summary.run_id)
    text = json.dumps([e.data for e in stored], ensure_ascii=False)
    assert "Shanghai\ufffd" in text and lone_surrogate_at([e.data for e in stored]) is None


def test_an_http_decision_naming_a_broken_step_id_is_a_422_not_a_500(tmp_path: Path) -> None:
    from tests.conftest import AFTERSALES
    from tests.serving import EXCHANGE

    agent = load_agent(AFTERSALES, data_dir=tmp_path)
    with (
        serving(agent, home=tmp_path, store=tmp_path / "c.db") as base,
        httpx.Client(base_url=base, headers=AUTH) as http,
    ):
        paused = http.post("/agents/aftersales/runs", json={"message": EXCHANGE}).json()
        assert paused["status"] == "awaiting_confirm", paused
        body = '{"approve": false, "step_id": "\\ud800"}'  # JSON's escape: ASCII on the wire
        answer = http.post(
            f"/runs/{paused['run_id']}/resume",
            content=body,
            headers={"content-type": "application/json"},
        )
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["code"] == "INVALID_INPUT"
        assert http.get(f"/runs/{paused['run_id']}").json()["status"] == "awaiting_confirm"


def test_the_helpers() -> None:
    assert unicode_safe("a\ud800b\ud83d\ude00") == "a\ufffdb\U0001f600"
    assert unicode_safe("已发货") == "已发货" and unicode_safe("plain") == "plain"
    assert unicode_safe_value({"k\udfff": ["x\ud800", 1, None]}) == {
        "k\ufffd": ["x\ufffd", 1, None]
    }
    assert lone_surrogate_at({"a": [{"b": "ok"}, {"c": "\ud800"}]}) == "a[1].c"
    assert lone_surrogate_at({"a": "已发货", "b": [1, 2.5, None, True]}) is None
    data, repaired = parse_json('{"city": "\\ud800"}')
    assert data == {"city": "\ufffd"} and not repaired


# ------------------------------------------------------------ review of 9967a93


def test_a_config_string_holding_one_is_config_invalid_at_its_line(tmp_path: Path) -> None:
    """YAML's ``"\\ud800"`` loads as a lone surrogate: every run's reply failed to save."""
    from corral import load_config

    folder = tmp_path / "agent"
    folder.mkdir()
    text = 'name: t\ntemplates:\n  done: {zh: "好", en: "done \\ud800"}\n'
    (folder / "agent.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigInvalidError, match=r"agent\.yaml:3: templates\.done\.en: text"):
        load_config(folder / "agent.yaml")


def test_a_declared_tool_s_description_and_schema_holding_one_are_kept_with_u_fffd() -> None:
    """An MCP listing or an OpenAPI document decoded wrongly: the description reaches a
    model's prompt, whose fingerprint failed to encode, and the run was lost."""
    from corral.tools.declared import declared_spec

    async def call(**_: Any) -> dict[str, Any]:
        return {"ok": True}

    spec = declared_spec(
        "odd",
        "looks up \ud800",
        call,
        input_schema={
            "type": "object",
            "properties": {"q": {"type": "string", "description": "x\ud800"}},
        },
        output_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}},
        policy=ToolPolicy(),
    )
    assert spec.description == "looks up \ufffd"
    assert lone_surrogate_at(spec.input_model.model_json_schema()) is None


async def test_a_model_failure_quoting_one_is_stored_with_u_fffd(tmp_path: Path) -> None:
    from corral.errors import ModelUnavailableError

    def fails(request: ModelRequest) -> str:
        raise ModelUnavailableError(f"upstream said {BROKEN}")

    config = EXTRACTING
    agent = Agent.build(parse_config(config), [lookup], model=ScriptedModel([fails] * 5))
    runtime = Runtime(agent, _store(tmp_path), effects=FixedEffects())
    summary = await runtime.start("weather please")
    stored = runtime.store.load_events(summary.run_id)
    text = json.dumps([e.data for e in stored], ensure_ascii=False)
    assert "upstream said Shanghai\ufffd" in text


def test_a_surrogate_pair_escape_is_its_character_and_a_dotted_key_its_own_line(
    tmp_path: Path,
) -> None:
    """Review of 0d9bdeb: ``"\\ud83d\\ude00"`` (JSON's and YAML's escape of 😀) was called a
    lone surrogate, and a key holding a dot was looked up as two keys (another line)."""
    from corral import load_config

    folder = tmp_path / "agent"
    folder.mkdir()
    text = (
        "name: t\n"
        "intents: [{name: a, rules: [{keywords: [go]}], route: reply, reply: done}]\n"
        'templates:\n  done: {zh: "好", en: "done \\ud83d\\ude00"}\n'
    )
    (folder / "agent.yaml").write_text(text, encoding="utf-8")
    assert load_config(folder / "agent.yaml").templates["done"].en == "done \U0001f600"
    text = 'name: t\nx:\n  a:\n    b: 1\n  "a.b":\n    en: "\\udc00"\n'
    (folder / "agent.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigInvalidError, match=r"agent\.yaml:6: x\.a\.b\.en: text"):
        load_config(folder / "agent.yaml")
