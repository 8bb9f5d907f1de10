"""What an HTTP tool costs per call over a bare ``httpx.AsyncClient`` call to the same endpoint.

    PYTHONPATH=src python benchmarks/http_tools.py [--calls 300] [--rounds 5] [--json]

A loopback service (FastAPI on uvicorn, in a child process so that its CPU is not this
process's) answers ``GET /weather/{city}?date=...`` with a small JSON forecast. In one
process and one event loop, interleaved rounds time:

- ``bare``: ``client.get(url, params=...)`` then ``response.json()`` on one pooled client;
- ``tool``: the same request as a declared HTTP tool through corral's invoke path
  (argument validation, the request built from the URL template, the streamed and capped
  body, JSON decoding, the output cut to the declared fields, the ``ToolResult`` envelope).

The table shows the median wall time per call of each, and the tool's overhead over bare.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

DAY = "2026-12-01"
TOOL = {
    "name": "get_forecast",
    "url": "${SERVICE_URL}/weather/{city}",
    "input": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "date": {"type": "string", "format": "date"}},
        "required": ["city", "date"],
    },
    "output": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "rain_probability": {"type": "number"}},
        "required": ["city", "rain_probability"],
    },
}


def serve() -> None:
    """The child: bind a free loopback port, print it, and serve until killed."""
    import uvicorn
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/weather/{city}")
    async def weather(city: str, date: str) -> dict[str, Any]:
        return {"city": city, "date": date, "rain_probability": 0.8, "high_c": 12, "extra": "x"}

    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say TCP, and
    # without it every response waits 40 ms for a delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])


async def measure(base: str, calls: int, rounds: int) -> dict[str, list[float]]:
    """Seconds per call, one sample per round, for ``bare`` and ``tool``."""
    import httpx

    from corral import Agent, LiveEffects, ToolContext, parse_config
    from corral.contracts import ToolStatus
    from corral.tools.invoke import invoke_tool, validate_args

    config = parse_config(
        {
            "name": "bench",
            "intents": [{"name": "x", "route": "reply", "reply": "r"}],
            "templates": {"r": {"zh": "r", "en": "r"}},
            "http_tools": [TOOL],
        }
    )
    agent = Agent.build(config, [], deps={"SERVICE_URL": base})
    spec = agent.tools.get("get_forecast")
    context = ToolContext(run_id="bench", step_id="s1", idempotency_key="k")
    effects = LiveEffects()
    url = f"{base}/weather/shanghai"

    async def bare(client: httpx.AsyncClient) -> None:
        response = await client.get(url, params={"date": DAY})
        response.raise_for_status()
        response.json()

    async def tool() -> None:
        args = validate_args(spec, {"city": "shanghai", "date": DAY})
        result = await invoke_tool(spec, args, context, effects)
        assert result.status is ToolStatus.SUCCESS, result

    samples: dict[str, list[float]] = {"bare": [], "tool": []}
    async with httpx.AsyncClient() as client:
        for _ in range(20):  # warm both paths: connections, imports, caches
            await bare(client)
            await tool()
        for _ in range(rounds):
            for name in ("bare", "tool"):
                began = time.perf_counter()
                for _ in range(calls):
                    await (bare(client) if name == "bare" else tool())
                samples[name].append((time.perf_counter() - began) / calls)
    await agent.aclose()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per round and path")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve:
        serve()
        return
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        samples = asyncio.run(measure(f"http://127.0.0.1:{port}", options.calls, options.rounds))
    finally:
        child.terminate()
        child.wait(10)
    bare = statistics.median(samples["bare"]) * 1e6
    tool = statistics.median(samples["tool"]) * 1e6
    figures = {
        "calls_per_round": options.calls,
        "rounds": options.rounds,
        "bare_httpx_us": round(bare, 1),
        "http_tool_us": round(tool, 1),
        "overhead_us": round(tool - bare, 1),
        "ratio": round(tool / bare, 2),
    }
    if options.json:
        print(json.dumps(figures))
        return
    print(f"median of {options.rounds} rounds x {options.calls} calls, µs per call (wall)")
    print(f"{'path':<34}{'µs/call':>10}")
    print(f"{'bare httpx.AsyncClient':<34}{bare:>10.1f}")
    print(f"{'corral HTTP tool (invoke_tool)':<34}{tool:>10.1f}")
    print(f"{'overhead':<34}{tool - bare:>10.1f}  ({tool / bare:.2f}x)")


if __name__ == "__main__":
    main()
