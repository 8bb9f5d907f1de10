"""``RunQueue``: enqueue drives of runs for the workers, and wait for them.

What ``corral serve --enqueue``, the CLI and the benchmark call. It talks to DBOS's tables
through ``DBOSClient`` only (no workflow code here), and reads corral's store to name a
resume's drive. A start's run id is chosen here, so its workflow id is known before any
worker takes it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from corral.contracts import RunStatus
from corral.effects import LiveEffects
from corral.errors import (
    AgentNotFoundError,
    InvalidArgumentError,
    InvalidInputError,
    RunBusyError,
    RunNotFoundError,
    RunNotResumableError,
)
from corral.events import ConfirmationGiven, Event, UserAnswered
from corral.inputs import (
    SEE_RUN,
    require_message_id,
    require_one_input,
    require_session_id,
    require_words,
)
from corral.observe.logs import valid_run_id
from corral.runtime.inputs import check_input, check_step, decided_otherwise
from corral.runtime.state import RunState, fold
from corral.workers import names
from corral.workers.drive import DriveArgs, raise_if_error

if TYPE_CHECKING:
    from dbos import DBOSClient

    from corral.store.sql import SqlStore

_FINAL = frozenset({"SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"})
"""DBOS workflow statuses after which a drive will not go on by itself."""

_STOPPED = {
    "CANCELLED": "was cancelled",
    "MAX_RECOVERY_ATTEMPTS_EXCEEDED": "was given up: its worker died on it too many times",
}
"""Final statuses in which a drive gave no answer of its own (DBOS stopped it), in words."""


def _listed_as(dbos_status: str) -> str:
    """A not-ended drive's DBOS status (``status.NOT_ENDED``) as a run listing shows it."""
    return "running" if dbos_status == "PENDING" else "queued"


@dataclass(frozen=True, slots=True)
class QueuedStart:
    """A new run's first drive that has not ended: the run may have no stored row yet."""

    run_id: str
    agent: str
    session_id: str | None
    status: str
    """``queued`` while no worker took it, ``running`` once one did."""
    created_at: datetime
    """When it was enqueued: the run's request."""
    updated_at: datetime


class StartOptions(TypedDict, total=False):
    """``RunQueue.start``'s options (``start_drive``'s keyword arguments)."""

    session_id: str | None
    priority: str | None
    run_id: str | None
    message_id: str | None


