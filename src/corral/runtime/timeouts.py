"""The executor's one handler of ``tool_timeout``: retry, switch to an equivalent, or fail.

The executor raises the signal for every attempt of a tool that did not answer within its
policy's ``timeout_s``. The handler does not invent a policy of its own: it reads what the
existing machinery already decided. The tool's retry policy (``invoke_tool``) says whether
the same tool is tried again (the attempt carries its backoff); a write that may have acted
is settled by its reconciler, never retried blindly; otherwise the next equivalent tool
the decision layer ranked is tried (``another_tool_may_follow``), else the call fails and
the recovery ladder goes on (replan or handoff).
"""

from __future__ import annotations

from typing import Literal

from corral.errors import ErrorCode
from corral.tools.invoke import Attempt
from corral.tools.spec import ToolSpec

TimeoutOutcome = Literal["retry", "reconcile", "switch", "fail"]


_TOOL_TIMEOUT = ErrorCode.TOOL_TIMEOUT.value
"""Read off the enum once: ``timed_out`` is asked after every attempt."""


def timed_out(attempt: Attempt) -> bool:
    """Whether this attempt ended because the tool did not answer in time."""
    return attempt.error_code == _TOOL_TIMEOUT


def handle_tool_timeout(attempt: Attempt, spec: ToolSpec, next_tool: str | None) -> TimeoutOutcome:
    """What follows a timed-out attempt of ``spec`` (``next_tool``: the next ranked one)."""
    if attempt.backoff_s is not None:
        return "retry"
    if spec.policy.kind == "write" and attempt.applied is not False:
        return "reconcile"
    return "switch" if next_tool is not None else "fail"
