"""What the HTTP API reads and answers: pydantic models at the boundary.

Request bodies are strict (no coercion of ``"1"`` into a bool) and refuse unknown
fields, so a typo is a 422 instead of a silently ignored option. Answers are documented
by these models in the OpenAPI schema; the routes send them already redacted.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from corral.contracts import RunSummary
from corral.decision.priority import Priority
from corral.inputs import CALL_DIGEST, MAX_MESSAGE_ID_CHARS, MAX_STEP_ID_CHARS


class Body(BaseModel):
    """Base of request bodies: strict types, no unknown fields."""

    model_config = ConfigDict(extra="forbid", strict=True)


class StartRun(Body):
    """``POST /agents/{agent}/runs``: a user's message, in a session or not."""

    message: str
    session_id: str | None = None
    message_id: str | None = Field(
        default=None, json_schema_extra={"maxLength": MAX_MESSAGE_ID_CHARS}
    )
    """The client's id of the message, unique in the session while its runs are kept (a
    UUID per message): a request sent again with it (a retry after a timeout) is answered
    with the summary of the run the first one started or continued, and is not handled
    again (``Runtime.start(message_id=...)``). Its length is checked there, as a session
    id's: a constraint here read a lone surrogate as ``INVALID_ARGUMENT``, not the
    ``INVALID_INPUT`` of every other text."""
    wait: bool | None = None
    """True: answer when the run pauses or ends. False: answer 202 at once; the run goes on
    in the server (in its workers, with ``--enqueue``) and ``GET /runs/{id}/stream``
    follows it. Unset: true for a server that runs its runs, false for one started with
    ``--enqueue`` (a request does not wait for a worker)."""
    priority: Priority | None = None
    """How equivalent tools are ranked: ``urgent`` (latency), ``budget`` (price) or
    ``normal``; by default the message's words decide (``decision.priority_words``)."""


class ResumeRun(Body):
    """``POST /runs/{id}/resume``: approve (true) or reject (false), or answer a question.

    Neither picks up a run whose process died mid-way, as ``corral resume RUN`` does.
    """

    approve: bool | None = None
    answer: str | None = None
    step_id: str | None = Field(default=None, json_schema_extra={"maxLength": MAX_STEP_ID_CHARS})
    """The confirmation being answered (``pending.step_id``), so that a late double click
    never approves what the run asks next. Its length is checked with the decision
    (``require_one_input``), as a message id's: a constraint here read a lone surrogate as
    ``INVALID_ARGUMENT``, not the ``INVALID_INPUT`` of every other text."""
    call: str | None = Field(default=None, pattern=f"^{CALL_DIGEST}$")
    """The call the person was shown (``pending.call``, sent with ``step_id``): the decision
    is applied only while the step asks about that call; another one asked in its place is
    a 409 ``RUN_NOT_RESUMABLE``."""
    wait: bool | None = None
    """As ``StartRun.wait``."""


class Answer(BaseModel):
    """Base of answers: documented closed, so the schema checks what the server sends."""

    model_config = ConfigDict(extra="forbid")


class ErrorDetail(Answer):
    """A corral error: its stable code (``docs/errors.md``), words, and what to do."""

    code: str
    message: str
    hint: str | None = None


class ErrorBody(Answer):
    """Every 4xx and 5xx answer of the API."""

    error: ErrorDetail


class Health(Answer):
    """``GET /healthz``."""

    status: Literal["ok"]
    version: str


class AgentInfo(Answer):
    """One agent the server runs."""

    name: str
    intents: list[str]


class AgentList(Answer):
    """``GET /agents``."""

    agents: list[AgentInfo]


class Accepted(Answer):
    """A run started or resumed with ``wait: false``: it goes on in the server."""

    run_id: str
    status: Literal["running"]


class RunRow(Answer):
    """One run in ``GET /runs``."""

    run_id: str
    agent: str
    status: str
    intent: str | None
    created_at: datetime
    updated_at: datetime
    session_id: str | None


class RunList(Answer):
    """``GET /runs``: newest first; ``next_offset`` is null on the last page."""

    runs: list[RunRow]
    next_offset: int | None


class RunDetail(RunSummary):
    """``GET /runs/{id}``: the run's summary, with what a person debugging it needs."""

    agent: str
    created_at: datetime | None
    updated_at: datetime | None
    model_calls: list[dict[str, Any]] = Field(default_factory=list)


class EventOut(Answer):
    """One event of a run's log, as ``Event.as_json()`` writes it."""

    run_id: str
    seq: int
    ts: str
    type: str
    stage: str
    data: dict[str, Any]


class EventList(Answer):
    """``GET /runs/{id}/events``."""

    events: list[EventOut]


class HandoffItem(Answer):
    """One handed-off run in the queue a person works from."""

    run_id: str
    agent: str
    created_at: datetime
    reason: str
    reason_code: str
    packet: dict[str, Any]


class HandoffList(Answer):
    """``GET /handoffs``: newest first."""

    handoffs: list[HandoffItem]