class RunQueue:
    """Enqueues runs' drives on their agent's DBOS queue in the store's PostgreSQL.

    >>> queue = RunQueue("postgresql://corral@db/corral")
    >>> run_id = queue.start("aftersales", "我的打印机坏了，订单号 HD20240501，能换新吗")
    >>> summary = queue.wait(names.workflow_id(run_id, 0), timeout_s=30)
    """

    def __init__(self, store_url: str) -> None:
        """Connect to DBOS's tables (created if missing) and to corral's store."""
        from dbos import DBOS, DBOSClient

        from corral.store.registry import sql_target
        from corral.store.sql import SqlStore

        system_url = names.system_database_url(store_url)
        DBOS.migrate(system_url, schema=names.SYSTEM_SCHEMA)
        self._client: DBOSClient = DBOSClient(
            system_database_url=system_url,
            dbos_system_schema=names.SYSTEM_SCHEMA,
            application_name=names.APP_NAME,
            system_database_pool_size=2,
        )
        self._store: SqlStore = SqlStore.open(sql_target(store_url))

    def start(self, agent: str, message: str, **options: Unpack[StartOptions]) -> str:
        """Enqueue a new run of ``agent`` for ``message``; its run id (drive 0).

        ``run_id``: the id to give the run (by default a fresh one); enqueueing the same
        id twice is one run. A message that shows nothing is ``INVALID_INPUT`` here, not
        on the worker after the run was accepted. ``message_id``: the client's id of the
        message (``Runtime.start``); the run id is then derived from it
        (``names.message_run_id``), so a retry enqueued before a worker took the first
        is the same drive, and another message under the same id is ``INVALID_INPUT``
        (``start_drive`` names the drive: a retry of a failed one is its next attempt).
        """
        return names.run_of(self.start_drive(agent, message, **options))[0]

    def start_drive(
        self,
        agent: str,
        message: str,
        *,
        session_id: str | None = None,
        priority: str | None = None,
        run_id: str | None = None,
        message_id: str | None = None,
    ) -> str:
        """``start``; the workflow id of the drive that takes the message."""
        require_words(message, "the message")
        if message_id is not None:
            require_message_id(message_id)
            run_id = run_id or names.message_run_id(agent, session_id, message_id)
        return self._new_run(
            run_id,
            kind="start",
            agent=agent,
            message=message,
            session_id=session_id,
            priority=priority,
            message_id=message_id,
        )

    def run_plan(
        self,
        agent: str,
        plan: str,
        *,
        entities: dict[str, Any] | None = None,
        session_id: str | None = None,
        priority: str | None = None,
        run_id: str | None = None,
    ) -> str:
        """Enqueue a run of the agent's plan template ``plan``; its run id (drive 0)."""
        drive = self._new_run(
            run_id,
            kind="run_plan",
            agent=agent,
            plan=plan,
            entities=entities,
            session_id=session_id,
            priority=priority,
        )
        return names.run_of(drive)[0]

    def resume(
        self,
        agent: str,
        run_id: str,
        *,
        approve: bool | None = None,
        answer: str | None = None,
        step_id: str | None = None,
        call: str | None = None,
        said: str | None = None,
        message_id: str | None = None,
        session_id: str | None = None,
    ) -> str:
        """Enqueue the drive that brings this input to a paused run; its workflow id.

        The drive is named by the input: the n-th input of a run is drive n. An approval
        of a step already decided, or an answer given while the run no longer waits,
        names the drive that applied it, so a double click is one workflow; the opposite
        decision of a decided step is ``RUN_NOT_RESUMABLE``. An approval is pinned to the
        step the run waits for now, so a late duplicate never approves a later one.
        ``AGENT_NOT_FOUND`` when the run is not ``agent``'s. Input that is no input (a
        blank answer, an approval with an answer, a step named with an answer) is
        ``INVALID_INPUT``, as from ``Runtime.resume``, before anything is read. A decision
        with ``call`` (``pending.call``) for a call the run no longer asks about is
        ``RUN_NOT_RESUMABLE`` here, and again on the worker if it changed in between.
        ``said``: the session's message that gave ``approve`` ("好的"), logged before it as
        ``Runtime.start`` logs it; ``message_id``, ``session_id``: the id of the message
        that gave the input (that yes, or the answer) and its session (``start``'s).
        """
        if answer is not None:
            require_words(answer, "the answer")
        require_one_input(approve, answer, step_id, call)
        events = self._store.load_events(run_id)
        if not events:
            raise RunNotFoundError(f"no run {run_id!r}", hint="see `corral runs`")
        state = fold(run_id, events)
        if state.agent != agent:  # its drive would wait on a queue no worker of it serves
            raise AgentNotFoundError(
                f"run {run_id} is a run of agent {state.agent!r}, not {agent!r}",
                hint=f"resume it as agent {state.agent!r}",
            )
        pending = state.pending
        if approve is not None and step_id is None:  # the step it waits for, else the last
            decided_steps: list[str | None] = [None, *state.confirmations]
            step_id = pending.step_id if pending else decided_steps[-1]
        decided = state.confirmations.get(step_id or "")
        if approve is not None and decided is not None and decided is not approve:
            raise decided_otherwise(run_id, step_id, decided)
        inputs = input_steps(events)
        drive = drive_for(state, inputs, approve, step_id)
        new = drive > len(inputs)
        if new:  # only for an input the run takes: a drive refused on a worker keeps its id
            check_input(state, approve, answer)
            check_step(state, step_id, call)
        args = DriveArgs(
            kind="resume",
            agent=agent,
            run_id=run_id,
            approve=approve,
            answer=answer,
            step_id=step_id,
            call=call,
            message=said,
            message_id=message_id,
            session_id=session_id,
        )
        attempt = self._attempt(run_id, drive, new)
        workflow = self._enqueue(args, drive, attempt)
        # a message already queued (``_enqueue``) is answered with the drive that holds it
        given = approve is not None or answer is not None
        named = workflow == names.workflow_id(run_id, drive, attempt)
        other = self._other_input(workflow, args) if given and named else None
        if other is not None:
            if not new:  # not a repeat of an input the run took: it no longer waits for one
                check_input(state, approve, answer)
            raise RunNotResumableError(
                f"run {run_id} does not take this input: its drive {workflow} "
                f"brings {_input_text(other)}",
                hint=f"{SEE_RUN}; give the input it waits for now",
            )
        return workflow

    def _attempt(self, run_id: str, drive: int, new: bool) -> int:
        """Which attempt of ``drive`` brings the input: its latest, or a new one.

        A new one when the latest ended without bringing the input (``new``: the run
        still waits for it) because it failed: a corral error (the run busy elsewhere, the
        store down longer than the save retries), or DBOS stopped it. DBOS answers every
        later enqueue of one workflow id with its first run's outcome, so the same input
        would otherwise get that failure back for ever.
        """
        found = self._client.list_workflows(
            workflow_id_prefix=names.workflow_id(run_id, drive), load_input=False
        )
        attempts = {}
        for status in found:
            try:
                of_run, of_drive, attempt = names.drive_of(status.workflow_id)
            except ValueError:
                continue
            if (of_run, of_drive) == (run_id, drive):  # not drive 10 for drive 1's prefix
                attempts[attempt] = status
        if not attempts:
            return 0
        latest = max(attempts)
        ended = attempts[latest]
        answer = ended.output if ended.status == "SUCCESS" else None
        failed = ended.status in _FINAL and (
            ended.status != "SUCCESS" or (isinstance(answer, dict) and "error" in answer)
        )
        return latest + 1 if new and failed else latest

    def _other_input(self, workflow: str, args: DriveArgs) -> DriveArgs | None:
        """What the drive ``workflow`` brings, when it is not the input ``args`` bring.

        The drive's number is the input's place in the run: another input enqueued for the
        same place first (a rejection beside an approval, another answer) took it, and
        DBOS keeps the first of one workflow id.
        """
        brought = self._brought(workflow)
        if brought is None:
            return None
        mine = (args.kind, args.approve, args.answer, args.step_id)
        same = (brought.kind, brought.approve, brought.answer, brought.step_id) == mine
        return None if same else brought

    def _brought(self, workflow: str) -> DriveArgs | None:
        """What the drive ``workflow`` was enqueued with (None: no such drive)."""
        found = self._client.list_workflows(
            workflow_ids=[workflow], load_input=True, load_output=False
        )
        given = found[0].input if found else None
        if not given or not given.get("args"):
            return None
        return DriveArgs.model_validate(given["args"][0])

    def wait(self, workflow_id: str, timeout_s: float) -> dict[str, Any]:
        """The drive's answer (the run's summary as JSON) once it ends.

        ``RUN_BUSY`` if it is still queued or running after ``timeout_s``; a drive that
        ended in a corral error raises it again (same code); ``RUN_NOT_RESUMABLE`` for one
        DBOS stopped (cancelled by an operator, or given up after too many recoveries);
        ``RUN_NOT_FOUND`` for a drive nobody enqueued.
        """
        from dbos import error as dbos_errors

        deadline = time.monotonic() + timeout_s
        while True:
            try:
                status = self._client.retrieve_workflow(workflow_id).get_status()
            except dbos_errors.DBOSNonExistentWorkflowError:
                raise RunNotFoundError(
                    f"no drive {workflow_id!r} was enqueued",
                    hint="a drive is <run id>.<n>: 0 for the start, n for the n-th input",
                ) from None
            if status.status in _FINAL:
                break
            if time.monotonic() >= deadline:
                raise RunBusyError(
                    f"drive {workflow_id} is still {status.status.lower()} after {timeout_s:g} s",
                    hint="wait longer, or see `corral workers`",
                )
            time.sleep(0.05)
        stopped = _STOPPED.get(status.status)
        if stopped is not None:  # DBOS would raise an error of its own
            run_id = names.run_of(workflow_id)[0]
            raise RunNotResumableError(
                f"drive {workflow_id} {stopped}: it will not go on",
                hint=f"DBOS can resume the drive (dbos workflow resume {workflow_id}); "
                f"or `corral resume {run_id} --store ...` drives the run in one process",
            )
        answer: dict[str, Any] = self._client.retrieve_workflow(workflow_id).get_result()
        return raise_if_error(answer)

    def queued_starts(self, newest: int, agent: str | None = None) -> list[QueuedStart]:
        """New runs' first drives that have not ended, newest first; at most ``newest``.

        ``agent``: only that agent's runs.

        A worker stores a run at its first pause, its end or before its first write: until
        then only its drive knows it (``GET /runs`` lists it from here).
        """
        from corral.workers.status import NOT_ENDED, unended_starts

        ids = unended_starts(self._store.engine, newest, agent)
        if not ids:
            return []
        found = self._client.list_workflows(
            workflow_ids=ids, sort_desc=True, load_input=True, load_output=False
        )
        starts = []
        for flight in found:
            given = flight.input.get("args") if flight.input else None
            if not given:
                continue
            args = DriveArgs.model_validate(given[0])
            if args.kind == "resume" or flight.status not in NOT_ENDED:  # ended since
                continue
            starts.append(
                QueuedStart(
                    run_id=args.run_id,
                    agent=args.agent,
                    session_id=args.session_id,
                    status=_listed_as(flight.status),
                    created_at=_instant(flight.created_at),
                    updated_at=_instant(flight.updated_at or flight.created_at),
                )
            )
        return starts

    def close(self) -> None:
        """Let go of DBOS's and the store's connections."""
        self._client.destroy()
        self._store.engine.dispose()

    def __enter__(self) -> RunQueue:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _new_run(self, run_id: str | None, **given: Any) -> str:
        """Enqueue drive 0 of a new run (``run_id``, else a fresh id); its workflow id.

        That of the drive that holds the message, when one already does (``_enqueue``).
        """
        if run_id is not None and not valid_run_id(run_id):
            raise InvalidArgumentError(
                f"{run_id[:80]!r} is not a run id",
                hint="up to 64 letters, digits, '_' or '-' (no '.': it separates the drive)",
            )
        session_id = given.get("session_id")
        if session_id is not None:  # refused here, not by the worker after a 202
            require_session_id(session_id)
        chosen = run_id or LiveEffects().new_id("run")
        args = DriveArgs(run_id=chosen, **given)
        # a message's run id is its retries' too: a try that failed must not answer them all
        attempt = self._attempt(chosen, 0, new=True) if args.message_id is not None else 0
        return self._enqueue(args, 0, attempt)

    def _enqueue(self, args: DriveArgs, drive: int, attempt: int = 0) -> str:
        """Enqueue ``args`` as the run's ``drive``; the workflow id of the drive that takes it.

        A drive that carries a client's message id holds that id on the agent's queue
        until it ends (DBOS's deduplication id): the same message enqueued again meanwhile,
        however it was routed (a new run, or an input of a paused one, as the session was
        when it came), is answered with that drive, and another message under the id is
        ``INVALID_INPUT``. Once the drive ended, the store has the id (``MessageLog``).
        """
        from dbos import EnqueueOptions

        options: EnqueueOptions = {
            "workflow_name": names.DRIVE_WORKFLOW,
            "queue_name": names.agent_queue(args.agent),
            "workflow_id": names.workflow_id(args.run_id, drive, attempt),
            "app_version": names.APPLICATION_VERSION,
        }
        message_id = args.message_id
        if message_id is not None:
            options["deduplication_id"] = names.message_run_id(
                args.agent, args.session_id, message_id
            )
            options["duplication_policy"] = "return-existing"
        workflow: str = self._client.enqueue(
            options, args.model_dump(mode="json")
        ).get_workflow_id()
        if message_id is not None:
            self._check_message(workflow, args)
        return workflow

    def _check_message(self, workflow: str, args: DriveArgs) -> None:
        """Refuse a message whose id, or whose input, the drive ``workflow`` already holds.

        Another message under the id is the client's mistake (``INVALID_INPUT``); another
        message that gives the same input (the same answer typed twice, two yeses) was
        not read as that input: it is read once the drive ended, against what the run
        asks then, as one process reads it (``RUN_BUSY``).
        """
        brought = self._brought(workflow)
        if brought is None:
            return
        if brought.message_id != args.message_id:
            raise RunBusyError(
                f"run {names.run_of(workflow)[0]} takes this input from an earlier request "
                f"(drive {workflow})",
                hint="send the message again once that drive ended: it is then read against "
                "what the run asks next",
            )
        if _said(brought) != _said(args):
            raise InvalidInputError(
                f"message id {args.message_id!r} was sent with another message (drive {workflow})",
                hint="give every message of a session its own id; send a retry unchanged",
            )


