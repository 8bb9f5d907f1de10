"""Routes on runs: start, resume, list, read, and follow one live (Server-Sent Events).

Starting and resuming go through the hub (``Runtime.stream`` / ``stream_resume``), so the
run belongs to the server, not to the request. Every answer is redacted with the run's
redactor (``redactor_for`` its events), as ``corral show --json`` is.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from functools import partial
from typing import Annotated, Any

import anyio
from fastapi import Depends, Header, Query
from pydantic import StringConstraints
from starlette.responses import Response

from corral.contracts import PAUSED_STATUSES, TERMINAL_RUN_STATUSES, RunStatus, RunSummary
from corral.errors import CorralError, RunNotFoundError
from corral.events import Event
from corral.inputs import MAX_SESSION_ID_CHARS
from corral.observe.redact import Redactor, keeping_ids, redact_builtin, redactor_for
from corral.observe.trace_ids import corral_trace_id
from corral.runtime.ownership import owner_gone
from corral.runtime.runtime import run_detail, summarize_run
from corral.runtime.state import fold
from corral.server.app import ServerState, checked_run_id, server_state
from corral.server.hub import LiveRun
from corral.server.live_rows import live_rows
from corral.server.positions import DIVERGED, NO_POSITION, Position, event_id
from corral.server.queries import (
    NO_FILTER_IF_EMPTY,
    NO_NUL,
    RunFilter,
    TextFilter,
    When,
    list_runs,
    moment,
)
from corral.server.queued import QueuedRuns
from corral.server.routes_meta import data_router
from corral.server.schemas import (
    Accepted,
    EventList,
    ResumeRun,
    RunDetail,
    RunList,
    StartRun,
)
from corral.workers.status import under_way

router = data_router()
State = Annotated[ServerState, Depends(server_state)]
STARTED: dict[int | str, dict[str, Any]] = {
    "202": {"model": Accepted, "description": "Started with wait=false: it goes on"}
}


@router.post("/agents/{agent}/runs", response_model=RunSummary, responses=STARTED)
async def start_run(agent: str, body: StartRun, state: State) -> Response:
    """Handle a user's message with an agent: the run's summary once it pauses or ends."""
    runtime = state.runtime(agent)
    if state.queued is not None:  # --enqueue: a worker drives it
        queued = state.queued
        handled = await queued.start(
            runtime, body.message, body.session_id, body.priority, body.message_id
        )
        return await state.queued_answer(queued, handled, body.wait is True)
    stream = runtime.stream(
        body.message, session_id=body.session_id, priority=body.priority, message_id=body.message_id
    )
    started = await state.hub.drive(stream)
    return await state.answer(started, body.wait is not False)


@router.post("/runs/{run_id}/resume", response_model=RunSummary, responses=STARTED)
async def resume_run(run_id: str, state: State, body: ResumeRun | None = None) -> Response:
    """Approve or reject a confirmation, answer a question, or pick up an interrupted run.

    One request drives a run at a time: another one meanwhile gets 409 ``RUN_BUSY``; the
    same approval given twice is applied once (the second gets the run's summary). No
    body at all is ``{}``: pick the run up where its log ends.
    """
    body = body or ResumeRun()
    runtime = await state.runtime_of_run(run_id)
    if state.queued is not None:  # --enqueue: a worker drives it
        drive = await state.queued.resume(
            runtime.agent.name, run_id, body.approve, body.answer, body.step_id, body.call
        )
        return await state.queued_answer(state.queued, drive, body.wait is True)
    stream = runtime.stream_resume(
        run_id, approve=body.approve, answer=body.answer, step_id=body.step_id, call=body.call
    )
    return await state.answer(await state.hub.drive(stream), body.wait is not False)


@router.get("/runs", response_model=RunList)
async def runs(
    state: State,
    agent: TextFilter = None,
    status: Annotated[RunStatus | None, NO_FILTER_IF_EMPTY] = None,
    intent: TextFilter = None,
    session_id: Annotated[
        Annotated[str, StringConstraints(max_length=MAX_SESSION_ID_CHARS)] | None,
        NO_FILTER_IF_EMPTY,
        NO_NUL,
    ] = None,
    trace_id: Annotated[
        Annotated[str, StringConstraints(max_length=200)] | None, NO_FILTER_IF_EMPTY, NO_NUL
    ] = None,
    since: When = None,
    until: When = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> dict[str, Any]:
    """Runs, newest first, filtered; ``next_offset`` asks for the next page.

    The runs this server drives are listed from their first event, before their first
    save (``live_rows``), as the dashboard's list shows them; with ``--enqueue``, a run
    whose first drive a worker has not stored yet is listed as ``queued`` or ``running``.

    ``session_id`` finds a conversation's runs, ``trace_id`` the run of a trace in either
    form, corral's or OpenTelemetry's 32 hex digits (as ``corral traces --session/--trace``
    do); the listing shows a session id redacted. An unknown ``status`` is a 422 that
    lists the statuses.
    """
    now = datetime.now(UTC)
    wanted = RunFilter(
        agent=agent,
        status=status.value if status is not None else None,
        intent=intent,
        session_id=session_id,
        trace_id=corral_trace_id(trace_id) if trace_id is not None else None,
        since=moment(since, now) if since is not None else None,
        until=moment(until, now) if until is not None else None,
        limit=limit,
        offset=offset,
    )
    live = live_rows(state.hub.in_flight(), wanted)  # read in the loop, the hub's own
    if state.queued is not None:  # --enqueue: the runs only their drive knows yet
        queued = await state.queued.unsaved_rows(wanted)
        live = sorted([*live, *queued], key=lambda row: row.order, reverse=True)
    page, next_offset = await asyncio.to_thread(list_runs, state.store, wanted, live)
    for row in page:  # a session id may be the customer's phone or mail: redact as elsewhere
        if row["session_id"] is not None:
            row["session_id"] = redact_builtin(row["session_id"])
    return {"runs": page, "next_offset": next_offset}


@router.get("/runs/{run_id}", response_model=RunDetail)
async def run(run_id: str, state: State) -> dict[str, Any]:
    """One run: its summary, agent, times, model calls and handoff packet."""
    events = await state.events(run_id)
    folded = fold(run_id, events)
    detail = run_detail(folded, events)  # what `corral show --json` prints, and more:
    detail["agent"] = folded.agent
    detail["created_at"] = events[0].ts.isoformat()
    detail["updated_at"] = events[-1].ts.isoformat()
    shown: dict[str, Any] = redactor_for(events).value(detail)
    return shown


@router.get("/runs/{run_id}/events", response_model=EventList)
async def run_events(
    run_id: str, state: State, after_seq: Annotated[int, Query(ge=0)] = 0
) -> dict[str, Any]:
    """The run's events after ``after_seq``, in order."""
    events = await state.events(run_id)
    redactor = redactor_for(events)
    return {"events": [redactor.value(e.as_json()) for e in events if e.seq > after_seq]}


@router.get(
    "/runs/{run_id}/stream",
    response_class=Response,
    responses={200: {"content": {"text/event-stream": {}}, "description": "Server-Sent Events"}},
)
async def stream(
    run_id: str,
    state: State,
    after_seq: Annotated[int, Query(ge=0)] = 0,
    last_event_id: Annotated[str | None, Header()] = None,
) -> Response:
    """The run's events after ``after_seq`` (or ``Last-Event-ID``), then live, then its summary.

    Each event is an SSE message ``event: event``, ``id: <seq>-<mark>``; the last one is
    ``event: summary``, after which the stream closes. A client that goes away stops
    only its stream, never the run. A ``Last-Event-ID`` naming an event the run's log no
    longer holds (its server stopped before saving it; ``positions``), or naming none, is
    answered with ``event: reset`` and the whole log.
    """
    from sse_starlette import EventSourceResponse

    checked_run_id(run_id)
    # sse-starlette ends every stream the moment the server is told to stop; a follower
    # of a run still going would lose its end. Told instead (``shutdown``), a follower of
    # a run driven here goes on until the run ends or the stop ends it (an ``error``
    # event, then the summary), within uvicorn's own wait for requests (the grace + 1 s);
    # one of a worker's run ends at once, saying so.
    shutdown = anyio.Event()
    held_s = state.settings.shutdown_grace_s + 2.0

    def answer(messages: AsyncIterator[dict[str, str]]) -> Response:
        return EventSourceResponse(
            _giving_way(messages), ping=15, shutdown_event=shutdown, shutdown_grace_period=held_s
        )

    if state.queued is not None:  # --enqueue: follow the run's drives through the store
        drives = await state.queued.drives(run_id)
        if not drives:
            await state.events(run_id)  # RUN_NOT_FOUND unless it was stored another way
        return answer(_followed(state, state.queued, run_id, after_seq, last_event_id, shutdown))
    live = state.hub.live(run_id)  # before reading the store: a drive's events are all here
    stored = await state.events(run_id)
    if live is not None:  # driven here: no other server can have sent more
        start = await _start(after_seq, last_event_id, _always, stored, live.events)
    else:
        start = await _start(after_seq, last_event_id, partial(_settled, state, run_id), stored)
    return answer(_messages(state, run_id, stored, start, live))


async def _giving_way(messages: AsyncIterator[dict[str, str]]) -> AsyncIterator[dict[str, str]]:
    """``messages``, with a turn of the event loop after each one is sent.

    Stored events are sent back to back without waiting for anything: a client that
    went away after the first (``curl ... | head -1``) was not noticed, since its
    connection's loss is handled at a later turn, and every event after it was written
    to the dead socket (asyncio's "socket.send() raised exception." on stderr, one per
    event past the fifth). A turn in between lets uvicorn see the loss first: the stream
    then ends, quietly.
    """
    async for message in messages:
        yield message
        await asyncio.sleep(0)


async def _start(
    after_seq: int,
    last_event_id: str | None,
    whole: Callable[[], Awaitable[bool]],
    *logs: list[Event],
) -> int | tuple[int, str]:
    """Where a stream starts: the later of ``after_seq`` and the client's last event.

    A ``(0, reason)`` when the client's copy has diverged from the run's log (``logs``):
    another event holds its last one's seq, or none does and the log is ``whole`` (it
    cannot grow elsewhere), or the ``Last-Event-ID`` names no event. It is then sent
    ``event: reset`` and the log from the start.
    """
    if not last_event_id:
        return after_seq
    seen = Position.parse(last_event_id)
    if seen is None:
        return 0, NO_POSITION
    held = seen.holds(*logs)
    if held is False:
        return 0, DIVERGED
    if held is None and await whole():
        return 0, DIVERGED
    return max(after_seq, seen.seq)


async def _always() -> bool:
    return True


async def _settled(state: ServerState, run_id: str) -> bool:
    """Whether no drive may be adding to the stored run's log.

    It has paused or ended, or no live lease is held on it (none, or its owner is a
    process of this host that no longer exists): its drive died, and what it saved is all
    there is until a resume. While another server holds the lease, that server may not
    have saved what it sent yet.
    """
    record = await asyncio.to_thread(state.store.get_run, run_id)
    if record is None:
        return False
    if record.status in TERMINAL_RUN_STATUSES or record.status in PAUSED_STATUSES:
        return True
    holder = await asyncio.to_thread(state.store.lease_holder, run_id)
    return holder is None or owner_gone(holder.owner)


def _reset_message(reason: str) -> dict[str, str]:
    return {"event": "reset", "data": json.dumps({"after_seq": 0, "reason": reason})}


async def _messages(
    state: ServerState,
    run_id: str,
    stored: list[Event],
    after: int | tuple[int, str],
    live: LiveRun | None,
) -> AsyncIterator[dict[str, str]]:
    """SSE messages: stored events after ``after``, live ones (no gap, no repeat), summary.

    ``after`` is ``(0, reason)`` for a client whose copy diverged: a reset, then every event.
    """
    redactor = redactor_for(stored)
    if isinstance(after, tuple):
        after, reason = after
        yield _reset_message(reason)
    last = after
    for event in stored:
        if event.seq > last:
            yield _event_message(redactor, event)
            last = event.seq
    summary: RunSummary | None = None
    if live is None:  # an approval or answer given while the stored events were sent
        live = state.hub.live(run_id)  # is followed to its pause or end, as any live run
    if live is not None:
        async for event in live.follow(last):
            redactor = redactor.learn(event.data)
            yield _event_message(redactor, event)
            last = event.seq
        summary = live.summary
        if live.error is not None:  # the drive failed: say why, then what the store holds
            yield {
                "event": "error",
                "data": json.dumps(_error(redactor, live.error, run_id), ensure_ascii=False),
            }
    try:
        events = await state.events(run_id)
    except RunNotFoundError:  # it failed before its first save: nothing of it was kept
        return
    for event in events:  # a drive that began and ended meanwhile: the summary's events
        if event.seq > last:
            redactor = redactor.learn(event.data)
            yield _event_message(redactor, event)
            last = event.seq
    yield _summary_message(run_id, events, summary)


def _summary_message(
    run_id: str, events: list[Event], summary: RunSummary | None = None
) -> dict[str, str]:
    """The last SSE message: ``summary`` (by default the stored log's), redacted."""
    if summary is None:
        summary = summarize_run(fold(run_id, events))
    shown = redactor_for(events).value(summary.model_dump(mode="json"))
    return {"event": "summary", "data": json.dumps(shown, ensure_ascii=False)}


async def _followed(
    state: ServerState,
    queued: QueuedRuns,
    run_id: str,
    after_seq: int,
    last_event_id: str | None,
    shutdown: anyio.Event,
) -> AsyncIterator[dict[str, str]]:
    """SSE messages of an enqueued run, read from the store: its events as they come.

    Until no drive of it is queued or running (a pause, or the end); then the last
    drive's error if it failed, then the summary. Only saved events are sent here, but a
    client may come from a server that streamed a drive's events before saving them.
    When this server stops (``shutdown``) the run goes on on its worker: the stream
    ends with an ``error`` saying so, which a client follows again elsewhere.
    """
    last, saved, events = after_seq, None, list[Event]()
    if last_event_id:
        events = await asyncio.to_thread(state.store.load_events, run_id)

        async def ended() -> bool:  # no drive queued or running: the log is whole
            return not under_way(await queued.drives(run_id))

        start = await _start(after_seq, last_event_id, ended, events)
        if isinstance(start, tuple):
            start, reason = start
            yield _reset_message(reason)
        last = start
    while True:
        drives = await queued.drives(run_id)  # before the events: a finished drive saved all
        busy = under_way(drives)
        record = await asyncio.to_thread(state.store.get_run, run_id)
        if not busy or (record is not None and record.updated_at != saved):  # a new save
            saved = None if record is None else record.updated_at
            events = await asyncio.to_thread(state.store.load_events, run_id)
            redactor = redactor_for(events)
            for event in events:
                if event.seq > last:
                    yield _event_message(redactor, event)
                    last = event.seq
        if not busy:
            break
        with anyio.move_on_after(queued.poll_s):
            await shutdown.wait()
        if shutdown.is_set():
            stopping = {
                "code": None,
                "message": "this server is stopping; the run goes on on its worker",
                "hint": "GET /runs/{id}/stream again, with Last-Event-ID, to follow it",
            }
            yield {"event": "error", "data": json.dumps({"error": stopping})}
            return
    if drives:
        try:
            await queued.outcome(list(drives)[-1])  # the latest drive
        except Exception as exc:  # the drive failed on its worker: say why
            yield {
                "event": "error",
                "data": json.dumps(_error(redactor_for(events), exc, run_id), ensure_ascii=False),
            }
    if events:
        yield _summary_message(run_id, events)


def _error(redactor: Redactor, error: BaseException, run_id: str) -> dict[str, Any]:
    """The ``error`` message of a failed drive: corral's code, or none (a stop, a bug)."""
    if isinstance(error, CorralError):
        code: str | None = error.code.value
        message, hint = keeping_ids(redactor.text, error.message, [run_id]), error.hint
    elif isinstance(error, asyncio.CancelledError):  # the server is stopping
        code, message = None, "the server stopped while the run was going"
        hint = "POST /runs/{id}/resume with no input picks it up where its log ends"
    else:
        code, message, hint = None, "the run stopped on an unexpected error", None
    return {"error": {"code": code, "message": message, "hint": hint}}


def _event_message(redactor: Redactor, event: Event) -> dict[str, str]:
    return {
        "event": "event",
        "id": event_id(event),
        "data": json.dumps(redactor.value(event.as_json()), ensure_ascii=False),
    }
