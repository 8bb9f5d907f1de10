"""A tool's rate limit holds across workers: never more calls in any window than it allows.

Many runs of one agent go to two real ``corral worker`` processes; their one step calls
a tool limited to 5 calls per second, which records the moment of each call (and its
process) inside itself. However the runs spread over the workers, no second-long
window holds more than 5 calls.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from corral import RateLimit, ToolPolicy
from corral.config import ToolPolicyConfig
from corral.events import Event
from corral.store.sql import SqlStore
from tests.extras import REQUIRE_ALL, import_extra
from tests.helpers import write_agent
from tests.workers_support import sql, until, worker_pool

import_extra("dbos", REQUIRE_ALL)

from corral.workers import names  # noqa: E402
from corral.workers.client import RunQueue  # noqa: E402

AGENT_YAML = """\
name: quotes
default_language: en
workers: {worker_concurrency: 3}
entities:
  order_id: {kind: pattern, patterns: ['\\b(A\\d+)\\b']}
intents:
  - name: quote
    rules: [{keywords: [quote], confidence: 0.95}]
    route: plan
    plan: quote
    requires: [order_id]
    reply: done
plans:
  quote:
    steps:
      - {id: s1, tool: quote, args: {order_id: $entities.order_id}}
templates:
  done: {zh: 好了, en: quoted}
"""

TOOLS_PY = """\
import os
import time
from pathlib import Path

from pydantic import BaseModel

from corral import RateLimit, ToolPolicy, tool


class Quote(BaseModel):
    order_id: str


@tool(policy=ToolPolicy(rate_limit=RateLimit(calls=5, per_s=1.0)))
def quote(order_id: str) -> Quote:
    '''A quote from an API that allows 5 calls a second; notes when it was called.'''
    with (Path(os.environ["FLEET_DIR"]) / "calls").open("a", encoding="utf-8") as out:
        out.write(f"{time.time()} {os.getpid()}\\n")
    return Quote(order_id=order_id)
