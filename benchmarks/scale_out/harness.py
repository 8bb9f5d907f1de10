"""The parts chaos.py and bench.py share: a PostgreSQL, its databases, workers, CPU, checks.

A throwaway PostgreSQL comes from ``.ci/start-postgres.sh`` (as CI starts one) and is
stopped when the ``with`` block ends, on an error or a SIGTERM too. Workers are
``python -m corral worker`` subprocesses; their output goes to files under the run's
temporary folder, which is kept only when ``--keep`` asks for it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "src") not in sys.path:  # the workers run this checkout's corral: so do we
    sys.path.insert(0, str(ROOT / "src"))

from corral.workers.liveness import APP_NAME_PREFIX as LIVENESS_PREFIX  # noqa: E402

AGENT = Path(__file__).resolve().parent / "agent"
AGENT_NAME = "aftersales_scale"
MESSAGE = "我的打印机坏了，订单号 HD20240501，能换新吗"
BUSINESS_SQL = AGENT / "data" / "business.sql"
BUSINESS_ENV = "SCALE_OUT_BUSINESS_URL"
WAITING = ("awaiting_confirm", "awaiting_user")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def plain(url: str) -> str:
    """A SQLAlchemy ``postgresql+psycopg://`` URL as psycopg's own ``postgresql://``."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name`` instead of its own."""
    base, _, _ = url.rpartition("/")
    return f"{base}/{name}"


def stop_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit, so ``with`` blocks stop PostgreSQL and the workers."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


@dataclass
class Server:
    """A PostgreSQL server: its URL (database ``postgres``) and, when ours, its data dir."""

    url: str
    data_dir: Path | None = None
    bin_dir: str = ""

    def postmaster_pid(self) -> int | None:
        if self.data_dir is None:
            return None
        return int((self.data_dir / "postmaster.pid").read_text().split()[0])


@contextmanager
def postgres(existing_url: str | None) -> Iterator[Server]:
    """``existing_url``'s server, or a throwaway one from ``.ci/start-postgres.sh``."""
    if existing_url:
        yield Server(existing_url)
        return
    started = subprocess.run(
        ["bash", str(ROOT / ".ci" / "start-postgres.sh")],
        capture_output=True,
        text=True,
        check=True,
        timeout=180,
    )
    url, data_dir, bin_dir = started.stdout.strip().splitlines()[-1].split()
    data = Path(data_dir)
    try:
        yield Server(url, data, bin_dir)
    finally:
        stop = [f"{bin_dir}/pg_ctl", "-D", data_dir, "-m", "immediate", "stop"]
        subprocess.run(
            ["runuser", "-u", "postgres", "--", *stop],
            capture_output=True,
            timeout=60,
            check=False,
        )
        shutil.rmtree(data.parent, ignore_errors=True)


@dataclass
class Databases:
    """A fresh store database and business database on one server, dropped at the end."""

    store_url: str
    business_url: str


@contextmanager
def databases(server: Server, prefix: str) -> Iterator[Databases]:
    """Create ``PREFIX_store_X`` and ``PREFIX_business_X``, the business tables in the second."""
    tag = uuid.uuid4().hex[:8]
    names = [f"{prefix}_store_{tag}", f"{prefix}_business_{tag}"]
    with psycopg.connect(plain(server.url), autocommit=True) as admin:
        for name in names:
            admin.execute(f'CREATE DATABASE "{name}"')
    found = Databases(with_database(server.url, names[0]), with_database(server.url, names[1]))
    try:
        with psycopg.connect(plain(found.business_url), autocommit=True) as conn:
            conn.execute(BUSINESS_SQL.read_text(encoding="utf-8"))  # type: ignore[arg-type]
        yield found
    finally:
        with psycopg.connect(plain(server.url), autocommit=True) as admin:
            for name in names:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def corral_env(business_url: str) -> dict[str, str]:
    """The environment of a corral subprocess: this checkout's sources, the business DB."""
    path = [str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in path if p),
        BUSINESS_ENV: business_url,
    }


def upgrade_store(store_url: str, home: Path, business_url: str) -> None:
    """``corral db upgrade``: once, before the workers start."""
    command = [sys.executable, "-m", "corral", "db", "upgrade", "--store", store_url]
    subprocess.run(
        [*command, "--home", str(home)],
        env=corral_env(business_url),
        check=True,
        capture_output=True,
        timeout=120,
    )


@dataclass
class Worker:
    executor_id: str
    process: subprocess.Popen[bytes]
    started: float = field(default_factory=time.monotonic)


