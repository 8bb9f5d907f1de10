"""``corral stats`` on a store of 100 000 runs: SQL over the projection against a Python fold.

    .venv/bin/python benchmarks/stats_scale.py [--runs 100000] [--sample 2000] [--home DIR]

1. Makes ``--sample`` runs (seeded mix: successes, partial completions, handoffs after a
   failed tool with its error code, failures, paused and resumed runs, model calls with
   tokens and cost) and saves each through ``SqlStore.save``, one or two saves per run
   as the runtime does, so rows, plan bodies and projection are the store's own; and
   again into a bare store with the projection switched off, for what it costs a save.
2. Copies them in SQL (``INSERT ... SELECT`` with new run ids) up to ``--runs``: the rows
   are byte for byte what ``save`` wrote, only the ids differ.
3. Times ``corral stats --json --home H`` in a subprocess (as a user runs it, Python's
   start included), the in-process ``run_stats`` and ``run_stats(since=7 days)``, each the
   median of ``--repeat`` runs; and the baseline: the naive Python fold (load every run's
   events, take its facts, aggregate) on the sample, extrapolated to ``--runs``.

It checks that the SQL figures of the sample equal the fold's before timing anything.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast
from unittest import mock

from sqlalchemy import text

from corral import Event, EventType, SqlStore
from corral.observe.stats import RunStats, run_stats
from corral.store import projection, sql
from corral.store.base import RunRecord, Store
from corral.store.projection import TABLES

TOOLS = ("query_order", "query_policy", "check_evidence", "create_exchange")
CODES = ("TOOL_TIMEOUT", "TOOL_FAILED", "RATE_LIMITED")
INTENTS = ("申请换新", "查询订单", "退款进度")


class RunMaker:
    """Builds one run's events and rows at known times, seeded."""

    def __init__(self, rng: random.Random, now: datetime) -> None:
        self.rng = rng
        self.now = now

    def make(self, index: int) -> list[tuple[RunRecord, list[Event]]]:
        """The saves of run ``index``: (row, events) once, or twice around a pause."""
        rng = self.rng
        rid = f"run_{index:08d}"
        trace = f"trace_{index:08d}"
        start = self.now - timedelta(seconds=rng.uniform(0, 30 * 86400))
        intent = rng.choice(INTENTS)
        kind = rng.choices(
            ("success", "partial", "handoff", "failed", "paused", "resumed"),
            weights=(60, 8, 12, 4, 6, 10),
        )[0]
        clock = [start]
        events: list[Event] = []

        def emit(kind_: EventType, stage: str, data: dict[str, Any], ms: float = 1.0) -> None:
            clock[0] += timedelta(milliseconds=ms * rng.uniform(0.5, 2.0))
            events.append(Event(rid, len(events) + 1, clock[0], kind_, stage, data=data))

        started = {"trace_id": trace, "agent": "aftersales", "received_at": start.isoformat()}
        emit(EventType.RUN_STARTED, "run", {**started, "language": "zh"}, 0.1)
        emit(EventType.USER_MESSAGE, "intent", {"text": f"订单 HD{index:08d} 能换新吗"}, 0.1)
        if rng.random() < 0.3:
            tokens = {"prompt_tokens": rng.randint(200, 900), "completion_tokens": 40}
            call = {"purpose": "extract", "model": "deepseek-chat", "fingerprint": "f"}
            call |= {"attempt": 1, "status": "ok", "usage": tokens, "latency_ms": 400.0}
            emit(EventType.MODEL_CALL, "intent", {**call, "cost": 0.0004}, 400)
        result = {"label": intent, "confidence": 0.92, "source": "rule"}
        emit(EventType.INTENT_CLASSIFIED, "intent", {"text": "t", "result": result}, 3)
        decision = {"action": "plan", "intent": intent, "template": "exchange"}
        emit(EventType.ROUTED, "route", {"decision": decision}, 0.2)
        emit(EventType.STATUS_CHANGED, "run", {"from": "parsing", "to": "planning"}, 0.05)
        steps = [{"id": f"s{i + 1}", "tool": t, "args": {}} for i, t in enumerate(TOOLS[:3])]
        plan = {"plan_id": f"plan_{index}", "intent": intent, "steps": steps}
        emit(EventType.PLAN_CREATED, "plan", {"plan": {**plan, "template": "exchange"}}, 0.5)
        emit(EventType.STATUS_CHANGED, "run", {"from": "planning", "to": "executing"}, 0.05)
        briefs = []
        failing = kind in ("partial", "handoff", "failed")
        for number, step in enumerate(steps, 1):
            last = number == len(steps)
            fails = failing and last
            emit(EventType.STEP_STARTED, "execute", {"step_id": step["id"], "tool": step["tool"]})
            tries = 2 if fails and rng.random() < 0.5 else 1
            for attempt in range(1, tries + 1):
                took = rng.lognormvariate(1.5, 0.6)
                code = rng.choice(CODES) if fails else None
                status = "error" if fails else "success"
                record = {"step_id": step["id"], "tool": step["tool"], "attempt": attempt}
                record |= {"status": status, "duration_ms": round(took, 3), "error_code": code}
                emit(EventType.TOOL_ATTEMPT, "execute", record, took)
            brief = {"id": step["id"], "tool": step["tool"], "attempts": tries}
            brief |= {"status": "failed" if fails else "succeeded", "duration_ms": 1.0}
            briefs.append({**brief, "error_code": code if fails else None})
            emit(
                EventType.STEP_FINISHED,
                "execute",
                {"step_id": step["id"], "status": "failed" if fails else "succeeded"},
            )
        saves: list[tuple[RunRecord, list[Event]]] = []

        def save(status: str, outcome: str | None, code: str | None) -> None:
            summary = {
                "run_id": rid,
                "trace_id": trace,
                "status": status,
                "intent": result,
                "steps": briefs,
                "reply": "好的" if outcome else None,
                "pending": None,
                "outcome": outcome,
                "error_code": code,
            }
            record = RunRecord(rid, trace, "aftersales", None, status, start, clock[0], summary)
            done = sum(len(batch) for _, batch in saves)
            saves.append((record, events[done:]))

        def end(status: str, outcome: str, code: str | None = None) -> None:
            emit(EventType.REPLY, "reply", {"text": "好的", "template": outcome}, 0.3)
            emit(EventType.STATUS_CHANGED, "run", {"from": "executing", "to": status}, 0.05)
            emit(
                EventType.RUN_FINISHED,
                "run",
                {"status": status, "outcome": outcome, "error_code": code},
                0.05,
            )
            save(status, outcome, code)

        if kind in ("paused", "resumed"):
            emit(EventType.STATUS_CHANGED, "run", {"from": "executing", "to": "awaiting_confirm"})
            save("awaiting_confirm", None, None)
            if kind == "resumed":
                clock[0] += timedelta(minutes=rng.uniform(1, 60))
                emit(EventType.CONFIRMATION_GIVEN, "decide", {"step_id": "s4", "approved": True})
                emit(
                    EventType.STATUS_CHANGED, "run", {"from": "awaiting_confirm", "to": "executing"}
                )
                end("finished", "success")
        elif kind == "success":
            end("finished", "success")
        elif kind == "partial":
            end("finished", "partial")
        elif kind == "handoff":
            code = briefs[-1]["error_code"]
            end("handed_off", "handoff", code)
        else:
            end("failed", "failed", briefs[-1]["error_code"])
        return saves


