"""The log of one step's attempts at one tool: each recorded as it ends (``AttemptLog``)."""

from __future__ import annotations

from functools import partial
from types import MappingProxyType
from typing import TYPE_CHECKING

from corral.contracts import ToolStatus, ToolTimeout
from corral.events import ToolAttempt, ToolTimeoutSignal
from corral.runtime.timeouts import handle_tool_timeout, timed_out
from corral.tools.invoke import Attempt
from corral.tools.spec import ToolSpec

if TYPE_CHECKING:
    from corral.runtime.journal import Journal

_STATUS_TEXT = MappingProxyType({status: status.value for status in ToolStatus})
"""Statuses written on every attempt, read off their enum once (``.value`` is a property:
two calls each time)."""


class AttemptLog:
    """Records every attempt of ``tool`` for one step in the run's log (``on_attempt``).

    A first attempt that succeeded is held (``Journal.hold``): the step's
    ``step_finished`` stands for it when the step ends with its result. Any other attempt
    (a retry, a failure, a timeout, one that says ``applied`` or ``in_flight``) is an
    event of its own, as it happens. With ``signals_timeouts``, an attempt that did not
    answer in time is followed by its ``tool_timeout`` signal (``next_tool``: the
    equivalent tool ranked after ``tool``).

    It keeps what the call reads back (how many attempts, the last one). One object per
    call: it stands for the listener closures each step allocated before. A held
    attempt's event is made by a ``partial`` that holds no journal: a run that ends with
    an attempt still held leaves no cycle for the collector.
    """

    __slots__ = (
        "count",
        "journal",
        "last",
        "next_tool",
        "signals_timeouts",
        "step_id",
        "tool",
    )

    def __init__(
        self,
        journal: Journal,
        step_id: str,
        tool: ToolSpec,
        signals_timeouts: bool = False,
        next_tool: str | None = None,
    ) -> None:
        self.journal = journal
        self.step_id = step_id
        self.tool = tool
        self.signals_timeouts = signals_timeouts
        self.next_tool = next_tool
        self.count = 0
        """Attempts made so far."""
        self.last: Attempt | None = None
        """The latest attempt."""

    def __call__(self, attempt: Attempt) -> None:
        """Record ``attempt`` (see the class)."""
        self.count += 1
        self.last = attempt
        if (
            attempt.number == 1
            and attempt.status is ToolStatus.SUCCESS
            and attempt.applied is None
            and not attempt.in_flight
        ):
            # how to make its event, holding nothing that holds the journal (no cycle)
            self.journal.hold(
                self.step_id,
                self.tool.name,
                partial(attempt_event, self.step_id, self.tool.name, attempt),
            )
        else:
            self.journal.emit("execute", attempt_event(self.step_id, self.tool.name, attempt))
        if self.signals_timeouts and timed_out(attempt):
            self._signal_timeout(attempt)

    def _signal_timeout(self, attempt: Attempt) -> None:
        """Signal ``tool_timeout`` for the attempt, with its handler's outcome."""
        spec, next_tool = self.tool, self.next_tool
        signal = ToolTimeout(
            step_id=self.step_id,
            tool=spec.name,
            attempt=attempt.number,
            timeout_s=spec.policy.timeout_s,
        )
        outcome = handle_tool_timeout(attempt, spec, next_tool)
        shown = next_tool if outcome == "switch" else None
        self.journal.emit("execute", ToolTimeoutSignal(signal, outcome, shown))


def attempt_event(step_id: str, tool: str, attempt: Attempt) -> ToolAttempt:
    """``attempt`` of ``tool`` for the step as its ``tool_attempt`` event."""
    return ToolAttempt(
        step_id,
        tool,
        attempt.number,
        _STATUS_TEXT[attempt.status],
        round(attempt.duration_ms, 3),
        attempt.error_code,
        attempt.error_message,
        attempt.retryable,
        attempt.backoff_s,
        attempt.data,
        attempt.applied,
        attempt.in_flight,
    )
