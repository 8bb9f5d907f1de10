"""The ops example's business API: weather, weekly sales and two flight searches, on loopback.

A real HTTP service that the example's ``setup`` starts as a subprocess (``tools.py``), so
corral's HTTP tools meet real sockets, status codes and latency, not mocks:

- ``GET /weather/{city}``: the forecast for a city (Chinese or English name) over a range
  of dates. The table is the month's mean moved by a 14-day pattern (``data/``), so every
  date has a forecast and the demo works on any day.
- ``GET /sales/{week}``: an ISO week's sales by region (fixed, repeatable demo figures).
- ``GET /flights/fast`` and ``GET /flights/cheap``: the same flights; the fast search
  answers at once and costs more per call, the cheap one takes 300-800 ms.
- ``POST /faults``: arm a fault for the next requests to a path (a status such as 503 or
  429 with ``Retry-After``, a delay, a malformed or oversized body). Faults live in the
  example's SQLite file, which the group-chat MCP server reads too (``mcp:<tool>`` paths).
  Tests and the eval use them; ``GET /health`` says the service is up.

Run: ``python api.py [--state FILE]`` binds 127.0.0.1 on a free port and prints
``OPS_API_PORT=<port>`` as its first line; it exits when its stdin closes, so it never
outlives the process that started it. ``python api.py --openapi`` prints the OpenAPI
document (``openapi.json`` beside this file is that output).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import socket
import sys
import threading
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ops_state import die_with_parent, open_state, take_fault

DATA = Path(__file__).resolve().parents[1] / "data"
MAX_DAYS = 14
"""The longest range one forecast or flight search covers."""
WEEK = r"^\d{4}-W\d{2}$"
SNOW_BELOW_C = 2
"""A wet day whose high is at most this falls as snow."""


def _load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DATA / name).read_text(encoding="utf-8"))
    return loaded


def _fraction(*parts: object) -> float:
    """A fixed number in [0, 1) for ``parts``: repeatable demo variation, no randomness."""
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


# --------------------------------------------------------------------------- faults


class Fault(BaseModel):
    """What the next ``times`` requests to ``path`` (a prefix) meet instead of an answer."""

    path: str = Field(description="Path prefix, e.g. /flights/fast; mcp:<tool> for the MCP server")
    status: int | None = Field(None, ge=400, le=599, description="Answer with this status")
    times: int = Field(1, ge=1, le=100)
    retry_after: float | None = Field(None, ge=0, description="Retry-After seconds (with 429/503)")
    delay_s: float | None = Field(None, ge=0, le=30, description="Wait this long first")
    body: str | None = Field(None, pattern="^(malformed|oversized)$")
    crash: bool = Field(False, description="mcp:<tool> only: the MCP server dies mid-call")


class Armed(BaseModel):
    armed: list[Fault]


class Health(BaseModel):
    status: str


# --------------------------------------------------------------------------- weather


class Cities:
    """The cities of ``data/cities.json``, found by Chinese or English name."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = _load("cities.json")["cities"]
        self.pattern: list[dict[str, Any]] = _load("weather_pattern.json")["days"]

    def find(self, name: str) -> tuple[int, dict[str, Any]]:
        wanted = name.strip().lower()
        for index, row in enumerate(self.rows):
            if wanted in (row["zh"], row["en"].lower(), row["code"].lower()):
                return index, row
        known = ", ".join(f"{r['zh']}/{r['en']}" for r in self.rows)
        raise HTTPException(404, f"unknown city {name!r}; known: {known}")

    def day(self, index: int, city: dict[str, Any], day: date) -> DayForecast:
        row = self.pattern[(day.toordinal() + index * 5) % len(self.pattern)]
        month = day.month - 1
        high = city["high"][month] + row["dt"]
        snow = high <= SNOW_BELOW_C and row["rain"] >= 50  # no thunderstorms at -10 °C
        return DayForecast(
            date=day,
            rain_probability=row["rain"],
            high_c=high,
            low_c=city["low"][month] + row["dt"],
            conditions="小雪" if snow else row["zh"],
            conditions_en="light snow" if snow else row["en"],
        )


class DayForecast(BaseModel):
    date: date
    rain_probability: int = Field(description="Chance of rain, percent")
    high_c: int
    low_c: int
    conditions: str
    conditions_en: str


class Forecast(BaseModel):
    """A range's forecast: the wettest day's conditions, the range's extremes, each day."""

    city: str
    city_en: str
    start: date
    end: date
    rain_probability: int = Field(description="The highest chance of rain in the range, percent")
    high_c: int = Field(description="The highest high in the range")
    low_c: int = Field(description="The lowest low in the range")
    conditions: str
    conditions_en: str
    umbrella: bool = Field(description="Rain is likely (50 % or more) on some day")
    days: list[DayForecast]


def _days(start: date, end: date | None) -> list[date]:
    end = end or start
    if end < start or (end - start).days >= MAX_DAYS:
        raise HTTPException(422, f"a range is 1 to {MAX_DAYS} days, start first")
    return [start + timedelta(days=n) for n in range((end - start).days + 1)]


