"""Reusing an MCP server's tool listing across agent builds, and checking it when it runs.

Building an agent lists each server's tools (plan templates are checked against their
schemas), which starts the server once. A command that builds the same agent many times
(``corral eval`` builds one per case) would start every server once per build just to
read the same list. ``McpListingCache`` lets it read the list once: the command creates
one and passes it to ``load_agent`` / ``Agent.build``; nothing is kept between commands
and nothing at module level.

The cache key is everything that can change what a server lists: its command and
arguments, the size and modification time of every file the command names (the server's
script, the program), the environment after ``${NAME}`` resolution, the working folder,
and an HTTP server's URL and headers (hashed: no secret is held in clear). An ``env``
entry named in the server's ``listing_ignores_env`` (a database path that differs per
eval case) is keyed by name only.

A listing can still go stale in ways no key sees (a module the script imports changed, a
remote server was upgraded), so every start of a server whose tools were imported lists
them again on the live session before its first request: an imported tool that is gone,
or whose input or output schema differs from the one its ``ToolSpec`` was built from,
fails the call with ``TOOL_SCHEMA_CHANGED`` before anything is sent, never a call with a
stale schema.
"""

from __future__ import annotations

import shutil
import threading
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corral.errors import ToolSchemaChangedError
from corral.hashing import stable_hash
from corral.tools.mcp.connection import McpLaunch, list_tools_now

if TYPE_CHECKING:
    from mcp.types import Tool


def _stamp(part: str, cwd: Path | None) -> list[Any] | None:
    """A file the command names, by path, size and mtime; ``None`` when it is no file."""
    found = shutil.which(part) if "/" not in part else None
    path = Path(found) if found else (cwd or Path.cwd()) / part
    try:
        stat = path.stat()
    except (OSError, ValueError):
        return None
    return [str(path.resolve()), stat.st_size, stat.st_mtime_ns] if path.is_file() else None


def listing_key(launch: McpLaunch, ignored_env: Collection[str] = ()) -> str:
    """The key of what ``launch`` lists: equal keys, same tools (see the module doc)."""
    argv = launch.argv() if launch.command else []
    env = {name: None if name in ignored_env else value for name, value in launch.env.items()}
    return stable_hash(
        {
            "argv": argv,
            "files": [_stamp(part, launch.cwd) for part in argv],
            "env": env,
            "cwd": str(launch.cwd) if launch.cwd is not None else None,
            "url": launch.url,
            "headers": dict(launch.headers),
        },
        32,
    )


@dataclass
class McpListingCache:
    """Tool listings by ``listing_key``, for one command's agent builds (not shared).

    ``hits`` and ``misses`` count the lookups: a miss starts the server to list it.
    """

    _listings: dict[str, tuple[Tool, ...]] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    hits: int = field(default=0, init=False)
    misses: int = field(default=0, init=False)

    def tools(
        self,
        launch: McpLaunch,
        ignored_env: Collection[str] = (),
        lister: Callable[[McpLaunch], list[Tool]] = list_tools_now,
    ) -> list[Tool]:
        """The tools ``launch`` lists: from the cache, else listed now and kept.

        A listing that fails is not kept (the next build tries again).
        """
        key = listing_key(launch, ignored_env)
        with self._lock:  # builds from threads list a server once, not once each
            cached = self._listings.get(key)
            if cached is None:
                self.misses += 1
                cached = self._listings[key] = tuple(lister(launch))
            else:
                self.hits += 1
        return list(cached)


def repeated(tools: Collection[Tool]) -> list[str]:
    """The names that ``tools`` lists more than once, sorted.

    The MCP spec makes a tool's name its unique identifier, and a listing read by name
    keeps only one entry per name: a server that names a tool twice (with two schemas, or
    the same one) would have corral pick one silently, and a hostile server could swap the
    schema a plan was validated against. Every reader of a listing refuses repeats instead.
    """
    counts = Counter(tool.name for tool in tools)  # linear: a listing may be long
    return sorted(name for name, seen in counts.items() if seen > 1)


def schemas(tool: Tool) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """What a tool's ``ToolSpec`` is built from: its input and output schemas."""
    return dict(tool.input_schema), dict(tool.output_schema) if tool.output_schema else None


Expected = Mapping[str, tuple[dict[str, Any], dict[str, Any] | None]]
"""The server's name of each imported tool -> the schemas its ``ToolSpec`` was built from."""


def check_listing(server: str, expected: Expected, live: list[Tool]) -> None:
    """Raise ``TOOL_SCHEMA_CHANGED`` when ``live`` lacks or changed an imported tool.

    A tool ``live`` names twice is changed too: the build refused such a listing, so this
    one is not what the agent was built from, and which entry holds is not for us to pick.
    """
    listed = {tool.name: tool for tool in live}
    twice = repeated(live)
    changed = [f"{name} (listed twice)" for name in twice] + [
        name if name in listed else f"{name} (gone)"
        for name, built in expected.items()
        if name not in twice and (name not in listed or schemas(listed[name]) != built)
    ]
    if changed:
        raise ToolSchemaChangedError(
            f"MCP server {server!r} now lists other schemas than the agent was built "
            f"with, for: {', '.join(sorted(changed))}",
            hint="load the agent again (restart the command) so its tools match the server",
        )
