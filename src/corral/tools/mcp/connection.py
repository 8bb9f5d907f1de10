"""One MCP server as a tool transport: started lazily, restarted after a death, closed.

The SDK's transports (``stdio_client``, ``streamable_http_client``) and ``ClientSession``
are async context managers bound to the task that enters them. Tool calls come from
whichever task runs a step, and a timeout cancels that task, so one *owner* task per
server start enters them, publishes the ready session, and exits them when told to stop.
A call that times out therefore cancels only its own request, never the server.

A server found dead before a request is sent is restarted first, invisibly. One that dies
while a request is in flight makes that call fail with ``TransientToolError`` (retryable;
for a write the effect may have happened); the next call starts a fresh process.

Each start of a server whose tools an agent imported lists them again before its first
request, and a listing that no longer fits the agent's tools fails the call with
``TOOL_SCHEMA_CHANGED`` (``listing.check_listing``).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pydantic import ValidationError

from corral.clipping import clip
from corral.errors import (
    CorralError,
    ToolFailedError,
    ToolOutputInvalidError,
    ToolTimeoutError,
    TransientToolError,
)
from corral.tools.transport import redact

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.types import CallToolResult, RequestParamsMeta, Tool

PYTHON_NAMES = frozenset({"python", "python3"})
"""A stdio command starting with one of these runs under corral's own interpreter, so a
server written in Python finds the packages corral was installed with."""

_MAX_PAGES = 100
"""Pages of ``tools/list`` read at most: a server that paginates forever cannot hang a load."""


@dataclass(frozen=True)
class McpLaunch:
    """How to reach one server, with every ``${NAME}`` already resolved."""

    name: str
    command: tuple[str, ...] = ()
    """A stdio server: the program and its arguments (empty for an HTTP server)."""
    url: str | None = None
    """A streamable HTTP server's endpoint."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Added to the SDK's minimal inherited environment (``PATH``, ``HOME``...)."""
    cwd: Path | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    startup_timeout_s: float = 10.0
    secrets: tuple[str, ...] = ()
    """What ``${NAME}`` put in the headers: redacted from every answer of the server."""

    def argv(self) -> list[str]:
        """The command to run, ``python`` meaning the interpreter running corral."""
        first, *rest = self.command
        return [sys.executable if first in PYTHON_NAMES else first, *rest]


@contextlib.asynccontextmanager
async def _streams(launch: McpLaunch) -> AsyncIterator[Any]:
    """The SDK transport for ``launch``: a child process over stdio, or streamable HTTP."""
    if launch.url is not None:
        from mcp.client.streamable_http import streamable_http_client

        from corral.tools.mcp.capped import capped_client  # needs the ``mcp`` extra

        client = capped_client(launch.headers)
        async with client, streamable_http_client(launch.url, http_client=client) as streams:
            yield streams
        return
    from mcp import StdioServerParameters, stdio_client

    program, *args = launch.argv()
    params = StdioServerParameters(command=program, args=args, env=dict(launch.env), cwd=launch.cwd)
    async with stdio_client(params) as streams:
        yield streams


def _leaf(exc: BaseException) -> BaseException:
    """The first real failure inside the exception groups of anyio's task groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def _list_all(session: ClientSession) -> list[Tool]:
    """Every tool the server offers, all pages read."""
    from mcp.types import PaginatedRequestParams

    tools: list[Tool] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


Verify = Callable[[list["Tool"]], None]
"""Checks a fresh start's listing against what the agent was built with; raises if not."""


async def _own(
    launch: McpLaunch,
    ready: asyncio.Future[ClientSession],
    stop: asyncio.Event,
    verify: Verify | None = None,
) -> None:
    """Enter the transport and the session, publish the session, hold it until ``stop``.

    With ``verify``, the session is published only once the live listing passed it.
    """
    import anyio
    from mcp import ClientSession

    try:
        async with _streams(launch) as (read, write), ClientSession(read, write) as session:
            with anyio.fail_after(launch.startup_timeout_s):
                await session.initialize()
                if verify is not None:
                    verify(await _list_all(session))
            ready.set_result(session)
            await stop.wait()
    except asyncio.CancelledError:
        ready.cancel()
        raise
    except Exception as exc:  # handed to the callers waiting for it
        if not ready.done():
            ready.set_exception(_leaf(exc))


@dataclass
class _Started:
    """One start of the server: its owner task and the session it publishes."""

    owner: asyncio.Task[None]
    ready: asyncio.Future[ClientSession]
    stop: asyncio.Event
    loop: asyncio.AbstractEventLoop

    def dead(self) -> bool:
        """Whether this start can no longer carry a request (it failed, or the server quit).

        The SDK marks its dispatcher closed when the server's output ends; reading that
        flag lets a server that died between calls be restarted before a request is sent,
        so that request is never in doubt. The flag is private to the SDK (2.3, as pinned
        in constraints.txt); should it go, the next request finds the death instead, and
        fails retryable as a death mid-call does.
        """
        if self.owner.done():
            return True
        if not self.ready.done():
            return False
        if self.ready.cancelled() or self.ready.exception() is not None:
            return True
        dispatcher = getattr(self.ready.result(), "_dispatcher", None)
        return bool(getattr(dispatcher, "_closed", False))

    async def close(self) -> None:
        """Stop the session and the server, and wait until the process is gone."""
        self.stop.set()
        if not self.ready.done():
            self.owner.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.owner


