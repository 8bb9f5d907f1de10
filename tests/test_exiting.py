"""``corral.exiting.exit_within``: a process ends within a bound, without cutting its exit short.

Each case is a small Python process, since what is tested is how a process ends.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def _ending(body: str, within_s: float, code: int = 0) -> tuple[int, str, float]:
    """Run ``body``, then ``exit_within(..., within_s, code)`` as the script's last line."""
    script = textwrap.dedent(body) + (
        "\nfrom corral.exiting import exit_within\n"
        f"exit_within('corral worker', {within_s}, {code})\n"
    )
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(SRC)!r})\n{script}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stderr, time.monotonic() - began


def test_a_thread_that_never_ends_is_named_and_left() -> None:
    code, said, took = _ending(
        """
        import threading, time
        threading.Thread(target=time.sleep, args=(3600,), name="stuck-tool").start()
        """,
        0.5,
        code=2,
    )
    assert code == 2 and took < 30
    assert said.strip().endswith(
        "corral worker: stopped, leaving 1 thread(s) that did not end "
        "(a sync tool, a model or a store call): stuck-tool"
    )


def test_an_exit_handler_slower_than_the_bound_is_not_cut_short() -> None:
    """With no thread left, the watcher lets ``atexit`` (a lock's release, an export) end."""
    code, said, _ = _ending(
        """
        import atexit, sys, time
        atexit.register(lambda: (time.sleep(1.5), print("handler done", file=sys.stderr)))
        """,
        0,
    )
    assert code == 0 and said.strip() == "handler done"


def test_idle_thread_pools_are_not_named_even_with_no_time_given() -> None:
    """Python's exit wakes them, and they end: they are not threads left behind."""
    for _ in range(3):
        code, said, _ = _ending(
            """
            from concurrent.futures import ThreadPoolExecutor
            pool = ThreadPoolExecutor(2)
            pool.submit(print, end="").result()
            """,
            0,
        )
        assert code == 0 and said == ""


def test_armed_as_a_stop_begins_it_also_ends_a_stop_that_hangs() -> None:
    """``main_too``: the main thread never gets to exit (the stop waits for ever)."""
    began = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys, time; sys.path.insert(0, {str(SRC)!r})\n"
            "from corral.exiting import exit_within\n"
            "exit_within('corral worker', 0.5, main_too=True)\n"
            "time.sleep(3600)\n",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and time.monotonic() - began < 30
    assert done.stderr.strip().endswith("MainThread (its stop)")
