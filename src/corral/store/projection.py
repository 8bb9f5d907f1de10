"""The stats projection of the SQL store: run, tool and stage facts, written with the events.

Stored events are compressed JSON (``corral.store.codec``), which SQL cannot add up. So
every ``SqlStore.save`` also writes, in the same transaction as the events it appends,
what ``corral.store.facts`` takes from them:

- ``corral_run_facts``: one row per run, its columns replaced on every save (status,
  intent, outcome...) and its counters (tool calls, model calls, tokens, cost) added to,
  as are the milliseconds the run spent in each of corral's own stages (``STAGE_COLUMNS``:
  one column each, ``NULL`` for a stage the run never entered);
- ``corral_step_facts``: one ``tool`` row per attempt (``store.facts``) (tool, status,
  error code, duration; keyed by the event's ``seq``) and, for a stage outside
  ``STAGE_COLUMNS`` (an event may name any), one ``stage`` row per run and stage.

Only events the transaction really inserts count, so a retried save (an identical
repeat) adds nothing twice. Homes created before the projection gain its tables through
``create_all``; their runs are backfilled from their events once (``SqlStore.ensure_facts``).

``figures`` answers ``corral stats`` with a handful of queries: sums and counts grouped
in SQL, and each percentile as ``ORDER BY duration_ms LIMIT 1 OFFSET k`` per stage or
tool, which walks the ``(kind, name, duration_ms, created_at, agent)`` index to the row
and no further (a stage column, by a scan of the run facts: they have no index, which
every save would pay for), on SQLite and PostgreSQL alike (a ``ROW_NUMBER`` window would sort every
row first). The figures are read in one transaction, so counts and ranks agree.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from operator import attrgetter
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    ColumnElement,
    CompoundSelect,
    Connection,
    Float,
    Index,
    Integer,
    MetaData,
    Select,
    String,
    Table,
    and_,
    bindparam,
    delete,
    func,
    insert,
    literal_column,
    select,
    text,
    union_all,
    update,
)

from corral.contracts import PAUSED_STATUSES, EventType
from corral.events import Event
from corral.store.base import RunRecord
from corral.store.codec import stored_type
from corral.store.driver import Bound
from corral.store.facts import Before, EventFacts, aware, event_facts, run_facts
from corral.store.figures import NO_CODE, PERCENTILES, TIMED_OUT, WHOLE_TIMEOUT, Figures, rank
from corral.store.instant import Instant

metadata = MetaData()

STAGE_COLUMNS = {
    stage: f"stage_{stage}_ms"
    for stage in (
        "run",
        "intent",
        "route",
        "plan",
        "decide",
        "execute",
        "verify",
        "reply",
        "memory",
        "handoff",
    )
}
"""Stage -> the run-facts column of its milliseconds (fixed: stored rows rely on it).

