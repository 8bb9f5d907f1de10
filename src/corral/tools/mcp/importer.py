"""Importing an MCP server's chosen tools as ``ToolSpec``s, when the agent is built.

Plan templates are validated when the agent is built, against each tool's input and
output models, so the schemas must be known then: the server is started once, its tools
are listed, and it is stopped again (nothing keeps running for an agent never used); with
an ``McpListingCache``, a listing read for an earlier build of the same server is reused.
Calls start it anew, lazily, on the event loop of the run (the SDK's sessions cannot move
between loops). A server that cannot be started or listed, or lacks a chosen tool, fails
the build with ``CONFIG_INVALID``; so does a listing that names one tool twice (with two
schemas or one: which entry holds would be a silent choice, see ``listing.repeated``),
whether listed now or reused from an ``McpListingCache``.

Each imported tool is a ``declared_spec`` (as HTTP tools are) whose function calls the
agent's ``McpConnection``: its input model comes from the tool's ``inputSchema``, its
output model from the ``outputSchema`` when the server gives one, else the single field
``value`` holding a JSON value (see ``results``).
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic_core import to_jsonable_python

from corral.errors import ConfigInvalidError, CorralError
from corral.tools.context import ToolContext
from corral.tools.declared import CONTEXT_PARAM, declared_spec
from corral.tools.mcp.connection import McpConnection, McpLaunch, list_tools_now
from corral.tools.mcp.declared import McpServerConfig, McpToolConfig
from corral.tools.mcp.listing import McpListingCache, check_listing, repeated, schemas
from corral.tools.mcp.results import result_value
from corral.tools.policy import ToolKind
from corral.tools.schema_models import object_fields, python_name
from corral.tools.sensitive import SECRET_NAME
from corral.tools.spec import ToolSpec
from corral.tools.transport import placeholders, redact, resolve_placeholders, secrets_in

if TYPE_CHECKING:
    from mcp.types import Tool

KEY_META = "corral/idempotency_key"
"""The request ``_meta`` entry carrying a write's idempotency key."""
TEXT_ANSWER: dict[str, Any] = {
    "type": ["string", "integer", "number", "boolean", "array", "object", "null"]
}
"""What a tool without an output schema returns: a JSON value (its text, or the JSON the
text holds), kept as the single field ``value``."""


def launch_of(server: McpServerConfig, root: Path | None, deps: Mapping[str, Any]) -> McpLaunch:
    """``server`` with its ``${NAME}``s resolved now: from ``deps``, then the environment."""

    def resolved(text: str) -> str:
        return resolve_placeholders(text, deps)

    return McpLaunch(
        name=server.name,
        command=tuple(resolved(part) for part in server.command or ()),
        url=resolved(server.url) if server.url is not None else None,
        env={key: resolved(value) for key, value in server.env.items()},
        cwd=(root or Path.cwd()).resolve(),
        headers={key: resolved(value) for key, value in server.headers.items()},
        startup_timeout_s=server.startup_timeout_s,
        secrets=(
            *(s for value in server.headers.values() for s in secrets_in(value, deps)),
            *(
                s
                for value in _secret_env(server.env)
                for s in secrets_in(value, deps)
                if len(s) >= MIN_ENV_SECRET
            ),
        ),
    )


MIN_ENV_SECRET = 8
"""An ``env`` secret shorter than this is not hunted for in answers: a 4-letter password
("your") was cut out of ordinary text. Keys and tokens are longer."""


def _secret_env(env: Mapping[str, str]) -> list[str]:
    """The ``env`` values that hold a secret: named as one (``API_KEY: "${SHOP_KEY}"``).

    A stdio server takes its API key in its environment; an answer that echoes it is
    hidden as a header's is. By name only: ``NOTES_DB: "${DB_PATH}"`` is a path, and
    every occurrence of a value taken for a secret is cut out of every answer.
    """
    return [
        value
        for key, value in env.items()
        if SECRET_NAME.fullmatch(key)
        or any(SECRET_NAME.fullmatch(name) for name in placeholders(value))
    ]


@dataclass(frozen=True)
class _Binding:
    """What one imported tool's function needs to call the server."""

    connection: McpConnection
    remote: str
    """The tool's name on the server."""
    aliases: Mapping[str, str]
    """Input field -> the argument's JSON name."""
    optional: frozenset[str]
    """Input fields left out of the request when they are ``None``."""
    structured: bool
    kind: ToolKind
    key_argument: str | None


async def _call(binding: _Binding, /, **fields: Any) -> Any:
    """Call the tool on its server; the result as the ``ToolSpec`` declares it."""
    context: ToolContext = fields.pop(CONTEXT_PARAM)
    arguments = {
        binding.aliases[field]: to_jsonable_python(value, by_alias=True)
        for field, value in fields.items()
        if not (value is None and field in binding.optional)
    }
    meta: dict[str, Any] | None = None
    if binding.kind == "write":
        meta = {KEY_META: context.idempotency_key}
        if binding.key_argument is not None:
            arguments[binding.key_argument] = context.idempotency_key
    result = await binding.connection.call_tool(binding.remote, arguments, meta)
    secrets = binding.connection.secrets
    return redact(result_value(binding.remote, result, binding.structured, secrets), secrets)


