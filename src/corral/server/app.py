"""The HTTP app: ``create_app(settings)`` builds it; ``corral serve`` runs it with uvicorn.

One app serves several agents over one store, the CLI's (``<home>/corral.db``, or the
``--store`` URL: ``settings.store``), so
``corral runs``, ``show`` and ``resume`` see what the server did and the other way round.
Each agent has one ``Runtime`` on that store, logging to ``<home>/logs`` as the CLI does.

Layers, outermost first: ``HEAD`` answered as ``GET`` without its body (``head.py``), the
bearer token (before anything else), the body limit (before anything parses a body), then
the routes. Every corral error is answered with its stable
code and the status of ``replies.STATUS_BY_CODE``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response

from corral import __version__
from corral.agent import Agent
from corral.contracts import RunSummary
from corral.errors import (
    AgentNotFoundError,
    ConfigInvalidError,
    CorralError,
    ErrorCode,
    RunBusyError,
    RunNotFoundError,
)
from corral.events import Event
from corral.observe.logs import valid_run_id
from corral.observe.redact import redactor_for
from corral.runtime.runtime import Runtime
from corral.server.auth import BearerAuth
from corral.server.head import HeadAsGet
from corral.server.hub import Hub, LiveRun
from corral.server.json_body import OneReadingJson
from corral.server.limits import DEFAULT_BODY_LIMIT, BodyLimit
from corral.server.replies import corral_error_response, error_response
from corral.server.schemas import Accepted
from corral.server.stopping import SHUTDOWN_GRACE_S, STOP_S
from corral.store.sql import SqlStore
from corral.validation import validation_problems

if TYPE_CHECKING:
    from corral.server.queued import QueuedRuns


@dataclass(frozen=True)
class ServerSettings:
    """What one server runs: loaded agents (``corral.load_agent``), its home, its token."""

    agents: tuple[Agent, ...]
    home: Path
    token: str
    body_limit: int = DEFAULT_BODY_LIMIT
    shutdown_grace_s: float = SHUTDOWN_GRACE_S
    shutdown_stop_s: float = STOP_S
    """How long each run stopped at shutdown may take to store what it did (``Hub.close``)."""
    store: str | Path | None = None
    """The store (a SQLite file or a URL, ``SqlStore.open``); default ``home/corral.db``."""
    enqueue: bool = False
    """Enqueue starts and resumes for ``corral worker`` processes instead of driving runs
    here (``queued.py``); needs a PostgreSQL ``store`` and the ``dbos`` extra."""


@dataclass
class ServerState:
    """The app's own state (``app.state.corral``): the store, a runtime per agent, the hub."""

    settings: ServerSettings
    store: SqlStore
    runtimes: dict[str, Runtime]
    hub: Hub
    queued: QueuedRuns | None = None
    """The workers' queue when the server enqueues (``--enqueue``); None: it drives runs."""

    def runtime(self, agent: str) -> Runtime:
        """The runtime of a served agent; ``AGENT_NOT_FOUND`` for any other name."""
        runtime = self.runtimes.get(agent)
        if runtime is None:
            raise AgentNotFoundError(
                f"this server does not serve an agent named {agent[:64]!r}",
                hint="GET /agents lists them; serve another with --agent DIR",
            )
        return runtime

    async def runtime_of_run(self, run_id: str) -> Runtime:
        """The runtime of the agent a stored run belongs to."""
        # the hub first: a run is saved before it leaves the hub, so one not found in the
        # store afterwards was not stored yet when it was seen live
        live = self.hub.live(checked_run_id(run_id))
        record = await asyncio.to_thread(self.store.get_run, run_id)
        if record is None:
            if (live is not None and not live.done) or await self._queued_not_taken(run_id):
                raise RunBusyError(  # a client told "no run" might start it again
                    f"run {run_id} is under way and not saved yet",
                    hint="wait until it pauses or ends (GET /runs/RUN/stream), then resume",
                )
            raise RunNotFoundError(f"no run {run_id!r}", hint="GET /runs lists them")
        return self.runtime(record.agent)

    async def _queued_not_taken(self, run_id: str) -> bool:
        """Whether a drive of the run waits for a worker (``--enqueue``; nothing stored yet)."""
        if self.queued is None:
            return False
        from corral.workers.status import under_way

        return under_way(await self.queued.drives(run_id))

    async def events(self, run_id: str) -> list[Event]:
        """The run's events: the stored ones, then those of its live drive not stored yet.

        ``RUN_NOT_FOUND`` when there are none.
        """
        live = self.hub.live(checked_run_id(run_id))
        found = await asyncio.to_thread(self.store.load_events, run_id)
        if live is not None:
            last = found[-1].seq if found else 0
            found += [e for e in list(live.events) if e.seq > last]
        if not found:
            raise RunNotFoundError(f"no run {run_id!r}", hint="GET /runs lists them")
        return found

    async def summary_answer(self, summary: RunSummary) -> dict[str, Any]:
        """A summary as JSON, redacted as ``corral show --json`` redacts it."""
        events = await self.events(summary.run_id)
        shown: dict[str, Any] = redactor_for(events).value(summary.model_dump(mode="json"))
        return shown

    async def answer(self, started: LiveRun | RunSummary, wait: bool) -> Response:
        """The answer to a start or resume: the summary once it pauses or ends, or 202."""
        if isinstance(started, LiveRun):
            if not wait:
                accepted = Accepted(run_id=started.run_id, status="running")
                return JSONResponse(accepted.model_dump(mode="json"), status_code=202)
            summary = await started.outcome()
        else:
            summary = started
        return JSONResponse(await self.summary_answer(summary))

    async def queued_answer(
        self, queued: QueuedRuns, handled: str | RunSummary, wait: bool
    ) -> Response:
        """``answer`` for an enqueued drive: its summary once it ended, or 202 at once.

        ``handled``: the drive's workflow id, or the summary a retried message is answered
        with (``QueuedRuns.start``). A drive that had already ended (the same approval
        again) is answered with its summary, as a double click is without ``--enqueue``.
        """
        from corral.workers.names import run_of

        if isinstance(handled, RunSummary):
            return JSONResponse(await self.summary_answer(handled))
        workflow_id = handled
        summary = await (queued.settled(workflow_id) if wait else queued.outcome(workflow_id))
        if summary is None:
            accepted = Accepted(run_id=run_of(workflow_id)[0], status="running")
            return JSONResponse(accepted.model_dump(mode="json"), status_code=202)
        return JSONResponse(await self.summary_answer(summary))


