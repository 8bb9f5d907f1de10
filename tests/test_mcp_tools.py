"""MCP tools: a real MCP server over stdio (tests/mcp_servers/notes_server.py), real SQLite.

The agent tests/agents/mcp_notes imports some of the server's tools from ``mcp_servers:``
in its agent.yaml. The server writes its pid to the data folder at every start, so each
test can check that no process outlives the agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral import Agent, MemoryStore, Runtime, ToolContext, load_agent
from corral.contracts import ToolResult, ToolStatus
from corral.errors import ConfigInvalidError
from corral.runtime.scheduler import idempotency_key
from corral.testing import FixedEffects
from corral.tools.invoke import invoke_tool, validate_args
from corral.tools.mcp.connection import McpConnection
from tests.conftest import ROOT
from tests.extras import REQUIRE_ALL, import_extra
from tests.helpers import corral_cli

import_extra("mcp", REQUIRE_ALL)

AGENT = ROOT / "tests" / "agents" / "mcp_notes"


def started(data: Path) -> list[int]:
    """The pids of every server process started with this data folder, in order."""
    pids = data / "pids.txt"
    return [int(line) for line in pids.read_text().split()] if pids.exists() else []


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie, dead but not yet reaped, does not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def posts(data: Path) -> list[tuple[str | None, str]]:
    """The server's posts (key, text), in order; none before its first write."""
    if not (data / "notes.sqlite3").exists():
        return []
    with sqlite3.connect(data / "notes.sqlite3") as conn:
        return list(conn.execute("SELECT key, text FROM posts ORDER BY id"))


def variant(tmp_path: Path, old: str, new: str) -> Path:
    """A copy of the test agent with one piece of its agent.yaml replaced."""
    folder = tmp_path / "agent"
    shutil.copytree(AGENT, folder)
    text = (folder / "agent.yaml").read_text()
    assert old in text
    text = text.replace(old, new)
    server = str(ROOT / "tests" / "mcp_servers" / "notes_server.py")
    (folder / "agent.yaml").write_text(text.replace("../../mcp_servers/notes_server.py", server))
    return folder


def load_variant(tmp_path: Path, old: str, new: str) -> Agent:
    """The variant ``variant`` writes, loaded with its data in ``tmp_path / "data"``."""
    return load_agent(variant(tmp_path, old, new), data_dir=tmp_path / "data")


async def call(agent: Agent, tool: str, args: dict[str, Any], key: str = "k1") -> ToolResult:
    """One tool call as the executor makes it: validated, with the policy, an envelope."""
    spec = agent.tools.get(tool)
    context = ToolContext(run_id="run_t", step_id="s1", idempotency_key=key)
    return await invoke_tool(spec, validate_args(spec, args), context, FixedEffects())


def calls(agent: Agent, *requests: tuple[Any, ...]) -> list[ToolResult]:
    """Make ``call(agent, *request)`` for each request in order on one event loop, then
    close the agent (stopping its server): the envelopes."""

    async def scenario() -> list[ToolResult]:
        try:
            return [await call(agent, *request) for request in requests]
        finally:
            await agent.aclose()

    return asyncio.run(scenario())


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def agent(data: Path) -> Agent:
    return load_agent(AGENT, data_dir=data)


def test_only_the_chosen_tools_are_imported_with_their_schemas(agent: Agent, data: Path) -> None:
    names = sorted(spec.name for spec in agent.tools)
    assert names == [
        "chatty",
        "crash",
        "echo_text",
        "get_note",
        "hold",
        "post_note",
        "refuse",
        "whoami",
    ]
    assert "delete_all" not in names  # the server offers it; the agent did not choose it
    note = agent.tools.get("get_note")
    assert note.input_model.model_json_schema()["required"] == ["topic"]
    assert set(note.output_model.model_fields) == {"topic", "text", "words"}
    assert note.description == "Read the note about a topic."
    assert note.policy.kind == "read"
    post = agent.tools.get("post_note")
    assert post.policy.kind == "write"
    assert post.policy.idempotent
    assert set(post.input_model.model_fields) == {"channel", "text"}  # the key is corral's
    assert set(agent.tools.get("echo_text").output_model.model_fields) == {"value"}
    assert agent.tools.get("hold").policy.timeout_s == 0.5
    # listing the tools at load started the server once, and stopped it again
    pids = started(data)
    assert len(pids) == 1
    assert not alive(pids[0])


def test_an_mcp_tool_is_read_only_unless_config_says_write(tmp_path: Path) -> None:
    written = "{kind: write, idempotent: true, key_argument: idempotency_key, backoff_s: [0.1]}"
    post = load_variant(tmp_path, written, "{}").tools.get("post_note")
    assert post.policy.kind == "read"
    assert not post.policy.requires_confirmation