# --------------------------------------------------------------------------- sales


class RegionSales(BaseModel):
    region: str
    region_en: str
    total_cny: int
    orders: int


class WeekSales(BaseModel):
    """One ISO week's sales: the total, the orders, and each region."""

    week: str = Field(description="ISO week, e.g. 2026-W47")
    start: date
    end: date
    total_cny: int
    orders: int
    regions: list[RegionSales]


def week_sales(week: str) -> WeekSales:
    year, number = int(week[:4]), int(week[6:])
    try:
        start = date.fromisocalendar(year, number, 1)
    except ValueError:
        raise HTTPException(422, f"{week} is not an ISO week") from None
    regions = []
    for row in _load("sales.json")["regions"]:
        factor = 0.8 + 0.4 * _fraction(week, row["region"])
        regions.append(
            RegionSales(
                region=row["region"],
                region_en=row["region_en"],
                total_cny=round(row["total_cny"] * factor, -2),
                orders=round(row["orders"] * (factor + 0.1 * _fraction(week, "orders"))),
            )
        )
    return WeekSales(
        week=week,
        start=start,
        end=start + timedelta(days=6),
        total_cny=sum(r.total_cny for r in regions),
        orders=sum(r.orders for r in regions),
        regions=regions,
    )


# --------------------------------------------------------------------------- flights


class Flight(BaseModel):
    flight_no: str
    airline: str
    date: date
    depart: str
    arrive: str
    price_cny: int


class FlightSearch(BaseModel):
    """Flights from ``origin`` to ``destination`` over the dates, earliest first."""

    origin: str
    destination: str
    origin_en: str
    destination_en: str
    count: int
    cheapest_flight_no: str
    cheapest_date: date
    cheapest_depart: str
    cheapest_price_cny: int
    earliest_flight_no: str
    earliest_date: date
    earliest_depart: str
    earliest_price_cny: int
    flights: list[Flight]


def _clock(minutes: int) -> str:
    return f"{minutes // 60 % 24:02d}:{minutes % 60:02d}"


def _number(airline: str, start: dict[str, Any], end: dict[str, Any]) -> int:
    """The flight number of an airline's daily flight on a route: fixed, four digits."""
    return 1000 + int(8999 * _fraction(airline, start["code"], end["code"]))


CLOCK = r"^(([01]\d|2[0-3]):[0-5]\d|24:00)$"
"""A departure-window bound, HH:MM (24:00 is the end of the day)."""


def search(
    cities: Cities,
    origin: str,
    destination: str,
    days: list[date],
    window: tuple[str, str] = ("00:00", "24:00"),
) -> FlightSearch:
    """The flights over ``days`` that leave within ``window`` (from, before; HH:MM)."""
    (_, start), (_, end) = cities.find(origin), cities.find(destination)
    if start is end:
        raise HTTPException(422, "origin and destination are the same city")
    flights = []
    for day in days:
        for airline in _load("flights.json")["airlines"]:
            if not window[0] <= airline["depart"] < window[1]:
                continue
            hours, minutes = map(int, airline["depart"].split(":"))
            leaves = hours * 60 + minutes
            fare = airline["fare"] * (0.85 + 0.3 * _fraction(day, airline["code"], end["code"]))
            flights.append(
                Flight(
                    flight_no=f"{airline['code']}{_number(airline['code'], start, end)}",
                    airline=airline["zh"],
                    date=day,
                    depart=airline["depart"],
                    arrive=_clock(leaves + airline["minutes"]),
                    price_cny=int(round(fare, -1)),
                )
            )
    if not flights:
        raise HTTPException(404, "no flights leave in that window")
    cheapest = min(flights, key=lambda f: (f.price_cny, f.date, f.depart))
    earliest = flights[0]
    return FlightSearch(
        origin=start["zh"],
        destination=end["zh"],
        origin_en=start["en"],
        destination_en=end["en"],
        count=len(flights),
        cheapest_flight_no=cheapest.flight_no,
        cheapest_date=cheapest.date,
        cheapest_depart=cheapest.depart,
        cheapest_price_cny=cheapest.price_cny,
        earliest_flight_no=earliest.flight_no,
        earliest_date=earliest.date,
        earliest_depart=earliest.depart,
        earliest_price_cny=earliest.price_cny,
        flights=flights,
    )


# --------------------------------------------------------------------------- the app


