"""The ``corral`` command line.

Commands live in modules by what they do (``runs``, ``stats``, ``quality``, ``recording``,
``conversation``, ``examples``, ``serve``, ``db``, ``worker``, ``workers``); importing them
registers them on the one ``app``. They import the layers, the store and the models inside
the command that uses them, so ``corral --help`` and ``corral --version`` start without them.
"""

import json
import sys
from typing import NoReturn

import typer
from rich.text import Text

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
from corral.cli.common import app, err_console
from corral.errors import ErrorCode

try:  # typer 0.22 and later carry their own copy of click
    from typer._click.exceptions import ClickException, UsageError
except ImportError:  # pragma: no cover - an older typer runs on click itself
    from click.exceptions import ClickException, UsageError  # type: ignore[assignment]


class _NoArgsBefore82(UsageError):
    """Never raised: click before 8.2 prints the help for no arguments and raises nothing."""


NoArgsIsHelpError: type[UsageError] = getattr(
    sys.modules[UsageError.__module__], "NoArgsIsHelpError", _NoArgsBefore82
)
"""What ``corral`` alone raises (its message is the help), from click 8.2 on."""

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
    """Console-script entry point.

    A command line that cannot be read (a missing argument, an unknown option or command,
    a value of the wrong type) ends as every other refusal does: ``error INVALID_ARGUMENT:
    ...`` after the usage (JSON with ``--json``), exit status 2.
    """
    try:
        status = app(standalone_mode=False)
    except NoArgsIsHelpError as exc:  # ``corral`` alone: the help, and status 2 as click's
        typer.echo(exc.format_message())
        sys.exit(exc.exit_code)
    except UsageError as exc:
        _refuse_usage(exc)
    except ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except typer.Abort:
        err_console.print("Aborted.")
        sys.exit(1)
    sys.exit(status if isinstance(status, int) else 0)


def _refuse_usage(exc: UsageError) -> NoReturn:
    """Print a command line's refusal with corral's code, as ``_fails_cleanly`` does."""
    message = exc.format_message()
    if "--json" in sys.argv[1:]:
        error = {"code": ErrorCode.INVALID_ARGUMENT.value, "message": message, "hint": None}
        if exc.ctx is not None:
            error["hint"] = f"see {exc.ctx.command_path} --help"
        typer.echo(json.dumps({"error": error}, ensure_ascii=False))
    else:
        if exc.ctx is not None:
            err_console.print(Text(exc.ctx.get_usage()))
            err_console.print(Text(f"Try '{exc.ctx.command_path} --help' for help."))
        err_console.print(
            f"[red]error[/red] [bold]{ErrorCode.INVALID_ARGUMENT.value}[/bold]: ",
            Text(message),
            sep="",
        )
    sys.exit(exc.exit_code)
