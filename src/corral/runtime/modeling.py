"""Model calls inside a run: budgets, recording, and the two model-backed decisions.

Every attempt goes through ``effects.call_model`` (so replays answer from the log, failures
included), is checked against the run's budget before it is made (model calls, tokens,
money) and bounded by the wall-clock time left, and becomes a ``model_call`` event with
the raw text, tokens, latency, structured mode and, when rejected or failed, why and the
error code. A model that fails, is invalid after its re-asks, or would exceed the budget
never crashes the run: the layer degrades (rules and templates) or hands off; a call that
ran out of the wall clock stops the run as the wall-clock budget does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from corral.clipping import clip
from corral.contracts import IntentResult, RunStatus, StepStatus, ToolStatus, Verdict
from corral.errors import CorralError, ErrorCode, ModelOutputInvalidError
from corral.events import EntityRejected, PlanCreated, PlanRejected
from corral.intent.grounding import Evidence
from corral.intent.model_fallback import intent_output_model, intent_request, to_intent_result
from corral.models.base import ModelRequest
from corral.models.context import fit_summaries
from corral.models.structured import Check, ask_structured
from corral.planning.model_planner import (
    draft_model,
    draft_to_plan,
    plan_problems,
    plan_request,
    ungrounded_literals,
)
from corral.planning.repeats import MadeWrite, repeated_writes
from corral.planning.validate import PlanContext, validate_plan
from corral.reply.model_reply import ReplyAnswer, reply_problems, reply_request
from corral.runtime.model_attempts import ModelAttempts
from corral.verify.judge import JudgeAnswer, judge_request

if TYPE_CHECKING:
    from corral.runtime.view import RunControl
    from corral.tools.spec import ToolSpec

T = TypeVar("T", bound=BaseModel)


async def ask_model(
    loop: RunControl, request: ModelRequest, output: type[T], check: Check[T] | None = None
) -> T:
    """The structured pipeline, every attempt recorded, within budget and retried by corral.

    See ``model_attempts``: a call that runs out of the wall clock sets
    ``loop.budget_stop``, and the run stops on it whichever layer asked.
    """
    model = loop.agent.model
    if model is None:
        raise CorralError("no model is configured", hint="set model.name in agent.yaml")
    attempts = ModelAttempts(loop, model)
    return await ask_structured(
        model,
        request,
        output,
        attempts.call,
        attempts.record,
        max_reasks=loop.agent.config.model.max_reasks,
        check=check,
    )


def _temperature(loop: RunControl, purpose: str) -> float:
    return loop.agent.config.model.temperatures.get(purpose, 0.0)


async def model_intent(loop: RunControl, text: str) -> IntentResult | None:
    """The model's label for a message the rules and classifier were unsure of, or ``None``."""
    config = loop.agent.config
    request = intent_request(config, text, _temperature(loop, "intent"))
    try:
        answer = await ask_model(loop, request, intent_output_model(config))
    except CorralError:
        return None  # recorded as events; the rules' verdict (clarify) stands
    return to_intent_result(answer)


def _evidence(loop: RunControl) -> Evidence:
    """What a model's values may be grounded in: the user's words, entities, tool results.

    Relative dates resolve against the run's recorded clock, so a replay grounds the same.
    """
    state = loop.state
    results = [s.data for s in state.steps.values() if s.status is StepStatus.SUCCEEDED]
    return Evidence.of(
        " ".join(state.messages),
        [*state.entities.values(), *results],
        state.received_at,
        loop.agent.config.timezone,
    )


def _planner_tools(loop: RunControl, intent: str) -> tuple[PlanContext, list[ToolSpec]]:
    """What a model plan for ``intent`` is validated against, and the tools it may use."""
    context = loop.agent.plan_context(intent, model=True)
    names = sorted(context.allowed_tools or [])
    return context, [loop.agent.tools.get(n) for n in names if n in loop.agent.tools]


