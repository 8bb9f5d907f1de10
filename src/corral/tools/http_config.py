"""``http_tools:`` and ``openapi:`` in agent.yaml: HTTP endpoints declared as tools.

Boundary models, strict like the rest of the config. Only the shape is checked here;
the schemas become models when the agent is built (``corral.tools.http``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, model_validator

from corral.tools.declared import AuthConfig, DeclaredConfig, ToolPolicyConfig

ParamIn = Literal["path", "query", "header", "body"]
HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
NotFound = Literal["no_result", "error"]
MAX_RESPONSE_BYTES = 1024 * 1024
"""A response body larger than this (1 MiB) is cut off while it streams, never parsed."""
PATH_PARAM = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_-]*)\}")
"""``{city}`` in a URL template; ``${NAME}`` is a placeholder, not a parameter."""
TOOL_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
IDEMPOTENCY_HEADER = "Idempotency-Key"


FRAMING_HEADERS = frozenset(
    {
        "accept",
        "accept-encoding",
        "authorization",
        "connection",
        "content-length",
        "content-type",
        "expect",
        "host",
        "keep-alive",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
"""Headers that say how the request is framed, where it goes or who sends it: corral and
its HTTP client set them. OpenAPI ignores a parameter named Accept, Content-Type or
Authorization; one naming ``Transfer-Encoding`` or ``Host`` let a user's words split the
request (smuggling) or send it elsewhere."""


def own_headers(auth: AuthConfig | None, headers: Mapping[str, str]) -> frozenset[str]:
    """The headers corral sends itself (lower case), which no argument may be.

    The idempotency key, the auth, config headers and the request's framing
    (``FRAMING_HEADERS``). A plan would have to invent the idempotency key (the same on
    every retry and resume only by luck) or hold the token, and a user's words could
    change where and how the request is sent.
    """
    auth_header = {auth.header} if auth is not None else set()
    return FRAMING_HEADERS | {h.lower() for h in {IDEMPOTENCY_HEADER, *auth_header, *headers}}


def _object() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


class HttpToolConfig(DeclaredConfig):
    """One HTTP endpoint as a tool: where it is, what it takes and what it answers.

    The arguments named in the URL template (``{city}``) fill the path; the others go to
    the query string (GET, DELETE) or the JSON body (POST, PUT, PATCH), unless ``params_in``
    says otherwise. Only the fields of ``output`` are kept from the response.
    """

    name: str = Field(pattern=TOOL_NAME)
    description: str = ""
    method: HttpMethod = "GET"
    url: str = Field(pattern=r"^(https?://|\$\{)")
    """``https://host/path/{param}``; ``${NAME}`` is taken from the deps, then the environment."""
    input: dict[str, Any] = Field(default_factory=_object)
    """The JSON Schema (an object) of the arguments."""
    output: dict[str, Any] = Field(default_factory=_object)
    """The JSON Schema of a successful (2xx) JSON response; undeclared fields are dropped."""
    params_in: dict[str, ParamIn] = Field(default_factory=dict)
    """Argument -> where it goes, when not where the method puts it."""
    auth: AuthConfig | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    """Sent with every call; values may say ``${NAME}`` (then treated as secrets)."""
    policy: ToolPolicyConfig = Field(default_factory=ToolPolicyConfig)
    summary: str | None = None
    """A ``str.format`` template over output fields, as ``@tool(summary=...)``."""
    max_response_bytes: int = Field(MAX_RESPONSE_BYTES, ge=1)
    not_found: NotFound = "no_result"
    """What a 404 to a read means: ``no_result`` (the thing asked for does not exist), or
    ``error`` (a failed call, ``TOOL_FAILED``): for an endpoint that never answers 404 for
    a missing thing, so that a wrong base URL is not read as "nothing found"."""

    @model_validator(mode="after")
    def _parameters_exist(self) -> HttpToolConfig:
        """Path parameters are required arguments; ``params_in`` names declared ones."""
        from corral.errors import ConfigInvalidError
        from corral.tools.schema_models import object_fields  # with the first HTTP tool

        try:
            properties, needed = object_fields(self.input, f"{self.name}: input")
            object_fields(self.output, f"{self.name}: output")
        except ConfigInvalidError as exc:
            raise ValueError(exc.message) from None
        declared, required = set(properties), set(needed)
        for name in PATH_PARAM.findall(self.url):
            if name not in declared or name not in required:
                raise ValueError(f"{self.name}: {{{name}}} in the url must be a required input")
            if self.params_in.get(name, "path") != "path":
                raise ValueError(f"{self.name}: {{{name}}} is in the url, so it goes in the path")
        unknown = sorted(set(self.params_in) - declared)
        if unknown:
            raise ValueError(f"{self.name}: params_in names undeclared inputs {unknown}")
        own = own_headers(self.auth, self.headers)
        for name, where in self.params_in.items():
            if where == "header" and name.lower() in own:
                raise ValueError(f"{self.name}: corral sends the {name} header itself")
        return self


class OpenApiConfig(DeclaredConfig):
    """Operations of an OpenAPI 3 document imported as HTTP tools."""

    document: str
    """A JSON or YAML file, relative to the agent folder (never fetched over the network)."""
    base_url: str | None = None
    """Where the operations' paths are; by default the document's first ``servers`` URL."""
    operations: dict[str, str] = Field(min_length=1)
    """``operationId`` -> tool name; only these become tools."""
    auth: AuthConfig | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    policies: dict[str, ToolPolicyConfig] = Field(default_factory=dict)
    """Tool name -> its policy (default: ``ToolPolicy``'s)."""
    summaries: dict[str, str] = Field(default_factory=dict)
    """Tool name -> its summary template."""
    max_response_bytes: int = Field(MAX_RESPONSE_BYTES, ge=1)
    not_found: NotFound = "no_result"
    """``HttpToolConfig.not_found``, for every operation imported."""

    @model_validator(mode="after")
    def _names_are_tools(self) -> OpenApiConfig:
        tools = set(self.operations.values())
        for name in tools:
            if not re.match(TOOL_NAME, name):
                raise ValueError(f"operation tool name {name!r} is not an identifier")
        unknown = sorted((set(self.policies) | set(self.summaries)) - tools)
        if unknown:
            raise ValueError(f"policies or summaries name tools not imported: {unknown}")
        return self
