"""The store's fixed statements, run on the driver's own cursor (``sqlite3``, ``psycopg``).

Every save runs the same few statements. Through SQLAlchemy Core each one costs far more
than the database spends on it: a cache key, parameter construction, bind processing
row by row, a result object. Here each statement is compiled by SQLAlchemy once per
dialect (so the SQL text, its parameter style and its bind processors are SQLAlchemy's
own, on SQLite and PostgreSQL alike) and then run on the cursor of the connection the
caller's transaction already holds: the same transaction, a fraction of the cost.

Two things keep SQLAlchemy's guarantees:

- a driver error is raised as SQLAlchemy's ``DBAPIError`` subclass (``IntegrityError``,
  ``OperationalError``...), exactly as ``Connection.execute`` raises it, so callers and
  ``store.faults`` see the same exceptions;
- while anyone listens to the engine's cursor events (a tracer, a test injecting a
  fault), statements go through ``Connection.exec_driver_sql`` instead, which fires them.

Only statements whose parameters and selected columns need no conversion beyond the
compiled bind processors belong here: rows come back as the driver returns them.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from operator import itemgetter
from typing import Any

from sqlalchemy import Connection, DateTime, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ClauseElement, CompoundSelect, Select
from sqlalchemy.types import TypeEngine

from corral.store.instant import Instant, to_micros

Params = Mapping[str, Any]
_ROW: Callable[[str, list[str]], type[tuple[Any, ...]]] = namedtuple
"""Makes the row type of a ``SELECT``'s columns (known when it is compiled)."""
_REQUIRED = object()
"""A bind the caller must give (not a literal of the statement)."""


@dataclass(frozen=True, slots=True)
class _Prepared:
    """One statement compiled for one dialect: its SQL and how to bind a dict to it."""

    sql: str
    names: tuple[str, ...]
    """Bind names, in the order of the SQL's markers when the style is positional."""
    defaults: tuple[Any, ...]
    """Each bind's own value (a literal compiled into the statement), or ``_REQUIRED``."""
    positional: bool
    row: type[tuple[Any, ...]] | None
    """A named tuple of the selected columns, for a ``SELECT``."""

    processed: tuple[tuple[int, Callable[[Any], Any]], ...]
    """The positions whose values SQLAlchemy converts (e.g. datetimes, as text on SQLite)."""

    get: Callable[[Params], tuple[Any, ...]] | None
    """Reads every value in one call, when each is the caller's (no literal) and >1."""

    def bind(self, params: Params) -> tuple[Any, ...] | dict[str, Any]:
        """The driver's parameters: positional or named, bind-processed like SQLAlchemy's."""
        if self.get is not None and not self.processed and self.positional:
            return self.get(params)
        if self.get is not None:
            values = list(self.get(params))
        else:
            values = [
                params[name] if default is _REQUIRED else params.get(name, default)
                for name, default in zip(self.names, self.defaults, strict=True)
            ]
        for index, process in self.processed:
            if values[index] is not None:
                values[index] = process(values[index])
        return tuple(values) if self.positional else dict(zip(self.names, values, strict=True))

    def bind_many(self, rows: Sequence[Params]) -> list[Any]:
        """``bind`` of every row; the common case (positional, all given) in one pass."""
        get = self.get
        if get is None or not self.positional:
            return [self.bind(row) for row in rows]
        if not self.processed:
            return list(map(get, rows))
        bound = []
        for row in rows:
            values = list(get(row))
            for index, process in self.processed:
                if values[index] is not None:
                    values[index] = process(values[index])
            bound.append(tuple(values))
        return bound


