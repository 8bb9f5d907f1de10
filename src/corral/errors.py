"""Every error corral raises or records, in one flat module.

Each error has a stable ``code`` string. Codes are the contract: they appear in tool
result envelopes, events, handoff packets and CLI output, and tests and dashboards key on
them. Messages may change; codes do not. The table of codes is in ``docs/errors.md``.

``retryable`` is data, decided here by the kind of failure, never guessed later.

A code need not have an exception class: ``TOOL_NOT_ALLOWED``, ``LOOP_DETECTED`` and
``OUTCOME_UNKNOWN`` are only ever recorded on a step (the run goes on to hand off), never
raised, so they have none; ``UNAUTHORIZED`` is only ever an HTTP answer of ``corral serve``.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """Stable error codes, one per kind of failure."""

    MISSING_ARGUMENT = "MISSING_ARGUMENT"
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    UNKNOWN_TOOL = "UNKNOWN_TOOL"
    TOOL_NOT_ALLOWED = "TOOL_NOT_ALLOWED"
    TOOL_TIMEOUT = "TOOL_TIMEOUT"
    TOOL_TRANSIENT = "TOOL_TRANSIENT"
    TOOL_FAILED = "TOOL_FAILED"
    TOOL_OUTPUT_INVALID = "TOOL_OUTPUT_INVALID"
    TOOL_DEGRADED = "TOOL_DEGRADED"
    NO_RESULT = "NO_RESULT"
    INTENT_UNCLEAR = "INTENT_UNCLEAR"
    POLICY_HANDOFF = "POLICY_HANDOFF"
    REJECTED_BY_USER = "REJECTED_BY_USER"
    NO_ELIGIBLE_TOOL = "NO_ELIGIBLE_TOOL"
    MODEL_OUTPUT_INVALID = "MODEL_OUTPUT_INVALID"
    MODEL_UNAVAILABLE = "MODEL_UNAVAILABLE"
    MODEL_TIMEOUT = "MODEL_TIMEOUT"
    SUCCESS_CRITERIA_FAILED = "SUCCESS_CRITERIA_FAILED"
    BUSINESS_RULE_VIOLATED = "BUSINESS_RULE_VIOLATED"
    PLAN_INVALID = "PLAN_INVALID"
    LOOP_DETECTED = "LOOP_DETECTED"
    EXTENSION_FAILED = "EXTENSION_FAILED"
    BUDGET_EXCEEDED = "BUDGET_EXCEEDED"
    DEPENDENCY_FAILED = "DEPENDENCY_FAILED"
    ILLEGAL_TRANSITION = "ILLEGAL_TRANSITION"
    RUN_NOT_FOUND = "RUN_NOT_FOUND"
    RUN_NOT_RESUMABLE = "RUN_NOT_RESUMABLE"
    CONFIG_INVALID = "CONFIG_INVALID"
    EXPRESSION_INVALID = "EXPRESSION_INVALID"
    TEMPLATE_INVALID = "TEMPLATE_INVALID"
    INPUT_TOO_LARGE = "INPUT_TOO_LARGE"
    REPLAY_DIVERGED = "REPLAY_DIVERGED"
    RUN_BUSY = "RUN_BUSY"
    LEASE_LOST = "LEASE_LOST"
    EVENT_CONFLICT = "EVENT_CONFLICT"
    OUTCOME_UNKNOWN = "OUTCOME_UNKNOWN"
    STORE_UNAVAILABLE = "STORE_UNAVAILABLE"
    STORE_READ_ONLY = "STORE_READ_ONLY"
    STORE_FULL = "STORE_FULL"
    STORE_CORRUPT = "STORE_CORRUPT"
    INVALID_INPUT = "INVALID_INPUT"
    AGENT_NOT_FOUND = "AGENT_NOT_FOUND"
    UNAUTHORIZED = "UNAUTHORIZED"
    BUDGET_LOW = "BUDGET_LOW"
    TOOL_SCHEMA_CHANGED = "TOOL_SCHEMA_CHANGED"
    STORE_SCHEMA_NEWER = "STORE_SCHEMA_NEWER"
    STORE_SCHEMA_OLDER = "STORE_SCHEMA_OLDER"
    WORKER_ID_IN_USE = "WORKER_ID_IN_USE"
    ADDRESS_IN_USE = "ADDRESS_IN_USE"
    MESSAGE_REPEATED = "MESSAGE_REPEATED"


def said(exc: BaseException) -> str:
    """``str(exc)``, or a stand-in when making it raises (a tool's or a user's own class).

    What failed is recorded in the failure's text: one whose ``__str__`` raised took the
    run down with it (``ZeroDivisionError`` out of ``Runtime.resume``, the run left
    ``executing``) instead of failing the step that raised it.
    """
    try:
        return str(exc)
    except Exception:
        return "<its text could not be made: str() raised>"


class CorralError(Exception):
    """Base of every corral error; carries a stable code and a hint for what to do next."""

    code: ErrorCode = ErrorCode.TOOL_FAILED
    retryable: bool = False

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        text = f"[{self.code.value}] {self.message}"
        return f"{text} (hint: {self.hint})" if self.hint else text


class MissingArgumentError(CorralError):
    """A tool argument could not be bound; corral never guesses one."""

    code = ErrorCode.MISSING_ARGUMENT


class InvalidArgumentError(CorralError):
    """A tool argument failed its schema."""

    code = ErrorCode.INVALID_ARGUMENT


class UnknownToolError(CorralError):
    """A name that is not in the tool registry."""

    code = ErrorCode.UNKNOWN_TOOL


class ToolTimeoutError(CorralError):
    """A tool call ran past its timeout; worth another attempt (for a read).

    ``in_flight`` is true when the tool may still be running: a sync tool's thread cannot
    be stopped, and it had not ended when corral gave up waiting for it.
    """

    code = ErrorCode.TOOL_TIMEOUT
    retryable = True

    def __init__(self, message: str, *, in_flight: bool = False, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.in_flight = in_flight


class TransientToolError(CorralError):
    """Raised by a tool to say: this failure is temporary (network, 5xx, locks).

    ``applied`` says whether the effect may already have happened. A read is retried
    whatever it says. A write is retried only with ``applied=False`` (the tool knows the
    effect did not happen, e.g. the connection was refused), or when its policy declares
    it idempotent by key; otherwise its outcome is unknown and never retried blindly.
    """

    code = ErrorCode.TOOL_TRANSIENT
    retryable = True

    def __init__(
        self,
        message: str,
        *,
        applied: bool | None = None,
        hint: str | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.applied = applied
        self.retry_after_s = retry_after_s
        """How long the service asked to wait before another try (``Retry-After``)."""


class ToolFailedError(CorralError):
    """Raised by a tool for a permanent business failure; retrying will not help."""

    code = ErrorCode.TOOL_FAILED


class ToolOutputInvalidError(CorralError):
    """A tool returned data that does not match its declared output schema."""

    code = ErrorCode.TOOL_OUTPUT_INVALID


class PlanInvalidError(CorralError):
    """A plan failed static validation; it lists every problem found, and never runs."""

    code = ErrorCode.PLAN_INVALID

    def __init__(self, problems: list[str], *, hint: str | None = None) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(self.problems) or "plan is invalid", hint=hint)


class BudgetExceededError(CorralError):
    """The run used up a budget (steps, tool calls, wall-clock, model calls, tokens, cost)."""

    code = ErrorCode.BUDGET_EXCEEDED


class IllegalTransitionError(CorralError):
    """A state-machine transition that the guard table does not allow."""

    code = ErrorCode.ILLEGAL_TRANSITION


class RunNotFoundError(CorralError):
    """No stored run has that id."""

    code = ErrorCode.RUN_NOT_FOUND


class RunNotResumableError(CorralError):
    """The run is not waiting for what was given (finished, or waiting for something else)."""

    code = ErrorCode.RUN_NOT_RESUMABLE


class ConfigInvalidError(CorralError):
    """The agent's config file or tools module is wrong; raised at load, before any run.

    ``problems``: each problem found by ``Agent.build`` with where in the config it lies
    (a path of keys and list indexes, ``("intents", "2", "plan")``; ``()`` where none is
    known). ``load_agent`` names each one's line in ``agent.yaml`` from them.
    """

    code = ErrorCode.CONFIG_INVALID

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        problems: tuple[tuple[tuple[str, ...], str], ...] = (),
    ) -> None:
        super().__init__(message, hint=hint)
        self.problems = problems


class ExpressionInvalidError(CorralError):
    """A success criterion or business rule is not a valid safe expression."""

    code = ErrorCode.EXPRESSION_INVALID


class TemplateInvalidError(CorralError):
    """A reply template names a value that is not available."""

    code = ErrorCode.TEMPLATE_INVALID


class InputTooLargeError(CorralError):
    """A user message longer than the agent's limit."""

    code = ErrorCode.INPUT_TOO_LARGE


