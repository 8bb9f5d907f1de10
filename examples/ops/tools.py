"""Local tools of the ops assistant (seed 001), and the setup that starts its services.

Most of this agent's tools are not here: the weather, sales and flight tools are HTTP
calls to the example's own service (``services/api.py``; ``http_tools:`` and ``openapi:``
in agent.yaml), and ``post_to_group`` is a tool of an MCP server
(``services/groupchat_mcp.py``; ``mcp_servers:``). What stays local is what is computed:
the week-over-week analysis and turning what the user said (a city, a date range) into
a query. Those are local compute: 30 s, no retry.

``setup`` is a generator: it starts the API on a free loopback port, yields the deps the
tools and the config's ``${NAME}`` read, and stops the service when the agent is closed.
The service also ends by itself when this process dies (it watches its stdin).
"""

from __future__ import annotations

import importlib.util
import json
import select
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from corral import LOCAL_COMPUTE, ToolContext, ToolFailedError, tool
from corral.errors import ConfigInvalidError
from corral.tools.builtin import generate_reply

__all__ = ["generate_reply"]  # registered from corral's built-ins

HERE = Path(__file__).parent
HOME_CITY = "北京"
"""Where the team sits: the city of a weather question that names none, and where
flights leave from unless the user says otherwise."""
START_TIMEOUT_S = 60.0
"""How long the API may take to come up (a cold start on a busy machine is seconds)."""


# --------------------------------------------------------------------------- setup


