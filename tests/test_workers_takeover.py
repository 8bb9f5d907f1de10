"""Losing a worker: another live worker takes its run over, and the write acts once.

Two real ``corral worker`` processes share a fresh PostgreSQL database. The run's one
step is a write that records each entry (time, process, idempotency key) and then
blocks while a flag file exists, so the test knows which worker is inside it when it
SIGKILLs that worker. The other worker's watcher finds the dead worker's lock free,
takes its pending workflow over, and re-enters the write with the same key; the
business table (UNIQUE key) gets one row, and the run's events have no gap.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from corral.store.registry import sql_target
from corral.store.sql import SqlStore
from corral.workers import names
from tests.extras import REQUIRE_ALL, import_extra
from tests.fleet import fleet, fresh_database, until, upgraded
from tests.helpers import corral_cli, write_agent

import_extra("dbos", REQUIRE_ALL)

from corral.workers.client import RunQueue  # noqa: E402

AGENT_YAML = """\
name: refunds
default_language: en
entities:
  order_id: {kind: pattern, patterns: ['\\b(A\\d+)\\b']}
intents:
  - name: refund
    rules: [{keywords: [refund], confidence: 0.95}]
    route: plan
    plan: refund
    requires: [order_id]
    reply: done
plans:
  refund:
    steps:
      - {id: s1, tool: refund, args: {order_id: $entities.order_id}}
templates:
  done: {zh: 好了, en: refunded}
"""

TOOLS_PY = """\
import os
import sqlite3
import time
from pathlib import Path

from pydantic import BaseModel

from corral import ToolContext, ToolPolicy, tool


class Done(BaseModel):
    order_id: str


@tool(policy=ToolPolicy(kind="write", idempotent=True, timeout_s=300))
def refund(order_id: str, ctx: ToolContext) -> Done:
    '''Refund an order once per idempotency key; waits while FLEET_DIR/hold exists.'''
    box = Path(os.environ["FLEET_DIR"])
    with (box / "entries").open("a", encoding="utf-8") as out:
        out.write(f"{time.time()} {os.getpid()} {ctx.idempotency_key}\\n")
    while (box / "hold").exists():
        time.sleep(0.02)
    with sqlite3.connect(box / "business.db") as db:
        db.execute("CREATE TABLE IF NOT EXISTS refunds (key TEXT UNIQUE, order_id TEXT)")
        db.execute("INSERT OR IGNORE INTO refunds VALUES (?, ?)", (ctx.idempotency_key, order_id))
    return Done(order_id=order_id)
"""

WAIT_S = 90.0
"""The most a step of the test waits for the workers (a loaded 2-core CI machine)."""


@dataclass(frozen=True)
class Entry:
    at: float
    pid: int
    key: str


def entries(box: Path) -> list[Entry]:
    """The write's entries, as the tool recorded them."""
    path = box / "entries"
    if not path.exists():
        return []
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        at, pid, key = line.split()
        found.append(Entry(float(at), int(pid), key))
    return found


def test_a_killed_workers_run_is_taken_over_by_the_other_and_its_write_acts_once(
    tmp_path: Path,
) -> None:
    home, box = tmp_path / "home", tmp_path / "box"
    box.mkdir()
    (box / "hold").touch()
    agent = write_agent(tmp_path / "refunds", AGENT_YAML, TOOLS_PY)
    with fresh_database("takeover") as url, fleet(home, upgraded(home, url)) as workers:
        workers.env["FLEET_DIR"] = str(box)
        started = {w: workers.start(w, agent, poll_s=0.5).pid for w in ("w-a", "w-b")}
        until(lambda: workers.live() == {"w-a", "w-b"}, WAIT_S, "two live workers")
        with RunQueue(url) as queue:
            run_id = queue.start("refunds", "refund A1")
            first = until(lambda: entries(box), WAIT_S, "the write to be entered")[0]
            dead = next(w for w, pid in started.items() if pid == first.pid)
            survivor = next(w for w in started if w != dead)
            workers.kill(dead)
            killed_at = time.time()
            second = until(lambda: entries(box)[1:], WAIT_S, "the write entered again")[0]
            print(f"takeover: {second.at - killed_at:.2f} s from SIGKILL to the write re-entered")
            status = until(
                lambda: (found := workers.workers())["recovered_total"] and found,
                WAIT_S,
                "the recovered run in `corral workers`",
            )
            (box / "hold").unlink()
            summary = queue.wait(names.workflow_id(run_id, 0), WAIT_S)
        assert f"took over 1 workflow(s) of executor {dead}" in workers.log(survivor)
        store = SqlStore.open(sql_target(url))
        events = store.load_events(run_id)
        store.engine.dispose()

    assert summary["status"] == "finished"
    # the other worker re-entered the write, with the same key: one business row
    assert second.pid == started[survivor] and second.key == first.key
    assert len(entries(box)) == 2
    with sqlite3.connect(box / "business.db") as db:
        assert db.execute("SELECT key FROM refunds").fetchall() == [(first.key,)]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))  # no event lost
    assert [e.type for e in events].count("run_finished") == 1
    # `corral workers` showed the survivor alone, driving the run it recovered
    assert [w["executor_id"] for w in status["workers"]] == [survivor]
    assert status["workers"][0]["in_flight"] == 1
    recovered = status["recovered"]
    assert [(r["run_id"], r["drive"], r["executor_id"]) for r in recovered] == [
        (run_id, 0, survivor)
    ]
    assert recovered[0]["dispatches"] >= 2


def test_a_second_worker_with_a_live_executor_id_refuses_to_start(tmp_path: Path) -> None:
    home = tmp_path / "home"
    agent = write_agent(tmp_path / "refunds", AGENT_YAML, TOOLS_PY)
    with fresh_database("dup") as url, fleet(home, upgraded(home, url)) as workers:
        workers.env["FLEET_DIR"] = str(tmp_path)
        workers.start("w-same", agent)
        until(lambda: workers.live() == {"w-same"}, WAIT_S, "the first worker")
        twin = ("worker", "--store", url, "--agent", str(agent), "--executor-id", "w-same")
        refused = corral_cli(home, *twin, ok=False, env={"FLEET_DIR": str(tmp_path)})
        assert refused.returncode == 2
        assert "WORKER_ID_IN_USE" in refused.stderr and "w-same" in refused.stderr
        assert workers.live() == {"w-same"}  # the first one goes on
        assert workers.procs["w-same"].poll() is None