def checked_run_id(run_id: str) -> str:
    """``run_id``, if it has the shape of one; anything else is no run (404), never a path."""
    if not valid_run_id(run_id):
        raise RunNotFoundError(
            f"no run {run_id[:80]!r}", hint="run ids look like run_019ad3f2a1b0…"
        )
    return run_id


def server_state(request: Request) -> ServerState:
    """The app's ``ServerState`` (a route dependency)."""
    state: ServerState = request.app.state.corral
    return state


def create_app(settings: ServerSettings) -> FastAPI:
    """The FastAPI app serving ``settings.agents`` over the store in ``settings.home``."""
    from corral.server import routes_meta, routes_runs
    from corral.server.ui import mount_ui

    names = [agent.name for agent in settings.agents]
    if not names or len(set(names)) != len(names):
        raise ConfigInvalidError(
            f"a server needs agents with distinct names, not {names}",
            hint="give each agent.yaml its own name",
        )
    store = SqlStore.open(settings.store or settings.home / "corral.db")
    runtimes = {
        agent.name: Runtime(agent, store, log_dir=settings.home / "logs")
        for agent in settings.agents
    }
    hub = Hub(grace_s=settings.shutdown_grace_s)
    state = ServerState(settings, store, runtimes, hub, _queued(settings, store))

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            yield
            await state.hub.close(settings.shutdown_grace_s, settings.shutdown_stop_s)
        finally:
            for runtime in runtimes.values():
                await runtime.aclose()
            if state.queued is not None:
                state.queued.close()

    app = FastAPI(
        title="corral",
        version=__version__,
        description="Runs of corral agents over HTTP: start, resume, read and follow them.",
        lifespan=lifespan,
        docs_url=None,  # the Swagger and ReDoc pages load scripts from a CDN: no network
        redoc_url=None,
        # "/runs/" is no route (404), not a 307 to a Location built from the client's
        # Host header, always http://: a scheme downgrade behind a TLS proxy
        redirect_slashes=False,
    )
    app.state.corral = state
    app.include_router(routes_meta.open_router)
    app.include_router(routes_meta.router)
    app.include_router(routes_runs.router)
    mount_ui(app)  # the dashboard, /ui (issue 12 part 6)
    _answer_errors(app)
    app.add_middleware(OneReadingJson)  # runs after the limit: it reads a bounded body
    app.add_middleware(BodyLimit, limit=settings.body_limit)
    app.add_middleware(BearerAuth, token=settings.token)
    app.add_middleware(HeadAsGet)  # added last: runs first, so HEAD meets the token as GET
    return app


