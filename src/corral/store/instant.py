"""``Instant``: a UTC timestamp column that SQLite stores as integer microseconds.

SQLAlchemy stores a SQLite ``DateTime`` as 26 characters of text
(``2026-01-31 12:00:00.000000``). The timestamps a run writes most often (each event's,
and the stats projection's) are stored by this type instead as the integer number of
microseconds since the Unix epoch, in UTC: 16 digits, exact, and ordered as the instants
are, so comparisons and ``ORDER BY`` in SQL mean what they did. PostgreSQL keeps its
``timestamptz`` (8 bytes already): the type changes nothing there.

The column is still declared ``DATETIME`` on SQLite (so that a home migrated in place and
a new one have the same schema); schema revision ``0003`` rewrote the text that older
homes hold. A text value is still read (as SQLAlchemy wrote it), so a row written by hand
or by an older corral reads as before; a naive ``datetime`` is taken as UTC, as corral
has always stored UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import DateTime, Dialect, TypeDecorator
from sqlalchemy.dialects.sqlite import DATETIME
from sqlalchemy.types import TypeEngine

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def to_micros(value: datetime) -> int:
    """Microseconds since the epoch of ``value`` (naive: taken as UTC), exactly."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - EPOCH) // _US


def from_micros(value: int) -> datetime:
    """The UTC ``datetime`` of ``value`` microseconds since the epoch."""
    return EPOCH + timedelta(microseconds=value)


class _Micros(DATETIME):
    """SQLite's ``DATETIME`` declaration, with no text conversion: ``Instant`` binds ints."""

    def bind_processor(self, dialect: Dialect) -> None:
        """None: the value is already the integer ``Instant`` made."""
        return None

    def result_processor(self, dialect: Dialect, coltype: object) -> None:
        """None: ``Instant`` reads the stored integer (or an older row's text) itself."""
        return None


class Instant(TypeDecorator[datetime]):
    """A timestamp: integer microseconds (UTC) on SQLite, ``timestamptz`` elsewhere."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        """SQLite: a ``DATETIME`` column holding integers; elsewhere ``DateTime(timezone)``."""
        if dialect.name == "sqlite":
            return _Micros()  # type: ignore[no-untyped-call]
        return dialect.type_descriptor(DateTime(timezone=True))

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        """A ``datetime`` as microseconds on SQLite; unchanged elsewhere."""
        if value is None or dialect.name != "sqlite":
            return value
        return to_micros(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        """The stored value as an aware UTC ``datetime`` (an older row's text as well)."""
        if value is None or dialect.name != "sqlite":
            return value  # type: ignore[no-any-return]
        return read_instant(value)


def read_instant(value: Any) -> datetime:
    """A stored ``Instant`` as the driver returns it, as an aware ``datetime``.

    SQLite's integer microseconds, or an older row's text (SQLAlchemy's, no zone: UTC);
    another database's ``timestamptz`` is a ``datetime`` already (in the session's zone
    on PostgreSQL, as SQLAlchemy gave it: the same instant).
    """
    if isinstance(value, int):
        return from_micros(value)
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(str(value)).replace(tzinfo=UTC)
