"""``GET /runs`` and ``GET /handoffs``: filtered, paginated reads in SQL over the run rows.

Filters and pages are SQL (``WHERE``, ``LIMIT``, ``OFFSET`` on indexed columns), never a
Python loop over every run: the store may hold months of them. The column filters are the
store's own (``sql.run_conditions``, as ``corral traces`` uses them); the intent is read
from the row's stored summary (``$.intent.label``), which both summary forms keep, so a
listing needs no stats backfill first. The runs this server drives that are not saved
yet (a handful, from the hub: ``live_rows``) are placed among the rows by a count each.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Query
from pydantic import (
    AfterValidator,
    BeforeValidator,
    StringConstraints,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from sqlalchemy import JSON, Connection, String, and_, cast, func, or_, select, type_coerce
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.expression import FromClause

from corral.observe.window import PERIOD_PATTERN, parse_period
from corral.store.facts import aware
from corral.store.projection import run_facts_table
from corral.store.sql import SqlStore, run_conditions, runs

if TYPE_CHECKING:
    from corral.server.live_rows import LiveRow

DURATION = PERIOD_PATTERN
"""A span back from now: ``30m``, ``1h``, ``7d`` (the one parser: ``observe.window``)."""
Duration = Annotated[str, StringConstraints(pattern=DURATION)]
WHEN_FORMS = "30m, 1h, 7d"
WHEN = f"An ISO time (naive: UTC), or a duration back from now: {WHEN_FORMS}"


def _none_if_empty(given: object) -> object:
    return given if given != "" else None


NO_FILTER_IF_EMPTY = BeforeValidator(_none_if_empty)
"""``?agent=`` (a form's empty field) is no filter, as a missing one is: every filter
reads it so (it filtered on the empty text, or was a 422, by filter)."""


def _without_nul(given: str | None) -> str | None:
    if given is not None and "\x00" in given:
        raise ValueError("holds a NUL character, which no stored value has")
    return given


NO_NUL = AfterValidator(_without_nul)
"""A text filter with a NUL is a 422: PostgreSQL refuses the query (a 500, or a store
that looked down), where SQLite found nothing."""
TextFilter = Annotated[str | None, NO_FILTER_IF_EMPTY, NO_NUL]
"""A filter on a text column (``agent``, ``intent``)."""


def _one_problem(given: object, handler: ValidatorFunctionWrapHandler) -> object:
    """One readable problem for a ``since`` or ``until`` that is neither form.

    pydantic names each member of the union (``since.datetime: ... input is too short;
    since.constrained-str: String should match pattern '^[1-9]...'``).
    """
    try:
        return handler(given)
    except ValidationError:
        raise ValueError(
            f"{repr(given)[:60]} is neither a duration back from now ({WHEN_FORMS}) nor an ISO time"
        ) from None


def _iso_as_the_cli_reads_it(given: object) -> object:
    """An ISO time read by ``datetime.fromisoformat``, as ``corral stats --since`` reads it.

    pydantic's own reading took a number for a Unix time: ``since=20260101`` (an ISO
    date to the CLI) filtered from 1970-08-23.
    """
    if isinstance(given, str) and given and re.fullmatch(DURATION, given) is None:
        return datetime.fromisoformat(given)  # its ValueError is ``_one_problem``'s
    return given


When = Annotated[
    datetime | Duration | None,
    NO_FILTER_IF_EMPTY,
    BeforeValidator(_iso_as_the_cli_reads_it),
    WrapValidator(_one_problem),
    Query(description=WHEN),
]
"""A ``since`` or ``until`` query parameter."""


def moment(value: datetime | str, now: datetime) -> datetime:
    """A time (naive: UTC), or a ``DURATION`` before ``now``; in UTC, as the store writes."""
    if isinstance(value, str):
        return now - parse_period(value)
    try:
        return aware(value).astimezone(UTC)
    except OverflowError:  # a time at the edge of the calendar, moved to UTC
        edge = datetime.min if value.year == 1 else datetime.max
        return edge.replace(tzinfo=UTC)


@dataclass(frozen=True)
class RunFilter:
    """What ``GET /runs`` asks for."""

    agent: str | None = None
    status: str | None = None
    intent: str | None = None
    session_id: str | None = None
    trace_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int = 50
    offset: int = 0


def _intent_label(store: SqlStore, conn: Connection) -> tuple[FromClause, ColumnElement[Any]]:
    """The runs, and their intent label: from the stats projection, where it is written.

    Read from the stored summary only in a home without the projection (an old one,
    opened read-only): PostgreSQL cannot read a JSON text with a NUL in any of its
    strings (a user may type one), and every listing holding that run failed.
    """
    if store.has_stats_projection(conn):
        facts = run_facts_table
        joined = runs.outerjoin(facts, facts.c.run_id == runs.c.run_id)
        return joined, facts.c.intent
    column = (
        cast(runs.c.summary, JSON)
        if store.engine.dialect.name == "postgresql"
        else type_coerce(runs.c.summary, JSON)
    )
    label: ColumnElement[Any] = column["intent"]["label"].as_string()
    return runs, label


def list_runs(
    store: SqlStore, wanted: RunFilter, live: Sequence[LiveRow] = ()
) -> tuple[list[dict[str, Any]], int | None]:
    """One page of runs, newest first, and the offset of the next page (None: no more).

    ``live`` are the filtered rows of the runs this server drives (``live_rows``): those
    not saved yet take their place among the stored ones, found by counting the stored
    rows before each (a few, not a loop over the store); a saved one is its stored row.
    """
    store.ensure_facts()  # runs stored before the projection: their intents are in it
    conditions = run_conditions(
        agent=wanted.agent,
        status=wanted.status,
        session_id=wanted.session_id,
        trace_id=wanted.trace_id,
        since=wanted.since,
        until=wanted.until,
    )
    end = wanted.offset + wanted.limit
    with store.engine.connect() as conn:
        listed, label = _intent_label(store, conn)
        if wanted.intent is not None:
            conditions.append(label == cast(wanted.intent, String))
        unsaved = _unsaved(conn, live)
        placed = [
            (_stored_before(conn, listed, conditions, row) + i, row)
            for i, row in enumerate(unsaved)
        ]
        shown = [row for at, row in placed if wanted.offset <= at < end]
        skipped = sum(1 for at, _ in placed if at < wanted.offset)
        stored_limit = wanted.limit - len(shown)
        query = (
            select(
                runs.c.run_id,
                runs.c.agent,
                runs.c.status,
                runs.c.created_at,
                runs.c.updated_at,
                runs.c.session_id,
                label.label("intent"),
            )
            .select_from(listed)
            .where(*conditions)
            .order_by(runs.c.created_at.desc(), runs.c.run_id.desc())
            .limit(stored_limit + 1)
            .offset(wanted.offset - skipped)
        )
        rows = list(conn.execute(query))
        # checked after the page's query: a run saved since it was seen live is shown
        # once (its stored row, if the query saw it), never twice
        still = {row.run_id for row in _unsaved(conn, shown)}
    more = len(rows) > stored_limit or any(at >= end for at, _ in placed)
    page: list[Any] = [*rows[:stored_limit], *(row for row in shown if row.run_id in still)]
    page.sort(key=lambda row: (aware(row.created_at), row.run_id), reverse=True)
    return [_listed(row) for row in page], end if more else None


def _listed(row: Any) -> dict[str, Any]:
    """A run as ``GET /runs`` lists it, from a stored row or a live one (``LiveRow``).

    Both have these fields under these names: one shape for the listing's two sources.
    """
    return {
        "run_id": row.run_id,
        "agent": row.agent,
        "status": row.status,
        "intent": row.intent,
        "created_at": aware(row.created_at).isoformat(),
        "updated_at": aware(row.updated_at).isoformat(),
        "session_id": row.session_id,
    }


def _unsaved(conn: Connection, live: Sequence[LiveRow]) -> list[LiveRow]:
    """The rows of ``live`` whose run has no stored row yet, in their order."""
    if not live:
        return []
    ids = [row.run_id for row in live]
    saved = set(conn.execute(select(runs.c.run_id).where(runs.c.run_id.in_(ids))).scalars())
    return [row for row in live if row.run_id not in saved]


def _stored_before(
    conn: Connection, listed: FromClause, conditions: list[ColumnElement[bool]], row: LiveRow
) -> int:
    """How many stored runs the filters keep come before ``row``, newest first."""
    created_at, run_id = row.order
    newer = or_(
        runs.c.created_at > created_at,
        and_(runs.c.created_at == created_at, runs.c.run_id > run_id),
    )
    query = select(func.count()).select_from(listed).where(*conditions, newer)
    return int(conn.execute(query).scalar_one())


def list_handoffs(store: SqlStore, limit: int) -> list[tuple[str, str, dict[str, Any]]]:
    """The newest handed-off runs: ``(run_id, agent, packet)``, the packet as stored."""
    query = (
        select(runs.c.run_id, runs.c.agent, runs.c.handoff)
        .where(runs.c.handoff.is_not(None))
        .order_by(runs.c.updated_at.desc(), runs.c.run_id.desc())
        .limit(limit)
    )
    with store.engine.connect() as conn:
        return [(row.run_id, row.agent, json.loads(row.handoff)) for row in conn.execute(query)]