def _queued(settings: ServerSettings, store: SqlStore) -> QueuedRuns | None:
    """The workers' queue of a server that enqueues; ``CONFIG_INVALID`` without PostgreSQL."""
    if not settings.enqueue:
        return None
    if not isinstance(settings.store, str) or not settings.store.startswith("postgresql"):
        raise ConfigInvalidError(
            "a server that enqueues needs the PostgreSQL store its workers share",
            hint="pass --store postgresql://user@host/db with --enqueue",
        )
    from corral.server.queued import QueuedRuns
    from corral.workers.client import RunQueue

    try:
        queue = RunQueue(settings.store)
    except ImportError as exc:
        raise ConfigInvalidError(
            f"a server that enqueues needs the dbos extra ({exc.name} is missing)",
            hint="pip install 'corral[dbos]'",
        ) from None
    return QueuedRuns(queue, store.engine)


def with_head(allowed: str) -> str:
    """An ``Allow`` header's methods, with ``HEAD`` wherever ``GET`` is.

    The routes name only ``GET``; ``HeadAsGet`` answers ``HEAD`` on each of them, and
    ``Allow`` lists every method a route takes (RFC 9110 §10.2.1).
    """
    methods = [method.strip() for method in allowed.split(",") if method.strip()]
    if "GET" in methods and "HEAD" not in methods:
        methods.insert(methods.index("GET") + 1, "HEAD")
    return ", ".join(methods)


def _answer_errors(app: FastAPI) -> None:
    """Answer every error with ``{"error": {"code", "message", "hint"}}``."""

    async def corral_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, CorralError)
        return corral_error_response(exc, request.path_params.get("run_id"))

    async def bad_request(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        problems = validation_problems(exc, 5)
        hint = "see GET /openapi.json for the fields each route takes"
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        json_kind = kind == "application/json" or kind.endswith("+json")  # FastAPI's own test
        sent = request.headers.get("content-length", "0") != "0" or (
            "transfer-encoding" in request.headers
        )
        body_refused = any(error["loc"][:1] == ("body",) for error in exc.errors())
        if body_refused and sent and not json_kind:  # FastAPI reads no other kind as JSON
            shown = f"as {kind}" if kind else "without a Content-Type"
            problems = f"the body was sent {shown}, not as application/json; {problems}"
            hint = "send the JSON body with the header Content-Type: application/json"
        return error_response(
            422, ErrorCode.INVALID_ARGUMENT, f"the request is not valid: {problems}", hint
        )

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 400:  # FastAPI's word for a body it cannot decode
            return error_response(
                422, ErrorCode.INVALID_INPUT, "the body is not JSON text", "send UTF-8 JSON"
            )
        # a route or method that does not exist: the request, not a run, is wrong
        hint: str | None = "GET /openapi.json lists the routes and their methods"
        if request.url.path.startswith("/ui/"):
            hint = None  # a file of the dashboard, not a route of the API
        if exc.status_code == 404:
            return error_response(404, ErrorCode.INVALID_ARGUMENT, "no such route", hint)
        if exc.status_code == 405:
            allowed = with_head((exc.headers or {}).get("Allow", ""))
            answer = error_response(
                405,
                ErrorCode.INVALID_ARGUMENT,
                f"the route takes {allowed or 'other methods'}",
                hint,
            )
            answer.headers["Allow"] = allowed
            return answer
        return error_response(exc.status_code, ErrorCode.INVALID_ARGUMENT, str(exc.detail), None)

    app.add_exception_handler(CorralError, corral_error)
    app.add_exception_handler(RequestValidationError, bad_request)
    app.add_exception_handler(HTTPException, http_error)