def test_a_run_calls_the_server_which_starts_lazily_and_stops_at_aclose(
    agent: Agent, data: Path
) -> None:
    async def scenario() -> tuple[Any, list[int]]:
        async with Runtime(agent, MemoryStore(), effects=FixedEffects()) as runtime:
            assert len(started(data)) == 1  # only the listing at load: nothing runs yet
            summary = await runtime.start("show me the note about cats")
            running = started(data)[1:]
            assert len(running) == 1
            assert alive(running[0])
        return summary, running

    summary, running = asyncio.run(scenario())
    assert summary.reply == "notes about cats"
    assert [(step.tool, step.status.value) for step in summary.steps] == [("get_note", "succeeded")]
    assert not alive(running[0])  # Runtime.aclose stopped it: no orphan


def test_a_server_that_dies_mid_call_is_retryable_and_restarted(agent: Agent, data: Path) -> None:
    before, crashed, after = calls(agent, ("whoami", {}), ("crash", {}), ("whoami", {}))
    assert crashed.status is ToolStatus.ERROR
    assert crashed.error_code == "TOOL_TRANSIENT"
    assert crashed.retryable
    assert "went away while crash was running" in (crashed.error_message or "")
    assert before.data and after.data
    first, second = before.data["result"], after.data["result"]
    assert first != second  # a new process answered
    assert started(data)[1:] == [first, second]
    assert not alive(first) and not alive(second)


def test_a_write_replayed_after_a_crash_posts_exactly_once(agent: Agent, data: Path) -> None:
    (data / "crash.flag").touch()  # the server dies right after its first commit

    post = {"channel": "general", "text": "hi"}
    requests = [
        ("post_note", post, "key-1"),
        ("post_note", post, "key-1"),
        ("post_note", post, "key-2"),
    ]
    first, again, other = calls(agent, *requests)
    assert not (data / "crash.flag").exists()  # the crash did happen
    # the first attempt posted and died; the retry (idempotent by key) found that post
    assert first.status is ToolStatus.SUCCESS
    assert first.attempts == 2
    assert first.data == {"post_id": 1, "channel": "general", "duplicate": True}
    assert again.data == {"post_id": 1, "channel": "general", "duplicate": True}
    assert other.data == {"post_id": 2, "channel": "general", "duplicate": False}
    assert posts(data) == [("key-1", "hi"), ("key-2", "hi")]


def test_a_write_that_is_not_idempotent_is_not_retried_after_a_crash(tmp_path: Path) -> None:
    data = tmp_path / "data"
    agent = load_variant(tmp_path, "idempotent: true, ", "")
    (data / "crash.flag").touch()

    [posted] = calls(agent, ("post_note", {"channel": "general", "text": "hi"}, "once"))
    assert posted.error_code == "OUTCOME_UNKNOWN"  # it may have posted: a person checks
    assert posted.attempts == 1
    assert posts(data) == [("once", "hi")]


def test_a_tool_can_be_renamed_in_corral(tmp_path: Path) -> None:
    agent = load_variant(tmp_path, "      whoami:\n", "      whoami: {name: server_pid}\n")
    assert "whoami" not in agent.tools
    assert "server_pid" in agent.tools

    [pid] = calls(agent, ("server_pid", {}))
    assert pid.tool == "server_pid"
    assert pid.data is not None
    assert pid.data["result"] == started(tmp_path / "data")[-1]


