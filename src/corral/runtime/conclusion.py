"""How a run ends once every step is settled: the outcome and the reply.

The order is deliberate. A business rule that decides the answer wins ("out of warranty"
beats "please upload a photo"); then a failed step, answered by the plan's ``on_failure``
template when it only found nothing, else handed to a person; then a declined
confirmation; else success, with the reply a reply step produced or the intent's template.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.contracts import EventType, StepStatus
from corral.errors import ErrorCode

if TYPE_CHECKING:
    from corral.runtime.loop import RunLoop


def conclude(
    loop: RunLoop, stop: tuple[str, ErrorCode] | None, model_reply: str | None = None
) -> None:
    """End the run: every step is succeeded, failed, skipped or blocked.

    ``model_reply`` is a checked reply the model wrote; it is used only on success.
    """
    if stop is not None:
        loop.handoff(*stop)
        return
    steps = list(loop.state.steps.values())
    failed = [s for s in steps if s.status is StepStatus.FAILED]
    declined = [s for s in steps if s.error_code == ErrorCode.REJECTED_BY_USER.value]
    refusal = _refusal(loop)
    if refusal is not None:
        loop.finish(refusal, "refused")
    elif failed:
        first = failed[0]
        answer = _failure_template(loop, first.id)
        if answer and first.error_code == ErrorCode.NO_RESULT.value:
            loop.finish(answer, "not_found")
        elif answer and first.error_code == ErrorCode.SUCCESS_CRITERIA_FAILED.value:
            loop.finish(answer, "unmet")
        else:
            code = first.error_code or ""
            loop.handoff(
                f"step {first.id} ({first.tool}) failed: {first.reason}",
                ErrorCode(code) if code in ErrorCode.__members__ else ErrorCode.TOOL_FAILED,
            )
    elif declined:
        loop.finish("cancelled", "cancelled")
    else:
        reply = loop.state.memory.facts.get("reply")
        if model_reply:
            loop.finish_with_text(model_reply, "success", "model")
        elif reply is not None and isinstance(reply.value, str) and reply.value:
            loop.finish_with_text(reply.value, "success")
        else:
            intent = loop.state.route.intent if loop.state.route else None
            spec = loop.agent.config.intent(intent) if intent else None
            loop.finish(spec.reply if spec and spec.reply else "done", "success")


def _refusal(loop: RunLoop) -> str | None:
    """The refusal template when a business rule decides the outcome, else ``None``.

    A step skipped by a rule refuses. So does a step that never ran (blocked by another
    failure) whose rule can already be judged false from the facts.
    """
    state = loop.state
    for step in state.steps.values():
        if step.error_code == ErrorCode.BUSINESS_RULE_VIOLATED.value and step.refusal:
            return step.refusal
    names = loop.rule_names()
    for step in state.steps.values():
        if step.status is not StepStatus.BLOCKED:
            continue
        for rule in loop.agent.rules:
            if rule.rule.before_tool != step.tool or not rule.judgeable(names):
                continue
            verdict = rule.check(names)
            if not verdict.passed:
                loop.journal.emit(
                    EventType.VERIFIED,
                    "verify",
                    step_id=step.id,
                    verdict=verdict.model_dump(mode="json"),
                )
                return rule.rule.refusal
    return None


def _failure_template(loop: RunLoop, step_id: str) -> str | None:
    declared = loop.declared_plan()
    return declared.on_failure.get(step_id) if declared else None
