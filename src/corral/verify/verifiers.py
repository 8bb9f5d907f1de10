"""The verdict on a step whose tool succeeded, as an ordered list of verifiers.

A verifier is a small value with one async method, ``check(outcome, run)``. It answers with a
``Verdict``, or ``None`` when it has nothing to say about this step (no criterion
declared). The verifiers run in order; the first failed verdict fails the step (with its
code and reason), and the last verdict given is the one recorded with a success.

The order is data: ``Agent.verifiers`` (``DEFAULT_VERIFIERS`` unless
``Agent.build(verifiers=...)`` says otherwise): the declared success criterion, then the
model judge. A verifier sees the run only through ``VerifyRun``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from corral.contracts import Step, ToolResult, Verdict
from corral.errors import ErrorCode, said
from corral.verify.expressions import Expression
from corral.verify.rules import check_success


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """A step whose tool succeeded: what it was asked, and what it returned."""

    step: Step
    """The step as planned (its ``judge`` criterion, its description)."""
    success: Expression | None
    """The step's compiled success criterion, if one was declared."""
    args: dict[str, Any]
    result: ToolResult


class VerifyRun(Protocol):
    """What a verifier may see of the run: its facts and entities, and the judge."""

    @property
    def entities(self) -> Mapping[str, Any]:
        """The entities the user gave."""
        ...

    def facts(self) -> dict[str, Any]:
        """The facts the run's steps published so far."""
        ...

    async def judge(self, criterion: str, tool: str, data: dict[str, Any] | None) -> Verdict | None:
        """The model judge's verdict, or ``None`` when the agent has no model."""
        ...


class Verifier(Protocol):
    """One check on a step's result."""

    async def check(self, outcome: StepOutcome, run: VerifyRun) -> Verdict | None:
        """A verdict on the step, or ``None`` when there is nothing to judge."""
        ...


@dataclass(frozen=True, slots=True)
class SuccessCriterion:
    """The step's declared ``success`` expression over its result, arguments and facts."""

    async def check(self, outcome: StepOutcome, run: VerifyRun) -> Verdict | None:
        """The expression's verdict; ``None`` when the step declares none."""
        if outcome.success is None:
            return None
        names = {
            "result": outcome.result.data,
            "args": outcome.args,
            "facts": run.facts(),
            "entities": run.entities,
        }
        return check_success(outcome.success, names)


@dataclass(frozen=True, slots=True)
class ModelJudge:
    """The step's ``judge`` criterion, stated in words, judged by the model."""

    async def check(self, outcome: StepOutcome, run: VerifyRun) -> Verdict | None:
        """The judge's verdict; ``None`` without a criterion or a model."""
        if not outcome.step.judge:
            return None
        return await run.judge(outcome.step.judge, outcome.result.tool, outcome.result.data)


DEFAULT_VERIFIERS: tuple[Verifier, ...] = (SuccessCriterion(), ModelJudge())
"""corral's checks on a result, in order; ``(*DEFAULT_VERIFIERS, MyVerifier())`` adds one."""


def may_judge(verifiers: Sequence[Verifier], step: Step, success: Expression | None) -> bool:
    """Whether ``verifiers`` may have a say on ``step``'s result.

    corral's own have none on a step that declares no success criterion and no judge
    (most steps): a caller that knows this makes no ``StepOutcome`` and awaits nothing.
    """
    return verifiers is not DEFAULT_VERIFIERS or success is not None or bool(step.judge)


async def verify(
    verifiers: Sequence[Verifier], outcome: StepOutcome, run: VerifyRun
) -> Verdict | None:
    """The first failed verdict, else the last one given (``None``: nobody had a say).

    corral's own verifiers have nothing to say about a step that declares no success
    criterion and no judge (most steps): then none of them is asked (``may_judge``).
    """
    if not may_judge(verifiers, outcome.step, outcome.success):
        return None
    told: Verdict | None = None
    for verifier in verifiers:
        try:
            verdict = await verifier.check(outcome, run)
        except Exception as exc:  # a user's verifier: its bug fails the check, not the run
            return _extension_failed(verifier, f"raised {type(exc).__name__}: {said(exc)}")
        if verdict is None:
            continue
        if not isinstance(verdict, Verdict):  # ``False``, ``"passed"``, a dict: no answer
            shown = repr(verdict)[:80]
            return _extension_failed(verifier, f"answered {shown}, not a Verdict or None")
        if not verdict.passed:
            if verdict.code is None:  # a failed step always carries a code
                code = ErrorCode.SUCCESS_CRITERIA_FAILED.value
                verdict = verdict.model_copy(update={"code": code})
            return verdict
        told = verdict
    return told


def _extension_failed(verifier: Verifier, what: str) -> Verdict:
    """The failed verdict standing for a user's verifier that broke (``EXTENSION_FAILED``)."""
    return Verdict(
        passed=False,
        check="success",
        reason=f"verifier {type(verifier).__name__} {what}",
        code=ErrorCode.EXTENSION_FAILED.value,
    )
