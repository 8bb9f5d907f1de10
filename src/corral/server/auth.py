"""The bearer token: where it comes from, and the check in front of every data route.

The token is ``CORRAL_API_TOKEN`` (or one given to ``create_app``); without one, the
server makes one on first start and keeps it in ``<home>/api-token`` (0600, written
atomically), so a restart keeps the dashboard's link working. The check is a pure ASGI
middleware, the outermost layer: it runs before routing, body parsing and any store read,
so a request without the token learns nothing (401 whether or not the run exists).
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from starlette.types import ASGIApp, Receive, Scope, Send

from corral.errors import ConfigInvalidError, ErrorCode
from corral.files import owned_private, write_private
from corral.server.replies import error_response

TOKEN_ENV = "CORRAL_API_TOKEN"
TOKEN_FILE = "api-token"
OPEN_PATHS = ("/healthz",)
"""Routes anyone may call: they hold no data."""
OPEN_PREFIXES = ("/ui/",)
"""The dashboard's static files: they hold no data; the page asks the API with the token."""


@dataclass(frozen=True)
class Token:
    """The server's token, and the file it was read from or written to (None: the env)."""

    value: str
    file: Path | None


def resolve_token(home: Path, environ: Mapping[str, str]) -> Token:
    """``CORRAL_API_TOKEN``, else the home's token file, else a new one stored there."""
    given = environ.get(TOKEN_ENV, "").strip()
    if given:
        return Token(given, None)
    path = home / TOKEN_FILE
    if path.exists():
        if not owned_private(path):
            raise ConfigInvalidError(
                f"{path} is readable by other users or not a file of ours",
                hint=f"chmod 600 {path}, or delete it to have a new token made",
            )
        stored = path.read_text(encoding="utf-8").strip()
        if stored:
            return Token(stored, path)
    token = secrets.token_urlsafe(32)
    write_private(path, token.encode())
    return Token(token, path)


def needs_token(path: str) -> bool:
    """Every route but the health check and the dashboard's static files."""
    return path not in OPEN_PATHS and path != "/ui" and not path.startswith(OPEN_PREFIXES)


class BearerAuth:
    """Refuse, with 401, any request to a data route without ``Authorization: Bearer TOKEN``.

    Tokens are compared as bytes with ``hmac.compare_digest``: the time taken does not
    tell how much of a guess was right. The scheme is read without regard to case, as
    HTTP says (``bearer`` is ``Bearer``); the token must match exactly.
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not needs_token(scope["path"]):
            await self.app(scope, receive, send)
            return
        given = b""
        for name, value in scope["headers"]:
            if name == b"authorization":
                given = value
                break
        scheme, _, credentials = given.partition(b" ")
        if scheme.lower() == b"bearer" and hmac.compare_digest(credentials, self.expected):
            await self.app(scope, receive, send)
            return
        response = error_response(
            401,
            ErrorCode.UNAUTHORIZED,
            "a valid API token is required",  # "bearer token" would read as a credential
            "send Authorization: Bearer TOKEN (CORRAL_API_TOKEN, or the token file "
            "`corral serve` named when it started)",
        )
        response.headers["WWW-Authenticate"] = "Bearer"
        await response(scope, receive, send)
