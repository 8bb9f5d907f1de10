"""The seam between tools and the connections they are called over.

A function tool needs nothing but Python. A tool declared in ``agent.yaml`` (an HTTP
endpoint, an MCP server's tool) is called over a *transport*: a pooled HTTP client, a
server process. The agent owns its transports and closes them in ``Agent.aclose``.

A transport opens lazily, on its first call, so building an agent stays synchronous and
starts nothing; it may be opened again after ``aclose`` (a later run of the same agent).
Values such as a base URL or a header may say ``${NAME}``: they are resolved when they
are used (each HTTP call, each MCP server start), from the agent's ``deps`` (what ``setup``
returned, e.g. the port of a service it started) first, then the environment.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from corral.errors import ConfigInvalidError
from corral.tools.sensitive import REDACTED

_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
MIN_SECRET = 4
"""Shorter secrets are not searched for in answers: they would hide ordinary text."""


@runtime_checkable
class ToolTransport(Protocol):
    """A connection tools are called over; opened lazily, closed by ``Agent.aclose``."""

    name: str
    """Shown in errors and logs (``http``, an MCP server's name)."""

    async def aclose(self) -> None:
        """Release what the transport holds; safe to call twice, or before any call."""
        ...


def placeholders(text: str) -> list[str]:
    """The ``${NAME}`` names in ``text``, in order (a config check lists them)."""
    return _PLACEHOLDER.findall(text)


def resolve_placeholders(
    text: str, deps: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> str:
    """``text`` with each ``${NAME}`` replaced: from ``deps`` first, then the environment.

    A name found in neither raises ``ConfigInvalidError`` naming it (never an empty
    string, which would turn ``${API_URL}/x`` into a request to ``/x``).
    """
    env = os.environ if environ is None else environ

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in deps and deps[name] is not None:
            return str(deps[name])
        if name in env:
            return env[name]
        raise ConfigInvalidError(
            f"${{{name}}} is not set",
            hint=f"return {name!r} from setup() in tools.py, or set the environment variable",
        )

    return _PLACEHOLDER.sub(value, text)


def secrets_in(template: str, deps: Mapping[str, Any]) -> list[str]:
    """The secrets a header template carries once resolved.

    Its whole value and the value of each ``${NAME}`` in it; none when it has no
    ``${NAME}`` (then it is plain config, written in agent.yaml).
    """
    names = placeholders(template)
    if not names:
        return []
    return [resolve_placeholders(template, deps)] + [
        resolve_placeholders(f"${{{name}}}", deps) for name in names
    ]


def redact(value: Any, secrets: Sequence[str]) -> Any:
    """``value`` (JSON) with every secret replaced by ``[REDACTED]``.

    A server's echo of a token it was sent never reaches the run. Longer secrets go first
    (``Bearer abc`` before ``abc``).
    """
    kept = sorted({s for s in secrets if len(s) >= MIN_SECRET}, key=len, reverse=True)

    def hidden(item: Any) -> Any:
        if isinstance(item, str):
            for secret in kept:
                item = item.replace(secret, REDACTED)
            return item
        if isinstance(item, dict):
            return {hidden(k): hidden(v) for k, v in item.items()}
        if isinstance(item, list):
            return [hidden(v) for v in item]
        return item

    return hidden(value) if kept else value
