from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from corral import Agent, MemoryStore, Runtime, load_agent, parse_config
from corral.contracts import RunStatus, RunSummary
from corral.tools.spec import ToolSpec

SECRETS = {
    "phone": "13812345678",
    "id_number": "11010519491231002X",
    "card": "4111111111111111",
    "email": "li.lei@example.com",
    "api_key": "sk-live1234567890abcdef",
    "password": "hunter2hunter2",
    "pattern": "VIP-778899",
    "sensitive": "Z9-secret-voucher",
}
"""One of each kind of secret corral redacts, for the leak tests: ``pattern`` matches an
agent's ``redaction.patterns: ['VIP-\\d{6}']`` and ``sensitive`` goes to a ``Sensitive()``
argument."""


def exchange_count(agent: Agent, *, forget: bool = False) -> int:
    """The aftersales exchanges made; ``forget``: then delete them (an order is exchanged
    once, so a test that exchanges the demo's order again starts from none)."""
    with sqlite3.connect(agent.deps["db"]) as conn:
        count = int(conn.execute("SELECT count(*) FROM exchanges").fetchone()[0])
        if forget:
            conn.execute("DELETE FROM exchanges")
    return count


def build_agent(
    tools: list[ToolSpec],
    steps: list[dict[str, Any]],
    *,
    entities: dict[str, Any] | None = None,
    business_rules: list[dict[str, Any]] | None = None,
    templates: dict[str, Any] | None = None,
    budget: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    intent_tools: list[str] | None = None,
    requires: list[str] | None = None,
    reply: str | None = "done_reply",
    plan_extra: dict[str, Any] | None = None,
) -> Agent:
    """A one-intent agent: any message containing 'go' runs the given plan."""
    config = parse_config(
        {
            "name": "test",
            "entities": entities or {"order_id": {"kind": "pattern", "patterns": [r"(A\d+)"]}},
            "intents": [
                {
                    "name": "do",
                    "rules": [{"keywords": ["go"], "confidence": 0.95}],
                    "route": "plan",
                    "plan": "p",
                    "reply": reply,
                    "tools": intent_tools or [],
                    "requires": requires or [],
                }
            ],
            "plans": {"p": {"steps": steps, **(plan_extra or {})}},
            "business_rules": business_rules or [],
            "templates": {"done_reply": {"zh": "完成", "en": "done"}, **(templates or {})},
            "budget": budget or {},
            "limits": limits or {},
        }
    )
    return Agent.build(config, tools)


def corral_cli(
    home: Path,
    *args: str,
    stdin: str | None = None,
    ok: bool = True,
    env: dict[str, str] | None = None,
    timeout: float = 180,
) -> subprocess.CompletedProcess[str]:
    """Run ``corral ARGS --home HOME`` in a fresh process, from the repository root.

    ``env`` adds variables (``CORRAL_FAULTS``, a test tool's switches) to this one's.
    ``timeout``: a guard against a hang, not a speed check (a whole eval takes longer).
    """
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-m", "corral", *args, "--home", str(home)],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        timeout=timeout,
        cwd=root,
    )
    if ok:
        assert done.returncode == 0, done.stderr + done.stdout
    return done


def run_cli_json(home: Path, agent: Path, message: str, *extra: str) -> dict[str, Any]:
    """``corral run AGENT MESSAGE --json EXTRA --home HOME``: the run's summary as JSON."""
    done = corral_cli(home, "run", str(agent), message, "--json", *extra)
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def write_agent(folder: Path, agent_yaml: str, tools_py: str, eval_yaml: str | None = None) -> Path:
    """An agent folder (``agent.yaml``, ``tools.py``, optionally ``eval.yaml``) for CLI tests."""
    import textwrap

    folder.mkdir(parents=True)
    (folder / "agent.yaml").write_text(textwrap.dedent(agent_yaml), encoding="utf-8")
    (folder / "tools.py").write_text(textwrap.dedent(tools_py), encoding="utf-8")
    if eval_yaml is not None:
        (folder / "eval.yaml").write_text(textwrap.dedent(eval_yaml), encoding="utf-8")
    return folder


_EXCHANGE_ONCE_FACT = (
    "facts: {product_name: result.product_name, open_exchange: result.open_exchange}",
    "facts: {product_name: result.product_name}",
)


def aftersales_as_the_fixtures_were_written(folder: Path) -> Path:
    """A copy of the aftersales example, in ``folder``, as the stored fixtures' runs met it.

    Before an order was exchanged once: that rule reads a fact of the exchange plan's first
    step (``open_exchange``) which their logs do not hold, so a replay of them under
    today's example diverges there, as a replay should after a change of plan. A run
    paused before it resumes under it (``test_stored_format``).
    """
    import shutil

    from tests.conftest import AFTERSALES

    shutil.copytree(AFTERSALES, folder, ignore=shutil.ignore_patterns("__pycache__"))
    config = folder / "agent.yaml"
    text = config.read_text(encoding="utf-8")
    assert text.count(_EXCHANGE_ONCE_FACT[0]) == 1, "the example's exchange plan changed"
    text = text.replace(*_EXCHANGE_ONCE_FACT)
    start = text.index("  # an order is exchanged once")
    end = text.index("refusal: refuse_second_exchange\n", start) + len(
        "refusal: refuse_second_exchange\n"
    )
    config.write_text(text[:start] + text[end:], encoding="utf-8")
    return folder


def waiting_run_after(example: Path, data_dir: Path, first: str, line: str) -> RunSummary:
    """``first``'s run, which waited for a confirmation, once ``line`` is said after it."""

    async def talk() -> RunSummary:
        runtime = Runtime(load_agent(example, data_dir=data_dir), MemoryStore())
        waiting = await runtime.start(first, session_id="s")
        assert waiting.status is RunStatus.AWAITING_CONFIRM, waiting
        await runtime.start(line, session_id="s")
        return await runtime.summary(waiting.run_id)

    return asyncio.run(talk())


def still_waits_after(example: Path, data_dir: Path, first: str, line: str) -> bool:
    """Whether ``first``'s confirmation still waits once ``line`` is said after it."""
    return waiting_run_after(example, data_dir, first, line).status is RunStatus.AWAITING_CONFIRM
