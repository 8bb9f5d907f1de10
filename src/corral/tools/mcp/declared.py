"""What ``mcp_servers:`` in agent.yaml says: the servers, and which of their tools to import.

Strict boundary models like the rest of the config (an unknown key fails the load).
``corral.config`` uses them; nothing here imports the ``mcp`` SDK.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from corral.tools.declared import DeclaredConfig, ToolPolicyConfig


class McpToolConfig(ToolPolicyConfig):
    """One imported tool: its corral policy (read-only unless it says ``kind: write``).

    The policy fields are ``ToolPolicyConfig``'s; nothing the server says about a tool
    (its annotations, a ``readOnlyHint``) makes it a write or a read: config decides.
    """

    name: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """The tool's name in corral (plans, events); by default the server's name for it."""
    key_argument: str | None = None
    """For a write whose server takes the idempotency key as an argument: that argument.
    It is filled with the step's key and hidden from plans. The key is also always sent
    in the request's ``_meta`` as ``corral/idempotency_key``."""
    summary: str | None = None
    """A ``str.format`` template over the result's fields, for logs and replies."""

    @model_validator(mode="after")
    def _key_for_writes(self) -> McpToolConfig:
        if self.key_argument is not None and self.kind != "write":
            raise ValueError("key_argument is for writes (kind: write)")
        return self


class McpServerConfig(DeclaredConfig):
    """One MCP server: a stdio ``command`` run in the agent's folder, or an HTTP ``url``.

    ``${NAME}`` in ``command``, ``env`` values, ``url`` and ``headers`` values is resolved
    when the server is started, from the agent's deps (what ``setup`` returned), then the
    environment.
    """

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    command: tuple[str, ...] | None = Field(None, min_length=1)
    """Program and arguments; ``python`` is the interpreter running corral."""
    url: str | None = None
    """A streamable HTTP endpoint (``http://127.0.0.1:8931/mcp``)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment of a stdio server, added to a minimal inherited one (``PATH``,
    ``HOME``...): corral's own environment, and its secrets, are not passed on."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Headers of an HTTP server's requests (``Authorization: Bearer ${TOKEN}``)."""
    startup_timeout_s: float = Field(10.0, gt=0)
    """How long a start (process and ``initialize``) may take; and listing the tools, again."""
    listing_ignores_env: tuple[str, ...] = ()
    """Names in ``env`` whose values do not change which tools the server lists (a
    database path that differs per eval case): a command that builds the agent many
    times (``corral eval``) reuses the listing whatever their values. The listing is still
    checked against the live server at each start (``TOOL_SCHEMA_CHANGED``)."""
    tools: dict[str, McpToolConfig] = Field(min_length=1)
    """The server's tools to import, by the server's name: only these become tools."""

    @field_validator("tools", mode="before")
    @classmethod
    def _bare_names(cls, tools: Any) -> Any:
        """``tools: {get_note: }`` (no settings) imports it with the default policy."""
        if isinstance(tools, dict):
            return {name: {} if value is None else value for name, value in tools.items()}
        return tools

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(f"mcp server {self.name}: give either command (stdio) or url")
        if self.url is not None and self.env:
            raise ValueError(f"mcp server {self.name}: env is for a command, not a url")
        unknown = sorted(set(self.listing_ignores_env) - set(self.env))
        if unknown:
            raise ValueError(f"mcp server {self.name}: listing_ignores_env names no env {unknown}")
        if self.command is not None and self.headers:
            raise ValueError(f"mcp server {self.name}: headers are for a url, not a command")
        names = [tool.name or name for name, tool in self.tools.items()]
        doubled = sorted({n for n in names if names.count(n) > 1})
        if doubled:
            raise ValueError(f"mcp server {self.name}: tool names used twice: {doubled}")
        return self
