"""What ``agent.yaml`` says about tools declared in config (HTTP, OpenAPI, MCP).

These are boundary models, strict like the rest of the config: an unknown key is an error
at load. They live beside the tools they describe, and ``corral.config`` uses them (the
import goes config -> tools, never back), so ``corral.config.ToolPolicyConfig`` is this
class.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from corral.tools.policy import RetryPolicy, ToolKind, ToolPolicy

_DEFAULT = ToolPolicy()


class DeclaredConfig(BaseModel):
    """Strict, frozen, finite: the base of every config model of declared tools."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


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
