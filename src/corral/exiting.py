"""Ending a long-lived process (``corral serve``, ``corral worker``) whose threads may not end.

A thread cannot be stopped. A sync tool that never returns (a socket read with no
timeout) outlives its call's timeout, and Python's exit waits for every such thread, for
ever: a stopped server or worker would never end, and its supervisor would have to kill
it. These commands wait for their threads a bounded time instead, then exit without the
ones still running, naming them. What such a thread was doing is already recorded: a
write as possibly done, the run resumable from its last save.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Iterable, Sequence


def exit_waits_for() -> list[threading.Thread]:
    """The threads Python's exit would join: alive, not daemons, not the main thread."""
    main = threading.main_thread()
    return [t for t in threading.enumerate() if not t.daemon and t is not main and t.is_alive()]


def still_running(threads: Sequence[threading.Thread], within_s: float) -> list[threading.Thread]:
    """Join ``threads`` for ``within_s`` in all; those that have not ended by then."""
    deadline = time.monotonic() + within_s
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [thread for thread in threads if thread.is_alive()]


def exit_leaving(command: str, left: Iterable[str], code: int = 0) -> None:
    """Say which threads ``command`` leaves, then exit with ``code`` without waiting for them.

    ``os._exit``: Python's own exit would join them. Logs and the standard streams are
    flushed first; ``atexit`` handlers do not run (a worker's liveness lock ends with its
    session, which ends with the process).
    """
    names = sorted(left)
    print(
        f"{command}: stopped, leaving {len(names)} thread(s) that did not end "
        f"(a sync tool, a model or a store call): {', '.join(names)}",
        file=sys.stderr,
        flush=True,
    )
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


LEAST_S = 0.5
"""The shortest ``exit_within`` waits: Python's exit first wakes idle thread pools, whose
threads then end; looked at sooner, they would be named as left."""


def exit_within(
    command: str, within_s: float, code: int = 0, *, main_too: bool = False
) -> threading.Thread:
    """Give the process ``within_s`` from now to end its threads, then end it without them.

    For a process about to return from its main function: Python's own exit runs (idle
    thread pools are woken and end, ``atexit`` handlers run) and is all that happens when
    every thread ends in time. A daemon thread watches: if threads Python's exit waits
    for are still running after ``within_s`` (at least ``LEAST_S``), or (``main_too``:
    armed as a stop began) the main thread is still running, its stop hanging, it names
    them and exits with ``code`` (``exit_leaving``). With none left by then it does
    nothing, so ``atexit`` handlers that take a while are not cut short.
    """

    def watch() -> None:
        time.sleep(max(within_s, LEAST_S))
        left = [thread.name for thread in exit_waits_for()]
        if main_too and threading.main_thread().is_alive():  # its stop itself hangs
            left.append(f"{threading.main_thread().name} (its stop)")
        if left:
            exit_leaving(command, left, code)

    watcher = threading.Thread(target=watch, name=f"{command} exit watch", daemon=True)
    watcher.start()
    return watcher
