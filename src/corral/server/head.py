"""``HEAD``: every route that answers ``GET`` answers ``HEAD`` too, with no body.

FastAPI's routes take only the methods they name, so a ``HEAD`` was a 405: load
balancers, uptime monitors and ``curl -I`` probe ``/healthz`` and the dashboard with
``HEAD`` and saw a healthy server as down. HTTP (RFC 9110 §9.3.2) asks for the status and
headers ``GET`` would give. One middleware, outside every other layer, gives them for
every route at once (a route added later included) and leaves the routes and the OpenAPI
schema as they are: the request goes on as a ``GET``, so the token is checked exactly as
for one, and a route that takes no ``GET`` still answers 405 with its ``Allow`` header.
"""

from __future__ import annotations

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HeadAsGet:
    """Answer a ``HEAD`` as its ``GET`` is answered: the same status and headers, no body.

    The ``GET`` is stopped once its headers are sent. Its body is never needed, and a
    ``GET`` that never ends (``/runs/{id}/stream``, Server-Sent Events) would otherwise
    hold a ``HEAD`` open for as long as the run goes on. The server's own scope keeps
    ``HEAD`` (only the app's copy says ``GET``), so uvicorn frames the answer as one to a
    ``HEAD``: its ``Content-Length`` is the ``GET`` body's, and no body follows it.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return
        with anyio.CancelScope() as answered:

            async def headers_only(message: Message) -> None:
                if message["type"] != "http.response.start":
                    return  # the body, or what follows it: a HEAD has none
                await send(message)
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                answered.cancel()  # the GET goes no further than its next await

            await self.app(dict(scope, method="GET"), receive, headers_only)
