"""What ``agent.yaml`` says about tools declared in config (HTTP, OpenAPI, MCP).

These are boundary models, strict like the rest of the config: an unknown key is an error
at load. They live beside the tools they describe, and ``corral.config`` uses them (the
import goes config -> tools, never back), so ``corral.config.ToolPolicyConfig`` is this
class.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from corral.inputs import lone_surrogate_at, unicode_safe_value
from corral.tools.outputs import VALUE_FIELD
from corral.tools.policy import RateLimit, RetryPolicy, ToolKind, ToolPolicy
from corral.tools.schema_models import model_from_schema
from corral.tools.spec import ToolSpec

_DEFAULT = ToolPolicy()


class DeclaredConfig(BaseModel):
    """Strict, frozen, finite: the base of every config model of declared tools."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class RateLimitConfig(DeclaredConfig):
    """``rate_limit: {calls: 5, per_s: 1.0}``: a ``RateLimit`` written in yaml."""

    calls: int = Field(ge=1, strict=True)
    per_s: float = Field(gt=0)


class ToolPolicyConfig(DeclaredConfig):
    """A ``ToolPolicy`` written in yaml; the defaults are ``ToolPolicy``'s own."""

    kind: ToolKind = _DEFAULT.kind
    idempotent: bool = _DEFAULT.idempotent
    timeout_s: float = Field(_DEFAULT.timeout_s, gt=0)
    max_retries: int = Field(_DEFAULT.retry.max_retries, ge=0, le=10)
    backoff_s: tuple[float, ...] = Field(_DEFAULT.retry.backoff_s)
    requires_confirmation: bool = _DEFAULT.requires_confirmation
    equivalent_group: str | None = _DEFAULT.equivalent_group
    latency_ms: float = Field(_DEFAULT.latency_ms, ge=0)
    cost: float = Field(_DEFAULT.cost, ge=0)
    rate_limit: RateLimitConfig | None = None
    """At most ``calls`` calls in any ``per_s`` seconds, across all workers."""
    max_output_chars: int = Field(_DEFAULT.max_output_chars, ge=1)
    max_interrupted_calls: int = Field(_DEFAULT.max_interrupted_calls, ge=1, le=100, strict=True)

    def to_policy(self) -> ToolPolicy:
        """The policy the invoke machinery applies."""
        return ToolPolicy(
            kind=self.kind,
            idempotent=self.idempotent,
            timeout_s=self.timeout_s,
            retry=RetryPolicy(self.max_retries, tuple(self.backoff_s)),
            requires_confirmation=self.requires_confirmation,
            equivalent_group=self.equivalent_group,
            latency_ms=self.latency_ms,
            cost=self.cost,
            rate_limit=(
                None
                if self.rate_limit is None
                else RateLimit(self.rate_limit.calls, self.rate_limit.per_s)
            ),
            max_output_chars=self.max_output_chars,
            max_interrupted_calls=self.max_interrupted_calls,
        )


class AuthConfig(DeclaredConfig):
    """An auth header whose value comes from an environment variable, never from yaml.

    The value is read when the transport opens; it is sent, never logged, and redacted
    in envelopes and events.
    """

    header: str = "Authorization"
    env: str
    """The environment variable holding the secret (the token, without the scheme)."""
    scheme: Literal["Bearer", "Basic", "Token", ""] = ""
    """Put before the value with a space (``Bearer abc``); empty: the value as it is."""


CONTEXT_PARAM = "_corral_context"
"""The keyword a declared tool's function gets its ``ToolContext`` under; no schema field
can have this name (``python_name`` never starts one with ``_``)."""


@dataclass(frozen=True)
class DeclaredReturns:
    """What a tool declared by a JSON Schema returns: equal when the schemas are equal.

    ``ToolSpec.returns`` of a function tool is its return type; two tools declared in
    config with the same output schema (equivalent flight searches) return the same thing.
    """

    schema: str
    """The output schema as canonical JSON."""

    def __str__(self) -> str:
        return "the declared output schema"


def declared_spec(
    name: str,
    description: str,
    fn: Callable[..., Any],
    *,
    input_schema: Mapping[str, Any],
    output_schema: Mapping[str, Any],
    policy: ToolPolicy,
    summary: str | None = None,
    document: Mapping[str, Any] | None = None,
) -> ToolSpec:
    """A ``ToolSpec`` for a tool declared by JSON Schemas (HTTP, OpenAPI, MCP).

    ``fn`` is an ``async def`` taking the validated arguments as keywords and the
    ``ToolContext`` as ``CONTEXT_PARAM``; it returns the decoded response (only the declared
    fields are kept), or ``None`` for no result, and raises what function tools raise
    (``TransientToolError`` for a retryable failure, ``ToolFailedError``...), so timeouts,
    retries and envelopes are the function tools' own. An output schema that is not an
    object (an array) is kept as ``{"value": ...}``.

    A description or schema holding a lone surrogate (a listing or document decoded
    wrongly) is kept with U+FFFD: it reaches a model's prompt and a run's records, which
    UTF-8 must encode.
    """
    description, input_schema, output_schema, document = _unicode_safe(
        description, input_schema, output_schema, document
    )
    wrapped = output_schema.get("type", "object") != "object"
    shown = (
        {"type": "object", "properties": {VALUE_FIELD: output_schema}, "required": [VALUE_FIELD]}
        if wrapped
        else output_schema
    )
    return ToolSpec(
        name=name,
        description=description,
        fn=fn,
        input_model=model_from_schema(
            f"{name}_input", input_schema, extra="forbid", document=document
        ),
        output_model=model_from_schema(f"{name}_output", shown, document=document),
        policy=policy,
        context_param=CONTEXT_PARAM,
        may_return_none=True,
        summary_template=summary,
        returns=DeclaredReturns(json.dumps(output_schema, sort_keys=True, default=str)),
        wrapped=wrapped,
    )


def _unicode_safe(*values: Any) -> Any:
    """``values`` as they are, or ``inputs.unicode_safe_value`` of them if one needs it."""
    if lone_surrogate_at(list(values)) is None:
        return values
    return tuple(unicode_safe_value(value) for value in values)
