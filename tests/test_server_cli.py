"""``corral serve`` as a user starts it: a subprocess, several agents, the CLI's home.

``CORRAL_API_TOKEN=T corral serve AGENT_DIR --agent DIR --host 127.0.0.1 --port N --home H``
is an interface checks outside the suite rely on; these tests pin it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx

from corral.cli.examples import LEFT_BEHIND
from tests.conftest import AFTERSALES, ORDERS
from tests.helpers import corral_cli
from tests.serving import EXCHANGE, START_S

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def corral_serve(
    home: Path,
    *agent_dirs: Path,
    env: dict[str, str],
    options: Sequence[str] = (),
    stderr: Path | None = None,
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``corral serve`` in a subprocess, until it answers ``/healthz``; stopped by SIGTERM.

    ``stderr``: a file its stderr goes to, which a test can read while it runs.
    """
    port = free_port()
    extra = [arg for path in agent_dirs[1:] for arg in ("--agent", str(path))]
    command = [sys.executable, "-m", "corral", "serve", str(agent_dirs[0]), *extra, *options]
    command += ["--host", "127.0.0.1", "--port", str(port), "--home", str(home)]
    environ = {k: v for k, v in os.environ.items() if k != "CORRAL_API_TOKEN"} | env
    with contextlib.ExitStack() as files:
        errors = subprocess.PIPE if stderr is None else files.enter_context(stderr.open("w"))
        server = subprocess.Popen(
            command, cwd=ROOT, env=environ, stderr=errors, stdout=subprocess.PIPE, text=True
        )
        base = f"http://127.0.0.1:{port}"
        with _stopped_at_the_end(server, base):
            yield base, server


@contextmanager
def _stopped_at_the_end(server: subprocess.Popen[str], base: str) -> Iterator[None]:
    """Wait until ``server`` answers ``/healthz``; at the end, stop it (SIGTERM, then kill)."""
    deadline = time.monotonic() + 3 * START_S
    try:
        while True:
            assert server.poll() is None, server.communicate()
            assert time.monotonic() < deadline, "corral serve did not start"
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        yield
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
        try:
            server.communicate(timeout=60)  # reads and closes its pipes: no pipe left open
        except subprocess.TimeoutExpired:  # a server that does not stop is not left behind
            server.kill()
            server.communicate()
            raise


def copy_example(source: Path, folder: Path) -> Path:
    shutil.copytree(source, folder, ignore=LEFT_BEHIND)
    return folder


def test_corral_serve_runs_several_agents_over_the_clis_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    aftersales = copy_example(AFTERSALES, tmp_path / "aftersales")
    orders = copy_example(ORDERS, tmp_path / "orders")
    auth = {"Authorization": "Bearer T"}
    with corral_serve(home, aftersales, orders, env={"CORRAL_API_TOKEN": "T"}) as (base, server):
        with httpx.Client(base_url=base, headers=auth, timeout=60) as http:
            started = http.post("/agents/aftersales/runs", json={"message": EXCHANGE})
            other = http.post(
                "/agents/orders/runs", json={"message": "我的快递到哪了 OD2611200002"}
            )
            agents = http.get("/agents").json()["agents"]
            refused = http.get("/agents", headers={"Authorization": "Bearer wrong"})
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0  # a clean stop
        _, errors = server.communicate()
    assert started.status_code == 200
    answer = started.json()
    assert answer["status"] == "awaiting_confirm" and answer["run_id"].startswith("run_")
    assert other.status_code == 200 and other.json()["status"] == "finished"
    assert [a["name"] for a in agents] == ["aftersales", "orders"]
    assert refused.status_code == 401
    assert "dashboard: http://127.0.0.1:" in errors and "/ui/" in errors
    assert "#token=" not in errors  # stderr is a pipe here: the token stays out of logs
    # the CLI sees the server's runs, and can go on with them
    shown = corral_cli(home, "show", answer["run_id"], "--json")
    assert json.loads(shown.stdout)["status"] == "awaiting_confirm"
    done = corral_cli(home, "resume", answer["run_id"], "--approve", "--json")
    assert json.loads(done.stdout)["status"] == "finished"


