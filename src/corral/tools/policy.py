"""Per-tool policies as small typed values (timeouts, retries, side effects, ranking).

Defaults come from seed 002: network tools get 10 s, 2 retries, backoff 1 s then 2 s;
local computation gets 30 s and no retry.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal, get_args

from corral.errors import ConfigInvalidError

ToolKind = Literal["read", "write", "compute"]
_KINDS = get_args(ToolKind)


def _refuse(what: str, value: object, needs: str) -> ConfigInvalidError:
    return ConfigInvalidError(
        f"a tool policy's {what} is {needs}, not {value!r}",
        hint="a policy written in Python is checked as agent.yaml's tool policies are",
    )


def _seconds(value: object) -> bool:
    """A number of seconds: an int or float that is finite and not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class RetryPolicy:
    """How often a retryable failure is tried again, and how long to wait between tries."""

    max_retries: int = 2
    """Retries after the first attempt; seed 000/002: at most 2."""
    backoff_s: tuple[float, ...] = (1.0, 2.0)
    """Wait before retry 1, 2, ...; the last value repeats."""

    def __post_init__(self) -> None:
        """Refuse what agent.yaml refuses: a wrong value must not change how a write is tried."""
        retries = self.max_retries
        if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 10:
            raise _refuse("max_retries", retries, "a whole number from 0 to 10")
        if not isinstance(self.backoff_s, tuple) or not all(
            _seconds(s) and s >= 0 for s in self.backoff_s
        ):
            raise _refuse("backoff_s", self.backoff_s, "a tuple of seconds (0 or more)")

    def delay(self, retry_number: int) -> float:
        """Seconds to wait before the given retry (1-based)."""
        if not self.backoff_s:
            return 0.0
        return self.backoff_s[min(retry_number, len(self.backoff_s)) - 1]


NO_RETRY = RetryPolicy(max_retries=0, backoff_s=())


@dataclass(frozen=True)
class RateLimit:
    """At most ``calls`` calls of a tool in any ``per_s`` seconds, across every worker.

    Enforced by ``corral worker`` processes (``corral.workers.permits``): each call waits
    for a permit from the tool's DBOS queue. A run in one process (``Runtime``, ``corral
    run``, ``corral serve`` without ``--enqueue``) does not enforce it.
    """

    calls: int
    per_s: float

    def __post_init__(self) -> None:
        if isinstance(self.calls, bool) or not isinstance(self.calls, int) or self.calls < 1:
            raise ValueError(f"a rate limit allows at least 1 call, not {self.calls!r}")
        if not 0 < self.per_s < float("inf"):
            raise ValueError(f"a rate limit's period is positive seconds, not {self.per_s!r}")


@dataclass(frozen=True)
class ToolPolicy:
    """How one tool is called and ranked. Set per tool in ``@tool(policy=...)``."""

    kind: ToolKind = "read"
    """``write`` tools get an idempotency key and a durable log flush before they run.

    A write is never retried blindly: only a failure that proves the effect did not happen
    (``TransientToolError(applied=False)``, a connection that was never established) is
    retried, unless the tool is ``idempotent``. Any other failure leaves its outcome unknown.
    """
    idempotent: bool = False
    """For writes: the tool finds its own earlier effect by ``ctx.idempotency_key`` and
    returns it instead of acting again, so it may be retried after a timeout and re-entered
    when a crashed run is resumed."""
    timeout_s: float = 10.0
    """Per attempt. Seed 002: 10 s for network tools."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    """Applied to retryable failures only (timeouts, transient errors)."""
    requires_confirmation: bool = False
    """Pause the run in ``awaiting_confirm`` before this tool runs."""
    equivalent_group: str | None = None
    """Tools in the same group answer the same question; the decision layer picks one."""
    latency_ms: float = 100.0
    """Declared typical latency, used to rank equivalent tools."""
    cost: float = 0.0
    """Declared cost per call (any unit, consistent within a group)."""
    rate_limit: RateLimit | None = None
    """How often the tool may be called across all workers (an API's quota); none: freely."""
    max_output_chars: int = 1_000_000
    """The most characters a result may take as JSON; a longer one is
    ``TOOL_OUTPUT_INVALID``. Everything a result holds goes into the run's log, its
    replies and any model's context: a 30 MB answer made a 180 MB home and a 30 MB reply."""
    max_interrupted_calls: int = 3
    """For writes: how many of its calls the process may die in (a kill, a crash) before a
    resume stops entering it again. An idempotent write, or one its reconciler proved had
    not acted, is entered again on resume with the same key; once this many calls were
    interrupted (a poison input, a tool that exhausts memory), the run goes to a person
    instead. Apart from ``retry``: a deploy that kills the process is no failure of the
    tool's."""

    def __post_init__(self) -> None:
        """Refuse a policy agent.yaml would refuse, when the tool is declared.

        Found by a walkthrough: ``ToolPolicy(kind="writ")`` was taken, so the write was
        retried as a read after a timeout and entered three times; ``timeout_s=-1`` made
        every call time out.
        """
        if self.kind not in _KINDS:
            raise _refuse("kind", self.kind, " or ".join(map(repr, _KINDS)))
        for name in ("idempotent", "requires_confirmation"):
            if not isinstance(getattr(self, name), bool):
                raise _refuse(name, getattr(self, name), "True or False")
        if not (_seconds(self.timeout_s) and self.timeout_s > 0):
            raise _refuse("timeout_s", self.timeout_s, "a number of seconds above 0")
        if not isinstance(self.retry, RetryPolicy):
            raise _refuse("retry", self.retry, "a RetryPolicy")
        for name in ("latency_ms", "cost"):
            if not (_seconds(getattr(self, name)) and getattr(self, name) >= 0):
                raise _refuse(name, getattr(self, name), "a number, 0 or more")
        group = self.equivalent_group
        if group is not None and not (isinstance(group, str) and group.strip()):
            raise _refuse("equivalent_group", group, "a name or None")
        if self.rate_limit is not None and not isinstance(self.rate_limit, RateLimit):
            raise _refuse("rate_limit", self.rate_limit, "a RateLimit or None")
        chars = self.max_output_chars
        if isinstance(chars, bool) or not isinstance(chars, int) or chars < 1:
            raise _refuse("max_output_chars", chars, "a whole number above 0")
        deaths = self.max_interrupted_calls
        if isinstance(deaths, bool) or not isinstance(deaths, int) or not 1 <= deaths <= 100:
            raise _refuse("max_interrupted_calls", deaths, "a whole number from 1 to 100")


NETWORK = ToolPolicy()
LOCAL_COMPUTE = ToolPolicy(kind="compute", timeout_s=30.0, retry=NO_RETRY)