def generate(store: SqlStore, sample: int, seed: int) -> float:
    """Save ``sample`` runs through ``SqlStore.save``; returns the seconds it took."""
    maker = RunMaker(random.Random(seed), datetime.now(UTC))
    begin = time.perf_counter()
    for index in range(sample):
        for record, batch in maker.make(index):
            store.save(record, batch)
    return time.perf_counter() - begin


def replicate(store: SqlStore, sample: int, runs: int) -> float:
    """Copy the sample's rows in SQL, with new run ids, until the store holds ``runs``."""
    begin = time.perf_counter()
    columns = {
        table.name: ", ".join(c.name for c in table.columns if c.name != "run_id")
        for table in (sql.runs, sql.events, *TABLES)
    }
    with store.engine.begin() as conn:
        for copy in range(1, (runs - 1) // sample + 1):
            wanted = min(sample, runs - copy * sample)
            for table, rest in columns.items():
                conn.execute(
                    text(
                        f"INSERT INTO {table} (run_id, {rest}) "
                        f"SELECT run_id || '_c{copy}', {rest} FROM {table} "
                        f"WHERE run_id < :bound AND run_id NOT LIKE '%\\_c%' ESCAPE '\\'"
                    ),
                    {"bound": f"run_{wanted:08d}"},
                )
    return time.perf_counter() - begin


class Folding:
    """The store's sample seen without its SQL figures: ``run_stats`` then folds events.

    The baseline: every run's events loaded and folded in Python (``run_stats`` on a
    store without ``figures``), the way stats would be made without the projection.
    """

    blocking = True

    def __init__(self, store: SqlStore) -> None:
        self.store = store

    def list_runs(self, limit: int = 50) -> list[RunRecord]:
        return [r for r in self.store.list_runs(limit) if "_c" not in r.run_id]

    def load_events(self, run_id: str) -> list[Event]:
        return self.store.load_events(run_id)


def naive(store: SqlStore) -> tuple[float, RunStats]:
    """The baseline on the sample: (seconds, its stats)."""
    begin = time.perf_counter()
    report = run_stats(cast(Store, Folding(store)))
    return time.perf_counter() - begin, report


def median_time(action: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        begin = time.perf_counter()
        action()
        times.append(time.perf_counter() - begin)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--sample", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--home", type=Path, help="Keep the generated home here")
    args = parser.parse_args()
    home = args.home or Path(tempfile.mkdtemp(prefix="corral-stats-"))
    home.mkdir(parents=True, exist_ok=True)
    store = SqlStore.open(home / "corral.db")
    save_s = generate(store, args.sample, args.seed)
    with mock.patch.object(projection, "record", lambda *_: None):  # the projection off
        bare = SqlStore.open(Path(tempfile.mkdtemp(prefix="corral-bare-")) / "corral.db")
        bare_s = generate(bare, args.sample, args.seed)
    fold_s, folded = naive(store)
    assert run_stats(store) == folded, "the SQL figures differ from the Python fold's"
    copy_s = replicate(store, args.sample, args.runs)
    with store.engine.begin() as conn:
        total = conn.execute(text("SELECT count(*) FROM corral_runs")).scalar_one()
        events = conn.execute(text("SELECT count(*) FROM corral_events")).scalar_one()
    report = run_stats(store)
    assert report.runs == total == args.runs, (report.runs, total)
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    command = [sys.executable, "-m", "corral", "stats", "--json", "--home", str(home)]

    def cli() -> None:
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
        assert json.loads(done.stdout)["runs"] == args.runs

    startup = [sys.executable, "-m", "corral", "--version"]
    rows = [
        ("save the sample (SqlStore.save, per run)", save_s / args.sample * 1000, "ms/run"),
        ("  the same without the projection", bare_s / args.sample * 1000, "ms/run"),
        ("copy up to --runs in SQL", copy_s, "s"),
        ("corral stats --json (subprocess)", median_time(cli, args.repeat), "s"),
        (
            "  of which Python + corral start",
            median_time(
                lambda: subprocess.run(startup, capture_output=True, env=env, check=True),
                args.repeat,
            ),
            "s",
        ),
        ("run_stats(store), in process", median_time(lambda: run_stats(store), args.repeat), "s"),
        (
            "run_stats(store, since=7 days ago)",
            median_time(
                lambda: run_stats(store, since=datetime.now(UTC) - timedelta(days=7)),
                args.repeat,
            ),
            "s",
        ),
        (f"baseline: Python fold of {args.sample} runs", fold_s, "s"),
        (f"baseline extrapolated to {args.runs} runs", fold_s * args.runs / args.sample, "s"),
    ]
    print(f"store: {home / 'corral.db'} ({total} runs, {events} events)")
    print(f"{'measure':48} {'value':>10}")
    for name, value, unit in rows:
        print(f"{name:48} {value:>10.3f} {unit}")
    sql_s = rows[5][1]
    print(f"speed-up of run_stats over the fold: {fold_s * args.runs / args.sample / sql_s:.0f}x")


if __name__ == "__main__":
    main()
