"""What a process that runs agents loads: only what its agents use.

An agent built from a dict, with Python tools only, runs without the YAML reader, the
HTTP, OpenAPI and MCP tool code, the JSONL log or the date and amount readers: each costs
memory in every worker that never calls it. An agent that declares one of them still gets
it, at build time. Checked in a fresh interpreter, as a user's process starts.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

OPTIONAL = (
    "yaml",
    "corral.tools.http",
    "corral.tools.openapi",
    "corral.tools.mcp.importer",
    "corral.tools.mcp.connection",
    "corral.observe.logs",
    "corral.intent.dates",
    "corral.intent.amounts",
)

RUN = """
import asyncio, sys
from pydantic import BaseModel
from corral import Agent, MemoryStore, Runtime, parse_config, tool

class Out(BaseModel):
    value: int

@tool
def lookup(n: int) -> Out:
    \"\"\"Stands for a lookup.\"\"\"
    return Out(value=n)

config = {
    "name": "lean",
    "intents": [{"name": "go", "rules": [{"keywords": ["go"]}], "route": "plan", "plan": "p",
                 "reply": "done"}],
    "plans": {"p": {"steps": [{"id": "s1", "tool": "lookup", "args": {"n": 1}}]}},
    "templates": {"done": {"zh": "完成", "en": "done"}},
    "entities": ENTITIES,
}
agent = Agent.build(parse_config(config), [lookup])
summary = asyncio.run(Runtime(agent, MemoryStore()).start(MESSAGE))
print(summary.status.value, summary.reply)
print("LOADED", sorted(m for m in OPTIONAL if m in sys.modules))
"""


def run_agent(entities: dict[str, object], message: str) -> list[str]:
    """Build and run the one-step agent in a fresh interpreter: its output lines."""
    script = f"OPTIONAL = {OPTIONAL!r}\nENTITIES = {entities!r}\nMESSAGE = {message!r}\n" + RUN
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=180, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_an_agent_of_python_tools_loads_none_of_the_optional_parts() -> None:
    lines = run_agent({}, "go")
    assert lines[0] == "finished done"
    assert lines[-1] == "LOADED []"


def test_an_agent_that_declares_a_date_gets_the_date_reader() -> None:
    lines = run_agent({"when": {"kind": "date_range"}}, "go tomorrow")
    assert lines[0] == "finished done"
    loaded = lines[-1].removeprefix("LOADED ")
    assert "corral.intent.dates" in loaded
    assert "yaml" not in loaded and "corral.tools.http" not in loaded
