"""``parse_time``: the one parser of ``--since``/``--until`` (and the API's ``since=``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.errors import ErrorCode, InvalidInputError
from corral.observe.window import UNITS, parse_time
from tests.helpers import corral_cli

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
ZONES = [UTC, timezone(timedelta(hours=8)), timezone(-timedelta(hours=5))]


@given(st.integers(min_value=1, max_value=9999), st.sampled_from(sorted(UNITS)))
def test_a_duration_counts_back_from_now(amount: int, unit: str) -> None:
    expected = NOW - timedelta(**{UNITS[unit]: amount})
    assert parse_time(f"{amount}{unit}", NOW) == expected
    assert parse_time(f" {amount}{unit} ", NOW) == expected


@given(
    st.datetimes(
        min_value=datetime(1970, 1, 1),
        max_value=datetime(2999, 1, 1),
        timezones=st.sampled_from(
            [UTC, timezone(timedelta(hours=8)), timezone(-timedelta(hours=5))]
        ),
    )
)
def test_an_iso_time_is_that_instant_in_utc(moment: datetime) -> None:
    parsed = parse_time(moment.isoformat(), NOW)
    assert parsed == moment and parsed.tzinfo == UTC


@given(st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2999, 1, 1)))
def test_an_iso_time_without_a_zone_is_utc(moment: datetime) -> None:
    assert parse_time(moment.isoformat(), NOW) == moment.replace(tzinfo=UTC)


@given(st.text(max_size=30))
def test_anything_else_is_invalid_input_never_a_crash(text: str) -> None:
    try:
        parsed = parse_time(text, NOW)
    except InvalidInputError as exc:
        assert exc.code is ErrorCode.INVALID_INPUT
    else:
        assert parsed.tzinfo == UTC


@pytest.mark.parametrize(
    ("text", "back"),
    [
        ("90s", timedelta(seconds=90)),
        ("30m", timedelta(minutes=30)),
        ("1h", timedelta(hours=1)),
        ("7d", timedelta(days=7)),
        ("2w", timedelta(weeks=2)),
    ],
)
def test_the_documented_examples(text: str, back: timedelta) -> None:
    assert parse_time(text, NOW) == NOW - back


REFUSED = ["", "yesterday", "1y", "-1h", "h1", "0d", "1.5h", "1 d", "10000d", "1H"]


@pytest.mark.parametrize("text", REFUSED)
def test_what_is_refused(text: str) -> None:
    with pytest.raises(InvalidInputError):
        parse_time(text, NOW)


@pytest.mark.parametrize("text", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
def test_a_time_outside_the_calendar_in_utc_is_invalid_input_not_a_crash(
    tmp_path: Path, text: str
) -> None:
    """Found by a hostile review: ``corral stats --since 0001-01-01T00:00:00+14:00`` ended
    in an OverflowError traceback (``GET /stats?since=`` handled the same value)."""
    with pytest.raises(InvalidInputError, match="outside the calendar"):
        parse_time(text, NOW)
    done = corral_cli(tmp_path, "stats", "--since", text, ok=False)
    assert done.returncode == 2 and "INVALID_INPUT" in done.stderr
    assert "Traceback" not in done.stderr
