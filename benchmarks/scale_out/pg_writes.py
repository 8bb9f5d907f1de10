"""How many event rows per second this machine's PostgreSQL writes: the store's ceiling.

    python benchmarks/scale_out/pg_writes.py [--seconds 10] [--clients 8] [--json]

Starts a throwaway PostgreSQL as CI does (``.ci/start-postgres.sh``: ``fsync=off``), makes
a table shaped like ``corral_events`` (run id and seq as the key, a timestamp, type, stage
and a ``--row-bytes`` JSON body), and runs ``pgbench`` (C, so the client costs little of the
2 cores) with ``--clients`` connections for ``--seconds`` in two ways: one row per commit,
and ``--batch`` rows per commit (a save appends a few events in one transaction). Then the
same with ``fsync=on`` (set by ``ALTER SYSTEM`` and a reload), as a production server runs.
Prints commits/s and rows/s for each.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import psycopg
from harness import Server, plain, postgres, stop_on_sigterm, with_database

TABLE = """
CREATE TABLE ev (
    run_id VARCHAR(64) NOT NULL, seq INTEGER NOT NULL, ts TIMESTAMPTZ NOT NULL,
    type VARCHAR(48) NOT NULL, stage VARCHAR(48) NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE SEQUENCE ev_seq;
"""


def script(batch: int, row_bytes: int) -> str:
    """A pgbench transaction: ``batch`` event rows of one run, one commit."""
    pad = max(0, row_bytes - 10)
    body = f"'{{\"k\": \"' || repeat('x', {pad}) || '\"}}'"
    return (
        "\\set run random(1, 1000000000)\n"
        "INSERT INTO ev SELECT 'run-' || :run || '-' || :client_id, nextval('ev_seq'), now(), "
        f"'tool_succeeded', 'execute', {body} FROM generate_series(1, {batch});\n"
    )


def pgbench(bin_dir: str, url: str, batch: int, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(script(batch, args.row_bytes))
    Path(f.name).chmod(0o644)
    command = [f"{bin_dir}/pgbench", "-n", "-c", str(args.clients), "-j", "2"]
    done = subprocess.run(
        [*command, "-T", str(args.seconds), "-f", f.name, plain(url)],
        capture_output=True,
        text=True,
        check=True,
        timeout=args.seconds + 60,
    )
    Path(f.name).unlink()
    tps = float(re.search(r"tps = ([0-9.]+)", done.stdout).group(1))  # type: ignore[union-attr]
    return {"rows_per_commit": batch, "commits_per_s": round(tps), "rows_per_s": round(tps * batch)}


def measure(server: Server, bin_dir: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    url = with_database(server.url, "pg_writes")
    with psycopg.connect(plain(server.url), autocommit=True) as admin:
        admin.execute("CREATE DATABASE pg_writes")
    with psycopg.connect(plain(url), autocommit=True) as conn:
        conn.execute(TABLE)  # type: ignore[arg-type]
    rows = []
    for fsync in ("off", "on"):
        with psycopg.connect(plain(server.url), autocommit=True) as admin:
            admin.execute(f"ALTER SYSTEM SET fsync = {fsync}")  # type: ignore[arg-type]
            admin.execute("SELECT pg_reload_conf()")
        for batch in (1, args.batch):
            rows.append({"fsync": fsync, **pgbench(bin_dir, url, batch, args)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--batch", type=int, default=8, help="rows per commit, second way")
    parser.add_argument("--row-bytes", type=int, default=400, help="bytes of a row's body")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    stop_on_sigterm()
    with postgres(None) as server:
        assert server.data_dir is not None
        bin_dir = server.bin_dir
        rows = measure(server, bin_dir, args)
    if args.json:
        print(json.dumps(rows))
        return
    for r in rows:
        print(
            f"fsync={r['fsync']:<3} {r['rows_per_commit']:>3} row(s)/commit: "
            f"{r['commits_per_s']:>7} commits/s {r['rows_per_s']:>8} rows/s"
        )


if __name__ == "__main__":
    main()
