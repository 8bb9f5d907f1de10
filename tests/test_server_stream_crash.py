"""A client following a run over SSE when its server dies before saving what it sent.

``corral serve`` streams a live run's events as they are applied; the store gets them at
the next durability point. SIGKILL the server in between, resume the run on a second
server over the same home, and the events after the last save are written again under
the same ``seq`` numbers. The client reconnects with the ``Last-Event-ID`` it last saw:
what it ends up holding must be the run's log, not a mix of the dead drive's events and
the new one's.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import httpx

from tests.serving import followed_until_started, seq_of, sse
from tests.test_server_cli import corral_serve

AGENT = """\
name: relay
default_language: en
intents:
  - name: go
    rules:
      - {keywords: [go], confidence: 0.95}
    route: plan
    plan: p
    reply: done
plans:
  p:
    steps:
      - {id: s1, tool: mark, args: {n: 1}}
      - {id: s2, tool: hold, args: {n: 2}, depends_on: [s1]}
templates:
  done: {zh: "完成", en: "done"}
"""

TOOLS = '''\
"""A write saved before it is entered, then a read that waits for the test's file."""

import asyncio
import os
from pathlib import Path

from pydantic import BaseModel

from corral import ToolPolicy, tool


class Value(BaseModel):
    value: int


@tool(policy=ToolPolicy(kind="write", idempotent=True))
def mark(n: int) -> Value:
    """A write that finds its own effect: the resume may enter it again."""
    return Value(value=n)


@tool
async def hold(n: int) -> Value:
    """Wait (under the tool's timeout) until the file ``RELAY_RELEASE`` names exists."""
    release = Path(os.environ["RELAY_RELEASE"])
    for _ in range(800):
        if release.exists():
            return Value(value=n)
        await asyncio.sleep(0.01)
    raise RuntimeError("the test never released the step")
'''


def relay_agent(folder: Path) -> Path:
    folder.mkdir()
    (folder / "agent.yaml").write_text(AGENT, encoding="utf-8")
    (folder / "tools.py").write_text(textwrap.dedent(TOOLS), encoding="utf-8")
    return folder


def held_after(held: list[dict[str, Any]], messages: list[dict[str, str]]) -> list[dict[str, Any]]:
    """What a client holds once it has read ``messages``: a reset drops what follows its seq."""
    held = list(held)
    for message in messages:
        data = json.loads(message["data"])
        if message["event"] == "reset":
            held = [event for event in held if event["seq"] <= data["after_seq"]]
        elif message["event"] == "event":
            assert seq_of(message) == data["seq"]
            held.append(data)
    return held


def test_a_client_of_a_server_killed_before_its_save_ends_up_with_the_runs_log(
    tmp_path: Path,
) -> None:
    home, agent = tmp_path / "home", relay_agent(tmp_path / "relay")
    release = tmp_path / "release"
    env = {"CORRAL_API_TOKEN": "T", "RELAY_RELEASE": str(release)}
    auth = {"Authorization": "Bearer T"}

    with corral_serve(home, agent, env=env) as (base, server):
        with httpx.Client(base_url=base, headers=auth, timeout=60) as http:
            # s2 waits for the release file: its server dies there
            run_id, seen = followed_until_started(http, "relay", "s2")
        server.kill()
        server.wait(timeout=30)
    held = held_after([], seen)
    release.touch()

    with (
        corral_serve(home, agent, env=env) as (base, _),
        httpx.Client(base_url=base, headers=auth, timeout=60) as http,
    ):
        saved = http.get(f"/runs/{run_id}/events").json()["events"]
        # the case this test is about: the dead server sent events it never saved
        assert saved[-1]["seq"] < held[-1]["seq"]
        # before any resume: the lease's owner is a process of this host that is gone,
        # so nobody drives the run and the client is told its copy diverged
        with http.stream(
            "GET", f"/runs/{run_id}/stream", headers={"Last-Event-ID": seen[-1]["id"]}
        ) as answer:
            orphaned = list(sse(answer.iter_lines()))
        assert orphaned[0]["event"] == "reset"
        assert held_after(held, orphaned) == saved
        resumed = http.post(f"/runs/{run_id}/resume", json={})
        assert resumed.status_code == 200, resumed.text
        assert resumed.json()["status"] == "finished"
        with http.stream(
            "GET", f"/runs/{run_id}/stream", headers={"Last-Event-ID": seen[-1]["id"]}
        ) as answer:
            again = list(sse(answer.iter_lines()))
        log = http.get(f"/runs/{run_id}/events").json()["events"]

    # the resume wrote the lost seqs again: the client's copy of them is stale
    rewritten = [e for e in held if e["seq"] > saved[-1]["seq"]]
    assert rewritten and all(e != log[e["seq"] - 1] for e in rewritten)
    assert again[0]["event"] == "reset"
    assert again[-1]["event"] == "summary"
    assert json.loads(again[-1]["data"])["status"] == "finished"
    assert held_after(held, again) == log
