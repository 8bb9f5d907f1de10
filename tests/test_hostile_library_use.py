"""Hostile use of the public API, found by a review of the library as a user would call it.

Each was reproduced on main:

- a tool that raised an exception whose ``str()`` itself raises crashed ``Runtime.resume``
  with that ``ZeroDivisionError`` and left the run ``executing`` (the write had been
  entered); a reconciler raising one did the same;
- a rule keyword ``""`` loaded, then matched every message ("hello", "asdf");
- ``run_plan(None)``, ``run_plan(5)``, ``entities=["order_id"]`` and ``intent=5`` raised
  ``AttributeError`` or pydantic's ``ValidationError``, not corral's codes;
- a 10 000-step ``Plan`` was validated whole (11 s) before it was refused for its length;
- a tool's ``dict`` whose keys collide as JSON text (``{1: "a", "1": "b"}``) lost ``"a"``
  without a word.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, field_serializer

from corral import (
    MemoryStore,
    Plan,
    RunStatus,
    Runtime,
    ToolPolicy,
    parse_config,
    tool,
)
from corral.errors import (
    ConfigInvalidError,
    CorralError,
    ErrorCode,
    InvalidArgumentError,
    PlanInvalidError,
)
from corral.testing import FixedEffects
from tests.helpers import build_agent


class Unprintable(Exception):
    """An exception whose text cannot be made: ``str()`` raises."""

    def __str__(self) -> str:
        raise ZeroDivisionError("str failed")


def _runtime(tools: list[Any], tool_name: str, args: dict[str, Any]) -> Runtime:
    """A one-step plan of ``tool_name``, run by any message with "go" in it."""
    agent = build_agent(tools, [{"id": "s1", "tool": tool_name, "args": args}])
    return Runtime(agent, MemoryStore(), effects=FixedEffects())


async def test_a_write_raising_an_unprintable_exception_ends_the_run_cleanly() -> None:
    calls: list[int] = []

    @tool(policy=ToolPolicy(kind="write", requires_confirmation=True))
    def pay(amount: int) -> int:
        """A write whose failure cannot be described."""
        calls.append(amount)
        raise Unprintable

    runtime = _runtime([pay], "pay", {"amount": 5})
    paused = await runtime.start("go")
    assert paused.status is RunStatus.AWAITING_CONFIRM, paused
    ended = await runtime.resume(paused.run_id, approve=True)
    assert calls == [5]  # entered once
    assert ended.status in (RunStatus.FAILED, RunStatus.HANDED_OFF), ended
    state = await runtime.load_state(paused.run_id)
    step = state.steps["s1"]
    assert step.error_code in (ErrorCode.TOOL_FAILED.value, ErrorCode.OUTCOME_UNKNOWN.value)
    assert "Unprintable" in (step.reason or ""), step.reason


async def test_a_reconciler_raising_an_unprintable_exception_leaves_the_outcome_unknown() -> None:
    calls: list[int] = []

    def find(amount: int) -> int | None:
        """Looks the payment up, and fails beyond description."""
        raise Unprintable

    @tool(policy=ToolPolicy(kind="write", requires_confirmation=True), reconcile=find)
    def pay(amount: int) -> int:
        """A write that may have acted when it raised (a lost answer)."""
        calls.append(amount)
        raise TimeoutError

    runtime = _runtime([pay], "pay", {"amount": 5})
    paused = await runtime.start("go")
    ended = await runtime.resume(paused.run_id, approve=True)
    assert calls == [5]
    assert ended.status is RunStatus.HANDED_OFF, ended
    state = await runtime.load_state(paused.run_id)
    assert state.steps["s1"].error_code == ErrorCode.OUTCOME_UNKNOWN.value


async def test_a_read_raising_an_unprintable_exception_fails_its_step() -> None:
    @tool
    def look(n: int) -> int:
        """A read whose failure cannot be described."""
        raise Unprintable

    runtime = _runtime([look], "look", {"n": 1})
    summary = await runtime.start("go")
    assert summary.status is not RunStatus.EXECUTING, summary
    state = await runtime.load_state(summary.run_id)
    assert state.steps["s1"].error_code == ErrorCode.TOOL_FAILED.value
    assert "Unprintable" in (state.steps["s1"].reason or "")


@pytest.mark.parametrize("keywords", [[""], ["go", "  "], ["\u200b"]])
def test_a_blank_keyword_is_refused_when_the_config_loads(keywords: list[str]) -> None:
    config = {
        "name": "blank",
        "intents": [{"name": "do", "rules": [{"keywords": keywords, "confidence": 0.9}]}],
    }
    with pytest.raises(ConfigInvalidError, match="keyword"):
        parse_config(config)


@tool
def echo(n: int) -> int:
    """Returns its argument."""
    return n


def _echo_runtime(store: MemoryStore | None = None) -> Runtime:
    agent = build_agent([echo], [{"id": "s1", "tool": "echo", "args": {"n": 1}}])
    return Runtime(agent, store or MemoryStore(), effects=FixedEffects())


@pytest.mark.parametrize(
    ("call", "error"),
    [
        ({"plan": None}, PlanInvalidError),
        ({"plan": 5}, PlanInvalidError),
        ({"plan": "p", "entities": ["order_id"]}, InvalidArgumentError),
        ({"plan": "p", "entities": "A1"}, InvalidArgumentError),
        ({"plan": "p", "intent": 5}, InvalidArgumentError),
    ],
)
async def test_run_plan_answers_arguments_of_the_wrong_type_with_its_codes(
    call: dict[str, Any], error: type[CorralError]
) -> None:
    store = MemoryStore()
    plan = call.pop("plan")
    with pytest.raises(error):
        await _echo_runtime(store).run_plan(plan, **call)
    assert store.runs == {}  # refused before any run exists


async def test_a_plan_over_the_step_limit_is_refused_before_it_is_checked_step_by_step() -> None:
    runtime = _echo_runtime()
    # each step wrong as well: listing all of that is work the length makes moot
    steps = [{"id": f"s{i}", "tool": "nope", "args": {"n": i}} for i in range(3000)]
    plan = Plan(plan_id="long", steps=steps)
    with pytest.raises(PlanInvalidError) as refused:
        await runtime.run_plan(plan)
    assert refused.value.problems == ["the plan has 3000 steps; the limit is 30"]


async def test_a_result_whose_keys_collide_as_json_is_refused_not_half_kept() -> None:
    @tool
    def clash(n: int) -> dict[Any, str]:
        """Keys that are one key once written as JSON."""
        return {1: "a", "1": "b"}

    runtime = _runtime([clash], "clash", {"n": 1})
    summary = await runtime.start("go")
    state = await runtime.load_state(summary.run_id)
    assert state.steps["s1"].error_code == ErrorCode.TOOL_OUTPUT_INVALID.value, state.steps["s1"]


class Flattened(BaseModel):
    """A mapping written as a string in JSON only (its serializer's own choice)."""

    data: dict[str, Any]

    @field_serializer("data", when_used="json")
    def _as_text(self, value: dict[str, Any]) -> str:
        return json.dumps(value)


async def test_a_result_a_serializer_reshapes_for_json_is_kept() -> None:
    """A review of the check above found it refusing this: a shape changed on purpose."""

    @tool
    def flat(n: int) -> Flattened:
        """Its data is written as one string."""
        return Flattened(data={"a": {"b": 1}})

    runtime = _runtime([flat], "flat", {"n": 1})
    summary = await runtime.start("go")
    state = await runtime.load_state(summary.run_id)
    assert state.steps["s1"].data == {"data": '{"a": {"b": 1}}'}, state.steps["s1"]


def test_load_config_takes_a_path_given_as_text() -> None:
    """Found by a docs walkthrough: ``load_config("…/agent.yaml")`` raised AttributeError
    (``'str' object has no attribute 'open'``); ``load_agent`` took text all along."""
    from corral import load_config
    from tests.conftest import ORDERS

    assert load_config(str(ORDERS / "agent.yaml")).name == load_config(ORDERS / "agent.yaml").name


def test_a_store_file_s_new_folder_is_private(tmp_path: Path) -> None:
    """Found by a docs walkthrough: docs/store.md says the file is "created 0600, its folder
    too"; the folder was made 0755."""
    from corral import SqlStore

    SqlStore.open(tmp_path / "a" / "b" / "corral.db").engine.dispose()
    for made in (tmp_path / "a", tmp_path / "a" / "b"):  # each one made, not the last alone
        assert stat.S_IMODE(made.stat().st_mode) == 0o700, made
    assert stat.S_IMODE((tmp_path / "a" / "b" / "corral.db").stat().st_mode) == 0o600


class Redacted(BaseModel):
    """A token left out of the JSON only (a serializer's redaction, not a key collision)."""

    data: dict[str, Any]

    @field_serializer("data", when_used="json")
    def _without_token(self, value: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in value.items() if k != "token"}


async def test_a_result_a_serializer_redacts_for_json_is_kept() -> None:
    """A review found the check above refusing this as "keys that are one key as JSON"."""

    @tool
    def login(n: int) -> Redacted:
        """Its token is never written."""
        return Redacted(data={"user": "ada", "token": "t0k"})

    runtime = _runtime([login], "login", {"n": 1})
    summary = await runtime.start("go")
    state = await runtime.load_state(summary.run_id)
    assert state.steps["s1"].data == {"data": {"user": "ada"}}, state.steps["s1"]


async def test_a_collision_inside_a_list_is_still_found() -> None:
    @tool
    def nested(n: int) -> dict[str, Any]:
        """A collision one list down."""
        return {"rows": [{"ok": 1}, {1: "a", "1": "b"}]}

    runtime = _runtime([nested], "nested", {"n": 1})
    summary = await runtime.start("go")
    state = await runtime.load_state(summary.run_id)
    assert state.steps["s1"].error_code == ErrorCode.TOOL_OUTPUT_INVALID.value, state.steps["s1"]
