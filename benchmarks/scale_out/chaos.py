"""Chaos: SIGKILL a random worker during the exchange load, restart it, check the invariants.

    python benchmarks/scale_out/chaos.py --workers 2 --runs 100 --kills 3 --json

Starts its own PostgreSQL (``.ci/start-postgres.sh``; ``--pg-url`` uses a running server
instead, in fresh databases it drops afterwards), upgrades the store, starts ``--workers``
``corral worker`` processes and runs the load (``load.distributed``: each run started,
then approved as soon as it pauses for its confirmation). The ``--kills`` SIGKILLs are
spread over the load by progress (kill i when i/(kills+1) of the runs are done), each of a
random live worker that has drives in flight. The killed worker comes back after
``--restart-delay-s`` under a NEW executor id: nothing recovers the dead id's drives but
the takeover by another worker, which is what is measured: from the SIGKILL to the moment
none of the drives the dead worker had in flight (``PENDING`` with its executor id in
DBOS's ``workflow_status``) still carries its id.

Prints one JSON object (``--json``), its first keys fixed: runs, finished_or_waiting,
duplicate_effects, stuck, seq_gaps, takeover_s_max; the rest explain them.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg
from harness import (
    Databases,
    Pool,
    databases,
    invariants,
    plain,
    pool,
    postgres,
    ready,
    scratch,
    stop_on_sigterm,
    upgrade_store,
    wait_ready,
)
from load import distributed


@dataclass
class Takeover:
    """One SIGKILL: the drives its worker had in flight, and when others had them all."""

    executor_id: str
    killed_at: float
    in_flight: list[str]
    taken_s: float | None = None
    by: dict[str, int] = field(default_factory=dict)


@dataclass
class Chaos:
    """Kills and restarts workers as the load progresses; ``tick`` is called every poll."""

    workers: Pool
    conn: psycopg.Connection[Any]
    schema: str
    runs: int
    kills: int
    restart_delay_s: float
    rng: random.Random
    takeovers: list[Takeover] = field(default_factory=list)
    restarts: list[tuple[float, str]] = field(default_factory=list)
    starting: set[str] = field(default_factory=set)
    """Executor ids restarted but not yet holding their liveness connection."""

    def tick(self, done: int) -> None:
        now = time.monotonic()
        for when, slot in list(self.restarts):
            if now >= when:
                self.restarts.remove((when, slot))
                self.starting.add(self.workers.start(slot).executor_id)
        self._follow()
        if self.starting:
            self.starting -= ready(self.conn, self.starting)
        due = len(self.takeovers) < self.kills and done >= self.runs * (len(self.takeovers) + 1) / (
            self.kills + 1
        )
        # one worker down at a time: the others are up, so a live one can take over
        if due and not self.restarts and not self.starting and not self._open():
            self._kill()

    def _open(self) -> bool:
        return any(t.taken_s is None for t in self.takeovers)

    def _in_flight(self, executor_ids: list[str]) -> dict[str, list[str]]:
        """The drives these executors hold: dequeued by them and not ended.

        ``ENQUEUED`` too: a takeover re-enqueues a dead executor's drive (keeping its id
        until a live worker dequeues it), which may happen right after the kill.
        """
        rows = self.conn.execute(
            f"SELECT executor_id, workflow_uuid FROM {self.schema}.workflow_status "
            "WHERE status IN ('PENDING', 'ENQUEUED') AND executor_id = ANY(%s)",
            (executor_ids,),
        ).fetchall()
        found: dict[str, list[str]] = {}
        for executor, workflow in rows:
            found.setdefault(executor, []).append(workflow)
        return found

    def _kill(self) -> None:
        live = {w.executor_id: slot for slot, w in self.workers.workers.items()}
        busy = self._in_flight(list(live))
        slot = live[self.rng.choice(sorted(busy or live))]
        killed_at = time.monotonic()
        worker = self.workers.kill(slot)
        # what it had in flight at its death: read after the kill, so nothing moves on
        flight = self._in_flight([worker.executor_id]).get(worker.executor_id, [])
        self.takeovers.append(Takeover(worker.executor_id, killed_at, flight))
        self.restarts.append((killed_at + self.restart_delay_s, slot))
        self._follow()

    def _follow(self) -> None:
        for takeover in self.takeovers:
            if takeover.taken_s is not None:
                continue
            rows = self.conn.execute(
                f"SELECT executor_id FROM {self.schema}.workflow_status "
                "WHERE workflow_uuid = ANY(%s)",
                (takeover.in_flight,),
            ).fetchall()
            if all(row[0] != takeover.executor_id for row in rows):
                takeover.taken_s = time.monotonic() - takeover.killed_at
                for (executor,) in rows:
                    takeover.by[executor] = takeover.by.get(executor, 0) + 1

    def settle(self, timeout_s: float) -> None:
        """Follow the takeovers still open after the load, for up to ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while self._open() and time.monotonic() < deadline:
            self._follow()
            time.sleep(0.05)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The whole chaos run; its JSON result."""
    from corral.workers.client import RunQueue
    from corral.workers.names import SYSTEM_SCHEMA

    stop_on_sigterm()
    with (
        postgres(args.pg_url) as server,
        databases(server, "chaos") as dbs,
        scratch(args.keep) as folder,
        pool(dbs, folder, args.takeover_poll_s) as workers,
    ):
        upgrade_store(dbs.store_url, folder / "home", dbs.business_url)
        slots = [f"w{i}" for i in range(args.workers)]
        wait_ready(dbs.store_url, [workers.start(slot).executor_id for slot in slots])
        with (
            RunQueue(dbs.store_url) as queue,
            psycopg.connect(plain(dbs.store_url), autocommit=True) as conn,
        ):
            chaos = Chaos(
                workers,
                conn,
                SYSTEM_SCHEMA,
                args.runs,
                args.kills,
                args.restart_delay_s,
                random.Random(args.seed),
            )
            outcome = distributed(
                queue,
                dbs.store_url,
                args.runs,
                args.inflight or 8 * args.workers,
                args.drain_timeout_s,
                on_poll=chaos.tick,
            )
            chaos.settle(args.drain_timeout_s)
        return _result(dbs, outcome, chaos)


def _result(dbs: Databases, outcome: Any, chaos: Chaos) -> dict[str, Any]:
    checks = invariants(dbs, outcome.run_ids, outcome.approved)
    taken = [t.taken_s for t in chaos.takeovers]
    finished_takeovers = [s for s in taken if s is not None]
    head = {key: checks.pop(key) for key in ("runs", "finished_or_waiting")}
    head |= {key: checks.pop(key) for key in ("duplicate_effects", "stuck", "seq_gaps")}
    head["takeover_s_max"] = round(max(finished_takeovers), 3) if finished_takeovers else None
    return {
        **head,
        "kills": len(chaos.takeovers),
        "takeovers": [
            {
                "executor_id": t.executor_id,
                "in_flight": len(t.in_flight),
                "taken_s": None if t.taken_s is None else round(t.taken_s, 3),
                "by": t.by,
            }
            for t in chaos.takeovers
        ],
        "takeovers_open": sum(1 for s in taken if s is None),
        **checks,
        "reentries": checks["write_entries"] - checks["exchange_orders"],
        "drive_errors": outcome.drive_errors,
        "drained": outcome.drained,
        "load_s": round(outcome.elapsed_s, 2),
    }


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--inflight", type=int, default=0, help="runs in flight (8 per worker)")
    parser.add_argument("--restart-delay-s", type=float, default=2.0)
    parser.add_argument("--drain-timeout-s", type=float, default=90.0)
    parser.add_argument("--takeover-poll-s", type=float, default=None)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--pg-url", help="a running PostgreSQL (fresh databases, dropped after)")
    parser.add_argument("--keep", action="store_true", help="keep the worker logs' folder")
    return parser.parse_args(argv)


def main() -> None:
    args = parse()
    began = time.monotonic()
    result = run(args)
    result["total_s"] = round(time.monotonic() - began, 1)
    if args.json:
        print(json.dumps(result))
        return
    for key, value in result.items():
        print(f"{key:>22}: {value}")


if __name__ == "__main__":
    main()
