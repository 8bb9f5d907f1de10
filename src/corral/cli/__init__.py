"""The ``corral`` command line.

Commands live in modules by what they do (``runs``, ``quality``, ``conversation``); importing
them registers them on the one ``app``.
"""

from corral.cli import conversation, quality, runs
from corral.cli.common import app

__all__ = ["app", "conversation", "main", "quality", "runs"]


def main() -> None:
    """Console-script entry point."""
    app()
