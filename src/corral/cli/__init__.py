"""The ``corral`` command line.

Commands live in modules by what they do (``runs``, ``stats``, ``quality``, ``recording``,
``conversation``, ``examples``, ``serve``, ``db``, ``worker``, ``workers``); importing them
registers them on the one ``app``. They import the layers, the store and the models inside
the command that uses them, so ``corral --help`` and ``corral --version`` start without them.
"""

from corral.cli import (
    conversation,
    db,
    examples,
    quality,
    recording,
    runs,
    serve,
    stats,
    worker,
    workers,
)
from corral.cli.common import app

__all__ = [
    "app",
    "conversation",
    "db",
    "examples",
    "main",
    "quality",
    "recording",
    "runs",
    "serve",
    "stats",
    "worker",
    "workers",
]


def main() -> None:
    """Console-script entry point."""
    app()
