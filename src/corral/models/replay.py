"""``ReplayModel``: answers from a recorded run's log, and fails loudly on anything new.

A recorded failure is an answer too: the attempt that timed out, was refused or ran out
of the wall-clock budget is raised again, with the same code and retryability, so the
replay retries, falls back or hands off exactly as the recorded run did.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from corral.errors import (
    BudgetExceededError,
    CorralError,
    ErrorCode,
    ModelTimeoutError,
    ModelUnavailableError,
    ReplayDivergedError,
    RunNotFoundError,
)
from corral.events import Event, ModelCall
from corral.models.base import ModelRequest, ModelResponse, Usage

Answer = ModelResponse | CorralError


def _coded(code: str, message: str) -> CorralError:
    """An error with a recorded code, of its own class where one takes just a message.

    ``CONFIG_INVALID`` from a local model that cannot load, for one.
    """
    classes: list[type[CorralError]] = [CorralError]
    while classes:
        cls = classes.pop()
        if cls.code.value == code and cls is not CorralError:
            try:
                return cls(message)
            except TypeError:  # a class that needs more than a message
                break
        classes.extend(cls.__subclasses__())
    error = CorralError(message)
    try:
        error.code = ErrorCode(code)
    except ValueError:  # a code this version does not know
        error.code = ErrorCode.MODEL_UNAVAILABLE
    return error


def recorded_failure(call: ModelCall) -> CorralError:
    """The error a failed ``model_call`` event recorded, as the live call raised it."""
    message = call.error_message or "recorded model failure"
    code = call.error_code
    if code == ErrorCode.BUDGET_EXCEEDED.value:
        return BudgetExceededError(message)
    if code == ErrorCode.MODEL_TIMEOUT.value:
        return ModelTimeoutError(message)
    if code not in (None, ErrorCode.MODEL_UNAVAILABLE.value):
        return _coded(str(code), message)
    return ModelUnavailableError(
        message,
        # Recorded without a wait, the live run did not try again (a Retry-After too long
        # for the budget left is judged on the live clock): the replay must not either.
        retryable=call.retryable and call.backoff_s is not None,
        retry_after=call.retry_after,
        status=call.http_status,
    )


def _response(call: ModelCall) -> ModelResponse:
    usage = call.usage
    meta = {
        key: value
        for key, value in (
            ("structured_mode", call.structured_mode),
            ("negotiation", call.negotiation),
        )
        if value is not None
    }
    return ModelResponse(
        text=call.text,
        usage=Usage(
            usage.get("prompt_tokens", 0),
            usage.get("completion_tokens", 0),
            usage.get("estimated", False),
        ),
        model=call.model or "replay",
        latency_ms=call.latency_ms,
        meta=meta,
    )


@dataclass
class ReplayModel:
    """The answers a run recorded, looked up by request fingerprint, in order."""

    answers: dict[str, deque[Answer]] = field(default_factory=lambda: defaultdict(deque))
    name: str = "replay"

    @classmethod
    def from_events(cls, events: Iterable[Event]) -> ReplayModel:
        """Collect every recorded model call that reached the model (or its deadline).

        A call the run's own counts refused before it was sent (``refused``) is not an
        answer: the replay, folding the same log, refuses it again by itself.
        """
        model = cls()
        for event in events:
            call = event.payload
            if not isinstance(call, ModelCall) or call.refused:
                continue
            answer = recorded_failure(call) if call.status == "error" else _response(call)
            model.answers[call.fingerprint].append(answer)
        return model

    @classmethod
    def of_run(cls, run_id: str, events: list[Event]) -> ReplayModel:
        """``replay:RUN_ID``: the run's answers; ``RunNotFoundError`` when no run has that id.

        An unknown (or collected) run fails at load, not as an empty model whose every
        call diverges and is then quietly fallen back from.
        """
        if not events:
            raise RunNotFoundError(
                f"replay:{run_id}: no stored run has that id",
                hint="see `corral runs`",
            )
        return cls.from_events(events)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The recorded answer to this exact request; ``ReplayDivergedError`` if there is none."""
        queue = self.answers.get(request.fingerprint())
        if not queue:
            raise ReplayDivergedError(
                f"the recorded run never asked this {request.purpose!r} request",
                hint="the prompt, schema or path changed since the run was recorded",
            )
        answer = queue.popleft()
        if isinstance(answer, CorralError):
            raise answer
        return answer