Every run enters most of these, so a column each costs a run a few bytes where a row
each cost it the row's keys (its run id, agent and creation time again). Schema revision
``0003`` added them and moved the older stage rows of these stages into them."""

run_facts_table = Table(
    "corral_run_facts",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("agent", String(128), nullable=False),
    Column("status", String(32), nullable=False),
    Column("intent", String(128)),
    Column("outcome", String(32)),
    Column("error_code", String(64)),
    Column("steps", Integer, nullable=False),
    Column("tool_calls", Integer, nullable=False),
    Column("model_calls", Integer, nullable=False),
    Column("input_tokens", BigInteger, nullable=False),
    Column("output_tokens", BigInteger, nullable=False),
    Column("cost", Float, nullable=False),
    Column("created_at", Instant, nullable=False),
    Column("updated_at", Instant, nullable=False),
    *(Column(column, Float) for column in STAGE_COLUMNS.values()),
    sqlite_with_rowid=False,
)

NEWEST_PER_AGENT_AND_TOOL = ("agent", "name", "created_at", "run_id", "seq", "duration_ms")
"""The columns of the observed-latency indexes: an agent's calls of a tool, newest last
(walked backwards), covering the duration each window reads."""

step_facts = Table(
    "corral_step_facts",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("kind", String(8), primary_key=True),
    Column("name", String(128), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("status", String(32)),
    Column("error_code", String(64)),
    Column("duration_ms", Float, nullable=False),
    Column("agent", String(128), nullable=False),
    Column("created_at", Instant, nullable=False),
    Index("ix_corral_step_facts_ms", "kind", "name", "duration_ms", "created_at", "agent"),
    Index(
        "ix_corral_step_facts_failed",
        "name",
        "error_code",
        "created_at",
        "agent",
        sqlite_where=text("status = 'error'"),
        postgresql_where=text("status = 'error'"),
    ),
    Index(
        "ix_corral_step_facts_recent",
        *NEWEST_PER_AGENT_AND_TOOL,
        sqlite_where=text("kind = 'tool' AND status = 'success'"),
        postgresql_where=text("kind = 'tool' AND status = 'success'"),
    ),
    Index(
        "ix_corral_step_facts_timeouts",
        *NEWEST_PER_AGENT_AND_TOOL,
        sqlite_where=text(f"kind = 'tool' AND status = 'error' AND error_code = '{TIMED_OUT}'"),
        postgresql_where=text(f"kind = 'tool' AND status = 'error' AND error_code = '{TIMED_OUT}'"),
    ),
    sqlite_with_rowid=False,
)
"""Tool attempts (``kind`` ``tool``, ``seq`` the event's) and the totals of stages outside
``STAGE_COLUMNS`` (``kind`` ``stage``, ``seq`` 0) in one table, so a save inserts them in
one statement. They repeat their run's ``agent`` and ``created_at`` (which never change),
so that a filtered percentile reads one covering index and joins nothing.

Each save writes these tables with its events, so every B-tree they add costs every
save: on SQLite they are ``WITHOUT ROWID`` (the primary key is the table), the run table
has no index (100 000 rows filter in milliseconds), and the index of failed attempts is
partial (a save with no failure never touches it). So are the indexes of successful and
of timed-out attempts, newest first per agent and tool (``latency_query``, read at every
run start of an agent with equivalent tools): a stage row never touches them, and only a
timeout touches the second."""

TOOL, STAGE = "tool", "stage"
UNTIMED_TOOL = "untimed"
"""The kind of an attempt's row whose duration says nothing (``ToolFact.timed``): a call and
a failure in the figures, never a latency sample (its 0 ms made a tool look fast)."""

TABLES = (run_facts_table, step_facts)

_COUNTERS = ("tool_calls", "model_calls", "input_tokens", "output_tokens", "cost")
_ADD_COUNTERS = (
    update(run_facts_table)
    .where(run_facts_table.c.run_id == bindparam("b_run_id"))
    .values(
        {
            **{
                name: bindparam(f"b_{name}")
                for name in ("agent", "status", "intent", "outcome", "error_code", "steps")
            },
            "updated_at": bindparam("b_updated_at"),
            **{name: run_facts_table.c[name] + bindparam(f"b_{name}") for name in _COUNTERS},
            **{
                name: func.coalesce(
                    run_facts_table.c[name] + bindparam(f"b_{name}", type_=Float),
                    run_facts_table.c[name],
                    bindparam(f"b_{name}", type_=Float),
                )
                for name in STAGE_COLUMNS.values()
            },
        }
    )
)
"""Built once: a save binds its values (the counters are added to, the rest replaced; a
stage column is added to, or set when still ``NULL``, or kept when the save adds none)."""
_INSERT_RUN_FACTS = insert(run_facts_table)
_INSERT_STEP_FACTS = insert(step_facts)
_ADD_STAGE_MS = (
    update(step_facts)
    .where(
        step_facts.c.run_id == bindparam("b_run_id"),
        step_facts.c.kind == STAGE,
        step_facts.c.name == bindparam("b_stage"),
        step_facts.c.seq == 0,
    )
    .values(duration_ms=step_facts.c.duration_ms + bindparam("b_ms"))
)
_STAGE_NAMES = select(step_facts.c.name).where(
    step_facts.c.run_id == bindparam("b_run_id"), step_facts.c.kind == STAGE
)


_SEQ = attrgetter("seq")
"""An event's ``seq``, read in C (a save sorts its events by it)."""

_STATUS_CHANGED = {EventType.STATUS_CHANGED.value, stored_type(EventType.STATUS_CHANGED)}
"""How a ``status_changed`` row names its type: by code (format 4), or by name (older)."""


def before_seq(conn: Connection, previous: Select[Any], run_id: str, seq: int) -> Before | None:
    """The ``Before`` of the stored event preceding ``seq`` (its ``to`` is always stored).

    ``previous`` is ``previous_event(events)``, built once by the store.
    """
    row = conn.execute(previous, {"b_run_id": run_id, "b_seq": seq}).first()
    if row is None:
        return None
    paused = False
    if row.type in _STATUS_CHANGED:
        data = json.loads(row.data)
        paused = isinstance(data, dict) and data.get("to") in PAUSED_STATUSES
    return Before(aware(row.ts), paused)


def previous_event(events_table: Table) -> Select[Any]:
    """The query of the last stored event of a run before a ``seq`` (bound by name)."""
    return (
        select(events_table.c.ts, events_table.c.type, events_table.c.data)
        .where(events_table.c.run_id == bindparam("b_run_id"))
        .where(events_table.c.seq < bindparam("b_seq"))
        .order_by(events_table.c.seq.desc())
        .limit(1)
    )


def record(
    db: Bound,
    run: RunRecord,
    inserted: Sequence[Event],
    prior: Callable[[int], Before | None],
    stored: Callable[[], list[Event]],
) -> None:
    """Write the run's facts for the events this transaction ``inserted``.

    A run is projected from its first event on: a save that inserts ``seq`` 1 creates its
    rows (nothing can be there yet), a later one adds to them. ``prior(seq)`` describes
    the stored event before ``seq``; ``stored()`` reads every stored event of the run
    (this transaction's included), for a run whose facts were never written (it began
    before the projection existed): then they are made whole. A run with no event yet
    has nothing to count and waits for its first.
    """
    ordered = sorted(inserted, key=_SEQ)
    first = ordered[0].seq if ordered else None
    columns = run_facts(run).columns()
    if first == 1:
        facts = event_facts(ordered)
        db.execute(_INSERT_RUN_FACTS, {"run_id": run.run_id, **columns, **_counters(facts)})
        _insert_event_facts(db, run, facts)
        return
    before = prior(first) if first is not None else None
    facts = event_facts(ordered, before) if ordered else EventFacts()
    bound = {f"b_{name}": value for name, value in columns.items() if name != "created_at"}
    counters = _counters(facts)
    updated = db.execute(
        _ADD_COUNTERS,
        {"b_run_id": run.run_id, **bound, **{f"b_{k}": v for k, v in counters.items()}},
    )
    if updated == 0:  # earlier events exist (or none), never projected
        events = stored()
        if events:
            replace_facts(db, run, events)
        return
    known: set[str] = set()
    if any(stage not in STAGE_COLUMNS for stage in facts.stage_ms):
        known = set(db.scalars(_STAGE_NAMES, {"b_run_id": run.run_id}))
        added = [
            {"b_run_id": run.run_id, "b_stage": stage, "b_ms": ms}
            for stage, ms in facts.stage_ms.items()
            if stage in known
        ]
        db.executemany(_ADD_STAGE_MS, added)
    _insert_event_facts(db, run, facts, known)


def replace_facts(db: Bound, run: RunRecord, events: Sequence[Event]) -> None:
    """Write a run's facts from all its events, replacing any it had (the backfill)."""
    forget(db.conn, [run.run_id])
    facts = event_facts(sorted(events, key=lambda e: e.seq))
    columns = run_facts(run).columns()
    db.execute(_INSERT_RUN_FACTS, {"run_id": run.run_id, **columns, **_counters(facts)})
    _insert_event_facts(db, run, facts)


def forget(conn: Connection, run_ids: list[str]) -> None:
    """Delete the facts of these runs (purged, or about to be rewritten)."""
    for table in TABLES:
        conn.execute(delete(table).where(table.c.run_id.in_(run_ids)))


def _counters(facts: EventFacts) -> dict[str, Any]:
    """The values a save adds to its run's facts: counters, and its ``STAGE_COLUMNS``."""
    stage_ms = facts.stage_ms
    return {
        "tool_calls": len(facts.tools),
        "model_calls": facts.model_calls,
        "input_tokens": facts.input_tokens,
        "output_tokens": facts.output_tokens,
        "cost": facts.cost,
        **{column: stage_ms.get(stage) for stage, column in STAGE_COLUMNS.items()},
    }


def _insert_event_facts(
    db: Bound,
    run: RunRecord,
    facts: EventFacts,
    known: set[str] | frozenset[str] = frozenset(),
) -> None:
    """Insert the tool rows of ``facts``, and its stage rows (no column) but ``known`` ones."""
    owner = {"run_id": run.run_id, "agent": run.agent, "created_at": run.created_at}
    rows = [
        {
            **owner,
            "kind": TOOL if t.timed else UNTIMED_TOOL,
            "name": t.tool,
            "seq": t.seq,
            "status": t.status,
            "error_code": t.error_code,
            "duration_ms": t.duration_ms,
        }
        for t in facts.tools
    ]
    rows += [
        {**owner, "kind": STAGE, "name": stage, "seq": 0, "status": None, "error_code": None}
        | {"duration_ms": ms}
        for stage, ms in facts.stage_ms.items()
        if stage not in known and stage not in STAGE_COLUMNS
    ]
    db.executemany(_INSERT_STEP_FACTS, rows)


def unprojected(conn: Connection, runs_table: Table, events_table: Table, limit: int) -> list[str]:
    """Ids of stored runs with events but no facts yet (saved before the projection)."""
    query = (
        select(runs_table.c.run_id)
        .where(
            ~select(run_facts_table.c.run_id)
            .where(run_facts_table.c.run_id == runs_table.c.run_id)
            .exists()
        )
        .where(
            select(events_table.c.seq).where(events_table.c.run_id == runs_table.c.run_id).exists()
        )
        .limit(limit)
    )
    return list(conn.execute(query).scalars())


# ---------------------------------------------------------------------- queries


def _filters(table: Table, since: datetime | None, agent: str | None) -> list[ColumnElement[bool]]:
    """The conditions on ``table``'s ``created_at`` and ``agent`` (every fact table has them)."""
    where: list[ColumnElement[bool]] = []
    if since is not None:
        where.append(table.c.created_at >= since)
    if agent is not None:
        where.append(table.c.agent == agent)
    return where


def _counts(conn: Connection, key: Any, where: list[ColumnElement[bool]]) -> dict[str, int]:
    query = select(key, func.count()).where(*where).group_by(key)
    return {str(k) if k is not None else NO_CODE: int(n) for k, n in conn.execute(query)}


def _percentiles(
    conn: Connection, name: Any, value: Any, where: list[ColumnElement[bool]]
) -> tuple[dict[str, int], dict[int, dict[str, float]]]:
    """How many rows each ``name`` has, and percent -> name -> the ``rank``-th smallest value.

    One count per name, then one ``LIMIT 1 OFFSET rank - 1`` per name and percentile,
    all answered from the ``(kind, name, duration_ms, created_at, agent)`` index.
    """
    out: dict[int, dict[str, float]] = {p: {} for p in PERCENTILES}
    counts = {
        str(key): int(count)
        for key, count in conn.execute(select(name, func.count()).where(*where).group_by(name))
    }
    for key, count in counts.items():
        for percent in PERCENTILES:
            query = (
                select(value)
                .where(*where, name == key)
                .order_by(value)
                .limit(1)
                .offset(rank(count, percent) - 1)
            )
            found = conn.execute(query).scalar()
            if found is not None:
                out[percent][key] = float(found)
    return counts, out


def _adder(conn: Connection) -> Callable[[ColumnElement[Any]], ColumnElement[Any]]:
    """A column's sum over the rows, 0 for none, that cannot overflow.

    SQLite's ``sum`` of integers fails past int64 ("integer overflow"): one run that
    stored an absurd token count made ``corral stats`` fail for ever. Its ``total`` adds
    in floating point; PostgreSQL's ``sum`` of a bigint is a numeric already.
    """
    if conn.dialect.name == "sqlite":
        return lambda column: func.total(column)
    return lambda column: func.coalesce(func.sum(column), 0)


def figures(conn: Connection, since: datetime | None, agent: str | None) -> Figures:
    """The figures of the runs created since ``since`` (by ``agent``), all in SQL."""
    runs = run_facts_table.c
    where = _filters(run_facts_table, since, agent)
    add = _adder(conn)
    totals = conn.execute(
        select(
            func.count(),
            add(runs.steps),
            add(runs.tool_calls),
            add(runs.model_calls),
            add(runs.input_tokens),
            add(runs.output_tokens),
            add(runs.cost),
        ).where(*where)
    ).one()
    result = Figures(
        runs=int(totals[0]),
        steps=int(totals[1]),
        tool_calls=int(totals[2]),
        model_calls=int(totals[3]),
        input_tokens=int(totals[4]),
        output_tokens=int(totals[5]),
        cost=float(totals[6]),
    )
    result.by_status = _counts(conn, runs.status, where)
    result.by_outcome = _counts(conn, runs.outcome, [*where, runs.outcome.is_not(None)])
    result.handoff_reasons = _counts(conn, runs.error_code, [*where, runs.status == "handed_off"])
    steps = step_facts.c
    window = _filters(step_facts, since, agent)
    tools = [*window, steps.kind == TOOL]
    result.calls_by_tool, result.tool_ms = _percentiles(conn, steps.name, steps.duration_ms, tools)
    untimed = select(steps.name, func.count()).where(*window, steps.kind == UNTIMED_TOOL)
    for name, count in conn.execute(untimed.group_by(steps.name)):
        calls = result.calls_by_tool
        calls[name] = calls.get(name, 0) + int(count)
    # the same SQL text in SELECT and GROUP BY (PostgreSQL compares them as text)
    code = func.coalesce(steps.error_code, literal_column(f"'{NO_CODE}'"))
    # only tool rows have a status: the partial index of failures answers without ``kind``
    failed = select(steps.name, code, func.count()).where(*window, steps.status == "error")
    for name, error_code, count in conn.execute(failed.group_by(steps.name, code)):
        by_tool, by_code = result.failures_by_tool, result.failures_by_code
        by_tool[name] = by_tool.get(name, 0) + int(count)
        by_code[error_code] = by_code.get(error_code, 0) + int(count)
    stages = [*window, steps.kind == STAGE]
    _, others = _percentiles(conn, steps.name, steps.duration_ms, stages)
    columns = _stage_percentiles(conn, where)
    result.stage_ms = {p: dict(sorted((columns[p] | others[p]).items())) for p in PERCENTILES}
    return result


def _stage_percentiles(
    conn: Connection, where: list[ColumnElement[bool]]
) -> dict[int, dict[str, float]]:
    """Percent -> stage -> the ``rank``-th smallest of its column over the runs ``where``.

    One query counts every column's values (a run that never entered a stage has
    ``NULL``, not 0); then one ``LIMIT 1 OFFSET rank - 1`` per stage and percentile.
    """
    columns = run_facts_table.c
    out: dict[int, dict[str, float]] = {p: {} for p in PERCENTILES}
    counted = select(*(func.count(columns[c]) for c in STAGE_COLUMNS.values())).where(*where)
    counts = conn.execute(counted).one()
    for (stage, name), count in zip(STAGE_COLUMNS.items(), counts, strict=True):
        if not count:
            continue
        column = columns[name]
        for percent in PERCENTILES:
            query = (
                select(column)
                .where(*where, column.is_not(None))
                .order_by(column)
                .limit(1)
                .offset(rank(int(count), percent) - 1)
            )
            found = conn.execute(query).scalar()
            if found is not None:
                out[percent][stage] = float(found)
    return out


def run_ids(
    conn: Connection,
    runs_table: Table,
    where: list[ColumnElement[bool]],
    intent: str | None,
    limit: int,
) -> list[str]:
    """The newest ``limit`` runs matching ``where`` (columns of the runs table) and ``intent``."""
    query = select(runs_table.c.run_id).where(*where)
    if intent is not None:
        query = query.join(
            run_facts_table,
            and_(
                run_facts_table.c.run_id == runs_table.c.run_id,
                run_facts_table.c.intent == intent,
            ),
        )
    query = query.order_by(runs_table.c.created_at.desc(), runs_table.c.run_id.desc()).limit(limit)
    return list(conn.execute(query).scalars())


LatencyShape = tuple[tuple[bool, ...], int]
"""What the observed-latency query looks like: for each tool asked about, whether its
timeouts count; and the window. Its SQL depends on nothing else (the rest is bound)."""


def latency_request(
    agent: str, tools: Sequence[str], last: int, timeouts_ms: Mapping[str, float] | None
) -> tuple[LatencyShape, dict[str, Any]]:
    """The shape of ``latency_query`` for these tools, and its parameters.

    A tool's timeouts count when ``timeouts_ms`` gives it a finite timeout: those that
    took at least ``WHOLE_TIMEOUT`` of it (``figures.timed``).
    """
    params: dict[str, Any] = {"agent": agent}
    counted = []
    for i, tool in enumerate(tools):
        params[f"tool_{i}"] = tool
        timeout_ms = (timeouts_ms or {}).get(tool, math.inf)  # none given: successes only
        counted.append(math.isfinite(timeout_ms))
        if counted[-1]:
            params[f"whole_ms_{i}"] = timeout_ms * WHOLE_TIMEOUT
    return (tuple(counted), last), params


def latency_query(shape: LatencyShape) -> CompoundSelect[Any]:
    """The ``(name, duration_ms)`` of each tool's latest timed calls (see ``latency_request``).

    One query, a ``UNION ALL`` of one ``ORDER BY ... LIMIT last`` per tool, newest run
    first (then newest event): each walks the partial index of successful attempts
    (``ix_corral_step_facts_recent``) backwards and stops after ``last`` rows, so a run
    start costs the same however many attempts the home holds (a ``ROW_NUMBER`` window
    numbered every past attempt first: 2.7 s at 400 000 rows). A tool whose timeouts count
    also walks its timeouts (``ix_corral_step_facts_timeouts``) the same way, keeping the
    whole ones among its latest ``last``, and the newest ``last`` of the two windows are
    kept: a sort of at most ``2 * last`` rows. (A whole timeout older than ``last`` of the
    tool's own short ones is not seen: a bound on the walk, not on what is counted, for a
    tool that mostly fails that way.) ``kind``, ``status`` and the code are
    literals, so that SQLite and PostgreSQL see the indexes' conditions hold. Everything
    else is a bound parameter: a store builds the statement once per shape.
    """
    counted, last = shape
    steps = step_facts.c
    newest_first = (steps.created_at.desc(), steps.run_id.desc(), steps.seq.desc())
    tool_kind = steps.kind == literal_column(f"'{TOOL}'")
    agent = bindparam("agent", type_=String)

    def window(i: int, *condition: Any) -> Select[Any]:
        return (
            select(steps.name, steps.duration_ms, steps.created_at, steps.run_id, steps.seq)
            .where(steps.agent == agent, steps.name == bindparam(f"tool_{i}", type_=String))
            .where(tool_kind, *condition)
            .order_by(*newest_first)
            .limit(last)
        )

    latest = []
    for i, timeouts_count in enumerate(counted):
        succeeded = window(i, steps.status == literal_column("'success'")).subquery()
        if not timeouts_count:
            latest.append(succeeded)
            continue
        timed_out = window(
            i,
            steps.status == literal_column("'error'"),
            steps.error_code == literal_column(f"'{TIMED_OUT}'"),
        ).subquery()
        # the whole ones among its latest ``last`` timeouts: the walk stops there, however
        # many short ones (the tool's own) the tool's history holds
        whole = timed_out.c.duration_ms >= bindparam(f"whole_ms_{i}", type_=Float)
        both = union_all(select(*succeeded.c), select(*timed_out.c).where(whole)).subquery()
        merged = both.c
        latest.append(
            select(*merged)
            .order_by(merged.created_at.desc(), merged.run_id.desc(), merged.seq.desc())
            .limit(last)
            .subquery()
        )
    return union_all(*(select(each.c.name, each.c.duration_ms) for each in latest))


def recent_tool_query(
    agent: str, tools: Sequence[str], last: int, timeouts_ms: Mapping[str, float] | None = None
) -> CompoundSelect[Any]:
    """``latency_query`` for these tools, with its parameters bound."""
    shape, params = latency_request(agent, tools, last, timeouts_ms)
    return latency_query(shape).params(params)


def durations(rows: Iterable[Sequence[Any]]) -> dict[str, list[float]]:
    """Tool -> its durations, from the ``(name, duration_ms)`` rows of ``latency_query``."""
    out: dict[str, list[float]] = {}
    for name, millis in rows:
        out.setdefault(str(name), []).append(float(millis))
    return out
