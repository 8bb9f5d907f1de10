"""The example agents corral ships, and ``corral init`` that copies one to start from.

A wheel carries them inside the package (``corral/examples/``, copied there by setup.py);
an editable install reads the checkout's top-level ``examples/`` in place. So ``corral
demo`` and ``corral init`` work the same from PyPI and from a clone.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from corral.cli.common import _fails_cleanly, app, console
from corral.errors import ConfigInvalidError, InvalidInputError
from corral.observe.terminal import visible

LEFT_BEHIND = shutil.ignore_patterns("__pycache__", "*.py[co]", ".data", "*.db", "*.db-*")
"""What a copy leaves out: bytecode and the business data a run created beside the agent."""


def examples_root() -> Path:
    """The folder holding the example agents, in the installed package or the checkout."""
    package = Path(__file__).resolve().parents[1]
    shipped = package / "examples"
    return shipped if shipped.is_dir() else package.parents[1] / "examples"


def example_names() -> list[str]:
    """The examples there are: each folder with an ``agent.yaml``."""
    root = examples_root()
    found = root.iterdir() if root.is_dir() else iter(())
    return sorted(p.name for p in found if (p / "agent.yaml").is_file())


def example_dir(name: str) -> Path:
    """The folder of the example ``name``; ``CONFIG_INVALID`` when this install lacks it."""
    names = example_names()
    if name not in names:
        raise ConfigInvalidError(
            f"no example {name!r} in {examples_root()}",
            hint=f"examples: {', '.join(names)}"
            if names
            else "this install of corral has no examples; reinstall it from a wheel or a clone",
        )
    return examples_root() / name


@app.command()
@_fails_cleanly
def init(
    folder: Annotated[Path, typer.Argument(help="New agent folder (must not exist, or be empty)")],
    example: Annotated[
        str, typer.Option("--example", help=f"The example to copy: {', '.join(example_names())}")
    ] = "aftersales",
) -> None:
    """Start an agent from an example: copy its agent.yaml, tools.py, data and eval.yaml."""
    source = example_dir(example)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise InvalidInputError(
            f"{folder} already exists and is not an empty folder",
            hint="name a new folder; corral init never overwrites files",
        )
    shutil.copytree(source, folder, ignore=LEFT_BEHIND, dirs_exist_ok=True)
    where = visible(str(folder))
    console.print(Text(f"created {where} from the {example} example"))
    console.print(Text(f"Try: corral chat {where}   or   corral eval {where}"))