async def model_plan(loop: RunControl, intent: str) -> None:
    """Plan with the model, validate like a template, or hand off; never run a bad plan."""
    agent, state = loop.agent, loop.state
    context, tools = _planner_tools(loop, intent)
    max_steps = agent.config.limits.max_plan_steps
    request = plan_request(
        state.memory.goal,
        intent,
        tools,
        state.entities,
        max_steps,
        _temperature(loop, "plan"),
        rule_reads=context.rule_reads,
    )
    output = draft_model(tools, max_steps)
    try:
        evidence = _evidence(loop)
        draft: Any = await ask_model(
            loop,
            request,
            output,
            check=lambda d: plan_problems(d, intent, context, evidence=evidence),
        )
    except ModelOutputInvalidError as exc:
        loop.journal.emit("plan", PlanRejected([exc.message]))
        loop.handoff(exc.message, ErrorCode.PLAN_INVALID)
        return
    except CorralError as exc:
        loop.handoff(f"the planner could not be asked: {exc.message}", exc.code)
        return
    if not draft.steps:
        loop.handoff(
            "the planner found no way to do this with the allowed tools", ErrorCode.PLAN_INVALID
        )
        return
    plan = draft_to_plan(draft, loop.effects.new_id("plan"), intent)
    loop.set_graph(validate_plan(plan, context))
    loop.journal.emit("plan", PlanCreated(plan))
    loop.journal.transition(RunStatus.DECIDING, "model plan validated")


async def model_judge(
    loop: RunControl, criterion: str, tool: str, data: dict[str, Any] | None
) -> Verdict:
    """The judge's verdict on a step whose deterministic checks passed."""
    request = judge_request(criterion, tool, data, _temperature(loop, "judge"))
    try:
        answer = await ask_model(loop, request, JudgeAnswer)
    except CorralError as exc:
        return Verdict(
            passed=False,
            check="success",
            code=exc.code.value,
            reason=f"judge unavailable: {exc.message}",
        )
    reason = answer.reason + (f" (risks: {'; '.join(answer.risks)})" if answer.risks else "")
    return Verdict(
        passed=answer.passed,
        check="success",
        reason=clip(f"judge: {reason}", 500),
        code=None if answer.passed else ErrorCode.SUCCESS_CRITERIA_FAILED.value,
    )


async def model_reply(loop: RunControl) -> str | None:
    """A checked model reply when every step succeeded, else ``None`` (templates answer)."""
    state = loop.state
    if any(s.status is not StepStatus.SUCCEEDED for s in state.steps.values()):
        return None
    facts = {k: v for k, v in state.memory.values().items() if k != "reply"}
    said = " ".join(state.messages)
    request = reply_request(
        state.memory.goal,
        facts,
        fit_summaries(
            state.memory.completed_steps, loop.agent.config.model.max_context_tokens // 2
        ),
        state.language,
        _temperature(loop, "reply"),
    )
    try:
        answer = await ask_model(
            loop, request, ReplyAnswer, check=lambda a: reply_problems(a.text, facts, said)
        )
    except CorralError:
        return None
    return str(answer.text)


async def model_entities(loop: RunControl, text: str, found: dict[str, Any]) -> dict[str, Any]:
    """Declared entities the rules missed, from the model, grounded in ``text``."""
    from corral.intent.model_extraction import extraction_model, extraction_request, ground

    wanted = {
        name: spec
        for name, spec in loop.agent.config.entities.items()
        if name not in found and spec.kind in ("pattern", "vocabulary")
    }
    if not wanted:
        return {}
    request = extraction_request(text, wanted, _temperature(loop, "extract"))
    try:
        answer: Any = await ask_model(loop, request, extraction_model(wanted))
    except CorralError:
        return {}
    kept, dropped = ground(
        text, answer.entities, wanted, loop.state.received_at, loop.agent.config.timezone
    )
    for name, reason in dropped.items():
        value = str(answer.entities.get(name, ""))[:100]
        loop.journal.emit("intent", EntityRejected(name, reason, value))
    return kept


