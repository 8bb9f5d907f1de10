"""A small real HTTP service for the HTTP tool tests, served by uvicorn on loopback.

Each endpoint misbehaves in one way a real service does (slow, 5xx, 429, 400, broken or
endless bodies) and the service keeps a ledger of what it received, so a test sees what
went over the wire: how many calls, which headers, which idempotency keys.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Literal

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel

CHUNK = b" " * 65536
HUGE_CHUNKS = 1024
"""The endless body is 64 MiB of spaces: far more than any cap, and than socket buffers."""


@dataclass
class Ledger:
    """What the service saw."""

    calls: Counter[str] = field(default_factory=Counter)
    """Path -> requests received."""
    headers: list[dict[str, str]] = field(default_factory=list)
    """Every request's headers, in order."""
    keys: list[str | None] = field(default_factory=list)
    """The ``Idempotency-Key`` of every write, in order."""
    posts: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Idempotency key -> the post it made (a repeated key does not post twice)."""
    ports: list[int] = field(default_factory=list)
    """The client's port of every request: one port, one pooled connection."""
    huge_chunks_sent: int = 0

    def reset(self) -> None:
        """Forget everything (the service is shared by a module's tests)."""
        self.calls.clear()
        self.headers.clear()
        self.keys.clear()
        self.posts.clear()
        self.ports.clear()
        self.huge_chunks_sent = 0


class Forecast(BaseModel):
    city: str
    date: date
    rain_probability: float
    high_c: int
    sky: Literal["sun", "rain", "cloud"]


class PostIn(BaseModel):
    channel: str
    text: str


class Posted(BaseModel):
    post_id: int
    channel: str
    idempotency_key: str | None


def forecast(city: str, day: date) -> dict[str, Any]:
    """The forecast table: rain in Shanghai; and a field the tool does not declare."""
    rainy = city == "shanghai"
    return {
        "city": city,
        "date": day.isoformat(),
        "rain_probability": 0.8 if rainy else 0.1,
        "high_c": 12 if rainy else 3,
        "sky": "rain" if rainy else "sun",
        "internal_station_secret": "raw-only-field",
    }


def make_app() -> tuple[FastAPI, Ledger]:
    """A fresh service and its ledger."""
    app = FastAPI(title="test service", servers=[{"url": "http://127.0.0.1:9"}])
    ledger = Ledger()

    @app.middleware("http")
    async def record(request: Request, call_next: Any) -> Response:
        ledger.calls[request.url.path] += 1
        ledger.headers.append(dict(request.headers))
        ledger.ports.append(request.client.port if request.client else 0)
        response: Response = await call_next(request)
        return response

    @app.get("/weather/{city}", operation_id="getForecast", response_model=Forecast)
    async def weather(city: str, date: date) -> dict[str, Any]:
        return forecast(city, date)

    @app.get("/flaky/{city}")
    async def flaky(city: str, date: date, fail: int = 1) -> Response:
        if ledger.calls[f"/flaky/{city}"] <= fail:
            return JSONResponse({"error": "overloaded"}, status_code=503)
        return JSONResponse(forecast(city, date))

    @app.get("/limited/{city}")
    async def limited(city: str, date: date, wait: str = "2") -> Response:
        if ledger.calls[f"/limited/{city}"] == 1:
            return JSONResponse(
                {"error": "slow down"}, status_code=429, headers={"Retry-After": wait}
            )
        return JSONResponse(forecast(city, date))

    @app.get("/refused/{city}")
    async def refused(city: str, date: date) -> Response:
        return JSONResponse({"error": "bad city", "echo": city}, status_code=400)

    @app.get("/slow/{city}")
    async def slow(city: str, date: date) -> Response:
        await asyncio.sleep(30)  # never reached by a test: the tool's timeout is far shorter
        return JSONResponse(forecast(city, date))

    @app.get("/malformed/{city}")
    async def malformed(city: str, date: date) -> Response:
        return Response(b'{"city": "' + city.encode() + b'", "rain', media_type="application/json")

    @app.get("/gzip-cut/{city}")
    async def gzip_cut(city: str, date: date, keep: int = 12) -> Response:
        """The forecast gzipped, and cut after ``keep`` bytes: its stream never ends."""
        body = gzip.compress(json.dumps(forecast(city, date)).encode())[:keep]
        return Response(body, media_type="application/json", headers={"Content-Encoding": "gzip"})

    @app.get("/packed/{city}")
    async def packed(city: str, date: date, how: str) -> Response:
        """The forecast compressed as some servers send it, all of it valid.

        ``members``: gzip in two members, as ``cat a.gz b.gz`` makes (RFC 1952 allows
        it); ``trailing``: one gzip member and zero bytes after it, which gzip, curl and
        urllib3 ignore; ``raw``: "deflate" without the zlib wrapper, as old IIS sent it.
        """
        text = json.dumps(forecast(city, date)).encode()
        encoding = "gzip"
        if how == "members":
            body = gzip.compress(text[:10]) + gzip.compress(text[10:])
        elif how == "trailing":
            body = gzip.compress(text) + bytes(8)
        else:
            packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
            body, encoding = packer.compress(text) + packer.flush(), "deflate"
        return Response(body, media_type="application/json", headers={"Content-Encoding": encoding})

    @app.get("/nan/{city}")
    async def not_a_number(city: str, date: date) -> Response:
        """Python's JSON reader takes NaN; a JSON document has no such number."""
        body = json.dumps({**forecast(city, date), "rain_probability": float("nan")})
        return Response(body.encode(), media_type="application/json")

    @app.get("/huge/{city}")
    async def huge(city: str, date: date) -> Response:
        async def body() -> AsyncIterator[bytes]:
            yield b'{"city": "' + city.encode() + b'", "pad": "'
            for _ in range(HUGE_CHUNKS):
                ledger.huge_chunks_sent += 1
                yield CHUNK
                await asyncio.sleep(0)
            yield b'"}'

        return StreamingResponse(body(), media_type="application/json")

    @app.get("/echo/{city}")
    async def echo(city: str, date: date, request: Request) -> Response:
        seen = request.headers.get("authorization", "")
        if city == "error":
            return JSONResponse({"error": f"token {seen} refused"}, status_code=403)
        return JSONResponse({**forecast(city, date), "city": f"{city} {seen}"})

    @app.post("/posts", operation_id="createPost", status_code=201, response_model=Posted)
    async def post(body: PostIn, request: Request) -> Response:
        fail = int(request.query_params.get("fail", "0"))  # a test's switch, not in the API
        key = request.headers.get("idempotency-key")
        ledger.keys.append(key)
        if len(ledger.keys) <= fail:
            return JSONResponse({"error": "busy"}, status_code=429, headers={"Retry-After": "0"})
        if key is not None and key in ledger.posts:
            return JSONResponse(ledger.posts[key], status_code=201)
        made = {"post_id": len(ledger.posts) + 1, "channel": body.channel, "idempotency_key": key}
        if key is not None:
            ledger.posts[key] = made
        cut = request.query_params.get("cut")  # the answer gzipped and cut: it never ends
        if cut is not None:
            body = gzip.compress(json.dumps(made).encode())[: int(cut)]
            return Response(
                body,
                status_code=201,
                media_type="application/json",
                headers={"Content-Encoding": "gzip"},
            )
        moved = request.query_params.get("moved")  # "done, look there", as many services say
        if moved is not None:
            return Response(
                status_code=int(moved), headers={"Location": f"/posts/{made['post_id']}"}
            )
        return JSONResponse(made, status_code=201)

    return app, ledger
