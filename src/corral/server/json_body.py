"""JSON bodies read one way only: a key given twice, or JSON too deep to read, is refused.

JSON's last key wins in Python (and FastAPI), the first in some proxies, firewalls and
audit logs. ``{"approve": false, "approve": true}`` was logged as a rejection there and
approved here: one body, two readings, and a write ran. Refused before the route runs,
so it changes nothing. A body nested too deeply, or with a number too long to convert,
was answered as "not JSON text" (``INVALID_INPUT``, the code of text that is not UTF-8):
it is JSON, just not JSON this server reads, which is ``INVALID_ARGUMENT``.

A body that is not JSON at all, or not UTF-8, is left to FastAPI's own answers.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from corral.errors import ErrorCode
from corral.server.limits import replayed
from corral.server.replies import error_response


class RepeatedKeyError(ValueError):
    """An object of the body names ``key`` twice."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _each_key_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``' object hook: the object, or ``RepeatedKeyError``."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise RepeatedKeyError(key)
        out[key] = value
    return out


def json_problem(body: bytes) -> str | None:
    """Why this server will not read ``body`` as it was meant; ``None``: nothing to say.

    Text that is not JSON (or not UTF-8) is ``None`` too: FastAPI answers it.
    """
    try:
        json.loads(body, object_pairs_hook=_each_key_once)
    except RepeatedKeyError as exc:
        return f"the body gives the key {exc.key!r} more than once"
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    except (RecursionError, ValueError) as exc:  # nested too deep; a number over 4300 digits
        return f"the body is JSON this server cannot read ({type(exc).__name__})"
    return None


def _is_json(scope: Scope) -> bool:
    """Whether FastAPI would read the body as JSON (its own test of the content type)."""
    for name, value in scope["headers"]:
        if name == b"content-type":
            kind = bytes(value).decode("latin-1").split(";")[0].strip().lower()
            return kind == "application/json" or kind.endswith("+json")
    return False


class OneReadingJson:
    """Answer 422 ``INVALID_ARGUMENT`` to a JSON body that ``json_problem`` refuses."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _is_json(scope):
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left: let the app see it
                await self.app(scope, replayed(messages, message, receive), send)
                return
            messages.append(message)
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        problem = json_problem(b"".join(chunks))
        if problem is None:
            await self.app(scope, replayed(messages, None, receive), send)
            return
        hint = "send each key once, in JSON no deeper than a few levels"
        response = error_response(422, ErrorCode.INVALID_ARGUMENT, problem, hint)
        await response(scope, receive, send)
