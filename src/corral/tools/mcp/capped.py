"""An HTTP client for MCP servers that reads no answer past a size.

The SDK reads a streamable HTTP server's answer to a request whole (a JSON body, or the
server-sent events of that request) before corral sees it: a server answering 100 MB, or
streaming without end, held that much memory (1.4 GB in five seconds of an endless
stream) until the call's deadline. HTTP tools are cut off at ``max_response_bytes`` as
they stream; an MCP server's answers are cut off here, at ``MAX_ANSWER_BYTES``: the
request fails as a broken connection would, and memory stays at about the cap.

Only the answers to requests (``POST``) are counted: the ``GET`` stream a server may keep
open for its own notifications lives as long as the session, and carries no answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx2
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

MAX_ANSWER_BYTES = 8 * 1024 * 1024
"""The most an MCP server may send in answer to one request. A tool's result over its
``max_output_chars`` (100 000 by default) is refused anyway; this bounds what is read
before that check can run."""


class AnswerTooLargeError(httpx2.ReadError):
    """An answer past ``MAX_ANSWER_BYTES``: its connection is dropped unread."""


class _Counted(httpx2.AsyncByteStream):
    """A response body that fails once more than ``cap`` bytes have come."""

    def __init__(self, inner: Any, cap: int) -> None:
        self._inner = inner
        self._cap = cap

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._cap:
                raise AnswerTooLargeError(f"the server's answer is over {self._cap} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CappedTransport(httpx2.AsyncBaseTransport):
    """``inner``, with each answer to a ``POST`` counted as it streams in."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, cap: int) -> None:
        self._inner = inner
        self._cap = cap

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if request.method != "POST":
            return response
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_Counted(response.stream, self._cap),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def capped_client(headers: Mapping[str, str], cap: int = MAX_ANSWER_BYTES) -> httpx2.AsyncClient:
    """The SDK's own client (its timeouts, no redirects followed), reading answers to ``cap``."""
    return httpx2.AsyncClient(
        headers=dict(headers),
        timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
        transport=_CappedTransport(httpx2.AsyncHTTPTransport(), cap),
    )