def start_api(state: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``services/api.py`` and wait until it answers ``/health``: (process, base URL).

    The service binds a free port itself and prints it first, so two agents (two eval
    cases, two tests) never race for one port.
    """
    with log.open("ab") as sink:
        process = subprocess.Popen(
            [sys.executable, str(HERE / "services" / "api.py"), "--state", str(state)],
            stdin=subprocess.PIPE,  # closing it (or our death) stops the service
            stdout=subprocess.PIPE,
            stderr=sink,
            cwd=HERE,
        )
    try:
        url = f"http://127.0.0.1:{_read_port(process, log)}"
        _wait_healthy(url, process)
    except BaseException:
        stop_api(process)
        raise
    return process, url


def _read_port(process: subprocess.Popen[bytes], log: Path) -> int:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], START_TIMEOUT_S)
    line = process.stdout.readline().decode() if ready else ""
    if not line.startswith("OPS_API_PORT="):
        raise RuntimeError(f"the ops API did not start; its output is in {log}")
    return int(line.split("=", 1)[1])


def _wait_healthy(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the ops API at {url} never answered /health") from None
        time.sleep(0.05)


def stop_api(process: subprocess.Popen[bytes]) -> None:
    """Close its stdin (it exits at once), then make sure: terminate, kill."""
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            pipe.close()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


NEEDED = {"fastapi": "server", "uvicorn": "server", "httpx": "http", "mcp": "mcp"}
"""The modules the services and the HTTP and MCP tools import, and corral's extra of each."""


def missing_extras() -> list[str]:
    """The extras whose modules cannot be found, before a service fails on one."""
    found = importlib.util.find_spec
    return sorted({extra for module, extra in NEEDED.items() if found(module) is None})


def setup(data_dir: Path) -> Iterator[dict[str, Any]]:
    """Start the ops API for this agent; stop it when the agent closes.

    Deps: ``OPS_API_URL`` (the ``${OPS_API_URL}`` of agent.yaml), ``GROUPCHAT_DB`` (the
    SQLite file of the group chat and of armed faults), ``OPS_API_PID`` and
    ``GROUPCHAT_PIDFILE`` (so tests can see that no process outlives the agent). Missing
    extras are named at once: the service would fail with them in its own log.
    """
    missing = missing_extras()
    if missing:
        raise ConfigInvalidError(
            f"the ops example needs corral's {', '.join(missing)} extra(s)",
            hint="pip install 'corral[server,http,mcp]'",
        )
    data_dir = data_dir.resolve()  # the service runs in the agent's folder, not here
    data_dir.mkdir(parents=True, exist_ok=True)
    state = data_dir / "ops.db"
    process, url = start_api(state, data_dir / "ops-api.log")
    (data_dir / "ops-api.pid").write_text(str(process.pid), encoding="utf-8")
    try:
        yield {
            "OPS_API_URL": url,
            "OPS_API_PID": str(process.pid),
            "GROUPCHAT_DB": str(state),
            "GROUPCHAT_PIDFILE": str(data_dir / "groupchat.pid"),
        }
    finally:
        stop_api(process)


# --------------------------------------------------------------------------- queries


def _range(dates: dict[str, str] | None, default: date) -> tuple[date, date, str]:
    if not dates:
        return default, default, ""
    return date.fromisoformat(dates["start"]), date.fromisoformat(dates["end"]), dates["text"]


def _day_word(day: date, ctx: ToolContext) -> str:
    """What the reply calls a day the user did not name: 今天/明天 (today, tomorrow), not
    the date twice ("北京2026-12-01（2026-12-01）")."""
    words = {0: ("今天", "today"), 1: ("明天", "tomorrow")}.get((day - ctx.today()).days)
    if words is None:
        return str(day)
    return words[0] if ctx.language == "zh" else words[1]


class WeatherQuery(BaseModel):
    city: str
    start: str
    """ISO dates, as the HTTP tools take them (JSON has no date type)."""
    end: str
    period: str
    """The words the user said for the dates, or the date itself."""
    dates: str
    """The dates as the reply shows them: one day, or the first and the last."""


@tool(policy=LOCAL_COMPUTE, summary="{city} {start}..{end}")
def resolve_weather(
    ctx: ToolContext, city: str | None = None, dates: dict[str, str] | None = None
) -> WeatherQuery:
    """The city (the team's own when none is named) and the dates (today when none)."""
    start, end, said = _range(dates, ctx.today())
    shown = (
        str(start) if start == end else f"{start} {'至' if ctx.language == 'zh' else 'to'} {end}"
    )
    return WeatherQuery(
        city=city or HOME_CITY,
        start=str(start),
        end=str(end),
        period=said or _day_word(start, ctx),
        dates=shown,
    )


def city_name(name: str) -> str:
    """The Chinese name of a city the service knows ("Beijing", "beijing", "PEK": 北京), so
    "flights to Beijing" is seen to leave from where it goes; an unknown name as given."""
    rows = json.loads((HERE / "data" / "cities.json").read_text(encoding="utf-8"))["cities"]
    wanted = name.strip().casefold()
    for row in rows:
        if wanted in (row["zh"], row["en"].casefold(), row["code"].casefold()):
            return str(row["zh"])
    return name


DAYPARTS = {
    "morning": ("06:00", "12:00", "上午", "morning"),
    "afternoon": ("12:00", "18:00", "下午", "afternoon"),
    "evening": ("18:00", "24:00", "晚上", "evening"),
}
"""The departure window of each ``daypart`` entity value, and its words (zh, en): a search
for "明天上午" finds the morning's flights, so the reply never quotes an evening one."""
WHOLE_DAY = ("00:00", "24:00")


class TripQuery(BaseModel):
    origin: str
    destination: str
    start: str
    end: str
    depart_after: str
    """The departure window, HH:MM: the part of the day the user asked for, or all of it."""
    depart_before: str
    period: str


@tool(policy=LOCAL_COMPUTE, summary="{origin} -> {destination}, {start}..{end}")
def resolve_trip(
    destination: str,
    ctx: ToolContext,
    origin: str | None = None,
    dates: dict[str, str] | None = None,
    daypart: str | None = None,
) -> TripQuery | None:
    """Where from (the team's city unless said), where to, and when (tomorrow unless said,
    in the part of the day said: 上午 is the morning's flights).

    No trip (``None``: the plan's ``same_city`` reply) when it would leave from where it goes.
    """
    start, end, said = _range(dates, ctx.today() + timedelta(days=1))
    leaving, destination = city_name(origin or HOME_CITY), city_name(destination)
    if leaving == destination:
        return None
    period = said or _day_word(start, ctx)
    after, before = WHOLE_DAY
    if daypart in DAYPARTS:
        after, before, zh, en = DAYPARTS[daypart]
        period = f"{period}{zh}" if ctx.language == "zh" else f"{period} {en}"
    return TripQuery(
        origin=leaving,
        destination=destination,
        start=str(start),
        end=str(end),
        depart_after=after,
        depart_before=before,
        period=period,
    )


class Weeks(BaseModel):
    week: str
    """The ISO week reported (e.g. 2026-W47)."""
    previous_week: str
    """The week before it, to compare with."""
    period: str


def iso_week(day: date) -> str:
    year, week, _ = day.isocalendar()
    return f"{year}-W{week:02d}"


@tool(policy=LOCAL_COMPUTE, summary="{week} vs {previous_week}")
def resolve_weeks(ctx: ToolContext, dates: dict[str, str] | None = None) -> Weeks:
    """The ISO week the user means (last week unless said) and the week before it."""
    start, _, said = _range(dates, ctx.today() - timedelta(days=7))
    return Weeks(
        week=iso_week(start), previous_week=iso_week(start - timedelta(days=7)), period=said
    )


class TrendWeeks(BaseModel):
    """Eight ISO weeks, oldest first, ending with last week."""

    w1: str
    w2: str
    w3: str
    w4: str
    w5: str
    w6: str
    w7: str
    w8: str


@tool(policy=LOCAL_COMPUTE, summary="{w1}..{w8}")
def resolve_trend_weeks(ctx: ToolContext) -> TrendWeeks:
    """The eight weeks up to last week: a plan of eight fetches (over the step limit)."""
    last = ctx.today() - timedelta(days=7)
    weeks = [iso_week(last - timedelta(days=7 * n)) for n in range(7, -1, -1)]
    return TrendWeeks(**{f"w{n}": week for n, week in enumerate(weeks, 1)})


# --------------------------------------------------------------------------- analysis


class RegionFigures(BaseModel):
    region: str
    region_en: str
    total_cny: int
    orders: int


class WeekFigures(BaseModel):
    """What ``fetch_sales`` returns for one week (the fields the analysis reads)."""

    week: str
    total_cny: int
    orders: int
    regions: list[RegionFigures]


class WeekOverWeek(BaseModel):
    """The week-over-week analysis: every number the reply and the post may quote."""

    week: str
    previous_week: str
    total_cny: int
    previous_total_cny: int
    change_pct: float
    orders: int
    previous_orders: int
    orders_change_pct: float
    top_region: str
    top_region_change_pct: float
    weak_region: str
    weak_region_change_pct: float
    trend: str
    """up / down / flat (within 1 %)."""
    summary: str
    """The conclusion to post to the group, in the run's language."""


def _pct(now: int, before: int) -> float:
    return round((now - before) * 100 / before, 1) if before else 0.0


@tool(policy=LOCAL_COMPUTE, summary="{week}: {change_pct}% vs {previous_week}")
def compute_wow(this_week: WeekFigures, last_week: WeekFigures, ctx: ToolContext) -> WeekOverWeek:
    """Week-over-week change of total sales, orders and each region; code, not a model."""
    before = {r.region: r for r in last_week.regions}
    changes = sorted(
        (_pct(r.total_cny, before[r.region].total_cny), r.region, r.region_en)
        for r in this_week.regions
        if r.region in before
    )
    if not changes:
        raise ToolFailedError("the two weeks share no region", hint="check fetch_sales")
    zh = ctx.language == "zh"
    weak, top = changes[0], changes[-1]
    change = _pct(this_week.total_cny, last_week.total_cny)
    values: dict[str, Any] = {
        "week": this_week.week,
        "previous_week": last_week.week,
        "total_cny": this_week.total_cny,
        "previous_total_cny": last_week.total_cny,
        "change_pct": change,
        "orders": this_week.orders,
        "previous_orders": last_week.orders,
        "orders_change_pct": _pct(this_week.orders, last_week.orders),
        "top_region": top[1] if zh else top[2],
        "top_region_change_pct": top[0],
        "weak_region": weak[1] if zh else weak[2],
        "weak_region_change_pct": weak[0],
        "trend": "flat" if abs(change) < 1 else ("up" if change > 0 else "down"),
    }
    assert ctx.render is not None, "the runtime always sets ToolContext.render"
    summary = ctx.render(f"sales_post_{values['trend']}", values)
    return WeekOverWeek(**values, summary=summary)


class Trend(BaseModel):
    first_week: str
    last_week: str
    best_week: str
    best_total_cny: int
    worst_week: str
    worst_total_cny: int
    change_pct: float
    """Last week's total against the first week's."""


@tool(policy=LOCAL_COMPUTE, summary="{first_week}..{last_week}: {change_pct}%")
def compute_trend(totals: list[int], weeks: list[str]) -> Trend:
    """The best and worst week, and the change from the first week to the last."""
    if not totals or len(totals) != len(weeks):
        raise ToolFailedError("one total per week is needed", hint="check the plan's weeks")
    by_week = list(zip(weeks, totals, strict=True))
    best = max(by_week, key=lambda pair: pair[1])
    worst = min(by_week, key=lambda pair: pair[1])
    return Trend(
        first_week=weeks[0],
        last_week=weeks[-1],
        best_week=best[0],
        best_total_cny=best[1],
        worst_week=worst[0],
        worst_total_cny=worst[1],
        change_pct=_pct(totals[-1], totals[0]),
    )
