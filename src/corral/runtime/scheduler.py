"""Execute: run a validated plan as an asyncio DAG.

Independent steps run concurrently; steps that publish the same fact run one after
another, and a step waits for the producers of the facts its rules read. Before a step
starts, the agent's gates decide (``decision.gates``: budget, binding, rewrite,
validation, allow-list, business rules, confirmation, loop guard); then which of several
equivalent tools to use. After it ends, the agent's verifiers judge it
(``verify.verifiers``) and the recovery ladder runs: retries (inside ``invoke_tool``), then
an equivalent tool, then a replan, then a handoff. Which steps are ready is kept in a
``StepBook``, updated as each step settles.

It raises two signals (``docs/signals.md``): ``tool_timeout`` for each attempt that did
not answer in time (handled by ``runtime.timeouts``), and ``need_replan`` when a step's
result fails verification (handled by ``verify.recovery``). A plan longer than
``limits.max_plan_steps_without_confirmation`` first waits for a person
(``runtime.plan_confirmation``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from corral.contracts import (
    PAUSED_STATUSES,
    NeedReplan,
    RunStatus,
    StepStatus,
    ToolResult,
    ToolStatus,
    Verdict,
)
from corral.decision.builtin_gates import stand_in_answer
from corral.decision.candidates import eligible_tools, simple, sole_candidate
from corral.decision.choice import Choice, choose, measure_for, ranking_latency
from corral.decision.gates import Proposal, Skip, decide, may_have_acted
from corral.eager import start
from corral.errors import CorralError, ErrorCode
from corral.events import (
    LoopDetected,
    NeedReplanSignal,
    OutcomeReconciled,
    StepBlocked,
    StepFinished,
    StepSkipped,
    StepStarted,
    ToolAttempt,
    ToolSelected,
)
from corral.hashing import stable_hash
from corral.memory.task import FactSource
from corral.planning.validate import CompiledStep
from corral.runtime.book import StepBook
from corral.runtime.conclusion import conclude, entered_write
from corral.runtime.gate import GateView, VerifyView
from corral.runtime.plan_confirmation import plan_held
from corral.runtime.tool_attempts import AttemptLog
from corral.tools.context import ToolContext
from corral.tools.invoke import (
    failed_result,
    invoke_tool,
    reconcile,
    validate_args,
)
from corral.tools.spec import ToolSpec
from corral.verify.loop_guard import LoopGuard
from corral.verify.recovery import (
    another_tool_may_follow,
    blames_the_tool,
    handle_need_replan,
    reconciled_outcome,
    replan_failure,
)
from corral.verify.verifiers import StepOutcome, may_judge, verify

if TYPE_CHECKING:
    from corral.runtime.view import RunControl


logger = logging.getLogger(__name__)

_OUTCOME_UNKNOWN = ErrorCode.OUTCOME_UNKNOWN.value
"""A code compared on every step, read off its enum once (``.value`` is a property)."""


def _taken(task: asyncio.Future[Any]) -> None:
    """Take what an ended task raised: the run ended by something else already."""
    if not task.cancelled():
        task.exception()


def idempotency_key(run_id: str, step_id: str, args: dict[str, Any]) -> str:
    """Stable for one run, step and arguments; a resumed write reuses it."""
    return stable_hash([run_id, step_id, args], 32)


@dataclass(slots=True)
class _Outcome:
    result: ToolResult
    args: dict[str, Any]
    skipped: Skip | None = None
    """No tool ran: the only ones left were skipped by a rule (a stand-in's), so the step
    is skipped with that rule's reply, as a rule on the planned tool would skip it."""


def _entered_again(died_in: str, outcome: _Outcome) -> _Outcome:
    """The outcome of a write entered again after its process died in ``died_in``.

    Its success is the write's (the key made the second call return the first one's
    effect). Anything else (a clean refusal such as "key already used", no tool left to
    run it) says nothing of the call the process died in, which may have acted: the step's
    outcome is unknown, and no other tool is tried (``_execute`` ran only that one).
    """
    result = outcome.result
    if outcome.skipped is None and result.status is not ToolStatus.ERROR:
        return outcome
    if result.error_code == _OUTCOME_UNKNOWN:
        return outcome
    why = result.error_message or (outcome.skipped.reason if outcome.skipped else "")
    reason = may_have_acted(
        died_in, f"entering it again did not settle it ({result.error_code or 'skipped'}: {why})"
    )
    unknown = failed_result(result.tool, _OUTCOME_UNKNOWN, reason, result.attempts)
    return _Outcome(unknown, outcome.args)


class _Wake:
    """Wakes the dispatch loop when one of its steps' tasks ends.

    What ``asyncio.wait(..., FIRST_COMPLETED)`` does, for tasks that are waited for again
    and again: the callback is added once, when a task starts, instead of being added to
    (and removed from) every running task and a set built on every wait.
    """

    __slots__ = ("waiter",)

    def __init__(self) -> None:
        self.waiter: asyncio.Future[None] | None = None

    def __call__(self, task: asyncio.Future[_Outcome]) -> None:
        """A task ended: the loop, if it waits, goes on."""
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def first_of(self) -> None:
        """Return once one of the running tasks has ended.

        Called only while none has ended (the dispatch loop takes those at once): every
        one of them calls back when it does.
        """
        self.waiter = asyncio.get_running_loop().create_future()
        try:
            await self.waiter
        finally:
            self.waiter = None


def _named(candidates: list[ToolSpec], name: str) -> list[ToolSpec]:
    """The candidates called ``name``.

    Its own function: a comprehension in ``_execute`` reading a local of it would make
    that local a cell, one more object for the collector in every call in flight.
    """
    return [spec for spec in candidates if spec.name == name]


class Scheduler:
    """Runs the ready steps of the plan until it is done, blocked, stopped or paused."""

    def __init__(self, loop: RunControl) -> None:
        self.loop = loop
        self.state = loop.state
        self.journal = loop.journal
        self.agent = loop.agent
        self.graph = loop.graph
        self.running: dict[asyncio.Future[_Outcome], str] = {}
        """The round's calls by their task, in dispatch order; a call that ended in its first
        step (``corral.eager``) is here, done, until the dispatch loop takes its outcome."""
        self.queued: dict[str, Coroutine[Any, Any, _Outcome]] = {}
        """Calls decided this round, not started yet (see ``_start_queued``)."""
        self.stop: tuple[str, ErrorCode] | None = None
        self.guard = LoopGuard(self.agent.config.limits.max_identical_calls)
        for step in self.state.steps.values():  # rebuild the guard from the log on resume
            if step.args is None or step.called is None or step.status is StepStatus.RUNNING:
                continue
            self.guard.observe_call(step.id, step.called, step.args)  # as the gate did
        for name, value in self.state.memory.values().items():  # what the run knows now
            self.guard.fact_written(name, value)
        self.book = StepBook(self.graph, self.state.steps)
        self.gates = GateView(loop, self.book, self.guard)
        config = self.agent.config
        self.measure = measure_for(self.state.priority, config.tool_preference)
        """What ranks equivalent tools in this run (its priority is fixed at its start)."""
        self.latency = ranking_latency(
            self.state.observed_latency, config.decision.min_observations
        )
        """Observed p95s the ranking uses (read once when the run started)."""
        self.verdicts = VerifyView(loop)

    def _open_book(self) -> None:
        """Start the bookkeeping over the current graph and steps (after a replan)."""
        self.book = StepBook(self.graph, self.state.steps)
        self.gates.book = self.book

    # ------------------------------------------------------------------ main loop

    async def run(self) -> None:
        """Schedule until nothing is ready or running, then conclude the run."""
        if self.state.status is RunStatus.DECIDING:
            if plan_held(self.loop):
                return
            self.journal.transition(RunStatus.EXECUTING, "dispatching steps")
        await self._settle_interrupted_writes()
        try:
            if await self._dispatch_until_settled():
                return
        except GeneratorExit:  # this coroutine was closed: it may not wait any more
            self._cancel_calls()
            raise
        except BaseException:  # a stop or a crash: the steps' own tasks end with the run
            self._cancel_calls()
            await self._running_ended()
            raise
        self._mark_blocked(nothing_runs=True)
        self._stop_on_model_budget()
        if self.stop is None and await self._replanned():
            self.graph = self.loop.graph
            self._open_book()
            if plan_held(self.loop, replanned=True):
                return
            await self.run()
            return
        reply = None
        if self.stop is None and self.loop.model_may("replies"):
            from corral.runtime.modeling import model_reply

            reply = await model_reply(self.loop)
        self._stop_on_model_budget()
        conclude(self.loop, self.stop, reply)

    def _cancel_calls(self) -> None:
        """Cancel the steps' tasks, and close the calls that never started."""
        for task in self.running:
            task.cancel()
        for call in self.queued.values():
            call.close()

    async def _running_ended(self) -> None:
        """Wait for the steps' cancelled tasks to end, before the run ends.

        A tool's cleanup (its ``finally``, its ``except CancelledError``) then runs before
        the run's call raises and before a stop's last save, and what a task raises on its
        way out is taken here: the run raises what ended it. A sync tool's thread cannot be
        stopped: its step lets go of it at once, and the thread runs on. A tool that
        swallows its cancellation is waited for ``limits.cancel_grace_s`` at most, then named in
        the log and left to end on its own; a second stop while this waits ends the wait.
        """
        pending = [task for task in self.running if not task.done()]
        try:
            if pending:
                await asyncio.wait(pending, timeout=self.agent.config.limits.cancel_grace_s)
        finally:
            for task, step_id in self.running.items():
                if task.done():
                    _taken(task)
                    continue
                step = self.state.steps[step_id]
                logger.warning(
                    "run %s: step %s (%s) did not end when the run did; it is left to end "
                    "on its own",
                    self.state.run_id,
                    step_id,
                    step.tool_used or step.tool,
                )
                task.add_done_callback(_taken)

    async def _dispatch_until_settled(self) -> bool:
        """Decide and run steps until nothing is ready or running; ``True``: it paused."""
        book, loop = self.book, self.loop  # a new book opens only after this returns
        wake = _Wake()  # every task it starts has ended (or was cancelled) when it returns
        while True:
            if book.to_block:
                self._mark_blocked()
            if loop.budget_stop is not None:
                self._stop_on_model_budget()
            if self.stop is None:
                for step_id in self._ready():
                    await self._gate_and_dispatch(step_id)
                    if self.state.status in PAUSED_STATUSES or self.stop is not None:
                        break
            if (
                self.queued
                and not self.running
                and (len(self.queued) == 1 or not loop.concurrent_steps)
            ):
                # The round's only call runs in this task: a chain of steps (and every step
                # without a sibling) costs no task and no wait set. The log is the same:
                # with one call in flight, its events come in the same order either way.
                # Without concurrent steps, every call of the round runs so, in order.
                step_id = next(iter(self.queued))
                call = self.queued.pop(step_id)
                await self._finish(step_id, await call)
                book.note(step_id)
                continue
            self._start_queued(wake)
            if self.state.status.paused and not self.running:
                return True
            if not self.running:
                return False
            finished = [task for task in self.running if task.done()]
            if not finished:  # every call of the round waits for something: so does the run
                await wake.first_of()
                finished = [task for task in self.running if task.done()]
            # In dispatch order, not the set's: the log must not depend on task addresses.
            # A cancelled step last: what cancelled it (a crash beside it) ends the run.
            for task in sorted(finished, key=lambda task: task.cancelled()):
                step_id = self.running.pop(task)
                await self._finish(step_id, task.result())  # ``_complete``, one coroutine less
                book.note(step_id)

    def _start_queued(self, wake: _Wake) -> None:
        """Start the round's calls, in dispatch order: they run concurrently.

        Each call's first step runs at once, as its own task (``corral.eager.start``): a
        call whose tools answer at once has ended when this returns, and the run takes
        its outcome without giving way to the event loop. A call that waits goes on as
        that task, beside the others, and wakes the dispatch loop when it ends.
        """
        loop = asyncio.get_running_loop()
        running, queued = self.running, self.queued
        for step_id in list(queued):
            # Out of ``queued`` before it starts: a first step that raises (an exit, an
            # interrupt) leaves the calls already started to their tasks, to be cancelled
            # as tasks, never closed under them (``run`` closes only what never started).
            task = start(loop, queued.pop(step_id))
            if not task.done():
                task.add_done_callback(wake)
            running[task] = step_id

    def _stop_on_model_budget(self) -> None:
        """A model call (judge, replan, reply) that ran out of the wall clock stops the run."""
        if self.stop is None and self.loop.budget_stop is not None:
            self.stop = (self.loop.budget_stop, ErrorCode.BUDGET_EXCEEDED)

    async def _replanned(self) -> bool:
        """Recovery's third rung for model plans: replan with the failure (at most twice)."""
        failure = replan_failure(
            self.state.plan,
            self.state.steps.values(),
            has_model=self.agent.model is not None,
            replans=self.state.replans,
            max_replans=self.agent.config.limits.max_replans,
        )
        if failure is None:
            return False
        from corral.runtime.modeling import model_replan

        return await model_replan(self.loop, failure)

    async def _settle_interrupted_writes(self) -> None:
        """Settle the writes that were in flight when an earlier process died.

        A step found ``running`` on resume, whose write tool was already selected (that
        event is stored before a write is entered), may or may not have acted. The call
        the process died in is recorded first, as an attempt whose outcome is unknown: it
        was made, and counts as one (in the step's attempts, the handoff packet, stats).
        A write with a reconciler is looked up then: found, the step succeeded; proven not
        to have acted, it is entered again (by ``_ready``, with the same key). An
        idempotent write without a reconciler is entered again at once; any other ends as
        ``OUTCOME_UNKNOWN``.

        Entering again is bounded by ``policy.max_interrupted_calls``: once that many of a
        write's calls were interrupted (a poison input, a tool that exhausts memory), it is
        not entered again but settled as it stands (what its reconciler finds, else
        ``OUTCOME_UNKNOWN``), and unless it was found to have acted the run goes to a
        person, with no replan: a replanned write would start a count of its own. Without
        the bound, every resume entered it again and died with it.
        """
        for step_id in self.graph.order:
            step = self.state.steps[step_id]
            spec = entered_write(step, self.agent.tools)
            if spec is None:
                continue
            message = (
                f"the run stopped while {spec.name} was running; "
                "the write may or may not have happened"
            )
            unknown_code = ErrorCode.OUTCOME_UNKNOWN.value
            if step.call_open:  # not yet recorded (a resume that died too recorded it)
                number = step.attempts + 1
                interrupted = ToolAttempt(
                    step_id,
                    spec.name,
                    number,
                    "error",
                    error_code=unknown_code,
                    error_message=message,
                    interrupted=True,
                )
                self.journal.emit("execute", interrupted)
            may_enter_again = step.interrupted_calls < spec.policy.max_interrupted_calls
            if not may_enter_again:
                message = (
                    f"the process died in each of {step.interrupted_calls} calls of "
                    f"{spec.name} (its max_interrupted_calls); the write is not entered again"
                )
            elif spec.policy.idempotent and spec.reconcile is None:
                self.gates.interrupted[step_id] = (spec.name, step.args or {})  # on its key
                continue
            unknown = failed_result(spec.name, unknown_code, message, 1)  # that call's
            args = step.args or {}
            settled = await self._reconciled(
                step_id,
                spec,
                args,
                unknown,
                "TOOL_FAILED",
                not_found_proves=not self.loop.earlier_owner_may_live,
            )
            outcome = reconciled_outcome(settled)
            if may_enter_again and spec.policy.idempotent and outcome != "applied":
                # it never acted, or (an earlier owner may live) nobody can tell: an
                # idempotent write is entered again by ``_ready``, with the same key
                if outcome == "unknown":  # only the same call is covered by that key
                    self.gates.interrupted[step_id] = (spec.name, args)
                continue
            await self._complete(step_id, _Outcome(settled, args))
            if not may_enter_again and outcome != "applied":
                failed = outcome == "not_applied"
                code = ErrorCode.TOOL_FAILED if failed else ErrorCode.OUTCOME_UNKNOWN
                self.stop = self.stop or (message, code)

    async def _reconciled(
        self,
        step_id: str,
        spec: ToolSpec,
        args: dict[str, Any],
        unknown: ToolResult,
        cause: str,
        *,
        not_found_proves: bool = True,
    ) -> ToolResult:
        """Ask the write's reconciler what happened, and record what it settled.

        ``not_found_proves=False`` when the write may still be running somewhere (an
        earlier owner that is only presumed dead): then only a found effect settles it.
        """
        if spec.reconcile is None:
            return unknown
        first = self.state.steps[step_id].attempts + 1
        settled = await reconcile(
            spec,
            args,
            self._context(step_id, args),
            self.loop.effects,
            unknown,
            cause,
            AttemptLog(self.journal, step_id, spec.reconcile),
            first,
            not_found_proves=not_found_proves,
        )
        outcome = reconciled_outcome(settled)
        self.journal.emit(
            "verify",
            OutcomeReconciled(step_id, spec.reconcile.name, spec.name, outcome, settled.summary),
        )
        return settled

    def _ready(self) -> list[str]:
        """The steps that may be decided now, in plan order.

        A candidate (its dependencies succeeded, the producers it waits for settled) is
        ready unless it is running, or publishes a fact that a running or an earlier ready
        step publishes too. RUNNING without a task means the process died mid-step: it
        runs again.
        """
        candidates = self.book.ready()
        if len(candidates) < 2 and not self.running and not self.queued:
            return candidates  # one candidate and nothing in flight: it conflicts with none
        in_flight = {*self.running.values(), *self.queued}
        ready: list[str] = []
        steps = self.graph.steps
        for step_id in candidates:
            if step_id in in_flight:
                continue
            if (
                (in_flight or ready)
                and steps[step_id].facts  # a step that publishes nothing conflicts with none
                and any(
                    self.graph.writes_conflict(step_id, other) for other in in_flight | set(ready)
                )
            ):
                continue
            ready.append(step_id)
        return ready

    def _mark_blocked(self, *, nothing_runs: bool = False) -> None:
        """Block the pending steps whose dependencies did not succeed, walking dependents."""
        book = self.book
        if nothing_runs:
            book.queue_waiting_again()
        while (found := book.next_blocked(wait=not nothing_runs)) is not None:
            step_id, bad = found
            reason = f"depends on {', '.join(bad)}, which did not succeed"
            self.journal.emit(
                "execute", StepBlocked(step_id, reason, ErrorCode.DEPENDENCY_FAILED.value)
            )
            book.note(step_id)

    # ------------------------------------------------------------------ before a step

    async def _gate_and_dispatch(self, step_id: str) -> None:
        compiled = self.graph.steps[step_id]
        self.gates.idle = not self.running and not self.queued
        decided = decide(self.agent.gates, Proposal(compiled, compiled.spec, {}), self.gates)
        if not isinstance(decided, Proposal):
            self.book.note(step_id)  # a gate failed, skipped or held it, or stopped the run
            if decided is not None:
                self.stop = (decided.reason, decided.code)
            await self._release_waiting_on(step_id)
            return
        spec, args = decided.tool, decided.args
        self.journal.emit("execute", StepStarted(step_id, spec.name, args))
        self.book.started_step(step_id)
        if spec.policy.kind == "write":
            await self.loop.persist()  # durable before any side effect
        self.queued[step_id] = self._execute(compiled, spec, args, decided.validated)

    async def _release_waiting_on(self, settled: str) -> None:
        """Decide the steps that waited for ``settled``, which ended before its tool ran.

        They were not ready when this round began; with nothing running, the main loop
        would otherwise stop and leave them pending.
        """
        if self.state.status.paused or self.stop is not None:
            return
        if self.book.status[settled] in (StepStatus.PENDING, StepStatus.RUNNING):
            return  # it awaits a person
        for step_id in self._ready():
            if settled in self.graph.steps[step_id].waits_for:
                await self._gate_and_dispatch(step_id)
                if self.state.status.paused or self.stop is not None:
                    return

    # ------------------------------------------------------------------ the call

    async def _execute(
        self,
        compiled: CompiledStep,
        planned: ToolSpec,
        args: dict[str, Any],
        validated: BaseModel | None = None,
    ) -> _Outcome:
        """Decide the tool and call it; on failure try the next eligible tool.

        ``validated``: ``args`` as ``planned``'s input model, when a gate validated them.
        """
        step, agent, journal = compiled.step, self.agent, self.journal
        priority = self.state.priority
        if simple(planned, agent.policy, agent.capabilities):  # most steps: the one tool
            candidates, excluded = sole_candidate(planned, agent.tools, self.gates.allowed_tools)
        else:
            candidates, excluded = eligible_tools(
                planned,
                agent.tools,
                agent.health,
                self.measure,
                allowed=self.gates.allowed_tools,
                policy=agent.policy,
                # what constraints read, and capability matching's query: built only when used
                names=self.loop.rule_names(args) if agent.policy.constraints else {},
                capabilities=agent.capabilities,
                query=(
                    f"{step.description} {planned.description} {self.state.memory.goal}"
                    if agent.capabilities is not None
                    else ""
                ),
                latency=self.latency,
                step_asks_approval=step.requires_confirmation,
            )
        died_in = self.gates.interrupted.get(step.id) if self.gates.interrupted else None
        if died_in is not None:  # entered again on its key: only as the tool it died in
            candidates = _named(candidates, died_in[0])
        if not candidates:
            reason = "; ".join(f"{name}: {why}" for name, why in excluded.items())
            refused = failed_result(planned.name, ErrorCode.NO_ELIGIBLE_TOOL.value, reason)
            return _Outcome(refused, args)
        choice: Choice | None = None
        told = False
        if len(candidates) > 1:  # one tool: nothing to choose, nothing to tell
            choice, told = await self._choose(planned, candidates)
            candidates = choice.order
        result: ToolResult | None = None
        # by index: a ``range`` iterator holds nothing for the collector to track, where an
        # ``enumerate`` and its list iterator stayed alive across every await of the call
        for index in range(len(candidates)):
            spec = candidates[index]
            if spec.name != planned.name:  # a stand-in: the agent's gates must pass it too
                self.gates.idle = False  # a gate may not pause the run for it: its step runs
                kept_out = stand_in_answer(agent.gates, Proposal(compiled, spec, args), self.gates)
                if kept_out is not None:
                    if result is None and index + 1 == len(candidates):  # no tool ran
                        refused = failed_result(spec.name, kept_out.code, kept_out.reason)
                        skipped = kept_out if isinstance(kept_out, Skip) else None
                        return _Outcome(refused, args, skipped)
                    continue
            degraded = agent.health.degraded(spec.name)
            write = spec.policy.kind == "write"
            if write or index or degraded or excluded or spec.name != planned.name or told:
                if result is not None:
                    reason = f"fallback after {result.tool}"
                else:
                    reason = choice.reason if choice is not None and told else "best ranked"
                names = [c.name for c in candidates]
                journal.emit(
                    "decide",
                    ToolSelected(
                        step.id,
                        spec.name,
                        reason,
                        degraded,
                        names,
                        excluded,
                        priority if told else None,
                        choice.scores if choice is not None and told else None,
                    ),
                )
            if write:
                await self.loop.persist()  # a resumed run knows which write was entered
            following = candidates[index + 1].name if index + 1 < len(candidates) else None
            result = await self._call(
                compiled, spec, args, validated if spec is planned else None, following
            )
            if result.status is not ToolStatus.ERROR:
                agent.health.record(spec.name, ok=True)
                break
            if blames_the_tool(result):
                agent.health.record(spec.name, ok=False)
            if not another_tool_may_follow(result):
                break
        assert result is not None
        return _Outcome(result, args)

    async def _choose(self, planned: ToolSpec, candidates: list[ToolSpec]) -> tuple[Choice, bool]:
        """The candidates in the order the run's priority puts them, and whether to say why.

        A tie goes to the model when one is configured. The choice is told (an event with
        the priority, the scores and the reason) when the priority or the model decided
        it; a normal run's pick by the default order is recorded as it always was.
        """
        agent, state = self.agent, self.state
        peers = {spec.name for spec in agent.tools.equivalents(planned.name)}
        decision = agent.config.decision
        choice = choose(
            candidates,
            planned.name,
            peers.__contains__,
            agent.health,
            state.priority,
            agent.config.tool_preference,
            state.observed_latency,
            decision,
        )
        if choice.tied and agent.model is not None:
            from corral.runtime.modeling import model_tie_break

            tied = [spec for spec in choice.order if spec.name in choice.tied]
            picked = await model_tie_break(self.loop, tied, choice.scores)
            return choice.by_model(picked, decision.tie_margin), True
        return choice, bool(choice.reason) and state.priority != "normal"

    async def _call(
        self,
        compiled: CompiledStep,
        spec: ToolSpec,
        args: dict[str, Any],
        validated: BaseModel | None = None,
        next_tool: str | None = None,
    ) -> ToolResult:
        """Call ``spec`` for the step (``next_tool``: the equivalent tool ranked after it)."""
        step_id = compiled.step.id
        if validated is None:  # an equivalent tool, or gates that validate nothing
            try:
                validated = validate_args(spec, args)
            except CorralError as exc:
                return failed_result(spec.name, exc.code.value, exc.message)
        log = AttemptLog(self.journal, step_id, spec, True, next_tool)
        context = self._context(step_id, args, spec)
        retry = spec.policy.retry
        while True:
            first = self.state.steps[step_id].attempts + 1
            spent = log.count  # an entry again after a reconcile is a retry: one budget
            result = await invoke_tool(
                spec, validated, context, self.loop.effects, log, first, spent
            )
            last = log.last
            if result.error_code != _OUTCOME_UNKNOWN or last is None:
                return result
            if last.in_flight:  # "not found" proves nothing while the thread may still act
                return result
            cause = last.error_code or ErrorCode.TOOL_FAILED.value
            settled = await self._reconciled(step_id, spec, args, result, cause)
            # The reconciler proved the write did not act: entering it again cannot act twice.
            retries = log.count - 1
            if reconciled_outcome(settled) != "not_applied" or not last.retryable:
                return settled
            if retries >= retry.max_retries:
                return settled
            await self.loop.effects.sleep(retry.delay(retries + 1))

    def _context(
        self, step_id: str, args: dict[str, Any], spec: ToolSpec | None = None
    ) -> ToolContext:
        """What a tool of this step may see; the key depends on run, step and arguments.

        ``spec``: the tool it is for. A read that declares no ``ToolContext`` parameter
        never sees it, so it gets no key and no facts: hashing the arguments and copying
        every fact for each step cost more than the rest of the context. A write always
        carries its key. Without ``spec`` (a reconciler's finder) the context is whole.
        """
        state = self.state
        sees = spec is None or spec.context_param is not None
        keyed = sees or (spec is not None and spec.policy.kind == "write")
        return ToolContext.of_call(
            state.run_id,
            step_id,
            idempotency_key(state.run_id, step_id, args) if keyed else "",
            self.agent.deps,
            self.loop.values() if sees else {},
            state.language,
            state.received_at or self.loop.effects.now(),
            self._render,
            self.agent.config.timezone,
        )

    def _render(self, name: str, values: Mapping[str, Any]) -> str:
        """Render one of the agent's templates in the run's language (``ToolContext.render``)."""
        return self.agent.renderer.render(name, values, self.state.language)

    # ------------------------------------------------------------------ after a step

    def _raise_need_replan(
        self, compiled: CompiledStep, result: ToolResult, code: str | None, reason: str
    ) -> None:
        """Signal ``need_replan``: the step's result failed its check.

        What the rest of the plan presumes does not hold. The handler's choice is carried
        out once the plan has settled (``_replanned``, else ``conclude``).
        """
        step_id = compiled.step.id
        signal = NeedReplan(
            step_id=step_id,
            tool=result.tool,
            code=code or ErrorCode.SUCCESS_CRITERIA_FAILED.value,
            reason=reason,
        )
        declared = self.loop.declared_plan()
        outcome = handle_need_replan(
            signal,
            self.state.plan,
            has_model=self.agent.model is not None,
            replans=self.state.replans,
            max_replans=self.agent.config.limits.max_replans,
            answer_declared=declared is not None and step_id in declared.on_failure,
        )
        self.journal.emit("verify", NeedReplanSignal(signal, outcome))

    async def _complete(self, step_id: str, outcome: _Outcome) -> None:
        """Record how the step ended (after its verdict), then update the bookkeeping."""
        await self._finish(step_id, outcome)
        self.book.note(step_id)

    async def _finish(self, step_id: str, outcome: _Outcome) -> None:
        if self.gates.interrupted and step_id in self.gates.interrupted:
            outcome = _entered_again(self.gates.interrupted.pop(step_id)[0], outcome)
        compiled = self.graph.steps[step_id]
        result, journal = outcome.result, self.journal
        if outcome.skipped is not None:
            skip = outcome.skipped
            journal.emit("decide", StepSkipped(step_id, skip.code, skip.reason, skip.template))
            return
        if result.error_code == _OUTCOME_UNKNOWN:
            reason = result.error_message or "the outcome of the write is unknown"
            unknown = StepStatus.UNKNOWN.value
            journal.emit(
                "execute",
                StepFinished(
                    step_id, unknown, result, result.error_code, reason, result.duration_ms
                ),
            )
            return
        if result.status is ToolStatus.SUCCESS:
            verifiers = self.agent.verifiers
            told: Verdict | None = None  # most steps: nobody may have a say (``may_judge``)
            if may_judge(verifiers, compiled.step, compiled.success):
                done = StepOutcome(compiled.step, compiled.success, outcome.args, result)
                told = await verify(verifiers, done, self.verdicts)
            # The output is stored once: with the attempt that produced it (the last), or
            # here when this event stands for the step's one attempt (``sole_attempt``).
            if told is not None and not told.passed:
                # its end is the verify stage's: the tool's time ends with its own event
                journal.release_held(step_id)
                produced = self.state.steps[step_id].attempts or None
                journal.emit(
                    "verify",
                    StepFinished(
                        step_id,
                        "failed",
                        result,
                        told.code,
                        told.reason,
                        result.duration_ms,
                        told,
                        produced,
                    ),
                )
                self._raise_need_replan(compiled, result, told.code, told.reason)
                return
            sole = journal.fold(step_id, result.tool)
            produced = None if sole else self.state.steps[step_id].attempts or None
            journal.emit(
                "execute",
                StepFinished(
                    step_id, "succeeded", result, None, "", result.duration_ms, told, produced, sole
                ),
            )
            for fact, path in compiled.facts:
                value: Any = result.data
                for part in path:
                    value = value.get(part) if isinstance(value, dict) else None
                if journal.write_fact(fact, value, FactSource.TOOL, step_id):
                    self.guard.fact_written(fact, value)
            looping = self.guard.observe_result(result.tool, outcome.args, result.data)
            if looping:
                journal.emit("verify", LoopDetected(looping, step_id))
                self.stop = (looping, ErrorCode.LOOP_DETECTED)
            return
        code = result.error_code or ErrorCode.NO_RESULT.value
        reason = result.error_message or "the tool found nothing"
        journal.emit(
            "execute", StepFinished(step_id, "failed", result, code, reason, result.duration_ms)
        )