def test_without_a_token_one_is_made_private_and_kept_for_the_next_start(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with corral_serve(home, AFTERSALES, env={}) as (base, server):
        token_file = home / "api-token"
        token = token_file.read_text(encoding="utf-8").strip()
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert len(token) >= 32
        with httpx.Client(base_url=base, timeout=60) as http:
            assert (
                http.get("/runs", headers={"Authorization": f"Bearer {token}"}).status_code == 200
            )
            assert http.get("/runs").status_code == 401
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
        _, errors = server.communicate()
    assert str(token_file) in errors.replace("\n", "")
    assert token not in errors.replace("\n", "")  # where it is, not what it is
    with corral_serve(home, AFTERSALES, env={}) as (base, _):
        headers = {"Authorization": f"Bearer {token}"}
        assert httpx.get(f"{base}/runs", headers=headers, timeout=60).status_code == 200


def test_corral_serve_uses_the_store_url(tmp_path: Path) -> None:
    """``CORRAL_STORE_URL`` (as ``--store``) puts the server's runs outside the home."""
    home, db = tmp_path / "home", tmp_path / "shared" / "runs.db"
    env = {"CORRAL_API_TOKEN": "T", "CORRAL_STORE_URL": f"sqlite:///{db}"}
    with corral_serve(home, AFTERSALES, env=env) as (base, server):
        with httpx.Client(base_url=base, headers={"Authorization": "Bearer T"}, timeout=60) as http:
            started = http.post("/agents/aftersales/runs", json={"message": EXCHANGE}).json()
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0
    assert db.is_file() and not (home / "corral.db").exists()
    shown = corral_cli(home, "show", started["run_id"], "--json", "--store", f"sqlite:///{db}")
    assert json.loads(shown.stdout)["status"] == "awaiting_confirm"


def test_a_port_in_use_is_refused_before_the_server_says_it_is_up(tmp_path: Path) -> None:
    """Not the banner and dashboard address, then uvicorn's bind error and exit 3."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = corral_cli(
            tmp_path / "home",
            "serve",
            str(AFTERSALES),
            "--port",
            str(port),
            ok=False,
            env={"CORRAL_API_TOKEN": "T"},
        )
    assert done.returncode == 2, done.stderr
    assert f"error ADDRESS_IN_USE: another process listens on 127.0.0.1:{port}" in done.stderr
    assert "dashboard" not in done.stderr and "corral serve:" not in done.stderr


def test_a_follower_that_leaves_after_one_event_ends_its_stream_quietly(tmp_path: Path) -> None:
    """``curl .../stream | head -1`` on a finished run: before, every event after the first
    was written to the dead socket (asyncio's "socket.send() raised exception.", one line
    per event past the fifth, on the server's stderr)."""
    errors = tmp_path / "stderr"
    served = corral_serve(tmp_path / "home", ORDERS, env={"CORRAL_API_TOKEN": "T"}, stderr=errors)
    with served as (base, server):
        auth = {"Authorization": "Bearer T"}
        with httpx.Client(base_url=base, headers=auth, timeout=60) as http:
            started = http.post(
                "/agents/orders/runs", json={"message": "我的快递到哪了 OD2611200002"}
            )
            run_id = started.json()["run_id"]
            assert len(http.get(f"/runs/{run_id}/events").json()["events"]) > 10
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1]))) as raw:
                raw.sendall(
                    f"GET /runs/{run_id}/stream HTTP/1.1\r\nHost: x\r\n"
                    "Authorization: Bearer T\r\n\r\n".encode()
                )
                got = b""
                while b"id: 1-" not in got:  # the first event, then gone
                    got += raw.recv(4096)
        time.sleep(1)
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    said = errors.read_text(encoding="utf-8")
    assert "socket.send() raised exception" not in said, said


def test_the_listening_sockets_are_made_as_asyncio_makes_them() -> None:
    """Review of bcdb785: TCP (not protocol 0, which left TCP_NODELAY off: every answer
    waited 40 ms for a delayed ACK), listening at once (two servers starting together
    both passed a bare bind, and the second crashed later), IPv6 only for an IPv6
    address, and not passed to the processes a tool starts."""
    from corral.errors import AddressInUseError
    from corral.server.process import listening

    first = listening("127.0.0.1", 0)
    try:
        [sock] = first
        assert sock.proto == socket.IPPROTO_TCP and not sock.get_inheritable()
        with contextlib.suppress(AddressInUseError):
            listening("127.0.0.1", sock.getsockname()[1])
            raise AssertionError("a port another socket listens on was taken")
    finally:
        for made in first:
            made.close()
    if socket.has_ipv6:
        six = listening("::1", 0)
        try:
            assert six[0].getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY) == 1
        finally:
            six[0].close()