"""

STATUS = "SELECT status, recovery_attempts FROM dbos.workflow_status WHERE workflow_uuid = %s"
RUNS = 16
LIMIT, PER_S = 5, 1.0


def test_a_limited_tool_called_from_two_workers_never_exceeds_its_limit(tmp_path: Path) -> None:
    box = tmp_path / "box"
    box.mkdir()
    agent = write_agent(tmp_path / "quotes", AGENT_YAML, TOOLS_PY)
    with worker_pool(tmp_path) as pool:
        pool.env["FLEET_DIR"] = str(box)
        pool.env["COLUMNS"] = "40"  # a narrow log: the ready line must not be wrapped
        pool.start("w-1", agent)
        pool.start("w-2", agent)
        # each says so once its queues are declared (DBOS logs only the one that inserts a
        # queue: waiting for DBOS's line timed out when the other worker declared it first)
        ready = f"ready, listening to {names.agent_queue('quotes')}, " + names.tool_queue(
            "quotes", "quote"
        )
        until(lambda: all(ready in pool.log(w) for w in ("w-1", "w-2")), "both workers", 90)
        with RunQueue(pool.store_url) as queue:
            runs = [queue.start("quotes", f"quote A{i}") for i in range(RUNS)]
            summaries = [queue.wait(names.workflow_id(run, 0), 120.0) for run in runs]
        until(lambda: (box / "calls").exists(), "the calls")
    calls = [line.split() for line in (box / "calls").read_text().splitlines()]
    times = sorted(float(at) for at, _ in calls)
    assert [s["status"] for s in summaries] == ["finished"] * RUNS
    assert len(times) == RUNS  # each run called it once
    assert len({pid for _, pid in calls}) == 2  # from both workers
    busiest = max(sum(1 for t in times if start <= t < start + PER_S) for start in times)
    print(f"rate limit: {RUNS} calls in {times[-1] - times[0]:.2f} s, busiest second {busiest}")
    assert busiest <= LIMIT


def test_a_rate_limit_is_declared_in_a_policy_block_or_in_python() -> None:
    declared = ToolPolicyConfig.model_validate({"rate_limit": {"calls": 5, "per_s": 1.0}})
    assert declared.to_policy().rate_limit == RateLimit(5, 1.0)
    assert ToolPolicyConfig().to_policy().rate_limit is None
    for wrong in ({"calls": 0, "per_s": 1}, {"calls": 5, "per_s": 0}, {"calls": "5", "per_s": 1}):
        with pytest.raises(ValidationError):
            ToolPolicyConfig.model_validate({"rate_limit": wrong})
    assert ToolPolicy(rate_limit=RateLimit(2, 0.5)).rate_limit == RateLimit(2, 0.5)
    for calls, per_s in ((0, 1.0), (True, 1.0), (3, 0.0), (3, float("inf"))):
        with pytest.raises(ValueError, match="rate limit"):
            RateLimit(calls, per_s)


def events_of(url: str, run_id: str) -> list[Event]:
    store = SqlStore.open(url)
    try:
        return store.load_events(run_id)
    finally:
        store.engine.dispose()


def test_a_limited_call_executed_again_asks_no_new_permit_and_calls_nothing(
    tmp_path: Path,
) -> None:
    """The permit and its answer are recorded: a re-execution replays them, in order."""
    box = tmp_path / "box"
    box.mkdir()
    agent = write_agent(tmp_path / "quotes", AGENT_YAML, TOOLS_PY)
    permits = f"SELECT count(*) FROM dbos.workflow_status WHERE name = '{names.PERMIT_WORKFLOW}'"
    with worker_pool(tmp_path) as pool:
        pool.env["FLEET_DIR"] = str(box)
        worker = pool.start("w-1", agent)
        with RunQueue(pool.store_url) as queue:
            run_id = queue.start("quotes", "quote A1")
            drive = names.workflow_id(run_id, 0)
            assert queue.wait(drive, 60.0)["status"] == "finished"
            before = events_of(pool.store_url, run_id)
            asked = sql(pool.store_url, permits)  # one, or more if one came too late to use
            pool.stop(worker)
            sql(
                pool.store_url,
                "UPDATE dbos.workflow_status SET status = 'PENDING' WHERE workflow_uuid = %s",
                drive,
            )
            pool.start("w-1", agent)  # recovers its own pending drive at launch
            until(lambda: sql(pool.store_url, STATUS, drive) == [("SUCCESS", 2)], "re-run")
            assert queue.wait(drive, 60.0)["status"] == "finished"
        after = events_of(pool.store_url, run_id)
        assert sql(pool.store_url, permits) == asked  # no new permit
    assert len((box / "calls").read_text().splitlines()) == 1  # the tool was not called again
    assert [(e.seq, e.type, e.payload) for e in after] == [
        (e.seq, e.type, e.payload) for e in before
    ]


def test_a_step_that_finds_its_permit_too_old_calls_nothing_and_gets_another() -> None:
    """The path a drive takes when it is run again long after its permit (a takeover)."""
    import asyncio
    import time

    from corral.workers.permits import EXPIRED, Permits, expired

    granted: list[float] = []

    class Handle:
        async def get_result(self, polling_interval_sec: float) -> float:
            granted.append(time.time() - (10.0 if not granted else 0.0))  # the first: stale
            return granted[-1]

    class Queue:
        async def enqueue_async(self, workflow: object) -> Handle:
            return Handle()

    async def permit() -> float:
        return 0.0

    permits = Permits({names.tool_queue("quotes", "quote"): RateLimit(5, 1.0)})
    permits.queues[names.tool_queue("quotes", "quote")] = Queue()  # type: ignore[assignment]
    permits._workflow = permit
    permits.declared.set()
    seen: list[float | None] = []

    async def step(use_by: float | None) -> dict[str, object]:
        seen.append(use_by)
        return EXPIRED if expired(use_by) else {"data": 1}

    assert asyncio.run(permits.call("quotes", "quote", step)) == {"data": 1}
    assert len(granted) == 2 and len(seen) == 2
    # each deadline is the permit's age on the database's clock (here: this process's)
    # taken from the monotonic clock: the stale one was past, the fresh one is not yet
    assert seen[0] is not None and seen[0] < time.monotonic() - 9  # the stale one: past
    assert seen[1] is not None and seen[1] - seen[0] >= 10  # the fresh one: 10 s later
    assert asyncio.run(permits.call("quotes", "unlimited", step)) == {"data": 1}
    assert seen[-1] is None  # an unlimited tool asks for no permit
    assert not expired(None) and expired(time.monotonic() - 1)
    assert not expired(time.monotonic() + 1)


def test_the_permit_is_checked_again_where_the_tool_runs() -> None:
    """A thread that starts late (a busy machine) finds its permit too old and calls nothing."""
    import asyncio
    import time

    from corral.tools.spec import tool
    from corral.workers.permits import PermitExpiredError, checked

    called: list[str] = []

    @tool
    def quote(order_id: str) -> str:
        """A quote."""
        called.append(order_id)
        return order_id

    @tool
    async def aquote(order_id: str) -> str:
        """A quote, async."""
        called.append(order_id)
        return order_id

    for spec in (quote, aquote):
        fresh = checked(spec, time.monotonic() + 60)
        stale = checked(spec, time.monotonic() - 1)
        assert fresh.is_async == spec.is_async and fresh.name == spec.name
        result = fresh.fn(order_id="A1")
        assert (asyncio.run(result) if spec.is_async else result) == "A1"
        with pytest.raises(PermitExpiredError):
            stale_call = stale.fn(order_id="A2")
            if spec.is_async:
                asyncio.run(stale_call)
    assert called == ["A1", "A1"]


SKEWED_CLOCK = """\
import time

_wall = time.time
time.time = lambda: _wall() + {skew}  # this worker's clock runs ahead of the database's
"""


def test_a_worker_whose_clock_runs_ahead_of_the_databases_still_calls_a_limited_tool(
    tmp_path: Path,
) -> None:
    """A permit's age is read on the database's clock, not by comparing two machines' clocks.

    Its dequeue time is the database's; a worker whose own clock ran 1 s ahead found every
    permit too old, asked for another without end (each spent from the tool's shared
    budget), and its drive never called the tool.
    """
    import os

    box = tmp_path / "box"
    box.mkdir()
    (tmp_path / "skew").mkdir()
    (tmp_path / "skew" / "sitecustomize.py").write_text(SKEWED_CLOCK.format(skew=1.0))
    agent = write_agent(tmp_path / "quotes", AGENT_YAML, TOOLS_PY)
    permits = f"SELECT count(*) FROM dbos.workflow_status WHERE name = '{names.PERMIT_WORKFLOW}'"
    with worker_pool(tmp_path) as pool:
        pool.env["FLEET_DIR"] = str(box)
        paths = [str(tmp_path / "skew"), os.environ.get("PYTHONPATH", "")]
        pool.env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
        pool.start("w-ahead", agent)
        with RunQueue(pool.store_url) as queue:
            run_id = queue.start("quotes", "quote A1")
            summary = queue.wait(names.workflow_id(run_id, 0), 60.0)
            asked = sql(pool.store_url, permits)[0][0]
    assert summary["status"] == "finished"
    assert len((box / "calls").read_text().splitlines()) == 1
    assert asked <= 2  # not a permit after permit, each spent from the shared budget
