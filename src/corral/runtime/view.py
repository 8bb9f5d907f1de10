"""What the run's layers may see of the run loop: two narrow protocols.

The scheduler, the step gate, the model calls and the conclusion each work on one run,
but none needs the whole ``RunLoop``, and naming it would tie each back to the module
that drives them (loop -> scheduler -> modeling -> conclusion -> loop). They take these
protocols instead; ``RunLoop`` satisfies them by shape, and a test can hand in a stand-in.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from corral.agent import Agent
    from corral.config import PlanTemplate
    from corral.contracts import RunOutcome, StepStatus
    from corral.effects import Effects
    from corral.errors import ErrorCode
    from corral.planning.validate import PlanGraph
    from corral.runtime.journal import Journal
    from corral.runtime.state import RunState

Persist = Callable[[], Awaitable[None]]
"""Makes the buffered events durable (the loop never talks to storage itself)."""


class RunView(Protocol):
    """The run as a layer reads it, and the journal it records into."""

    budget_stop: str | None
    """Set when a model call ran out of the wall-clock budget: the run stops on it."""

    @property
    def agent(self) -> Agent:
        """The agent the run belongs to."""
        ...

    @property
    def state(self) -> RunState:
        """The run's folded state."""
        ...

    @property
    def journal(self) -> Journal:
        """Where events are emitted (and folded into ``state``)."""
        ...

    @property
    def effects(self) -> Effects:
        """Clock, ids, sleeps, tool and model calls."""
        ...

    def active_seconds(self) -> float:
        """Running time of the run so far, excluding pauses."""
        ...

    def values(self) -> dict[str, Any]:
        """What templates may use."""
        ...

    def facts_with_entities(self) -> dict[str, Any]:
        """Facts, falling back to the entities the user gave."""
        ...

    def rule_names(self, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """What business rules, constraints and rewrites may read."""
        ...

    def declared_plan(self) -> PlanTemplate | None:
        """The config template the run's plan came from."""
        ...

    def model_may(self, feature: str) -> bool:
        """Whether a model is configured and enabled for ``feature``."""
        ...


class RunControl(RunView, Protocol):
    """A run view plus the ways a layer may move the run on: confirm, finish, hand off."""

    @property
    def persist(self) -> Persist:
        """Make the buffered events durable now."""
        ...

    @property
    def earlier_owner_may_live(self) -> bool:
        """Whether a write of a silent earlier owner may still act."""
        ...

    @property
    def concurrent_steps(self) -> bool:
        """Whether a round's independent steps run at once (else one by one, in order)."""
        ...

    @property
    def graph(self) -> PlanGraph:
        """The validated graph of the run's plan."""
        ...

    def set_graph(self, graph: PlanGraph) -> None:
        """Use this validated graph for the run's plan."""
        ...

    def step_statuses(self) -> dict[str, StepStatus]:
        """Step id -> status."""
        ...

    def render(self, template: str, extra: dict[str, Any] | None = None) -> str:
        """Render a template in the run's language over its verified values."""
        ...

    def request_confirmation(
        self,
        step_id: str,
        template: str,
        tool: str,
        args: dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
        call: str | None = None,
    ) -> None:
        """Pause before a step (or the plan) until the user confirms."""
        ...

    def finish(
        self,
        template: str,
        outcome: RunOutcome,
        extra: dict[str, Any] | None = None,
        *,
        note: str = "",
    ) -> None:
        """Reply from ``template`` and finish (``note``: a line said after it)."""
        ...

    def finish_with_text(
        self, text: str, outcome: RunOutcome, template: str = "step", *, note: str = ""
    ) -> None:
        """Finish with a reply already written."""
        ...

    def others_named(self) -> str:
        """A line naming the values the message gave that the run did not act on."""
        ...

    def handoff(
        self,
        reason: str,
        code: ErrorCode,
        template: str = "handoff",
        outcome: RunOutcome = "handoff",
    ) -> None:
        """Hand the run to a person."""
        ...
