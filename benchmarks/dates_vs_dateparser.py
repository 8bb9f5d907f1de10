"""Date expressions: corral's resolver against dateparser on the same table.

    .venv/bin/pip install dateparser==1.5.0
    .venv/bin/python benchmarks/dates_vs_dateparser.py

The table (tests/date_table.py) expects ranges (上周 is a week). dateparser returns one
point, so it counts as right when its point lies inside the expected range; corral must
return the exact range. dateparser runs with the same reference time and time zone.
"""

from __future__ import annotations

import sys
import time
from datetime import date
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corral.intent.dates import find_relative_date
from tests.date_table import NOW, TABLE, ZONE


def main() -> None:
    try:
        from dateparser.search import search_dates
    except ImportError:
        sys.exit("install dateparser==1.5.0 to run the comparison")
    settings = {
        "RELATIVE_BASE": NOW.replace(tzinfo=None),
        "TIMEZONE": ZONE,
        "PREFER_DATES_FROM": "past",
        "RETURN_AS_TIMEZONE_AWARE": False,
    }
    ours_right = theirs_right = 0
    ours_time = theirs_time = 0.0
    misses: list[tuple[str, str, str]] = []
    for text, start, end in TABLE:
        lo, hi = date.fromisoformat(start), date.fromisoformat(end)
        t0 = time.perf_counter()
        found = find_relative_date(text, NOW, ZONE)
        ours_time += time.perf_counter() - t0
        ours_ok = found is not None and (found.start, found.end) == (lo, hi)
        t0 = time.perf_counter()
        hits = search_dates(text, languages=["zh", "en"], settings=settings)  # type: ignore[arg-type]
        theirs_time += time.perf_counter() - t0
        point = hits[0][1].date() if hits else None
        theirs_ok = point is not None and lo <= point <= hi
        ours_right += ours_ok
        theirs_right += theirs_ok
        if not theirs_ok:
            misses.append((text, f"{start}..{end}", str(point)))
    table = Table(title=f"{len(TABLE)} expressions, reference {NOW.isoformat()} {ZONE}")
    for column in ("resolver", "right", "share", "ms per expression"):
        table.add_column(column, justify="right")
    table.add_row(
        "dateparser 1.5.0 (baseline, point in range)",
        str(theirs_right),
        f"{theirs_right / len(TABLE):.0%}",
        f"{theirs_time / len(TABLE) * 1000:.2f}",
    )
    table.add_row(
        "corral (exact range)",
        str(ours_right),
        f"{ours_right / len(TABLE):.0%}",
        f"{ours_time / len(TABLE) * 1000:.3f}",
    )
    console = Console()
    console.print(table)
    console.print("dateparser misses: " + "; ".join(f"{t} → {p}" for t, _, p in misses[:20]))


if __name__ == "__main__":
    main()