def _said(args: DriveArgs) -> str | None:
    """The session's message a drive brings: a start's, an answer, or the words of a yes."""
    return args.answer if args.answer is not None else args.message


def _instant(epoch_ms: int | None) -> datetime:
    """A DBOS time (Unix milliseconds) as an aware datetime."""
    return datetime.fromtimestamp((epoch_ms or 0) / 1000, UTC)


def input_steps(events: list[Event]) -> list[str | None]:
    """The inputs the log holds, in order (a confirmation's step id, ``None`` for an answer).

    The n-th was brought by drive n: as many drives followed the start as there are.
    """
    return [
        e.payload.step_id if isinstance(e.payload, ConfirmationGiven) else None
        for e in events
        if isinstance(e.payload, ConfirmationGiven | UserAnswered)
    ]


def _input_text(args: DriveArgs) -> str:
    """What a drive brings, in words."""
    if args.kind != "resume":
        return "the run's start"
    if args.approve is not None:
        return f"{'an approval' if args.approve else 'a rejection'} of step {args.step_id}"
    if args.answer is not None:
        return f"the answer {args.answer[:40]!r}"
    return "no input"


def drive_for(
    state: RunState, inputs: list[str | None], approve: bool | None, step_id: str | None
) -> int:
    """The drive (the resume's number) that brings this input to the run.

    ``state``: the run folded from its log; ``inputs``: the log's (``input_steps``). The
    next drive when the run waits for this input; the one that already brought it
    otherwise (an approval of a step already decided, an answer to a run that no longer
    waits), so the same input enqueued twice is the same workflow.
    """
    decided = approve is not None and step_id is not None and step_id in inputs
    if decided and (state.pending is None or state.pending.step_id != step_id):
        return inputs.index(step_id) + 1
    waiting = state.status in (RunStatus.AWAITING_CONFIRM, RunStatus.AWAITING_USER)
    return len(inputs) + 1 if waiting else len(inputs)
