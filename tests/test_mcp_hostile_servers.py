"""MCP servers that answer in ways a review found misread (tests/mcp_servers/raw_server.py).

Reproduced on main:
- a server answering a call with JSON-RPC error -32000 ("insufficient funds": the usual
  "server error" code, which the SDK also uses for a closed connection) was taken for a
  server that died: its message dropped, the process killed and restarted, the call
  retried; a write's outcome left unknown instead of refused;
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
    return Agent.build(config, [], root=tmp_path, deps={"SHOP_TOKEN": TOKEN})


@pytest.mark.parametrize("kind", ["read", "write"])
def test_a_server_error_coded_minus_32000_is_its_refusal_not_its_death(
    tmp_path: Path, kind: str
) -> None:
    pids = tmp_path / "pids"
    agent = bank(tmp_path, "server_error", {"RAW_PIDS": str(pids)}, kind=kind)
    [result] = calls(agent, ("balance", {}))
    assert result.status is ToolStatus.ERROR
    assert result.error_code == "TOOL_FAILED", result
    assert "insufficient funds" in (result.error_message or "")
    assert not result.retryable
    assert len(pids.read_text(encoding="utf-8").split()) == 1  # called once, not restarted


def test_a_secret_given_in_the_env_is_never_echoed_into_the_run(tmp_path: Path) -> None:
    agent = bank(tmp_path, "token", {"RAW_TOKEN": "${SHOP_TOKEN}"})
    [result] = calls(agent, ("balance", {}))
    assert result.status is ToolStatus.SUCCESS
    assert TOKEN not in str(result.data)
    assert "[REDACTED]" in str(result.data)


def test_an_env_value_not_named_a_secret_is_left_in_answers(tmp_path: Path) -> None:
    """By name only: a path or a flag taken for a secret would be cut out of every answer."""
    agent = bank(tmp_path, "token", {"RAW_TOKEN_FILE_DIR": "${SHOP_TOKEN}"})
    [result] = calls(agent, ("balance", {}))
    assert result.status is ToolStatus.SUCCESS
    assert "[REDACTED]" not in str(result.data)


def test_nan_in_a_text_answer_is_kept_as_the_text_not_made_null(tmp_path: Path) -> None:
    agent = bank(tmp_path, "nan", {})
    [result] = calls(agent, ("balance", {}))
    assert result.status is ToolStatus.SUCCESS
    assert result.data == {"value": '{"balance": NaN}'}, result.data
