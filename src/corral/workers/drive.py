"""What a drive workflow is given and what it answers, as JSON: one shape on both sides.

The enqueuer (``RunQueue``) builds a ``DriveArgs`` and the workflow (``workflow.py``)
reads it; the workflow answers the run's summary as JSON, or an error record that the
enqueuer raises again as a corral error with the same code. Plain JSON crosses DBOS, so a
worker of another process (or another corral version's client) reads it the same.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from corral.errors import CorralError, ErrorCode

DriveKind = Literal["start", "resume", "run_plan"]


class DriveArgs(BaseModel):
    """One drive of a run: which agent, which run, and the input it brings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: DriveKind
    agent: str
    run_id: str
    message: str | None = None
    """``start``: the message; ``resume``: the session's message that gave the yes or no."""
    session_id: str | None = None
    priority: str | None = None
    approve: bool | None = None
    answer: str | None = None
    step_id: str | None = None
    message_id: str | None = None
    """The client's id of the session message this drive brings (``Runtime.start``)."""
    call: str | None = None
    """A decision's ``PendingAction.call``: the worker applies it only to that call."""
    plan: str | None = None
    """``run_plan``: a template name of the agent's config."""
    entities: dict[str, Any] | None = None


class DriveFailedError(CorralError):
    """A drive that ended in a corral error on its worker, raised again by the enqueuer."""

    def __init__(self, code: str, message: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.code = ErrorCode(code) if code in ErrorCode.__members__ else ErrorCode.TOOL_FAILED


def error_record(exc: CorralError) -> dict[str, Any]:
    """A corral error as the workflow's JSON answer."""
    return {"error": {"code": exc.code.value, "message": exc.message, "hint": exc.hint}}


def raise_if_error(answer: dict[str, Any]) -> dict[str, Any]:
    """The summary a drive answered; its error record raised as ``DriveFailedError``."""
    error = answer.get("error")
    if isinstance(error, dict):
        raise DriveFailedError(str(error.get("code")), str(error.get("message")), error.get("hint"))
    return answer
