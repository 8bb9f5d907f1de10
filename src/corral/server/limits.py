"""The request body limit, enforced before anything parses the body.

A body is read into memory up to the limit and then handed on; one that goes past it is
answered 413 at once, whether it declared its size (``Content-Length``) or came in chunks
without one, and the route never runs, so an oversized request changes nothing.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from corral.errors import ErrorCode
from corral.server.replies import error_response

DEFAULT_BODY_LIMIT = 64 * 1024
"""Bytes: room for a message of the default ``limits.max_message_chars`` many times over."""


class BodyLimit:
    """Answer 413 ``INPUT_TOO_LARGE`` to a request whose body is over ``limit`` bytes."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            await self._refuse(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client left: let the app see it
                await self.app(scope, replayed([], message, receive), send)
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._refuse(scope, receive, send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body: Message = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, replayed([body], None, receive), send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(
            413,
            ErrorCode.INPUT_TOO_LARGE,
            f"the request body is over {self.limit} bytes",
            "send a shorter message",
        )
        response.headers["Connection"] = "close"  # the rest of the body is never read
        await response(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


def replayed(messages: list[Message], last: Message | None, receive: Receive) -> Receive:
    """A ``receive`` that gives ``messages`` (then ``last``) first, then the real one's."""
    queue = [*messages, *([last] if last is not None else [])]

    async def receive_next() -> Message:
        if queue:
            return queue.pop(0)
        return await receive()

    return receive_next
