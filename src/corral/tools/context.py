"""What a tool may see of the run besides its arguments."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from corral.contracts import Language


@dataclass(frozen=True)
class ToolContext:
    """Handed to a tool that declares a parameter annotated ``ToolContext``.

    It is not part of the tool's input schema, so a planner can never set it. A read tool
    that declares no such parameter is handed one without a key or facts (``Effects``
    passes it through unread); a write's always carries its key.
    """

    run_id: str
    step_id: str
    idempotency_key: str
    """Stable for this run, step and arguments: a write tool stores it to never act twice."""
    deps: Mapping[str, Any] = field(default_factory=dict)
    """The agent's dependencies (database paths, clients), from its ``setup`` hook."""
    facts: Mapping[str, Any] = field(default_factory=dict)
    """Verified facts so far (read-only), for tools such as reply generation."""
    language: Language = "zh"
    received_at: datetime = field(default_factory=lambda: datetime(1970, 1, 1, tzinfo=UTC))
    """When the run received its message (recorded once): use it instead of the system clock
    so that the same run always computes the same answer, in replays too."""
    render: Callable[[str, Mapping[str, Any]], str] | None = None
    """Renders one of the agent's templates; set for every tool."""
    timezone: str = "UTC"
    """The agent's timezone (``timezone:`` in agent.yaml), where dates the user says live."""

    @classmethod
    def of_call(
        cls,
        run_id: str,
        step_id: str,
        idempotency_key: str,
        deps: Mapping[str, Any],
        facts: Mapping[str, Any],
        language: Language,
        received_at: datetime,
        render: Callable[[str, Mapping[str, Any]], str] | None,
        timezone: str,
    ) -> ToolContext:
        """The context of one call, every field given: what the constructor would make.

        The scheduler makes one per step. A frozen dataclass's ``__init__`` sets each of
        its nine fields through ``object.__setattr__``, which cost more than the rest of
        the context; the fields are set here at once. Equal, hashed, shown and replaced
        as one built by the constructor.
        """
        context = _new(cls)
        context.__dict__.update(
            run_id=run_id,
            step_id=step_id,
            idempotency_key=idempotency_key,
            deps=deps,
            facts=facts,
            language=language,
            received_at=received_at,
            render=render,
            timezone=timezone,
        )
        return context

    def today(self) -> date:
        """The run's date in the agent's timezone: what "today" and "three months ago" mean.

        ``received_at`` is in UTC; its date can be a day off the user's (at 16:30 UTC it is
        already tomorrow in Shanghai), and date extraction reads the user's dates in the
        agent's timezone, so a tool that compares with them must too.
        """
        return self.received_at.astimezone(ZoneInfo(self.timezone)).date()


_new = object.__new__