class ModelOutputInvalidError(CorralError):
    """The model's output stayed invalid after every re-ask; nothing downstream used it."""

    code = ErrorCode.MODEL_OUTPUT_INVALID


class ModelUnavailableError(CorralError):
    """The model endpoint failed: connection, an HTTP error, a body that is not the protocol.

    ``retryable`` is true for what another attempt may cure (connection, 408, 409, 429,
    5xx); ``retry_after`` is the server's ``Retry-After`` in seconds, when it sent one.
    """

    code = ErrorCode.MODEL_UNAVAILABLE
    retryable = True

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = True,
        retry_after: float | None = None,
        status: int | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status


class ModelTimeoutError(CorralError):
    """The model did not answer in time."""

    code = ErrorCode.MODEL_TIMEOUT
    retryable = True


class ReplayDivergedError(CorralError):
    """A replay asked for a model call or tool result the recorded run never made."""

    code = ErrorCode.REPLAY_DIVERGED


class RunBusyError(CorralError):
    """Another process holds the run's lease and is driving it right now."""

    code = ErrorCode.RUN_BUSY


class LeaseLostError(CorralError):
    """The process no longer owns the run (its lease expired and was taken over).

    Raised before any tool is entered: a process without the lease causes no side effect.
    """

    code = ErrorCode.LEASE_LOST


