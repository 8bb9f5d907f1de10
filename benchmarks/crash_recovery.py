"""SIGKILL at every named durability point, then recovery: what survives, what repeats.

For each crash point (``corral.runtime.faults.POINTS``) and each round: pause a run of the
ledger test agent at its confirmation, approve it in a process that is SIGKILLed at that
point, then recover with a plain ``corral resume RUN`` (or the approval again when the
crash lost it). Counted: runs that end ``finished``, write effects made more than once,
and events of the store missing from ``logs/RUN.jsonl``.

    .venv/bin/python benchmarks/crash_recovery.py [--rounds 5]

The baseline row of each point is the state right after the crash, before recovery.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from corral.runtime.faults import POINTS
from corral.store.sql import SqlStore

ROOT = Path(__file__).resolve().parents[1]
LEDGER = ROOT / "tests" / "agents" / "ledger"


def corral(home: Path, *args: str, faults: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CORRAL_FAULTS": faults, "LEDGER_WRITE_S": "0"}
    command = [sys.executable, "-m", "corral", *args, "--home", str(home)]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def state(home: Path, run_id: str) -> tuple[bool, int, int]:
    """(finished, duplicated effects, store events missing from the JSONL log)."""
    events = SqlStore.open(home / "corral.db", read_only=True).load_events(run_id)
    finished = any(e.type.value == "run_finished" for e in events)
    effects_log = home / "data" / "ledger" / "effects.log"
    effects = effects_log.read_text().split() if effects_log.exists() else []
    log = home / "logs" / f"{run_id}.jsonl"
    logged: set[int] = set()
    if log.exists():
        for line in log.read_text(encoding="utf-8").splitlines():
            try:
                logged.add(int(json.loads(line)["seq"]))
            except (ValueError, KeyError, TypeError):
                continue
    missing = sum(1 for e in events if e.seq not in logged)
    return finished, len(effects) - len(set(effects)), missing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    table = Table(title=f"SIGKILL at each durability point, {args.rounds} runs each")
    for column in ("crash point", "when", "runs finished", "duplicate effects", "JSONL missing"):
        table.add_column(column)
    for point in POINTS:
        after_crash = [0, 0, 0]
        recovered = [0, 0, 0]
        for _ in range(args.rounds):
            home = Path(tempfile.mkdtemp(prefix="corral-crash-"))
            paused = json.loads(corral(home, "run", str(LEDGER), "cancel A1", "--json").stdout)
            run_id = paused["run_id"]
            killed = corral(home, "resume", run_id, "--approve", "--json", faults=point)
            assert killed.returncode == -9, killed.stderr
            for index, value in enumerate(state(home, run_id)):
                after_crash[index] += value
            done = corral(home, "resume", run_id, "--json")
            if done.returncode != 0:  # the crash lost the approval itself
                corral(home, "resume", run_id, "--approve", "--json")
            for index, value in enumerate(state(home, run_id)):
                recovered[index] += value
        for when, totals in (
            ("after the crash (baseline)", after_crash),
            ("after recovery", recovered),
        ):
            table.add_row(
                point, when, f"{totals[0]} / {args.rounds}", str(totals[1]), str(totals[2])
            )
    Console().print(table)


if __name__ == "__main__":
    main()
