"""How a run ends once every step is settled: the outcome and the reply.

The order is deliberate. A write whose outcome is unknown goes to a person first, with a
reply that says neither "done" nor "not done". Then a stop (budget, loop): as an unknown
outcome too when it left a write entered and unsettled. A business
rule that decides the answer wins ("out of warranty" beats "please upload a photo"); then
a failed required step, answered by the plan's ``on_failure`` template when it only found
nothing, else handed to a person; then a declined confirmation; then a partial completion,
when only optional steps (``on_failure: continue``) failed, with what was done and what
was not; else success, with the reply a reply step produced or the intent's template.

Outcomes (``run_finished`` and ``RunSummary.outcome``): ``success``, ``partial``,
``refused``, ``not_found``, ``unmet``, ``cancelled``, ``unknown`` and ``handoff``; and,
ended before this (``RunLoop``): ``reply`` (a reply template, no step) and ``unclear`` (a
line nobody understood, typed at a confirmation).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.contracts import Plan, Step, StepStatus, ToolStatus
from corral.errors import ErrorCode, TemplateInvalidError
from corral.events import Verified
from corral.reply.render import display
from corral.runtime.state import StepState
from corral.tools.registry import ToolRegistry
from corral.tools.spec import ToolSpec

if TYPE_CHECKING:
    from corral.runtime.view import RunControl


def conclude(
    loop: RunControl, stop: tuple[str, ErrorCode] | None, model_reply: str | None = None
) -> None:
    """End the run: every step is succeeded, failed, skipped, blocked or unknown.

    ``model_reply`` is a checked reply the model wrote; it is used only on success.
    """
    steps = list(loop.state.steps.values())
    unknown: StepState | None = None
    unsettled: StepState | None = None
    failed: list[StepState] = []
    declined = False
    for step in steps:  # one pass sorts the steps for every check below
        status = step.status
        if status is StepStatus.UNKNOWN:
            unknown = unknown or step
        elif status is StepStatus.PENDING or status is StepStatus.RUNNING:
            unsettled = unsettled or step
        elif status is StepStatus.FAILED:
            failed.append(step)
        declined = declined or step.error_code == ErrorCode.REJECTED_BY_USER
    if unknown is not None:
        loop.handoff(
            f"step {unknown.id} ({unknown.tool_used or unknown.tool}): {unknown.reason}",
            ErrorCode.OUTCOME_UNKNOWN,
            template="outcome_unknown",
            outcome="unknown",
        )
        return
    if stop is not None:
        entered = _write_left_running(loop, steps) if unsettled is not None else None
        if entered is not None:  # a resume's budget stopped its settling: it may have acted
            loop.handoff(
                f"{stop[0]}; step {entered.id} ({entered.tool_used}) was entered before the "
                "run stopped and may or may not have acted",
                ErrorCode.OUTCOME_UNKNOWN,
                template="outcome_unknown",
                outcome="unknown",
            )
            return
        loop.handoff(*stop)
        return
    if unsettled is not None:  # a gate held a step without asking anyone: never a success
        loop.handoff(
            f"step {unsettled.id} never ran and nobody was asked to approve it",
            ErrorCode.EXTENSION_FAILED,
        )
        return
    optional = _optional(loop) if failed else set()
    required = [s for s in failed if s.id not in optional]
    refusal = _refusal(loop)
    note = loop.others_named()  # "查 A 和 B": A answered (or not found), B named to ask
    if refusal is not None:
        loop.finish(refusal, "refused", note=note)
    elif required:
        _failure(loop, required[0], note)
    elif declined:
        cancel(loop)
    elif failed:
        _partial(loop, steps, failed[0], note)
    else:
        reply = loop.state.memory.facts.get("reply")
        if model_reply:
            loop.finish_with_text(model_reply, "success", "model", note=note)
        elif reply is not None and isinstance(reply.value, str) and reply.value:
            loop.finish_with_text(reply.value, "success", note=note)
        else:
            intent = loop.state.route.intent if loop.state.route else None
            spec = loop.agent.config.intent(intent) if intent else None
            loop.finish(spec.reply if spec and spec.reply else "done", "success", note=note)


def entered_write(step: StepState, tools: ToolRegistry) -> ToolSpec | None:
    """The write a ``running`` step entered, when its tool was selected.

    That event is stored before a write is entered: in a run that is not running, a
    process that died entered it, and it may have acted. ``None`` for any other step.
    """
    if step.status is not StepStatus.RUNNING or step.tool_used is None:
        return None
    return tools.write(step.tool_used)


def _write_left_running(loop: RunControl, steps: list[StepState]) -> StepState | None:
    """A write step still ``running`` at the end: entered by a process that died.

    Not settled since: a resume's budget stopped its re-entry, or its reconciler's lookup
    spent the last tool call.
    """
    tools = loop.agent.tools
    return next((step for step in steps if entered_write(step, tools) is not None), None)


def _plan(loop: RunControl) -> Plan:
    """The run's plan: the scheduler, the only caller of ``conclude``, ran one."""
    plan = loop.state.plan
    assert plan is not None
    return plan


def _optional(loop: RunControl) -> set[str]:
    """Ids of the steps whose failure the plan allows (``on_failure: continue``)."""
    return {s.id for s in _plan(loop).steps if s.on_failure == "continue"}


