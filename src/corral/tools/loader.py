"""Importing an agent's ``tools.py`` and running its ``setup()``.

``tools.py`` is the developer's code, read at load like ``agent.yaml``. A syntax error,
an exception while it is imported, or one raised by ``setup()`` means the agent is
broken: ``CONFIG_INVALID`` naming the file and line (the innermost frame inside the agent
folder), never a Python traceback out of the CLI.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import traceback
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from corral.errors import ConfigInvalidError, CorralError
from corral.files import private_dir

_MAX_MESSAGE = 300
"""Characters of the exception's own message kept in the error."""


def _location(exc: BaseException, folder: Path) -> str:
    """``file:line`` where the developer's code failed, preferring the agent's own files."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}"
    frames = traceback.extract_tb(exc.__traceback__)
    chosen = [f for f in frames if Path(f.filename).resolve().is_relative_to(folder)] or frames
    if not chosen:
        return str(folder)
    frame = chosen[-1]
    return f"{frame.filename}:{frame.lineno} (in {frame.name})"


def _failure(what: str, exc: BaseException, folder: Path) -> ConfigInvalidError:
    if isinstance(exc, SyntaxError):
        detail = f"syntax error: {exc.msg}"
    elif isinstance(exc, CorralError):  # e.g. ``@tool`` on a function it cannot describe
        detail = exc.message
    else:
        detail = f"{type(exc).__name__}: {str(exc)[:_MAX_MESSAGE]}"
    # a refusal that says what to do (a setup naming the extra it needs) keeps its hint
    hint = exc.hint if isinstance(exc, CorralError) and exc.hint else "fix the agent's tools.py"
    return ConfigInvalidError(f"{_location(exc, folder)}: {what} failed: {detail}", hint=hint)


def import_tools(path: Path) -> ModuleType:
    """Import ``tools.py`` once per process, as the module the developer's own code sees.

    A module already imported from this file (``import tools`` in the developer's code, or
    ``myagent.tools`` in a package) is used as it is. Otherwise the file is imported as
    ``tools``, so a later ``import tools`` gets the same module and the same classes: a
    second copy would make ``tools.Order`` a different class from the one the tool returns,
    and its result would fail the output check. Only when ``tools`` is another module (a
    second agent in the process, a ``tools`` package of the application) does this file get
    a private name. A failed import leaves nothing behind.
    """
    resolved = path.resolve()
    for module in list(sys.modules.values()):
        if _source(module, path.name) == resolved:
            return module
    module_name = (
        path.stem if _free(path.stem, resolved) else f"corral_agent_tools_{abs(hash(resolved))}"
    )
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ConfigInvalidError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # the developer's code may raise anything
        del sys.modules[module_name]  # a half-run module must not be reused
        raise _failure(f"importing {path.name}", exc, path.parent.resolve()) from None
    return module


def _free(name: str, file: Path) -> bool:
    """Whether ``import NAME`` would find ``file`` or nothing.

    A module of that name that is imported already, or that ``sys.path`` finds elsewhere,
    is another one, and is never shadowed.
    """
    if name in sys.modules:
        return False
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    if found is None:
        return True
    return found.origin is not None and Path(found.origin).resolve() == file


def _source(module: ModuleType | None, name: str) -> Path | None:
    """The file called ``name`` a module was imported from, resolved; else ``None``."""
    filename = getattr(module, "__file__", None)
    if not isinstance(filename, str) or not filename.endswith(name):
        return None
    try:
        return Path(filename).resolve()
    except (OSError, RuntimeError):
        return None


@dataclass(frozen=True)
class Setup:
    """What ``setup(data_dir)`` gave: the tools' ``deps``, and how to undo it.

    A plain ``setup`` returns the deps and has nothing to undo. A generator ``setup``
    yields them, and the code after its ``yield`` is the teardown (like a pytest fixture
    or a FastAPI lifespan): ``Agent.aclose`` runs it once.
    """

    deps: dict[str, Any] = field(default_factory=dict)
    teardown: Callable[[], None] | None = None


def run_setup(module: ModuleType, data_dir: Path, folder: Path) -> Setup:
    """Run the tools' ``setup(data_dir)``, if there is one; a failure is ``CONFIG_INVALID``."""
    setup = getattr(module, "setup", None)
    if not callable(setup):
        return Setup()
    try:
        # business data (a customer's address): its folders are made 0700, as the home's
        private_dir(data_dir.parent)
        private_dir(data_dir)
        made = setup(data_dir)
        generator = made if isinstance(made, Generator) else None
        deps = next(generator) if generator is not None else made
    except StopIteration:
        raise ConfigInvalidError(f"{module.__file__}: setup() must yield its deps once") from None
    except (Exception, SystemExit) as exc:
        raise _failure("setup()", exc, folder.resolve()) from None
    if not isinstance(deps, Mapping):
        if generator is not None:
            generator.close()
        what = "yield" if generator is not None else "return"
        raise ConfigInvalidError(
            f"{module.__file__}: setup() must {what} a mapping, not {type(deps).__name__}"
        )
    if generator is None:
        return Setup(dict(deps))
    return Setup(dict(deps), functools.partial(_finish, generator, module, folder))


def _finish(generator: Generator[Any, None, None], module: ModuleType, folder: Path) -> None:
    """Run a generator setup's teardown: the code after its ``yield``, at most once."""
    try:
        next(generator)
    except StopIteration:
        return
    except (Exception, SystemExit) as exc:
        raise _failure("setup() teardown", exc, folder.resolve()) from None
    generator.close()
    raise ConfigInvalidError(f"{module.__file__}: setup() must yield only once")