@dataclass
class Pool:
    """The worker processes of one measurement; ``close`` stops every one it started."""

    store_url: str
    business_url: str
    folder: Path
    takeover_poll_s: float | None = None
    workers: dict[str, Worker] = field(default_factory=dict)
    killed: list[Worker] = field(default_factory=list)
    generation: int = 0

    def start(self, slot: str) -> Worker:
        """Start a worker in ``slot`` under a new executor id (``SLOT-gN``)."""
        self.generation += 1
        executor_id = f"{slot}-g{self.generation}"
        log = open(self.folder / f"{executor_id}.log", "wb")  # noqa: SIM115 (the child owns it)
        command = [sys.executable, "-m", "corral", "worker", "--store", self.store_url]
        command += ["--agent", str(AGENT), "--executor-id", executor_id]
        if self.takeover_poll_s is not None:
            command += ["--takeover-poll-s", str(self.takeover_poll_s)]
        command += ["--home", str(self.folder / "home")]
        process = subprocess.Popen(
            command,
            env=corral_env(self.business_url),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
        log.close()
        worker = Worker(executor_id, process)
        self.workers[slot] = worker
        return worker

    def kill(self, slot: str) -> Worker:
        """SIGKILL the worker in ``slot`` and reap it; the slot stays empty until ``start``."""
        worker = self.workers.pop(slot)
        worker.process.send_signal(signal.SIGKILL)
        worker.process.wait(timeout=30)
        self.killed.append(worker)
        return worker

    def alive(self) -> list[Worker]:
        return [w for w in self.workers.values() if w.process.poll() is None]

    def close(self) -> None:
        """SIGTERM every worker (a graceful stop), then SIGKILL what is left after 15 s."""
        workers = list(self.workers.values())
        for worker in workers:
            if worker.process.poll() is None:
                worker.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for worker in workers:
            try:
                worker.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.process.wait(timeout=30)
        self.workers.clear()


@contextmanager
def pool(
    databases: Databases, folder: Path, takeover_poll_s: float | None = None
) -> Iterator[Pool]:
    made = Pool(databases.store_url, databases.business_url, folder, takeover_poll_s)
    try:
        yield made
    finally:
        made.close()


@contextmanager
def scratch(keep: bool) -> Iterator[Path]:
    """A temporary folder for worker logs and homes; kept (and named on stderr) with ``keep``."""
    folder = Path(tempfile.mkdtemp(prefix="corral-scale-"))
    try:
        yield folder
    finally:
        if keep:
            print(f"kept {folder}", file=sys.stderr)
        else:
            shutil.rmtree(folder, ignore_errors=True)


def ready(conn: psycopg.Connection[Any], executor_ids: Iterable[str]) -> set[str]:
    """Those of ``executor_ids`` whose worker holds its liveness connection (launched)."""
    rows = conn.execute(
        "SELECT application_name FROM pg_stat_activity WHERE application_name = ANY(%s)",
        ([f"{LIVENESS_PREFIX}{e}" for e in executor_ids],),
    ).fetchall()
    return {row[0].removeprefix(LIVENESS_PREFIX) for row in rows}


def wait_ready(store_url: str, executor_ids: Sequence[str], timeout_s: float = 120) -> None:
    """Wait until each worker holds its liveness connection (``corral-worker:ID``)."""
    deadline = time.monotonic() + timeout_s
    with psycopg.connect(plain(store_url), autocommit=True) as conn:
        while time.monotonic() < deadline:
            if ready(conn, executor_ids) >= set(executor_ids):
                return
            time.sleep(0.2)
    raise TimeoutError(f"workers {sorted(executor_ids)} not ready after {timeout_s} s")


# ---------------------------------------------------------------------- CPU from /proc


def _ticks(pid: int, children: bool = False) -> int:
    """utime + stime of ``pid`` (+ its reaped children's with ``children``), in clock ticks."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0
    # fields[0] is the state (field 3); utime..cstime are fields 14..17
    own = int(fields[11]) + int(fields[12])
    return own + (int(fields[13]) + int(fields[14]) if children else 0)


def _children(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent:
            found.append(int(entry.name))
    return found


def postgres_cpu_s(server: Server) -> float | None:
    """CPU seconds the server has used: the postmaster, its reaped backends, its live ones.

    None for a server that is not ours (no data dir to find its postmaster in).
    """
    postmaster = server.postmaster_pid()
    if postmaster is None:
        return None
    ticks = _ticks(postmaster, children=True) + sum(_ticks(p) for p in _children(postmaster))
    return ticks / CLK_TCK


def process_cpu_s(pids: Sequence[int]) -> float:
    """CPU seconds used so far by live processes ``pids``."""
    return sum(_ticks(p) for p in pids) / CLK_TCK


def self_cpu_s() -> float:
    """CPU seconds of this process (the load generator)."""
    times = os.times()
    return times.user + times.system


# ---------------------------------------------------------------------- invariants


def invariants(databases: Databases, run_ids: Sequence[str], approved: set[str]) -> dict[str, Any]:
    """The chaos checks over the store and the business database (definitions: README)."""
    ids = list(run_ids)
    with psycopg.connect(plain(databases.store_url)) as conn:
        statuses = dict(
            conn.execute(
                "SELECT run_id, status FROM corral_runs WHERE run_id = ANY(%s)", (ids,)
            ).fetchall()
        )
        seqs = conn.execute(
            "SELECT run_id, count(*), min(seq), max(seq) FROM corral_events "
            "WHERE run_id = ANY(%s) GROUP BY run_id",
            (ids,),
        ).fetchall()
    with psycopg.connect(plain(databases.business_url)) as conn:
        orders = dict(
            conn.execute("SELECT run_id, count(*) FROM exchanges GROUP BY run_id").fetchall()
        )
        entries = conn.execute("SELECT count(*) FROM exchange_entries").fetchone()
    ok = sum(1 for r in ids if statuses.get(r) == "finished" or statuses.get(r) in WAITING)
    duplicates = sum(n - 1 if run in approved else n for run, n in orders.items())
    finished_approved = [r for r in approved if statuses.get(r) == "finished"]
    by_status: dict[str, int] = {}
    for run in ids:
        status = statuses.get(run, "missing")
        by_status[status] = by_status.get(status, 0) + 1
    return {
        "runs": len(ids),
        "finished_or_waiting": ok,
        "duplicate_effects": duplicates,
        "stuck": len(ids) - ok,
        "seq_gaps": sum(1 for _, n, low, high in seqs if low != 1 or high != n),
        "statuses": by_status,
        "approved": len(approved),
        "exchange_orders": sum(orders.values()),
        "missing_effects": sum(1 for r in finished_approved if orders.get(r, 0) == 0),
        "approved_not_finished": len(approved) - len(finished_approved),
        "write_entries": entries[0] if entries else 0,
    }
