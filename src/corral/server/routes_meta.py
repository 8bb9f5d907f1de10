"""Routes about the server rather than one run: health, agents, the handoff queue, workers."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Security
from fastapi.security import HTTPBearer

from corral import __version__
from corral.observe.redact import redactor_for
from corral.observe.stats import RunStats, run_stats
from corral.server.app import ServerState, server_state
from corral.server.queries import TextFilter, When, list_handoffs, moment
from corral.server.schemas import AgentInfo, AgentList, ErrorBody, HandoffList, Health
from corral.workers.status import WorkersStatus, workers_status

bearer = HTTPBearer(auto_error=False, description="The server's token (CORRAL_API_TOKEN)")
"""Documents the token in the OpenAPI schema; ``auth.BearerAuth`` checks it, before routing."""

ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody} for code in ("401", "404", "409", "413", "422", "503")
}
"""The error answers every data route may give, for the schema.

503: every data route reads the store, and a store that cannot be reached, is full or is
read-only is answered 503 (``replies.STATUS_BY_CODE``); a client reading the schema
should know to retry it.
"""

open_router = APIRouter()
"""Routes anyone may call."""


def data_router() -> APIRouter:
    """A router of routes that need the token: the schema says so, and lists their errors."""
    return APIRouter(dependencies=[Security(bearer)], responses=ERRORS)


router = data_router()

State = Annotated[ServerState, Depends(server_state)]


@open_router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """Whether the server is up; needs no token."""
    return Health(status="ok", version=__version__)


@router.get("/agents", response_model=AgentList)
async def agents(state: State) -> AgentList:
    """The agents this server runs, with their intents."""
    return AgentList(
        agents=[
            AgentInfo(name=name, intents=[i.name for i in runtime.agent.config.intents])
            for name, runtime in state.runtimes.items()
        ]
    )


@router.get("/handoffs", response_model=HandoffList)
async def handoffs(state: State, limit: Annotated[int, Query(ge=1, le=500)] = 50) -> dict[str, Any]:
    """The handed-off runs with their packets, newest first: the queue a person works from."""
    found = await asyncio.to_thread(list_handoffs, state.store, limit)
    items = []
    for run_id, agent, packet in found:
        events = await asyncio.to_thread(state.store.load_events, run_id)
        shown = redactor_for(events).value(packet)
        items.append(
            {
                "run_id": run_id,
                "agent": agent,
                "created_at": shown["created_at"],
                "reason": shown["reason"],
                "reason_code": shown["reason_code"],
                "packet": shown,
            }
        )
    return {"handoffs": items}


@router.get("/stats", response_model=RunStats)
async def stats(
    state: State,
    since: When = None,
    agent: TextFilter = None,
) -> RunStats:
    """The figures ``corral stats --json`` prints: rates, failures, stage and tool times."""
    start = moment(since, datetime.now(UTC)) if since is not None else None
    return await asyncio.to_thread(run_stats, state.store, since=start, agent=agent)


@router.get("/workers", response_model=WorkersStatus)
async def workers(state: State) -> WorkersStatus:
    """What ``corral workers --json`` prints: live workers, queues, runs recovered.

    Workers share a PostgreSQL store; on SQLite every list is empty.
    """
    if state.store.engine.dialect.name != "postgresql":
        return WorkersStatus(workers=[], queues=[], orphaned=[], recovered_total=0, recovered=[])
    return await asyncio.to_thread(workers_status, state.store.engine)
