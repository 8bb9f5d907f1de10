"""MCP servers that answer in ways a review found misread (tests/mcp_servers/raw_server.py).

Reproduced on main:
- a secret given to a stdio server in its ``env`` (``RAW_TOKEN: "${SHOP_TOKEN}"``) and
  echoed in its answer reached the run whole (only ``headers`` were redacted);
- ``{"balance": NaN}`` in a text answer became ``{"balance": null}``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from corral import Agent, parse_config
from corral.contracts import ToolStatus
from tests.conftest import ROOT
from tests.extras import REQUIRE_ALL, import_extra
from tests.one_intent import one_intent
from tests.test_mcp_tools import calls

import_extra("mcp", REQUIRE_ALL)

RAW_SERVER = ROOT / "tests" / "mcp_servers" / "raw_server.py"
TOKEN = "sk-live-0123456789abcdef"


HOME = "/srv/shop/home"


def bank(tmp_path: Path, mode: str, env: dict[str, str], **tool: Any) -> Agent:
    """An agent importing ``balance`` from the raw server in ``mode``."""
    server = {
        "name": "bank",
        "command": ["python", str(RAW_SERVER), mode],
        "env": env,
        "tools": {"balance": tool or None},
    }
    steps = [{"id": "s1", "tool": "balance", "args": {}}]
    config = parse_config(one_intent("go", steps=steps, mcp_servers=[server]))
    deps = {"SHOP_TOKEN": TOKEN, "SHOP_HOME": HOME, "SHOP_PIN": "7391"}
    return Agent.build(config, [], root=tmp_path, deps=deps)


@pytest.mark.parametrize(
    "env", [{"RAW_ECHO": "${SHOP_TOKEN}"}, {"SHOP_API_KEY": "${SHOP_TOKEN}", "RAW_ECHO": TOKEN}]
)
def test_a_secret_given_in_the_env_is_never_echoed_into_the_run(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """Named a secret by its ``${NAME}`` (``SHOP_TOKEN``) or by its own name (``SHOP_API_KEY``)."""
    agent = bank(tmp_path, "echo", env)
    [result] = calls(agent, ("balance", {}))
    assert result.status is ToolStatus.SUCCESS
    assert TOKEN not in str(result.data)
    assert "[REDACTED]" in str(result.data)


@pytest.mark.parametrize(
    ("env", "kept"),
    [({"RAW_ECHO": "${SHOP_HOME}"}, HOME), ({"RAW_ECHO": "${SHOP_PIN}"}, "7391")],
    ids=["not named a secret", "too short to hunt for"],
)
def test_an_env_value_is_left_in_answers_unless_it_is_a_secret_worth_hunting(
    tmp_path: Path, env: dict[str, str], kept: str
) -> None:
    """By name, and 8 characters or more: a path, or a short value cut out of every answer
    (a review found "your" cut out of "your token is" with a 4-letter password), would
    damage the data."""
    agent = bank(tmp_path, "echo", {**env, "SHOP_PASSWORD": "${SHOP_PIN}"})
    [result] = calls(agent, ("balance", {}))
    assert result.status is ToolStatus.SUCCESS
    assert kept in str(result.data) and "[REDACTED]" not in str(result.data)


def test_nan_in_a_text_answer_is_kept_as_the_text_not_made_null(tmp_path: Path) -> None:
    agent = bank(tmp_path, "nan", {})
    [result] = calls(agent, ("balance", {}))
    assert result.status is ToolStatus.SUCCESS
    assert result.data == {"value": '{"balance": NaN}'}, result.data