def test_the_banner_writes_an_ipv6_host_in_brackets_as_a_browser_takes_it() -> None:
    from corral.cli.serve import _origin

    assert _origin("::", 8080) == "http://[::]:8080"
    assert _origin("::1", 80) == "http://[::1]:80"
    assert _origin("[::1]", 80) == "http://[::1]:80"
    assert _origin("127.0.0.1", 8080) == "http://127.0.0.1:8080"
    assert _origin("localhost", 1) == "http://localhost:1"


SLOW_AGENT = """
    name: slow
    default_language: en
    intents:
      - name: go
        rules: [{keywords: [go], confidence: 0.95}]
        route: plan
        plan: p
        reply: done
    plans:
      p:
        steps:
          - {id: s1, tool: slow}
    templates:
      done: {zh: 好了, en: done}
"""
SLOW_TOOLS = """
    import time

    from pydantic import BaseModel

    from corral import tool


    class Done(BaseModel):
        ok: bool


    @tool
    def slow() -> Done:
        \"\"\"Takes two seconds.\"\"\"
        time.sleep(2.0)
        return Done(ok=True)
"""


def _follow_through_a_stop(
    tmp_path: Path, tools: str, options: Sequence[str] = ()
) -> tuple[list[str], str, str]:
    """Follow a run of the slow agent, SIGTERM the server after its first event.

    The kinds of SSE messages the follower got, the server's stderr, and the run's id.
    """
    import threading

    from tests.helpers import write_agent

    agent = write_agent(tmp_path / "slow", SLOW_AGENT, tools)
    errors = tmp_path / "stderr"
    env = {"CORRAL_API_TOKEN": "T"}
    served = corral_serve(tmp_path / "home", agent, env=env, stderr=errors, options=options)
    kinds: list[str] = []
    with served as (base, server):
        auth = {"Authorization": "Bearer T"}
        with httpx.Client(base_url=base, headers=auth, timeout=60) as http:
            run_id = http.post("/agents/slow/runs", json={"message": "go", "wait": False}).json()[
                "run_id"
            ]
            first = threading.Event()

            def follow() -> None:
                with http.stream("GET", f"/runs/{run_id}/stream") as answer:
                    for line in answer.iter_lines():
                        if line.startswith("event: "):
                            kinds.append(line.removeprefix("event: "))
                            first.set()

            follower = threading.Thread(target=follow)
            follower.start()
            assert first.wait(30)
            server.send_signal(signal.SIGTERM)
            follower.join(60)
        assert server.wait(timeout=60) == 0
    return kinds, errors.read_text(encoding="utf-8"), run_id


def test_a_follower_of_a_run_that_ends_in_the_grace_sees_its_end_after_sigterm(
    tmp_path: Path,
) -> None:
    """Found by a walkthrough: SIGTERM cut every SSE follower at once (sse-starlette's
    own drain), with uvicorn's "ASGI callable returned without completing response",
    though the run went on and finished inside the grace: the follower never saw it."""
    kinds, said, run_id = _follow_through_a_stop(tmp_path, SLOW_TOOLS)
    assert kinds[-1] == "summary" and "error" not in kinds, kinds
    assert "ASGI callable returned without completing response" not in said, said
    shown = corral_cli(tmp_path / "home", "show", run_id, "--json")
    assert json.loads(shown.stdout)["status"] == "finished"


def test_a_follower_of_a_run_that_outlives_the_grace_is_told_it_was_stopped(
    tmp_path: Path,
) -> None:
    """The run is stopped as the grace ends, while the server still waits for requests:
    its follower gets the ``error`` (how to resume) and the summary, not a cut stream
    (the server used to stop runs only after it had cut every request still open)."""
    hours = (
        SLOW_TOOLS.replace("def slow", "async def slow")
        .replace("time.sleep(2.0)", "await asyncio.sleep(3600)")
        .replace("import time", "import asyncio")
    )
    kinds, said, run_id = _follow_through_a_stop(tmp_path, hours, ["--shutdown-grace", "1"])
    assert kinds[-2:] == ["error", "summary"], kinds
    assert "cancelled" not in said and "ASGI callable" not in said, said
    shown = corral_cli(tmp_path / "home", "show", run_id, "--json")
    assert json.loads(shown.stdout)["status"] == "executing"  # stopped, resumable
