"""Whether a paused run takes an input now: one check for the runtime and an enqueuer."""

from __future__ import annotations

from dataclasses import dataclass

from corral.contracts import RunStatus
from corral.errors import RunNotResumableError
from corral.inputs import SEE_RUN
from corral.runtime.state import RunState


@dataclass(frozen=True, slots=True)
class OpenRunInput:
    """What a session's message brings to the session's paused run: an answer, or a yes or no.

    ``Runtime.start`` gives it to that run instead of starting one; a server that enqueues
    drives (``--enqueue``) enqueues that run's drive, so its answer names the run.
    """

    run_id: str
    approve: bool | None = None
    answer: str | None = None
    corrects: bool = False
    """The message corrects what the run's confirmation shows ("不对，是 OD…", "sorry, I
    meant OD…"): the run is declined (``approve`` is ``False``), or its question's request
    taken back by the answer ("算了，帮我查下我的订单"), and the message is then a new
    run's, which follows the declined request (``RunStarted.follows``)."""

    def said(self, message: str) -> str | None:
        """The message to log with the run's input, or ``None``.

        A yes or no is logged after the message that said it; an answer is the input
        itself, and logged as that.
        """
        return message if self.approve is not None else None


def check_input(state: RunState, approve: bool | None, answer: str | None) -> None:
    """``RUN_NOT_RESUMABLE`` unless the run waits for this kind of input now.

    An approval or rejection for a confirmation, an answer for a question, nothing for a
    run that waits for neither. The runtime checks before it records the input, and an
    enqueuer before it gives the input a drive of the run (a drive refused on a worker
    would otherwise hold that drive's number, and the right input could never follow).
    """
    run_id, status = state.run_id, state.status
    _refuse_ended(state)
    if status is RunStatus.AWAITING_CONFIRM:
        if approve is None or answer is not None:
            raise RunNotResumableError(
                f"run {run_id} waits for a confirmation",
                hint=(
                    "approve or reject it: corral resume RUN --approve (or --reject), or "
                    'POST /runs/RUN/resume {"approve": true} (or false)'
                ),
            )
    elif status is RunStatus.AWAITING_USER:
        if answer is None or approve is not None:
            raise RunNotResumableError(
                f"run {run_id} waits for an answer",
                hint=(
                    "answer it: corral resume RUN --answer TEXT, or "
                    'POST /runs/RUN/resume {"answer": "TEXT"}'
                ),
            )
    elif approve is not None or answer is not None:
        raise RunNotResumableError(
            f"run {run_id} is not waiting for input ({status.value}); resume it without "
            "arguments (POST /runs/RUN/resume with no body)"
        )


def _refuse_ended(state: RunState) -> None:
    if state.status.terminal:
        raise RunNotResumableError(
            f"run {state.run_id} has already ended ({state.status.value})",
            hint="an ended run takes no input; a new message starts a new run "
            "(POST /agents/AGENT/runs, corral run)",
        )


def check_step(state: RunState, step_id: str | None, call: str | None = None) -> None:
    """``RUN_NOT_RESUMABLE`` when a decision names a step or call the run does not ask now.

    ``call`` is the digest the caller was shown (``PendingAction.call``): a person's answer
    about one call is never applied to another asked in its place, as when a deploy changed
    the step's tool or arguments while the prompt was on their screen. An ended run is
    refused as ``check_input`` refuses it, whatever step it names.
    """
    if step_id is not None or call is not None:
        _refuse_ended(state)
    pending = state.pending
    if step_id is not None and (pending is None or pending.step_id != step_id):
        waiting = pending.step_id if pending else None
        raise RunNotResumableError(
            f"run {state.run_id} does not wait for a confirmation of step {step_id}"
            + (f" (it waits for {waiting})" if waiting else ""),
            hint=f"{SEE_RUN}; approve what it asks now",
        )
    if call is not None and (pending is None or pending.call != call):
        now = f" (it asks about step {pending.step_id} now)" if pending is not None else ""
        raise RunNotResumableError(
            f"run {state.run_id} does not ask about the call that was shown{now}",
            hint=f"{SEE_RUN}; show the person what it asks now, and send pending.call with "
            "their answer",
        )


def decided_otherwise(run_id: str, step_id: str | None, decided: bool) -> RunNotResumableError:
    """The refusal of a decision that conflicts with the step's (a reject after an approve).

    The runtime's and an enqueuer's alike.
    """
    done = "approved" if decided else "rejected"
    return RunNotResumableError(
        f"step {step_id} of run {run_id} was {done}", hint=f"a step is decided once; {SEE_RUN}"
    )
