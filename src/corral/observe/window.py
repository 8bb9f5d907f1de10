"""Points in time as people type them: ``90s``, ``30m``, ``1h``, ``7d``, ``2w`` ago, or ISO.

One parser for every "since" and "until": ``corral stats --since``, ``corral traces
--since/--until`` and the HTTP API's ``since=``. A duration counts back from now; an ISO
time without a zone is UTC (everything corral stores is UTC).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from corral.errors import InvalidInputError

UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
"""Duration suffixes and the ``timedelta`` argument each one is."""

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")

_HINT = "give a duration back from now (90s, 30m, 1h, 7d, 2w) or an ISO time (2026-11-29T10:00Z)"


def parse_time(text: str, now: datetime | None = None) -> datetime:
    """The UTC time ``text`` names: ``now`` minus a duration, or an ISO date or time.

    ``InvalidInputError`` (``INVALID_INPUT``) for anything else, including a duration too
    large to count back from ``now``.
    """
    given = text.strip()
    moment = now if now is not None else datetime.now(UTC)
    match = _DURATION.fullmatch(given.lower())
    if match is not None:
        amount, unit = float(match.group(1)), UNITS[match.group(2)]
        try:
            return _utc(moment) - timedelta(**{unit: amount})
        except OverflowError:
            raise InvalidInputError(f"{text!r} reaches back too far", hint=_HINT) from None
    try:
        parsed = datetime.fromisoformat(given)
    except ValueError:
        raise InvalidInputError(f"{text!r} is not a duration or an ISO time", hint=_HINT) from None
    return _utc(parsed)


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
