"""Points in time as people type them: ``90s``, ``30m``, ``1h``, ``7d``, ``2w`` ago, or ISO.

One parser for every "since" and "until": ``corral stats --since``, ``corral traces
--since/--until``, ``corral record --failed --since`` and the HTTP API's ``since=``. A
period is a whole number from 1 to 9999 and a unit (``s``, ``m``, ``h``, ``d``, ``w``),
counted back from now; an ISO time without a zone is UTC (everything corral stores is
UTC). Anything else is ``INVALID_INPUT``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from corral.errors import InvalidInputError

UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
"""Period suffixes and the ``timedelta`` argument each one is."""

PERIOD_PATTERN = r"^[1-9][0-9]{0,3}[smhdw]$"
"""A period as a regular expression (for schemas: the HTTP API's ``since=``)."""
_PERIOD = re.compile(r"([1-9][0-9]{0,3})([smhdw])")

_HINT = "a whole number from 1 to 9999, then s, m (minutes), h, d or w (weeks)"


def parse_period(text: str) -> timedelta:
    """A period such as ``90s``, ``30m``, ``1h``, ``7d`` or ``2w``; else ``INVALID_INPUT``."""
    match = _PERIOD.fullmatch(text)
    if match is None:
        raise InvalidInputError(
            f"--since takes a period such as 30m, 1h, 1d or 2w, not {text!r}", hint=_HINT
        )
    return timedelta(**{UNITS[match.group(2)]: int(match.group(1))})


def parse_time(text: str, now: datetime | None = None) -> datetime:
    """The UTC time ``text`` names: ``now`` minus a period, or an ISO date or time."""
    given = text.strip()
    moment = _utc(now if now is not None else datetime.now(UTC))
    if _PERIOD.fullmatch(given) is not None:
        return moment - parse_period(given)
    try:
        return _utc(datetime.fromisoformat(given))
    except ValueError:
        raise InvalidInputError(
            f"{text!r} is neither a period nor an ISO time",
            hint=f"give a period back from now ({_HINT}) or an ISO time (2026-11-29T10:00Z)",
        ) from None
    except OverflowError:  # 0001-01-01T00:00+14:00 is before the calendar in UTC
        raise InvalidInputError(
            f"{text!r} is outside the calendar once moved to UTC",
            hint="give a time between the years 1 and 9999 in UTC",
        ) from None


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