class McpConnection:
    """One MCP server of an agent: the ``ToolTransport`` its tools are called over.

    Opened by the first call (building an agent starts nothing), reopened after the server
    dies or after ``aclose``. ``starts`` counts the processes (or HTTP sessions) begun.
    """

    def __init__(
        self, name: str, launch: Callable[[], McpLaunch], verify: Verify | None = None
    ) -> None:
        self.name = name
        self._launch = launch
        self._verify = verify
        """Run on each start's listing before its first request (``listing.check_listing``)."""
        self._started: _Started | None = None
        self.starts = 0
        self.secrets: tuple[str, ...] = ()
        """The secrets of the current start (``McpLaunch.secrets``)."""

    @property
    def running(self) -> bool:
        """Whether a started server is up and can carry a request now (health checks)."""
        started = self._started
        return started is not None and started.ready.done() and not started.dead()

    async def _session(self) -> ClientSession:
        """The live session, starting (or restarting) the server when there is none."""
        loop = asyncio.get_running_loop()
        started = self._started
        if started is not None and (started.loop is not loop or started.dead()):
            self._started = None
            if started.loop is loop:
                await started.close()  # reap what is left of the dead one
            started = self._started  # another caller may have restarted it meanwhile
        if started is None:
            launch = self._launch()
            self.secrets = launch.secrets
            ready: asyncio.Future[ClientSession] = loop.create_future()
            stop = asyncio.Event()
            owner = loop.create_task(
                _own(launch, ready, stop, self._verify), name=f"mcp-{self.name}"
            )
            started = self._started = _Started(owner, ready, stop, loop)
            self.starts += 1
        try:
            return await asyncio.shield(started.ready)  # a call's timeout never stops a start
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if self._started is started:
                self._started = None
            if isinstance(exc, CorralError):  # the live listing failed ``verify``
                raise
            raise TransientToolError(
                f"MCP server {self.name!r} did not start: {type(exc).__name__}: {exc}"[:300],
                applied=False,
            ) from None

    async def call_tool(
        self, tool: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None
    ) -> CallToolResult:
        """Call one tool; a dead server, a refusal or a broken answer raise corral errors."""
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED

        session = await self._session()
        started = self._started
        try:
            return await session.call_tool(tool, arguments, meta=cast("RequestParamsMeta", meta))
        except MCPError as exc:
            # -32000 is also JSON-RPC's usual "server error", and the SDK's stdio and HTTP
            # clients report a lost connection with it under several wordings: a server's
            # own -32000 is read as its death too, the safe side (a write's outcome unknown,
            # never a refusal that would let it run again). docs/mcp.md asks servers to
            # refuse with another code.
            if exc.code != CONNECTION_CLOSED:  # the server answered with an error
                said = redact(exc.message, self.secrets)
                message = f"MCP server {self.name!r} refused {tool}: {said}"
                raise ToolFailedError(clip(message, 300)) from None
            await self._discard(started)
            raise TransientToolError(
                f"MCP server {self.name!r} went away while {tool} was running"
            ) from None
        except RuntimeError:  # the SDK's check against the tool's output schema
            # Its message quotes the offending content: the raw answer stays out of the log.
            raise ToolOutputInvalidError(
                f"MCP tool {tool!r} answered content that does not match its output schema"
            ) from None
        except ValidationError:  # no CallToolResult at all; its message quotes it too
            raise ToolOutputInvalidError(
                f"MCP tool {tool!r} answered something that is not a tool result"
            ) from None
        except Exception:
            await self._discard(started)  # an unknown state: the next call starts afresh
            raise

    async def _discard(self, started: _Started | None) -> None:
        """Stop ``started`` if it is still the current start, so the next call restarts."""
        if started is not None and self._started is started:
            self._started = None
            await started.close()

    async def list_tools(self, timeout_s: float) -> list[Tool]:
        """Every tool the server offers, all pages read within ``timeout_s`` of the start.

        A server that starts but never answers ``tools/list`` would otherwise hang the
        agent's load for ever.
        """
        session = await self._session()
        try:
            async with asyncio.timeout(timeout_s):
                return await _list_all(session)
        except TimeoutError:
            raise ToolTimeoutError(
                f"MCP server {self.name!r} did not list its tools within {timeout_s:g} s"
            ) from None

    async def aclose(self) -> None:
        """Stop the server; the next call starts it again."""
        started, self._started = self._started, None
        if started is not None and started.loop is asyncio.get_running_loop():
            await started.close()


def list_tools_now(launch: McpLaunch) -> list[Tool]:
    """List a server's tools from synchronous code (loading an agent), then stop it.

    It runs on an event loop of its own in a worker thread, so it works whether or not the
    caller is inside a running loop; the process it starts is stopped before it returns.
    """

    async def listing() -> list[Tool]:
        connection = McpConnection(launch.name, lambda: launch)
        try:
            return await connection.list_tools(launch.startup_timeout_s)
        finally:
            await connection.aclose()

    with ThreadPoolExecutor(1, thread_name_prefix=f"mcp-{launch.name}") as pool:
        return pool.submit(asyncio.run, listing()).result()