def create_app(state: Path) -> FastAPI:
    """The service over the state file ``state`` (armed faults)."""
    app = FastAPI(
        title="corral ops example API",
        version="1.0.0",
        description="Weather, weekly sales and flight searches for the corral ops example.",
    )
    cities = Cities()
    conn = open_state(state)
    lock = threading.Lock()

    @app.middleware("http")
    async def faults(request: Request, call_next: Any) -> Any:
        path = request.url.path
        if path in ("/health", "/faults"):
            return await call_next(request)
        with lock:
            fault = take_fault(conn, path)
        if fault is None:
            return await call_next(request)
        if fault["delay_s"]:
            await asyncio.sleep(fault["delay_s"])
        if fault["body"] == "malformed":
            return Response('{"rain_probability": 40, "high', media_type="application/json")
        if fault["body"] == "oversized":
            padding = '"' + "x" * (8 * 1024 * 1024) + '"'
            return Response('{"padding": ' + padding + "}", media_type="application/json")
        if fault["status"]:
            headers = {}
            if fault["retry_after"] is not None:
                headers["Retry-After"] = f"{fault['retry_after']:g}"
            detail = {"detail": f"injected fault: {fault['status']}"}
            return JSONResponse(detail, status_code=fault["status"], headers=headers)
        return await call_next(request)

    @app.get("/health", operation_id="health", response_model=Health)
    async def health() -> Health:
        return Health(status="ok")

    @app.post("/faults", operation_id="armFault", response_model=Armed)
    async def arm(fault: Fault) -> Armed:
        with lock:
            conn.execute(
                "INSERT INTO faults (path, status, times, retry_after, delay_s, body, crash) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    fault.path,
                    fault.status,
                    fault.times,
                    fault.retry_after,
                    fault.delay_s,
                    fault.body,
                    int(fault.crash),
                ),
            )
        return await armed()

    @app.get("/faults", operation_id="listFaults", response_model=Armed)
    async def armed() -> Armed:
        with lock:
            rows = conn.execute("SELECT * FROM faults ORDER BY id").fetchall()
        fields = Fault.model_fields
        return Armed(armed=[Fault(**{k: row[k] for k in fields}) for row in rows])

    @app.delete("/faults", operation_id="clearFaults", response_model=Armed)
    async def clear() -> Armed:
        with lock:
            conn.execute("DELETE FROM faults")
        return Armed(armed=[])

    @app.get("/weather/{city}", operation_id="getForecast", response_model=Forecast)
    async def forecast(
        city: str = PathParam(description="City name, Chinese or English"),
        start: date = Query(description="First day"),
        end: date | None = Query(None, description="Last day (default: the first)"),
    ) -> Forecast:
        index, row = cities.find(city)
        days = [cities.day(index, row, day) for day in _days(start, end)]
        wettest = max(days, key=lambda d: d.rain_probability)
        return Forecast(
            city=row["zh"],
            city_en=row["en"],
            start=days[0].date,
            end=days[-1].date,
            rain_probability=wettest.rain_probability,
            high_c=max(d.high_c for d in days),
            low_c=min(d.low_c for d in days),
            conditions=wettest.conditions,
            conditions_en=wettest.conditions_en,
            umbrella=wettest.rain_probability >= 50,
            days=days,
        )

    @app.get("/sales/{week}", operation_id="fetchSales", response_model=WeekSales)
    async def sales(week: str = PathParam(pattern=WEEK, description="ISO week")) -> WeekSales:
        return week_sales(week)

    @app.get("/flights/fast", operation_id="searchFlightsFast", response_model=FlightSearch)
    async def flights_fast(
        origin: str = Query(),
        destination: str = Query(),
        start: date = Query(),
        end: date = Query(),
        depart_after: str = Query("00:00", pattern=CLOCK, description="Leaves at or after"),
        depart_before: str = Query("24:00", pattern=CLOCK, description="Leaves before"),
    ) -> FlightSearch:
        """The fast search: answers at once, and costs more per call."""
        return search(cities, origin, destination, _days(start, end), (depart_after, depart_before))

    @app.get("/flights/cheap", operation_id="searchFlightsCheap", response_model=FlightSearch)
    async def flights_cheap(
        origin: str = Query(),
        destination: str = Query(),
        start: date = Query(),
        end: date = Query(),
        depart_after: str = Query("00:00", pattern=CLOCK, description="Leaves at or after"),
        depart_before: str = Query("24:00", pattern=CLOCK, description="Leaves before"),
    ) -> FlightSearch:
        """The cheap search: the same flights, after 300-800 ms."""
        await asyncio.sleep(0.3 + 0.5 * _fraction(origin, destination, start, end))
        return search(cities, origin, destination, _days(start, end), (depart_after, depart_before))

    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", type=Path, help="SQLite file for armed faults")
    parser.add_argument("--openapi", action="store_true", help="Print the OpenAPI document")
    args = parser.parse_args(argv)
    if args.openapi:
        document = create_app(Path(":memory:")).openapi()
        print(json.dumps(document, ensure_ascii=False, indent=2, sort_keys=True))
        return
    import uvicorn

    state = args.state or Path(os.environ.get("OPS_STATE", "ops-state.db"))
    app = create_app(state)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    print(f"OPS_API_PORT={sock.getsockname()[1]}", flush=True)
    sys.stdout = sys.stderr  # the parent reads one line; nothing else goes to its pipe
    die_with_parent()
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    main()
