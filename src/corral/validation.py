"""One way to say what pydantic rejected: ``where: why`` for each problem, joined by ``;``.

Config, tool arguments and model output are validated at corral's boundaries, and each
failure becomes an error message, a tool envelope or a re-ask prompt. They all describe
the problems the same way. The texts are stored (in events, and in the re-ask requests
whose fingerprints a replay looks answers up by), so the format must not drift.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class Rejection(Protocol):
    """What pydantic raises (``ValidationError``), or FastAPI's ``RequestValidationError``."""

    def errors(self) -> Any:
        """The problems, each with its ``loc`` and ``msg``."""


def validation_problems(
    exc: Rejection,
    limit: int,
    *,
    root: str = "",
    where: Callable[[tuple[Any, ...]], str] | None = None,
) -> str:
    """The first ``limit`` problems as ``a.b: message; c: message``.

    ``root`` names a problem with the whole value (an empty location), e.g. ``output``.
    ``where``: what goes before each problem, from its location (a config's
    ``file:line``, ``agent.yaml:12: a.b: message``).
    """
    return "; ".join(
        (f"{where(e['loc'])}: " if where is not None else "")
        + f"{'.'.join(map(str, e['loc'])) or root}: {e['msg']}"
        for e in exc.errors()[:limit]
    )


def validation_messages(exc: Rejection, limit: int) -> str:
    """The first ``limit`` problems' messages alone, for one value (no place to name)."""
    return "; ".join(e["msg"] for e in exc.errors()[:limit])
