"""What calling an MCP tool through corral costs, against a bare ``mcp`` ClientSession call.

    PYTHONPATH=src python benchmarks/mcp_tools.py [--calls 300] [--rounds 5] [--json]

The same server (``tests/mcp_servers/notes_server.py`` over stdio, its ``get_note`` read
with an output schema) is called three ways in one process, each on its own server
process started before timing:

- ``bare``: ``ClientSession.call_tool`` on a session opened with ``stdio_client``;
- ``connection``: corral's ``McpConnection.call_tool`` and the result turned into data;
- ``tool call``: the whole call as a run's executor makes it, ``invoke_tool`` on the
  imported ``ToolSpec``: argument validation, the policy's timeout, the output kept to
  the declared fields, the envelope.

Calls are one at a time. Each round runs every way once, in a rotated order; the table
shows the medians over rounds of the wall time per call and of this process's CPU time
per call (corral's side of the work: the server's is the same for every way), and what
corral adds to the bare call. The wall time is mostly the round trip to the server
process, and on a loaded machine mostly noise: read the CPU column for the overhead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SERVER = ROOT / "tests" / "mcp_servers" / "notes_server.py"

from corral import ToolContext, load_agent  # noqa: E402
from corral.effects import LiveEffects  # noqa: E402
from corral.tools.invoke import invoke_tool, validate_args  # noqa: E402
from corral.tools.mcp.connection import McpConnection, McpLaunch  # noqa: E402
from corral.tools.mcp.results import result_value  # noqa: E402

WAYS = ("bare", "connection", "tool call")
ARGS = {"topic": "benchmarks"}
AGENT_YAML = f"""\
name: mcp_bench
default_language: en
mcp_servers:
  - name: notes
    command: [python, {json.dumps(str(SERVER))}]
    env: {{NOTES_DB: "${{NOTES_DB}}"}}
    tools:
      get_note: {{max_retries: 0}}
intents:
  - {{name: chat, route: reply, reply: hi, rules: [{{keywords: [hi]}}]}}
templates:
  hi: {{zh: 你好, en: hi}}
"""

Call = Callable[[], Awaitable[Any]]


async def _per_call_us(call: Call, calls: int) -> tuple[float, float]:
    """Wall and CPU (this process: corral's side) microseconds per call, after a warm-up."""
    for _ in range(5):
        await call()
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        await call()
    return (
        (time.perf_counter() - wall) / calls * 1e6,
        (time.process_time() - cpu) / calls * 1e6,
    )


async def _measure(folder: Path, calls: int, rounds: int) -> dict[str, list[tuple[float, float]]]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    (folder / "agent.yaml").write_text(AGENT_YAML, encoding="utf-8")
    env = {"NOTES_DB": str(folder / "notes.sqlite3")}
    os.environ.update(env)  # ${NOTES_DB} of the agent, resolved from the environment
    agent = load_agent(folder, data_dir=folder / "data")
    spec = agent.tools.get("get_note")
    context = ToolContext(run_id="run_bench", step_id="s1", idempotency_key="")
    effects = LiveEffects()
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)], env=env)
    launch = McpLaunch("notes", ("python", str(SERVER)), env=env, cwd=folder)
    direct = McpConnection("notes", lambda: launch)  # corral's own, beside the agent's

    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()

        async def bare() -> Any:
            result = await session.call_tool("get_note", ARGS)
            return result.structured_content

        async def through_connection() -> Any:
            return result_value("get_note", await direct.call_tool("get_note", ARGS), True)

        async def tool_call() -> Any:
            envelope = await invoke_tool(spec, validate_args(spec, ARGS), context, effects)
            assert envelope.ok, envelope
            return envelope.data

        ways: dict[str, Call] = {"bare": bare, "connection": through_connection}
        ways["tool call"] = tool_call
        assert await bare() == await through_connection() == await tool_call()
        results: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
        for number in range(rounds):
            order = WAYS[number % len(WAYS) :] + WAYS[: number % len(WAYS)]
            for way in order:
                results[way].append(await _per_call_us(ways[way], calls))
    await direct.aclose()
    await agent.aclose()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per way and round")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (median)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        results = asyncio.run(_measure(Path(folder), options.calls, options.rounds))
    wall = {way: statistics.median(w for w, _ in values) for way, values in results.items()}
    cpu = {way: statistics.median(c for _, c in values) for way, values in results.items()}
    if options.json:
        print(json.dumps({"wall_us": wall, "cpu_us": cpu, "rounds": results}, indent=2))
        return
    print(f"Medians of {options.rounds} rounds of {options.calls} calls, one at a time.\n")
    print("| way | wall µs per call | added | client CPU µs per call | added |")
    print("|---|---|---|---|---|")
    for way in WAYS:
        added_wall = "—" if way == "bare" else f"{wall[way] - wall['bare']:+.0f}"
        added_cpu = "—" if way == "bare" else f"{cpu[way] - cpu['bare']:+.0f}"
        print(f"| {way} | {wall[way]:.0f} | {added_wall} | {cpu[way]:.0f} | {added_cpu} |")


if __name__ == "__main__":
    main()