class Driver:
    """Runs prepared statements on one engine's connections (see the module docstring)."""

    def __init__(self, engine: Engine) -> None:
        self._dialect = engine.dialect
        self._prepared: dict[tuple[ClauseElement, tuple[str, ...]], _Prepared] = {}

    def _prepare(self, statement: ClauseElement, keys: tuple[str, ...]) -> _Prepared:
        """Compile once per statement (and, for an ``INSERT``, per set of columns)."""
        found = self._prepared.get((statement, keys))
        if found is not None:
            return found
        compiled = statement.compile(dialect=self._dialect, column_keys=list(keys) or None)
        assert isinstance(compiled, SQLCompiler)  # a statement, not DDL
        positional = bool(self._dialect.positional)
        names = tuple(compiled.positiontup or ()) if positional else ()
        if not positional:
            names = tuple(dict.fromkeys(compiled.bind_names.values()))
        binds = {compiled.bind_names[b]: b for b in compiled.bind_names}
        defaults = []
        processors: list[Callable[[Any], Any] | None] = []
        for name in names:
            bind = binds[name]
            defaults.append(_REQUIRED if bind.required else bind.effective_value)
            processors.append(self._processor(bind.type))
        row = None
        if isinstance(statement, Select):
            row = _ROW("Row", [str(column.key) for column in statement.selected_columns])
        processed = tuple((i, p) for i, p in enumerate(processors) if p is not None)
        every = len(names) > 1 and all(d is _REQUIRED for d in defaults)
        get = itemgetter(*names) if every else None
        prepared = _Prepared(
            compiled.string, names, tuple(defaults), positional, row, processed, get
        )
        self._prepared[(statement, keys)] = prepared
        return prepared

    def _processor(self, kind: TypeEngine[Any]) -> Callable[[Any], Any] | None:
        """SQLAlchemy's bind processor of a type; for SQLite datetimes, one that is faster.

        SQLite stores a datetime as SQLAlchemy's text, ``2026-01-31 12:00:00.000000``
        (no zone: corral stores UTC). ``isoformat`` writes that text in one C call, where
        SQLAlchemy formats a dict of seven fields; it is used only when both write the
        same text for a probe, and only for plain ``datetime`` values. An ``Instant`` is
        bound by ``to_micros`` itself (what its ``process_bind_param`` returns on SQLite),
        sparing a wrapper call per value; again only if both give the same for the probes.
        A ``None`` is never processed (``_Prepared.bind`` passes it as it is).
        """
        process = kind._cached_bind_processor(self._dialect)
        if process is None or self._dialect.name != "sqlite":
            return process
        probes = (datetime(2026, 1, 31, 23, 59, 7, 5, tzinfo=UTC), datetime(999, 2, 3, 4, 5, 6))
        if type(kind) is Instant:  # its integer, without TypeDecorator's wrapper per value
            same = all(process(p) == to_micros(p) for p in probes)
            return to_micros if same else process
        if not isinstance(kind, DateTime):
            return process
        if any(process(p) != _sqlite_datetime(p, process) for p in probes):
            return process
        return partial(_sqlite_datetime, fallback=process)

    def execute(self, conn: Connection, statement: ClauseElement, params: Params) -> int:
        """Run a DML statement with one set of parameters; the rows it touched."""
        prepared = self._prepare(statement, tuple(params) if _is_insert(statement) else ())
        cursor = run(conn, prepared.sql, prepared.bind(params), many=False)
        count = int(cursor.rowcount)
        cursor.close()
        return count

    def executemany(
        self, conn: Connection, statement: ClauseElement, rows: Sequence[Params]
    ) -> None:
        """Run a DML statement once per row (every row with the same keys)."""
        if not rows:
            return
        prepared = self._prepare(statement, tuple(rows[0]) if _is_insert(statement) else ())
        run(conn, prepared.sql, prepared.bind_many(rows), many=True).close()

    def on(self, conn: Connection) -> Bound:
        """The driver bound to the connection of one transaction."""
        return Bound(self, conn)

    def first(self, conn: Connection, statement: Select[Any], params: Params) -> Any:
        """The first row of a ``SELECT`` as a named tuple, or ``None``."""
        prepared = self._prepare(statement, ())
        cursor = run(conn, prepared.sql, prepared.bind(params), many=False)
        found = cursor.fetchone()
        cursor.close()
        if found is None or prepared.row is None:
            return None
        return prepared.row(*found)

    def scalars(self, conn: Connection, statement: Select[Any], params: Params) -> list[Any]:
        """The first column of every row of a ``SELECT``."""
        return [row[0] for row in self.rows(conn, statement, params)]

    def rows(
        self, conn: Connection, statement: Select[Any] | CompoundSelect[Any], params: Params
    ) -> list[Any]:
        """Every row of a query, as the driver gives them (plain tuples)."""
        prepared = self._prepare(statement, ())
        cursor = run(conn, prepared.sql, prepared.bind(params), many=False)
        found = cursor.fetchall()
        cursor.close()
        return list(found)


def _is_insert(statement: ClauseElement) -> bool:
    return bool(getattr(statement, "is_insert", False))


@dataclass(frozen=True, slots=True)
class Bound:
    """A driver and the connection of one transaction, for code that runs in it."""

    driver: Driver
    conn: Connection

    def execute(self, statement: ClauseElement, params: Params) -> int:
        """``Driver.execute`` in this transaction."""
        return self.driver.execute(self.conn, statement, params)

    def executemany(self, statement: ClauseElement, rows: Sequence[Params]) -> None:
        """``Driver.executemany`` in this transaction."""
        self.driver.executemany(self.conn, statement, rows)

    def scalars(self, statement: Select[Any], params: Params) -> list[Any]:
        """``Driver.scalars`` in this transaction."""
        return self.driver.scalars(self.conn, statement, params)


def _sqlite_datetime(value: Any, fallback: Callable[[Any], Any]) -> Any:
    """SQLAlchemy's SQLite text of a ``datetime`` (see ``Driver._processor``)."""
    if type(value) is datetime:
        return value.isoformat(" ", "microseconds")[:26]
    return fallback(value)


def run(conn: Connection, sql: str, params: Any = (), *, many: bool = False) -> Any:
    """Execute driver SQL on ``conn``'s own cursor, in its transaction; that cursor.

    While the engine's cursor events have listeners, through ``exec_driver_sql`` (which
    fires them) instead; its result reads the same (``rowcount``, ``fetchone``...).
    """
    engine = conn.engine
    dispatch = engine.dispatch
    if dispatch.before_cursor_execute or dispatch.after_cursor_execute:
        return conn.exec_driver_sql(sql, params)
    dialect = engine.dialect
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        if many:
            cursor.executemany(sql, params)
        else:
            cursor.execute(sql, params)
    except dialect.loaded_dbapi.Error as exc:
        cursor.close()
        base = dialect.loaded_dbapi.Error
        raise DBAPIError.instance(sql, params, exc, base, dialect=dialect, ismulti=many) from exc
    return cursor
