"""The ``corral`` console script: ``corral --version`` answers before the CLI is loaded.

Loading the CLI (typer, click, rich and the command modules) takes about a quarter of a
second; the version is one constant. Every other command line, ``--help`` included, goes
to ``corral.cli.main``. This module lives outside ``corral.cli``: importing anything in
that package loads the whole CLI first.
"""

import sys


def main() -> None:
    """``corral --version`` at once; anything else through the CLI."""
    if sys.argv[1:] == ["--version"]:
        from corral import __version__

        print(f"corral {__version__}")  # the line the CLI's own --version prints
        sys.exit(0)
    from corral.cli import main as cli_main

    cli_main()