class EventConflictError(CorralError):
    """An event's ``seq`` is already stored: another writer appended to the same run."""

    code = ErrorCode.EVENT_CONFLICT


class MessageRepeatedError(CorralError):
    """A message id was already taken by a turn of the session (``run_id``'s).

    A store's save raises it when the events it holds record a message id that another
    run (or another turn of the same run) recorded first: the save writes nothing. Every
    save comes before a write tool is entered, so the repeated message has acted on
    nothing; the runtime answers it with the summary of the run that took the id.
    """

    code = ErrorCode.MESSAGE_REPEATED

    def __init__(self, message: str, *, run_id: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.run_id = run_id

    @classmethod
    def taken_by(cls, run_id: str, message_id: str) -> MessageRepeatedError:
        """The error every store raises: ``message_id`` is held by ``run_id``'s events."""
        return cls(f"message {message_id!r} was handled already, by run {run_id}", run_id=run_id)


class StoreError(CorralError):
    """The event store failed. Says which run, and what had already happened before it."""

    code = ErrorCode.STORE_UNAVAILABLE

    def __init__(
        self,
        message: str,
        *,
        run_id: str | None = None,
        happened: str | None = None,
        hint: str | None = None,
    ) -> None:
        parts = [message]
        if run_id:
            parts.append(f"run {run_id}")
        if happened:
            parts.append(happened)
        super().__init__("; ".join(parts), hint=hint)
        self.base_message = message
        self.run_id = run_id
        self.happened = happened

    def with_context(self, run_id: str, happened: str) -> StoreError:
        """The same failure, saying which run it hit and what had already happened."""
        return type(self)(self.base_message, run_id=run_id, happened=happened, hint=self.hint)


class StoreUnavailableError(StoreError):
    """The store cannot be reached or opened (missing file, server down, wrong path)."""

    code = ErrorCode.STORE_UNAVAILABLE


class StoreReadOnlyError(StoreError):
    """The store (or its folder) cannot be written."""

    code = ErrorCode.STORE_READ_ONLY


class StoreFullError(StoreError):
    """The disk (or the database's quota) is full."""

    code = ErrorCode.STORE_FULL


class StoreCorruptError(StoreError):
    """The stored data is damaged, or the database vanished while a run was using it."""

    code = ErrorCode.STORE_CORRUPT


class InvalidInputError(CorralError):
    """User input that cannot be handled as text (invalid UTF-8, lone surrogates)."""

    code = ErrorCode.INVALID_INPUT


class AgentNotFoundError(CorralError):
    """A request names an agent that this server (or this call) does not serve."""

    code = ErrorCode.AGENT_NOT_FOUND


class ToolSchemaChangedError(CorralError):
    """A tool's server now lists another schema than the one the agent was built with.

    Found before the request is sent (``applied`` is false: a write did not act), and
    not retryable: calling again meets the same server.
    """

    code = ErrorCode.TOOL_SCHEMA_CHANGED
    applied = False


class StoreSchemaNewerError(StoreError):
    """The store was migrated by a newer corral: this code would misread or damage it."""

    code = ErrorCode.STORE_SCHEMA_NEWER


class StoreSchemaOlderError(StoreError):
    """The store's schema predates this code and is not migrated implicitly (PostgreSQL)."""

    code = ErrorCode.STORE_SCHEMA_OLDER


class WorkerIdInUseError(CorralError):
    """A worker was started with the executor id of a worker that is still running.

    Refused before it takes any run: two processes of one executor id would each recover
    the other's workflows as their own.
    """

    code = ErrorCode.WORKER_ID_IN_USE


class AddressInUseError(CorralError):
    """``corral serve`` was asked for a host and port another process listens on.

    Refused before anything is served or said to be: the banner and the dashboard address
    are printed only once the port is this server's.
    """

    code = ErrorCode.ADDRESS_IN_USE
