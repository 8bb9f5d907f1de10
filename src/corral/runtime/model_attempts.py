"""The one door from a run to its model: budget, retry policy and an event per attempt.

A request is tried until it gets an answer, with corral's retry policy only (the SDK's
own retries are off): a retryable failure (connection, timeout, 408/409/429/5xx) is tried
again up to ``model.max_retries`` times, after the server's ``Retry-After`` or the
backoff, through ``effects.sleep``. Before each attempt the run's counted budget (model
calls, tokens, money) is checked; the attempt itself gets only the wall-clock time the
run has left. Every attempt becomes a ``model_call`` event, a failure too (error code,
latency, retryability), so a replay meets the same failures in the same order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from corral.clipping import clip
from corral.errors import (
    BudgetExceededError,
    CorralError,
    ModelTimeoutError,
    ReplayDivergedError,
)
from corral.events import BudgetExceeded, ModelCall
from corral.models.base import Model, ModelRequest, ModelResponse, Usage, estimate_usage
from corral.models.structured import Attempt
from corral.tools.policy import RetryPolicy

if TYPE_CHECKING:
    from corral.runtime.view import RunView

MODEL_BACKOFF_S = (1.0, 2.0)
"""Wait before model retry 1, 2, ... when the server sends no ``Retry-After``."""
MAX_RETRY_AFTER_S = 60.0
"""The longest ``Retry-After`` worth waiting for: a longer one (a daily quota) ends the
call at once, so the layer falls back or hands off instead of sleeping out the budget."""
ModelFailure = CorralError
"""Any failure of a call: besides the model's own (unavailable, timeout, budget), a local
model that cannot load (``CONFIG_INVALID``) or anything else a model raises with a code."""


def budget_problem(loop: RunView) -> str | None:
    """Which counted budget (model calls, tokens, money) forbids another call, if any."""
    budget, state = loop.agent.config.budget, loop.state
    if state.model_calls >= budget.max_model_calls:
        return f"model-call budget of {budget.max_model_calls} used up"
    if state.tokens >= budget.max_tokens:
        return f"token budget of {budget.max_tokens} used up"
    if budget.max_cost is not None and state.cost >= budget.max_cost:
        return f"cost budget of {budget.max_cost:g} used up"
    return None


def wall_clock_left(loop: RunView) -> float:
    """Seconds of ``budget.max_wall_clock_s`` the run has not used (may be negative)."""
    return loop.agent.config.budget.max_wall_clock_s - loop.active_seconds()


def failure_data(exc: ModelFailure, backoff: float | None) -> dict[str, Any]:
    """What a failed attempt records: enough for a replay to raise it again."""
    return {
        "text": "",
        "accepted": False,
        "repaired": False,
        "reason": clip(exc.message, 500),
        "status": "error",
        "error_code": exc.code.value,
        "error_message": clip(exc.message, 500),
        "retryable": exc.retryable,
        "retry_after": getattr(exc, "retry_after", None),
        "http_status": getattr(exc, "status", None),
        "backoff_s": backoff,
    }


def spent(req: ModelRequest, exc: ModelFailure) -> Usage:
    """Tokens a failed attempt cost: a server that timed out was still reading the prompt.

    It reports nothing to a client that stopped waiting, so the prompt is estimated (and
    marked so); an attempt refused or answered with an error cost none.
    """
    if isinstance(exc, ModelTimeoutError):
        return Usage(estimate_usage(req, "").prompt_tokens, 0, estimated=True)
    return Usage(0, 0)


def backoff(loop: RunView, retry: RetryPolicy, exc: ModelFailure, tries: int) -> float | None:
    """Seconds to wait before trying again, or ``None`` when this failure is final.

    The wait is the server's ``Retry-After`` or the backoff. A wait longer than
    ``MAX_RETRY_AFTER_S`` or than the wall-clock budget left makes the failure final at
    once: the layer gets the model's own error (``MODEL_UNAVAILABLE``) and falls back or
    hands off as for any unavailable model, instead of sleeping the budget away and then
    stopping the run on ``BUDGET_EXCEEDED``. The replay's verdict is the recorded
    ``backoff_s``: a failure recorded without one is replayed as final (see
    ``models.replay.recorded_failure``), so the replay follows the same path.
    """
    if isinstance(exc, BudgetExceededError) or not exc.retryable or tries > retry.max_retries:
        return None
    after = getattr(exc, "retry_after", None)
    wait = after if after is not None else retry.delay(tries)
    if wait > MAX_RETRY_AFTER_S or wait >= wall_clock_left(loop):
        return None
    return round(max(0.0, wait), 3)


@dataclass
class ModelAttempts:
    """The ``call`` and ``listener`` that ``ask_structured`` uses inside one run.

    ``asked`` counts the pipeline's questions (re-asks included), ``tries`` the attempts
    at the current one; both go into each event.
    """

    loop: RunView
    model: Model
    asked: int = 0
    tries: int = 0

    def _emit(self, req: ModelRequest, name: str, data: dict[str, Any], usage: Usage) -> None:
        prices = self.loop.agent.config.model.prices
        price = prices.get(self.model.name) or prices.get(name)
        cost = (
            round(
                (usage.prompt_tokens * price.prompt + usage.completion_tokens * price.completion)
                / 1000,
                6,
            )
            if price
            else 0.0
        )
        self.loop.journal.emit(req.purpose, ModelCall(**data, cost=cost, try_=self.tries))

    def _failed(
        self,
        req: ModelRequest,
        chosen: Model,
        exc: ModelFailure,
        latency_ms: float,
        wait: float | None = None,
        **more: Any,
    ) -> None:
        data = {
            "purpose": req.purpose,
            "model": chosen.name,
            "fingerprint": req.fingerprint(),
            "attempt": self.asked,
            "latency_ms": round(latency_ms, 3),
            **failure_data(exc, wait),
            **more,
        }
        usage = spent(req, exc)
        data["usage"] = usage.as_event()
        self._emit(req, chosen.name, data, usage)

    async def call(self, chosen: Model, req: ModelRequest) -> ModelResponse:
        """The model's answer to ``req``, after as many attempts as the policy allows."""
        loop = self.loop
        retry = RetryPolicy(loop.agent.config.model.max_retries, MODEL_BACKOFF_S)
        loop.journal.release_held()  # a tool's time is not the model's (``Journal.release_held``)
        self.asked += 1
        self.tries = 0
        while True:
            self.tries += 1
            problem = budget_problem(loop)
            if problem:
                loop.journal.emit(req.purpose, BudgetExceeded(problem))
                loop.budget_stop = problem  # the run stops on it, whichever layer asked
                refusal = BudgetExceededError(problem)
                self._failed(req, chosen, refusal, 0.0, refused=True)  # never sent
                raise refusal
            started = loop.effects.monotonic()
            try:
                return await loop.effects.call_model(chosen, req, wall_clock_left(loop))
            except ReplayDivergedError:
                raise  # a replay that left the recorded path: a divergence, not a failure
            except CorralError as exc:  # every failure is an event, and replays
                latency_ms = (loop.effects.monotonic() - started) * 1000
                wait = backoff(loop, retry, exc, self.tries)
                self._failed(req, chosen, exc, latency_ms, wait)
                if isinstance(exc, BudgetExceededError):
                    loop.journal.emit(req.purpose, BudgetExceeded(exc.message))
                    loop.budget_stop = exc.message
                if wait is None:
                    raise
            await loop.effects.sleep(wait)

    def record(self, attempt: Attempt) -> None:
        """An answer the pipeline accepted or rejected, as its event."""
        response = attempt.response
        self._emit(attempt.request, response.model, attempt.as_event(), response.usage)