async def model_replan(loop: RunControl, failure: str) -> bool:
    """Ask for a new plan after a failure; steps that succeeded are kept, never rerun.

    Returns True when a valid new plan replaced the old one; False leaves the failure to
    the usual ending (a handoff).
    """
    from corral.contracts import Plan

    state, agent = loop.state, loop.agent
    old = state.plan
    assert old is not None and old.intent is not None
    intent = old.intent
    done = [s for s in old.steps if state.steps[s.id].status is StepStatus.SUCCEEDED]
    context, tools = _planner_tools(loop, intent)
    budget = agent.config.model.max_context_tokens
    summaries = "; ".join(
        fit_summaries([f"{s.id} {s.tool} -> {state.steps[s.id].data}" for s in done], budget // 2)
    )
    max_steps = agent.config.limits.max_plan_steps
    request = plan_request(
        state.memory.goal,
        intent,
        tools,
        state.entities,
        max_steps - len(done),
        _temperature(loop, "plan"),
        failure=f"{failure}. Already done, keep and do not repeat: {summaries or 'nothing'}. "
        "Use new step ids.",
        rule_reads=context.rule_reads,
    )
    evidence = _evidence(loop)
    results = {s.id: state.steps[s.id].data for s in done}
    made = [  # writes that acted, kept or not (one whose result failed its check acted too),
        # under the tool the plan named and the equivalent that ran it
        MadeWrite(step.id, name, step.args or {})
        for step in state.steps.values()
        if step.result is not None and step.result.status is ToolStatus.SUCCESS
        for name in dict.fromkeys((step.called, step.tool_used))
        if name is not None and agent.tools.write(name)
    ]

    def combined(draft: Any) -> Plan:
        return Plan(
            plan_id="draft",
            intent=intent,
            source="model",
            steps=[*done, *draft_to_plan(draft, "draft", intent).steps],
        )

    def problems(draft: Any) -> list[str]:
        if not draft.steps:
            return []
        used = state.steps.keys() | state.retired_step_ids
        clash = [s.id for s in draft.steps if s.id in used]
        if clash:  # a step's id names one call: its events, its key and a person's yes
            return [f"step ids {clash} are already used by an earlier plan; use new ids"]
        try:
            graph = validate_plan(combined(draft), context)
        except CorralError as exc:
            return [exc.message]
        values = (state.entities, loop.facts_with_entities(), results, state.request)
        new = [s.id for s in draft.steps]
        repeats = repeated_writes(graph, new, made, agent.tools, values)
        return repeats + ungrounded_literals(draft, context, evidence)

    try:
        draft: Any = await ask_model(loop, request, draft_model(tools, max_steps), problems)
    except CorralError:
        return False
    if not draft.steps:
        return False
    plan = combined(draft).model_copy(update={"plan_id": loop.effects.new_id("plan")})
    loop.set_graph(validate_plan(plan, context))
    kept = [s.id for s in done]
    loop.journal.emit("plan", PlanCreated(plan, state.replans + 1, kept, failure))
    return True


async def model_tie_break(
    loop: RunControl, tied: list[ToolSpec], scores: dict[str, dict[str, float]]
) -> str | None:
    """The tool the model names among tied equivalent tools, or ``None`` when it fails.

    The name is checked by the caller (``Choice.by_model``): one that is not among
    ``tied`` is ignored. Recorded as ``model_call`` events like every call, so a replay
    picks the same.
    """
    from corral.decision.tiebreak import TieAnswer, tie_request

    state = loop.state
    request = tie_request(
        state.memory.goal, state.priority, tied, scores, _temperature(loop, "decide")
    )
    try:
        answer = await ask_model(loop, request, TieAnswer)
    except CorralError:
        return None  # recorded as events; the fixed order stands
    return answer.tool