def _input_schema(tool: Tool, key_argument: str | None) -> dict[str, Any]:
    """The tool's input schema, without the argument corral fills with the key."""
    schema = dict(tool.input_schema)
    if key_argument is None:
        return schema
    fields, needed = object_fields(schema, f"mcp tool {tool.name!r}")
    properties = dict(fields)
    if key_argument not in properties:
        raise ConfigInvalidError(
            f"mcp tool {tool.name!r}: key_argument {key_argument!r} is not one of its "
            f"arguments ({', '.join(properties) or 'none'})"
        )
    del properties[key_argument]
    schema["properties"] = properties
    schema["required"] = [name for name in needed if name != key_argument]
    return schema


def mcp_tool_spec(connection: McpConnection, tool: Tool, config: McpToolConfig) -> ToolSpec:
    """One listed tool as a ``ToolSpec`` with the policy ``config`` gives it."""
    name = config.name or tool.name
    input_schema = _input_schema(tool, config.key_argument)
    properties, needed = object_fields(input_schema, f"mcp tool {tool.name!r}")
    required = set(needed)
    binding = _Binding(
        connection,
        tool.name,
        {python_name(field): field for field in properties},
        frozenset(python_name(field) for field in properties if field not in required),
        tool.output_schema is not None,
        config.kind,
        config.key_argument,
    )
    return declared_spec(
        name,
        (tool.description or tool.title or name).split("\n\n")[0].strip(),
        functools.partial(_call, binding),
        input_schema=input_schema,
        output_schema=tool.output_schema or TEXT_ANSWER,
        policy=config.to_policy(),
        summary=config.summary,
    )


def mcp_tools(
    servers: Sequence[McpServerConfig],
    *,
    root: Path | None,
    deps: Mapping[str, Any],
    listings: McpListingCache | None = None,
) -> tuple[list[ToolSpec], list[McpConnection]]:
    """The chosen tools of every server, and one connection per server (not yet open).

    Each server is started once, here, to list its tools, and stopped again, unless
    ``listings`` already holds its listing. Each connection checks the live listing at
    every start against the schemas the tools were built from (``TOOL_SCHEMA_CHANGED``).
    """
    if servers and importlib.util.find_spec("mcp") is None:
        raise ConfigInvalidError(
            "mcp_servers need the mcp SDK, which is not installed", hint="pip install 'corral[mcp]'"
        )
    names = [server.name for server in servers]
    doubled = sorted({name for name in names if names.count(name) > 1})
    if doubled:
        raise ConfigInvalidError(f"mcp_servers: names used twice: {doubled}")
    specs: list[ToolSpec] = []
    connections: list[McpConnection] = []
    for server in servers:
        launch = functools.partial(launch_of, server, root, deps)
        try:
            if listings is None:
                tools = list_tools_now(launch())
            else:
                tools = listings.tools(launch(), server.listing_ignores_env)
            listed = {tool.name: tool for tool in tools}
        except CorralError as exc:
            raise ConfigInvalidError(
                f"mcp server {server.name!r}: cannot list its tools: {exc.message}",
                hint="run its command by hand to see why it does not start",
            ) from None
        except Exception as exc:  # whatever the SDK or the server raised
            detail = f"{type(exc).__name__}: {exc}"[:300]
            raise ConfigInvalidError(
                f"mcp server {server.name!r}: cannot list its tools: {detail}"
            ) from None
        twice = repeated(tools)  # checked here, after the cache: a reused listing too
        if twice:
            raise ConfigInvalidError(
                f"mcp server {server.name!r} lists a tool twice: {', '.join(map(repr, twice))}",
                hint="a server must name each tool once; which entry is meant cannot be told",
            )
        missing = sorted(set(server.tools) - set(listed))
        if missing:
            raise ConfigInvalidError(
                f"mcp server {server.name!r} has no tool {', '.join(map(repr, missing))}",
                hint=f"it offers: {', '.join(sorted(listed)) or 'nothing'}",
            )
        expected = {remote: schemas(listed[remote]) for remote in server.tools}
        verify = functools.partial(check_listing, server.name, expected)
        connection = McpConnection(server.name, launch, verify)
        for remote, config in server.tools.items():
            try:
                specs.append(mcp_tool_spec(connection, listed[remote], config))
            except CorralError as exc:
                raise ConfigInvalidError(
                    f"mcp server {server.name!r}, tool {remote!r}: {exc.message}"
                ) from None
            except Exception as exc:  # a listing is the server's: any shape may come
                raise ConfigInvalidError(
                    f"mcp server {server.name!r}, tool {remote!r}: its listing cannot be "
                    f"read ({type(exc).__name__}: {str(exc)[:200]})"
                ) from None
        connections.append(connection)
    return specs, connections
