"""Load on ``corral serve``: 50 clients POST runs for N seconds; against in-process starts.

    python benchmarks/serve_load.py [--seconds 10] [--clients 50] [--json]

A: ``corral serve examples/aftersales`` in a subprocess on a temporary home, and
``--clients`` concurrent httpx clients (one connection each) POSTing the demo's exchange
message to ``/agents/aftersales/runs`` (each run reads the order, the policy and the
evidence, then pauses for a confirmation: no write) for ``--seconds``.

Baseline: the same runs through ``Runtime.start`` in one process, no HTTP, on the same kind
of store (a SQLite file in a temporary home), ``--clients`` at a time.

The table: requests, errors, requests per second, p50 and p99 latency. The client shares
the machine with the server, so read the ratio within one run, not the absolute figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
AGENT = ROOT / "examples" / "aftersales"
MESSAGE = "我的打印机上周坏了，订单号 HD20240501，能换新吗？"
TOKEN = "bench-token"


async def load(call: Callable[[], Awaitable[bool]], clients: int, seconds: float) -> dict[str, Any]:
    """``clients`` loops calling ``call`` until ``seconds`` have passed; latencies in ms."""
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds

    async def client() -> None:
        nonlocal errors
        while time.perf_counter() < deadline:
            began = time.perf_counter()
            ok = await call()
            latencies.append((time.perf_counter() - began) * 1000)
            errors += not ok

    began = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.perf_counter() - began
    ordered = sorted(latencies)
    return {
        "requests": len(ordered),
        "errors": errors,
        "per_s": len(ordered) / elapsed,
        "p50_ms": statistics.median(ordered) if ordered else float("nan"),
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        if ordered
        else float("nan"),
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def over_http(home: Path, clients: int, seconds: float) -> dict[str, Any]:
    port = free_port()
    env = {**os.environ, "CORRAL_API_TOKEN": TOKEN, "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, "-m", "corral", "serve", str(AGENT), "--port", str(port)]
    server = subprocess.Popen([*command, "--home", str(home)], env=env, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(
            base_url=base,
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=120,
            limits=httpx.Limits(max_connections=clients, max_keepalive_connections=clients),
        ) as http:
            while True:
                assert server.poll() is None, "corral serve did not start"
                try:
                    if (await http.get("/healthz")).status_code == 200:
                        break
                except httpx.TransportError:
                    await asyncio.sleep(0.1)

            async def post() -> bool:
                answer = await http.post("/agents/aftersales/runs", json={"message": MESSAGE})
                return answer.status_code == 200

            await post()  # warm: the first run imports the layers
            return await load(post, clients, seconds)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)


async def in_process(home: Path, clients: int, seconds: float) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / "src"))
    from corral.cli.common import _load
    from corral.runtime.runtime import Runtime
    from corral.store.sql import SqlStore

    runtime = Runtime(_load(AGENT, home), SqlStore.open(home / "corral.db"), log_dir=home / "logs")

    async def start() -> bool:
        summary = await runtime.start(MESSAGE)
        return summary.status.value == "awaiting_confirm"

    await start()
    return await load(start, clients, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as served, tempfile.TemporaryDirectory() as direct:
        results["corral serve (HTTP)"] = asyncio.run(
            over_http(Path(served), args.clients, args.seconds)
        )
        results["Runtime.start (baseline)"] = asyncio.run(
            in_process(Path(direct), args.clients, args.seconds)
        )
    if args.json:
        print(json.dumps(results))
        return
    print(f"{args.clients} clients, {args.seconds:.0f} s each, POST /agents/aftersales/runs")
    print(f"{'':26} {'requests':>8} {'errors':>6} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8}")
    for name, r in results.items():
        print(
            f"{name:26} {r['requests']:>8} {r['errors']:>6} {r['per_s']:>8.1f}"
            f" {r['p50_ms']:>8.1f} {r['p99_ms']:>8.1f}"
        )
    http, base = results["corral serve (HTTP)"], results["Runtime.start (baseline)"]
    print(f"HTTP / in-process throughput: {http['per_s'] / base['per_s']:.2f}x")


if __name__ == "__main__":
    main()