def _failure(loop: RunControl, first: StepState, note: str = "") -> None:
    """A required step failed: the plan's answer for "not found" or "unmet", else a person.

    A code of the user's own (not an ``ErrorCode``) is read by where the step failed: a
    verifier's, on a result the tool gave, is a check that failed ("unmet", as
    ``SUCCESS_CRITERIA_FAILED``); a gate's, before the tool was entered, is a policy's
    refusal (``POLICY_HANDOFF``). Neither is ``TOOL_FAILED``: the tool did not fail.
    """
    answer = _failure_template(loop, first.id)
    code = first.error_code or ""
    own = code not in ErrorCode.__members__
    checked = own and first.result is not None and first.result.status is ToolStatus.SUCCESS
    if answer and code == ErrorCode.NO_RESULT.value:
        loop.finish(answer, "not_found", note=note)
    elif answer and (code == ErrorCode.SUCCESS_CRITERIA_FAILED.value or checked):
        loop.finish(answer, "unmet", note=note)
    else:
        if not own:
            reason_code = ErrorCode(code)
        elif checked:
            reason_code = ErrorCode.SUCCESS_CRITERIA_FAILED
        elif first.attempts == 0:  # refused before any tool was entered: a gate's code
            reason_code = ErrorCode.POLICY_HANDOFF  # (its own tool's, or every stand-in's)
        else:
            reason_code = ErrorCode.TOOL_FAILED
        loop.handoff(f"step {first.id} ({first.tool}) failed: {first.reason}", reason_code)


def _partial(loop: RunControl, steps: list[StepState], first: StepState, note: str) -> None:
    """Only optional steps failed: say what was done and what was not.

    The steps that publish the reply are not listed; their text comes first. When nothing
    at all succeeded there is nothing to report, and a person takes over.
    """
    declared = {s.id: s for s in _plan(loop).steps}
    reply_steps = {sid for sid, step in declared.items() if "reply" in step.facts}
    succeeded = [s for s in steps if s.status is StepStatus.SUCCEEDED]
    if not succeeded:
        _failure(loop, first, note)
        return
    done = [s for s in succeeded if s.id not in reply_steps] or succeeded
    not_done = [s for s in steps if s.status in (StepStatus.FAILED, StepStatus.BLOCKED)]

    try:
        said = loop.render(
            "partial",
            {"done": _words(loop, declared, done), "not_done": _words(loop, declared, not_done)},
        )
    except TemplateInvalidError as exc:
        loop.handoff(exc.message, ErrorCode.TEMPLATE_INVALID)
        return
    reply = loop.state.memory.facts.get("reply")
    text = reply.value if reply is not None and isinstance(reply.value, str) else ""
    loop.finish_with_text(f"{text} {said}".strip(), "partial", "partial", note=note)


def cancel(loop: RunControl) -> None:
    """A person declined a step or the plan: end ``cancelled``, saying nothing false.

    "Nothing was changed" holds only when no write acted; once one did (a charge before a
    declined post, a step kept before a declined replan) the reply names what was done
    and what was not, so the user is never told a change did not happen.
    """
    steps = list(loop.state.steps.values())
    changed = [
        s
        for s in steps
        if s.status is StepStatus.SUCCEEDED and loop.agent.tools.write(s.tool_used or s.tool)
    ]
    if not changed:
        loop.finish("cancelled", "cancelled")
        return
    declared = {s.id: s for s in _plan(loop).steps}
    not_done = [s for s in steps if s.status is not StepStatus.SUCCEEDED]
    extra = {"done": _words(loop, declared, changed), "not_done": _words(loop, declared, not_done)}
    loop.finish("cancelled_after_changes", "cancelled", extra)


def _words(loop: RunControl, declared: dict[str, Step], items: list[StepState]) -> str:
    """Steps in plain words, each named once, as a list in the run's language."""
    names = dict.fromkeys(_describe(loop, declared, s) for s in items)
    return display(list(names), loop.state.language)


def _describe(loop: RunControl, declared: dict[str, Step], step: StepState) -> str:
    """A step in plain words: its ``description``, else its tool's, else the tool's name."""
    planned = declared.get(step.id)
    described = planned.description if planned else ""
    if not described:
        name = step.tool_used or step.tool
        tool = loop.agent.tools.get(name) if name in loop.agent.tools else None
        described = tool.description if tool and tool.description else name
    return described.rstrip("。.")


def _refusal(loop: RunControl) -> str | None:
    """The refusal template when a business rule decides the outcome, else ``None``.

    A step skipped by a rule, or by a gate with a template, refuses. So does a step that
    never ran (blocked by another failure) whose rule can already be judged false from the
    facts.
    """
    state = loop.state
    for step in state.steps.values():
        if step.error_code == ErrorCode.REJECTED_BY_USER:
            continue  # the person declined: the run is cancelled, not refused
        if step.refusal and (
            step.status is StepStatus.SKIPPED or step.error_code == ErrorCode.BUSINESS_RULE_VIOLATED
        ):
            return step.refusal
    rules = loop.agent.rules
    blocked = [step for step in state.steps.values() if step.status is StepStatus.BLOCKED]
    if not (rules and blocked):
        return None
    names = loop.rule_names()
    for step in blocked:
        for rule in rules:
            if rule.rule.before_tool != step.tool or not rule.judgeable(names):
                continue
            verdict = rule.check(names)
            if not verdict.passed:
                loop.journal.emit("verify", Verified(step.id, verdict))
                return rule.rule.refusal
    return None


def _failure_template(loop: RunControl, step_id: str) -> str | None:
    declared = loop.declared_plan()
    return declared.on_failure.get(step_id) if declared else None
