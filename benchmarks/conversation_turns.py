"""A conversation's turns on SQLite, against the baseline: the same turns on ``MemoryStore``.

The after-sales example (``examples/aftersales``) as a chat desk runs it: each
conversation is a session of three messages (a broken printer, its order number, an
answer to what it asks next). Every turn reads its session; an answer resumes the run it
answers (its events read back, its lease taken); every run start of an agent with
equivalent tools reads their observed latency; every turn ends with a save and the
session's update. Rounds alternate the two stores, each new, in one process: CPU per
turn (every thread), then the SQLite store's calls, with the thread CPU each takes per
turn, from the last SQLite round.

    PYTHONPATH=src .venv/bin/python benchmarks/conversation_turns.py
    PYTHONPATH=src .venv/bin/python benchmarks/conversation_turns.py --rounds 5 --conversations 200
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from corral import MemoryStore, Runtime, SqlStore, load_agent

ROOT = Path(__file__).resolve().parents[1]
TURNS = ("我的打印机坏了，能换新吗", "订单号 HD20240501", "好的")
STORES = ("MemoryStore (baseline)", "SqlStore, a SQLite file")
CALLS = (
    "save",
    "get_session",
    "update_session",
    "load_events",
    "get_run",
    "tool_latency",
    "acquire_lease",
)


class _Timed:
    """Thread CPU and calls of a store's methods, by name.

    ``SqlStore``'s own methods are wrapped on the class until ``restore``: a store with a
    method replaced on it, or a subclass's, makes no call in place (``calls_in_place``),
    and would be measured on another path than the one a user's store takes.
    """

    def __init__(self, store: SqlStore) -> None:
        self.cpu: collections.Counter[str] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()
        self.originals = {name: getattr(SqlStore, name) for name in CALLS}
        for name, method in self.originals.items():
            setattr(SqlStore, name, self._wrap(name, method, store))

    def restore(self) -> None:
        for name, method in self.originals.items():
            setattr(SqlStore, name, method)

    def _wrap(self, name: str, method: Callable[..., Any], store: SqlStore) -> Callable[..., Any]:
        @functools.wraps(method)
        def timed(self_: SqlStore, *args: Any, **kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return method(self_, *args, **kwargs)
            finally:
                if self_ is store:
                    self.cpu[name] += time.thread_time() - start
                    self.calls[name] += 1

        return timed


async def _measure(sql: bool, conversations: int) -> tuple[float, _Timed | None]:
    """CPU µs per turn after 10 warm-up conversations; the store's calls when ``sql``."""
    with tempfile.TemporaryDirectory() as folder:
        agent = load_agent(ROOT / "examples" / "aftersales", data_dir=Path(folder) / "data")
        store = SqlStore.open(Path(folder) / "corral.db") if sql else MemoryStore()
        runtime = Runtime(agent, store)

        async def talk(n: int) -> None:
            for message in TURNS:
                await runtime.start(message, session_id=f"chat-{n}")

        for n in range(10):
            await talk(n)
        timed = _Timed(store) if isinstance(store, SqlStore) else None
        cpu = time.process_time()
        try:
            for n in range(10, 10 + conversations):
                await talk(n)
        finally:
            if timed is not None:
                timed.restore()
        cpu = time.process_time() - cpu
        await runtime.aclose()
        if isinstance(store, SqlStore):
            store.engine.dispose()
    return cpu / (conversations * len(TURNS)) * 1e6, timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="alternations (median)")
    parser.add_argument("--conversations", type=int, default=100, help="per measurement")
    args = parser.parse_args()
    results: dict[str, list[float]] = {name: [] for name in STORES}
    timed: _Timed | None = None
    for round_ in range(args.rounds):
        for name in STORES if round_ % 2 == 0 else STORES[::-1]:
            cpu, found = asyncio.run(_measure(name != STORES[0], args.conversations))
            results[name].append(cpu)
            timed = found or timed
    turns = args.conversations * len(TURNS)
    base = statistics.median(results[STORES[0]])
    print(
        f"{args.conversations} conversations of {len(TURNS)} turns x {args.rounds} rounds, "
        "one turn at a time; median CPU per turn (every thread)\n"
    )
    print("| store | CPU per turn | vs baseline |\n|---|---|---|")
    for name in STORES:
        cpu = statistics.median(results[name])
        print(f"| {name} | {cpu:,.0f} µs | {cpu / base:.2f}× (+{cpu - base:,.0f} µs) |")
    if timed is not None:
        print("\nthe SQLite store's calls, last round:\n")
        print("| call | per turn | thread CPU per turn |\n|---|---|---|")
        for name, cpu in timed.cpu.most_common():
            print(f"| {name} | {timed.calls[name] / turns:.2f} | {cpu / turns * 1e6:,.0f} µs |")


if __name__ == "__main__":
    main()
