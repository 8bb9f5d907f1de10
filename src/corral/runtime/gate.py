"""The run as the decide and verify layers see it: ``GateRun`` and ``VerifyRun`` over a run.

The gates (``decision.gates``) and the verifiers (``verify.verifiers``) never name the run
loop; the scheduler hands them these views, which read the folded state, the scheduler's
bookkeeping and the agent, and record through the run's journal.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from corral.contracts import Verdict
from corral.decision.budget import BudgetTracker
from corral.decision.gates import shown_call
from corral.decision.policy import DecisionPolicy
from corral.events import Payload
from corral.runtime.book import StepBook
from corral.tools.registry import ToolRegistry
from corral.verify.loop_guard import LoopGuard
from corral.verify.rules import CompiledRule

if TYPE_CHECKING:
    from corral.runtime.view import RunControl


class GateView:
    """``GateRun`` for one scheduler: the run, its bookkeeping, its budget and guard."""

    def __init__(self, loop: RunControl, book: StepBook, guard: LoopGuard) -> None:
        self.loop = loop
        self.book = book
        self.guard = guard
        self.idle = False
        self._budget = BudgetTracker(loop.agent.config.budget)
        # What does not change while a scheduler runs is read once, not on every step.
        self.tools: ToolRegistry = loop.agent.tools
        """The agent's tools."""
        self.policy: DecisionPolicy = loop.agent.policy
        """The agent's tool constraints and argument rewrites."""
        self.rules: Sequence[CompiledRule] = loop.agent.rules
        """The agent's business rules."""
        self.entities: Mapping[str, Any] = loop.state.entities
        """The entities the user gave (a scheduler's run merges no new ones)."""
        self.message: str | None = loop.state.request
        """The message the run's intent was classified from (``$message``); None for a
        run started from a plan."""
        self.active_seconds: Callable[[], float] = loop.active_seconds
        """Running time of the run so far, excluding pauses (the loop's own method)."""
        self.interrupted: dict[str, tuple[str, dict[str, Any]]] = {}
        """Step id -> the call its process died in, entered again on its key (the
        scheduler's ``_settle_interrupted_writes`` fills it)."""

    @property
    def budget(self) -> BudgetTracker:
        """The run's budget, its counts brought up to date."""
        self._budget.steps = len(self.book.started) + self.loop.state.replaced_steps
        self._budget.tool_calls = self.loop.state.tool_calls
        self._budget.tokens = self.loop.state.tokens
        self._budget.signalled_low = self.loop.state.budget_low
        return self._budget

    @property
    def allowed_tools(self) -> Collection[str]:
        """The intent's allow-list, as routed."""
        route = self.loop.state.route
        return route.allowed_tools if route else ()

    def facts(self) -> dict[str, Any]:
        """Facts, falling back to the entities the user gave."""
        return self.loop.facts_with_entities()

    def results(self) -> Mapping[str, Any]:
        """Step id -> data of the steps that succeeded."""
        return self.book.results

    def rule_names(self, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """What business rules, constraints and rewrites may read."""
        return self.loop.rule_names(args)

    def confirmation(self, step_id: str, call: str | None = None) -> bool | None:
        """The person's answer for the step, if asked; a yes only for the call it was shown."""
        state = self.loop.state
        answer = state.confirmations.get(step_id)
        calls = state.confirmation_calls
        if answer is True and call is not None and calls is not None:
            shown = calls.get(step_id)
            if shown is not None and shown != call:
                return None
        return answer

    def interrupted_call(self, step_id: str) -> tuple[str, dict[str, Any]] | None:
        """The call the step's process died in, when its write is entered again on its key."""
        return self.interrupted.get(step_id) if self.interrupted else None

    def started(self, step_id: str) -> bool:
        """The step started before (it is counted in ``book.started``)."""
        return step_id in self.book.started

    def ask_confirmation(self, step_id: str, tool: str, args: dict[str, Any]) -> None:
        """Pause with the plan's confirmation template for the step (default ``confirm``)."""
        declared = self.loop.declared_plan()
        template = declared.confirm.get(step_id, "confirm") if declared else "confirm"
        self.loop.request_confirmation(step_id, template, tool, args, call=shown_call(tool, args))

    def emit(self, stage: str, payload: Payload) -> None:
        """Record an event of the run."""
        self.loop.journal.emit(stage, payload)


class VerifyView:
    """``VerifyRun`` for one scheduler: published facts, entities, and the model judge."""

    def __init__(self, loop: RunControl) -> None:
        self.loop = loop

    @property
    def entities(self) -> Mapping[str, Any]:
        """The entities the user gave."""
        return self.loop.state.entities

    def facts(self) -> dict[str, Any]:
        """The facts the run's steps published so far."""
        return self.loop.state.memory.values()

    async def judge(self, criterion: str, tool: str, data: dict[str, Any] | None) -> Verdict | None:
        """The model judge's verdict, or ``None`` when the agent has no model."""
        if self.loop.agent.model is None:
            return None
        from corral.runtime.modeling import model_judge

        return await model_judge(self.loop, criterion, tool, data)