def test_a_confirmed_write_in_a_run_reaches_the_server_with_the_runs_key(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    agent = load_variant(tmp_path, "key_argument: idempotency_key,", "requires_confirmation: true,")

    async def scenario() -> tuple[Any, Any]:
        async with Runtime(agent, MemoryStore(), effects=FixedEffects()) as runtime:
            paused = await runtime.start("post about otters")
            assert posts(data) == []  # nothing is posted before the confirmation
            done = await runtime.resume(paused.run_id, approve=True)
        return paused, done

    paused, done = asyncio.run(scenario())
    assert paused.status.value == "awaiting_confirm"
    assert done.status.value == "finished"
    assert done.reply == "Posted as 1"
    key = idempotency_key(paused.run_id, "s1", {"channel": "general", "text": "otters"})
    assert posts(data) == [(key, "otters")]  # the run's own key, sent in _meta


def test_without_a_key_argument_the_key_travels_in_the_request_meta(tmp_path: Path) -> None:
    agent = load_variant(tmp_path, "key_argument: idempotency_key, ", "")
    assert "idempotency_key" in agent.tools.get("post_note").input_model.model_fields

    post = ("post_note", {"channel": "general", "text": "yo"}, "meta-key")
    calls(agent, post, post)
    assert posts(tmp_path / "data") == [("meta-key", "yo")]


def test_a_non_json_answer_is_a_text_result_and_is_error_a_failure(agent: Agent) -> None:
    text, refused = calls(
        agent, ("echo_text", {"text": "not {json"}), ("refuse", {"reason": "closed today"})
    )
    assert text.status is ToolStatus.SUCCESS
    assert text.data == {"value": "you said: not {json"}
    assert refused.status is ToolStatus.ERROR
    assert refused.error_code == "TOOL_FAILED"
    assert not refused.retryable
    assert "closed today" in (refused.error_message or "")


def test_a_stray_non_json_line_on_stdout_does_not_break_the_call(agent: Agent) -> None:
    chatty, after = calls(agent, ("chatty", {"text": "hello"}), ("get_note", {"topic": "later"}))
    assert chatty.data == {"value": "HELLO"}
    assert after.status is ToolStatus.SUCCESS


def test_a_call_timeout_follows_the_policy_and_keeps_the_server(agent: Agent, data: Path) -> None:
    release = data / "release"

    async def scenario() -> tuple[ToolResult, ToolResult, ToolResult]:
        before = await call(agent, "whoami", {})  # started first: a start counts in a timeout
        late = await call(agent, "hold", {"path": str(release)})  # policy: timeout_s 0.5
        release.touch()  # the server's hold answers now, to a caller that left
        after = await call(agent, "whoami", {})
        await agent.aclose()
        return before, late, after

    before, late, after = asyncio.run(scenario())
    assert late.error_code == "TOOL_TIMEOUT"
    assert late.retryable
    assert after.data == before.data  # the same process: a timeout cancels only its request
    assert len(started(data)) == 2  # the listing, then one server for every call


def test_a_server_that_lacks_a_chosen_tool_fails_the_load(tmp_path: Path) -> None:
    folder = variant(tmp_path, "      whoami:\n", "      whoami:\n      launch_rockets:\n")
    with pytest.raises(ConfigInvalidError) as caught:
        load_agent(folder, data_dir=tmp_path / "data")
    assert "has no tool 'launch_rockets'" in caught.value.message
    assert "get_note" in (caught.value.hint or "")
    assert not any(alive(pid) for pid in started(tmp_path / "data"))


def test_a_server_that_does_not_start_fails_the_load(tmp_path: Path) -> None:
    folder = variant(tmp_path, "command: [python, ", "command: [no-such-program-here, ")
    with pytest.raises(ConfigInvalidError) as caught:
        load_agent(folder, data_dir=tmp_path / "data")
    assert "mcp server 'notes': cannot list its tools" in caught.value.message


def test_corral_run_json_calls_the_mcp_tool_and_leaves_no_process(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = corral_cli(home, "run", str(AGENT), "show me the note about owls", "--json")
    summary = json.loads(done.stdout)
    assert summary["status"] == "finished"
    assert summary["reply"] == "notes about owls"
    assert [step["tool"] for step in summary["steps"]] == ["get_note"]
    pids = started(home / "data" / "mcp_notes")
    assert len(pids) == 2  # the listing at load, and the server the run called
    assert not any(alive(pid) for pid in pids)


def test_corral_help_does_not_import_the_mcp_sdk() -> None:
    code = "import sys, corral.cli, corral.config; print('mcp' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.stdout.strip() == "False", done.stderr


def test_one_event_loop_per_turn_restarts_the_server_and_leaves_no_process(
    agent: Agent, data: Path
) -> None:
    """``corral chat`` runs each turn in its own event loop: a server cannot outlive one."""
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    replies = []
    for topic in ("cats", "dogs"):
        replies.append(asyncio.run(runtime.start(f"the note about {topic}")).reply)
        assert not any(alive(pid) for pid in started(data))  # the loop's end stopped it
    asyncio.run(runtime.aclose())
    assert replies == ["notes about cats", "notes about dogs"]
    assert len(started(data)) == 3  # the listing, then one server per loop


def test_a_server_that_died_between_calls_is_restarted_before_the_request(
    tmp_path: Path,
) -> None:
    """Nothing was sent to the dead process, so even a write that is not idempotent runs."""
    data = tmp_path / "data"
    agent = load_variant(tmp_path, "idempotent: true, ", "")

    async def scenario() -> ToolResult:
        first = await call(agent, "whoami", {})
        assert first.data is not None
        server = agent.transports[0]
        assert isinstance(server, McpConnection)
        assert server.running
        os.kill(first.data["result"], signal.SIGKILL)
        for _ in range(3000):  # until the connection has seen its output end
            if not server.running:
                break
            await asyncio.sleep(0.01)
        posted = await call(agent, "post_note", {"channel": "general", "text": "hi"}, "k")
        await agent.aclose()
        return posted

    posted = asyncio.run(scenario())
    assert posted.status is ToolStatus.SUCCESS
    assert posted.attempts == 1
    assert posts(data) == [("k", "hi")]
    assert len(started(data)) == 3  # the listing, the killed one, the restarted one


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    """The notes server over streamable HTTP on a free loopback port, behind a token."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        **os.environ,
        "NOTES_PORT": str(port),
        "NOTES_TOKEN": "t0ken",
        "NOTES_DB": str(tmp_path / "http.sqlite3"),
    }
    server = ROOT / "tests" / "mcp_servers" / "notes_server.py"
    process = subprocess.Popen([sys.executable, str(server)], env=env, stderr=subprocess.DEVNULL)
    try:
        for _ in range(3000):  # until it accepts connections (or has died)
            assert process.poll() is None, "the HTTP MCP server exited"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=0.05)  # paces the next try; ends if it exits
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)


def http_agent(tmp_path: Path, url: str) -> Path:
    """The test agent with its server reached over streamable HTTP, with a token header."""
    stdio = (
        "    command: [python, ../../mcp_servers/notes_server.py]\n"
        "    env:\n"
        '      NOTES_DB: "${NOTES_DB}"\n'
        '      NOTES_PIDS: "${NOTES_PIDS}"\n'
        '      NOTES_CRASH_AFTER_WRITE: "${NOTES_CRASH_FLAG}"\n'
    )
    http = f'    url: "{url}"\n    headers: {{X-Notes-Token: "Bearer ${{NOTES_TOKEN}}"}}\n'
    return variant(tmp_path, stdio, http)


def test_a_streamable_http_server_is_called_with_its_headers(
    tmp_path: Path, http_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOTES_TOKEN", "t0ken")  # ${NOTES_TOKEN}: not in deps, so from here
    agent = load_agent(http_agent(tmp_path, http_server), data_dir=tmp_path / "data")

    [note] = calls(agent, ("get_note", {"topic": "http"}))
    assert note.data == {"topic": "http", "text": "notes about http", "words": 3}


def test_a_streamable_http_server_refusing_the_token_fails_the_load(
    tmp_path: Path, http_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOTES_TOKEN", "wrong")
    with pytest.raises(ConfigInvalidError) as caught:
        load_agent(http_agent(tmp_path, http_server), data_dir=tmp_path / "data")
    assert "mcp server 'notes': cannot list its tools" in caught.value.message


ENDLESS = (
    "import socket, sys\n"
    "server = socket.create_server(('127.0.0.1', 0))\n"
    "print(server.getsockname()[1], flush=True)\n"
    "while True:\n"
    "    conn, _ = server.accept()\n"
    "    conn.recv(65536)\n"
    "    conn.sendall(b'HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\n'\n"
    "                 b'Transfer-Encoding: chunked\\r\\n\\r\\n')\n"
    "    try:\n"
    "        while True:\n"
    "            conn.sendall(b'1000\\r\\n' + b' ' * 4096 + b'\\r\\n')\n"
    "    except OSError:\n"
    "        conn.close()\n"
)


def test_an_mcp_server_answering_without_end_is_cut_off_at_the_cap(tmp_path: Path) -> None:
    """Found by a hostile review: over streamable HTTP an answer was read whole before
    corral saw it: an endless one grew to 1.3 GB until the deadline, 100 MB peaked at
    498 MB. It is cut off at ``MAX_ANSWER_BYTES`` as it streams (HTTP tools already were)."""
    import resource

    from corral import parse_config
    from corral.tools.mcp.capped import MAX_ANSWER_BYTES
    from tests.one_intent import one_intent

    script = tmp_path / "endless.py"
    script.write_text(ENDLESS, encoding="utf-8")
    server = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        url = f"http://127.0.0.1:{port}/mcp"
        servers = [{"name": "web", "url": url, "startup_timeout_s": 60, "tools": {"x": None}}]
        config = one_intent(
            "go", steps=[{"id": "s1", "tool": "x", "args": {}}], mcp_servers=servers
        )
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        with pytest.raises(ConfigInvalidError, match=f"over {MAX_ANSWER_BYTES} bytes"):
            Agent.build(parse_config(config), [])
        grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
        assert grown_mb < 200  # not the gigabyte an endless answer reached
    finally:
        server.kill()
        server.wait(timeout=30)
