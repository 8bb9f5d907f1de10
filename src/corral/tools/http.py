"""HTTP endpoints as tools: one pooled ``httpx.AsyncClient`` per agent.

An HTTP tool is an ordinary ``ToolSpec`` (``declared_spec``) whose function makes one
request and maps what comes back onto the exceptions function tools raise, so timeouts,
retries, backoff, envelopes, idempotency keys, plan validation and the loop guard are the
function tools' own code path:

- 408 and 429: ``TransientToolError(applied=False)`` (the service did not act), with
  the ``Retry-After`` it sent (seconds or an HTTP date);
- 5xx: ``TransientToolError`` (the outcome of a write is unknown), with ``Retry-After``;
- a connection that could not be made: ``TransientToolError(applied=False)``; a timeout:
  ``TimeoutError``; a connection lost on the way: ``TransientToolError``;
- 404 for a read: no result (``NO_RESULT``), or with ``not_found: error`` a failed call;
  a 2xx without a body (204): no result for a read, and a success without data for a
  write (``DELETE`` answers 204);
- any other status outside 2xx: ``ToolFailedError`` (not retried), except a redirect
  (3xx, never followed) or a 409 to a write, which do not prove it did not act
  (``WriteInDoubtError``: outcome unknown);
- a body that is not JSON, or larger than ``max_response_bytes`` (cut off while it
  streams, before parsing): ``ToolOutputInvalidError``.

The raw response never leaves this module: errors carry the status code only, and the
decoded JSON is cut to the declared output fields by the invoke machinery. The auth
header's value comes from the environment when a call is made; it is never in a message,
and any echo of it in a response is replaced by ``[REDACTED]``. A write sends its
idempotency key as ``Idempotency-Key`` (the same on every retry of the call).

httpx is imported when the first call is made, never at import.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from pydantic_core import to_jsonable_python

from corral.errors import (
    ConfigInvalidError,
    CorralError,
    InvalidArgumentError,
    ToolFailedError,
    ToolOutputInvalidError,
    TransientToolError,
)
from corral.json_values import loads_finite
from corral.tools.declared import CONTEXT_PARAM, AuthConfig, declared_spec
from corral.tools.http_config import (
    IDEMPOTENCY_HEADER,
    PATH_PARAM,
    HttpToolConfig,
    OpenApiConfig,
    ParamIn,
)
from corral.tools.schema_models import object_fields, python_name
from corral.tools.spec import ToolSpec
from corral.tools.transport import redact, resolve_placeholders, secrets_in

if TYPE_CHECKING:
    import httpx

    from corral.tools.context import ToolContext

ACCEPTED_ENCODINGS = "gzip, deflate"
"""What corral inflates itself (bounded by the cap); httpx would add br or zstd when
their packages happen to be installed."""
MAX_MEMBERS = 4096
"""gzip members one answer may hold: an empty one inflates to nothing, so the cap would
not stop a stream of them, and each costs a new inflater (about 9 µs)."""
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class HttpTransport:
    """The agent's HTTP connection pool, shared by all its HTTP tools.

    Opened on the first call in an event loop, and opened again when a call comes from
    another loop (the CLI's interactive commands run one loop per turn): a client belongs
    to the loop it was opened in. ``aclose`` closes it in its own loop, or drops it when
    that loop has ended.
    """

    name = "http"

    def __init__(self, deps: Mapping[str, Any]) -> None:
        self.deps = deps
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def client(self) -> httpx.AsyncClient:
        """The pooled client of the running loop, opened if need be."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop or self._client.is_closed:
            import httpx

            self._client = httpx.AsyncClient(follow_redirects=False)
            self._loop = loop
        return self._client

    def resolve(self, text: str) -> str:
        """``${NAME}`` from the agent's deps, then the environment."""
        return resolve_placeholders(text, self.deps)

    async def aclose(self) -> None:
        """Close the pool; a later call opens a new one."""
        client, loop = self._client, self._loop
        self._client = self._loop = None
        if client is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is running:
            await client.aclose()


_IN_DOUBT = frozenset({*range(300, 400), 409})
"""Statuses that do not prove a write did not act: every redirect (none is followed; a
302 or 303 is how many services say "done, look there", and a 307 may come from a proxy
after the request went on), and 409 Conflict (for a keyed write: a request with the same
key is still running)."""


class WriteInDoubtError(CorralError):
    """A write answered with a status in ``_IN_DOUBT``: its outcome is unknown.

    ``TOOL_FAILED`` and not retried, but not ``ToolFailedError``, which would claim that
    nothing happened: the step ends ``OUTCOME_UNKNOWN``.
    """


class NotSentError(ConfigInvalidError):
    """A call that failed before anything was sent: ``CONFIG_INVALID``, and not applied.

    An unset ``${NAME}`` or auth variable, or a URL that is not one: a write that fails so
    provably did not act, so its outcome is not unknown.
    """

    applied = False


class UnsendableArgumentError(InvalidArgumentError):
    """An argument that cannot go where it must: ``INVALID_ARGUMENT``, and nothing sent.

    An empty path argument (``/users/{id}`` with ``id=""`` would be ``/users/``, the
    collection: another resource), or a header argument that is not printable ASCII (a
    line break would be an injection, other text cannot be encoded).
    """

    applied = False


def path_segment(value: str, where: str) -> str:
    """``value`` as one path segment, which it can never leave.

    Reserved characters are escaped, and so is a segment of dots: ``..`` would otherwise
    be resolved away by URL normalisation, and climb out of the template.
    """
    if not value:
        raise UnsendableArgumentError(f"{where} cannot be empty: it fills a path segment")
    if not value.strip("."):
        return "%2E" * len(value)
    return quote(value, safe="")


def _text(plain: Any) -> str:
    """A JSON argument as the text of a path segment, a header or a query object.

    A string as it is; any other value as JSON writes it (``true``, ``1.5``, ``["a"]``),
    never as Python does (``True``).
    """
    if isinstance(plain, str):
        return plain
    return json.dumps(plain, ensure_ascii=False, separators=(",", ":"))


def _query_value(plain: Any) -> Any:
    """A JSON argument as the query carries it: an object as compact JSON, not Python's repr.

    Scalars stay as they are and a list repeats the name (httpx's own encoding).
    """
    if isinstance(plain, list):
        return [_query_value(item) for item in plain]
    if isinstance(plain, dict):
        return _text(plain)
    return plain


def sendable(value: str) -> bool:
    """Whether ``value`` can be a header's value: printable ASCII, so never a line break."""
    return value.isascii() and value.isprintable()


def header_value(value: str, where: str) -> str:
    """An argument as a header's value, or ``UnsendableArgumentError``."""
    if not sendable(value):
        raise UnsendableArgumentError(f"{where} must be printable ASCII: it is sent as a header")
    return value


def retry_after_s(value: str | None, now: datetime) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (delta seconds or an HTTP date)."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


@dataclass(frozen=True)
class HttpEndpoint:
    """One declared endpoint: arguments in, a result or a function tool's exception out."""

    config: HttpToolConfig
    transport: HttpTransport
    json_names: Mapping[str, str]
    """Argument attribute -> its JSON name (they differ for names such as ``high-c``)."""

    @property
    def label(self) -> str:
        """What errors name: the tool, the method and the URL template (never resolved)."""
        return f"{self.config.name} ({self.config.method} {self.config.url})"

    def _place(self, name: str) -> ParamIn:
        if name in self.config.params_in:
            return self.config.params_in[name]
        if name in PATH_PARAM.findall(self.config.url):
            return "path"
        return "body" if self.config.method in _BODY_METHODS else "query"

    def _headers(self, context: ToolContext) -> tuple[dict[str, str], list[str]]:
        """The headers to send, and the secrets among their values."""
        headers = {"Accept": "application/json", "Accept-Encoding": ACCEPTED_ENCODINGS}
        secrets: list[str] = []
        for name, template in self.config.headers.items():
            headers[name] = self.transport.resolve(template)
            if not sendable(headers[name]):  # the value may be a secret: never shown
                raise ConfigInvalidError(
                    f"the {name} header is not one line of printable ASCII once resolved"
                )
            secrets.extend(secrets_in(template, self.transport.deps))
        if self.config.auth is not None:
            header, secret = _auth_header(self.config.auth)
            headers[self.config.auth.header] = header
            secrets.extend([header, secret])
        if self.config.policy.kind == "write":
            headers[IDEMPOTENCY_HEADER] = context.idempotency_key
        return headers, secrets

    async def call(self, **kwargs: Any) -> Any:
        """One request; the decoded JSON, ``None`` for no result, or a tool exception."""
        import httpx

        context: ToolContext = kwargs.pop(CONTEXT_PARAM)
        try:
            request = self._request(context, kwargs)
        except ConfigInvalidError as exc:  # nothing was sent: a write may be called again
            raise NotSentError(exc.message, hint=exc.hint) from None
        except httpx.InvalidURL:
            raise NotSentError(f"{self.label}: the URL is not valid once resolved") from None
        target, body, headers, secrets = request
        content = None
        if self.config.method in _BODY_METHODS:
            try:  # encoded here, before anything goes out: a NaN argument is never sent
                content = json.dumps(
                    body, ensure_ascii=False, separators=(",", ":"), allow_nan=False
                ).encode()
            except ValueError as exc:
                raise NotSentError(f"{self.label}: the body is not JSON ({exc})") from None
            if not any(name.lower() == "content-type" for name in headers):
                headers = {**headers, "Content-Type": "application/json"}
        try:
            async with self.transport.client().stream(
                self.config.method,
                target,
                content=content,
                headers=headers,
                timeout=httpx.Timeout(self.config.policy.timeout_s),
            ) as response:
                return redact(await self._answer(response), secrets)
        except (httpx.ConnectError, httpx.ConnectTimeout):
            raise TransientToolError(f"{self.label}: could not connect", applied=False) from None
        except httpx.UnsupportedProtocol:
            raise NotSentError(f"{self.label}: the URL needs http:// or https://") from None
        except httpx.TimeoutException:
            raise TimeoutError(f"{self.label}: no answer in time") from None
        except httpx.TransportError as exc:
            raise TransientToolError(f"{self.label}: {type(exc).__name__}") from None

    def _request(
        self, context: ToolContext, arguments: Mapping[str, Any]
    ) -> tuple[httpx.URL, dict[str, Any], dict[str, str], list[str]]:
        """The URL (path and query filled), JSON body, headers, and the secrets among them."""
        import httpx

        url = self.transport.resolve(self.config.url)
        query: dict[str, Any] = {}
        body: dict[str, Any] = {}
        headers, secrets = self._headers(context)
        for attribute, value in arguments.items():
            if value is None:
                continue
            name = self.json_names.get(attribute, attribute)
            plain = to_jsonable_python(value, by_alias=True)
            where = self._place(name)
            if where == "path":
                segment = path_segment(_text(plain), f"{self.label}: {name}")
                url = url.replace(f"{{{name}}}", segment)
            elif where == "query":
                query[name] = _query_value(plain)
            elif where == "header":
                headers[name] = header_value(_text(plain), f"{self.label}: {name}")
            else:
                body[name] = plain
        unfilled = PATH_PARAM.findall(url)  # a value's own braces are escaped
        if unfilled:  # null, or left out: the template's {name} would be sent as it is
            raise UnsendableArgumentError(
                f"{self.label}: {', '.join(unfilled)} cannot be null: it fills a path segment"
            )
        target = httpx.URL(url)  # a query in the template is kept, the arguments added
        return (target.copy_merge_params(query) if query else target), body, headers, secrets

    async def _answer(self, response: httpx.Response) -> Any:
        status = response.status_code
        if status in (408, 429) or status >= 500:
            wait = retry_after_s(response.headers.get("Retry-After"), datetime.now(UTC))
            raise TransientToolError(
                f"{self.label}: HTTP {status}",
                applied=False if status < 500 else None,
                retry_after_s=wait,
            )
        if status == 404 and self.config.policy.kind != "write":
            if self.config.not_found == "error":
                raise ToolFailedError(f"{self.label}: HTTP 404 (not_found: error)")
            return None
        if not 200 <= status < 300:
            if status in _IN_DOUBT and self.config.policy.kind == "write":
                raise WriteInDoubtError(f"{self.label}: HTTP {status}")
            raise ToolFailedError(f"{self.label}: HTTP {status}")
        if status == 204:
            return self._nothing()
        cap = self.config.max_response_bytes
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > cap:
            raise ToolOutputInvalidError(self._too_large(cap))
        body = _Body(response.headers.get("Content-Encoding", ""), cap, self.label)
        async for chunk in response.aiter_raw():
            body.take(chunk)
            if body.too_large:
                raise ToolOutputInvalidError(self._too_large(cap))
        body.end()
        if not body.data.strip():
            return self._nothing()
        charset = response.charset_encoding  # JSON is UTF-8, but older services say GBK
        try:
            return loads_finite(body.data.decode(charset) if charset else body.data)
        except (ValueError, LookupError):  # bad JSON, bad bytes or an unknown charset
            raise ToolOutputInvalidError(f"{self.label}: the response is not valid JSON") from None
        except RecursionError:  # a few KB of "[[[[..." reach the parser's limit
            raise ToolOutputInvalidError(f"{self.label}: the response nests too deep") from None

    def _nothing(self) -> dict[str, Any] | None:
        """A 2xx without a body: a write is done (no data), a read has no result."""
        return {} if self.config.policy.kind == "write" else None

    def _too_large(self, cap: int) -> str:
        return f"{self.label}: the response is larger than {cap} bytes; it was cut off unread"


class _Body:
    """A response body as it streams in, inflated here a bounded piece at a time.

    httpx would inflate each read whole, and 64 KiB of gzip can hold 64 MiB: far past any
    cap. So corral reads the raw bytes and never inflates more than one byte past the cap,
    nor takes more raw bytes than the cap (padding and empty members inflate to nothing).
    It reads what urllib3 reads: gzip of several members (RFC 1952), zero bytes between
    them, and "deflate" with or without its zlib wrapper. What follows a member and does
    not start one (other bytes a server appended) is ignored, as urllib3 and curl do.
    """

    def __init__(self, encoding: str, cap: int, label: str) -> None:
        self.data = bytearray()
        self.cap = cap
        self.label = label
        encoding = encoding.strip().lower()
        self.inflate: zlib._Decompress | None = None
        self.received = 0
        """Raw bytes taken: none (an empty body, whatever its header says) has no end to reach."""
        self.members = 0
        """Members (gzip or zlib streams) that reached their end."""
        self.member_from = 0
        """Where in ``data`` the member being read began."""
        self.in_member = False
        """Bytes went to a member that has not reached its end yet."""
        self.trailing = False
        """What came after a member did not start another: the rest is ignored."""
        self.head: bytes | None = b"" if encoding == "deflate" else None
        """The first bytes of a "deflate" answer until they inflate to something: if they
        have no zlib header, they are read again as a raw stream, as old servers sent it."""
        self.between = False
        """A member has ended and nothing of the next one has come yet."""
        if encoding in ("gzip", "x-gzip", "deflate"):
            self.inflate = zlib.decompressobj(zlib.MAX_WBITS | 32)  # a gzip or zlib header
        elif encoding not in ("", "identity"):
            raise ToolOutputInvalidError(f"{label}: the response is encoded as {encoding}")

    @property
    def too_large(self) -> bool:
        """Past the cap: inflated, or as it came."""
        return len(self.data) > self.cap or self.received > self.cap

    def take(self, chunk: bytes) -> None:
        """Add a raw chunk to ``data``, inflated no further than one byte past the cap."""
        inflate = self.inflate
        self.received += len(chunk)
        if inflate is None:
            self.data += chunk
            return
        if self.head is not None:
            self.head += chunk
        while chunk and not self.too_large and not self.trailing:
            if self.between:  # zero bytes pad members (gzip's rule)
                chunk = chunk.lstrip(b"\0")
                if not chunk:
                    return
                if self.members >= MAX_MEMBERS:
                    raise ToolOutputInvalidError(
                        f"{self.label}: the response has more than {MAX_MEMBERS} gzip members"
                    )
                self.between, self.member_from = False, len(self.data)
                inflate = self.inflate = zlib.decompressobj(zlib.MAX_WBITS | 16)
            try:
                self.data += inflate.decompress(chunk, self.cap + 1 - len(self.data))
            except zlib.error:
                if self.head is not None:  # no zlib header: the bytes so far, read raw
                    chunk, self.head = self.head, None
                    inflate = self.inflate = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                if self.members and len(self.data) == self.member_from:
                    self.trailing, self.in_member = True, False  # it never began: ignored
                    return
                raise ToolOutputInvalidError(
                    f"{self.label}: the response is not valid gzip"
                ) from None
            if self.head is not None and self.data:
                self.head = None  # it inflates: a zlib (or gzip) stream
            self.in_member = True
            chunk = inflate.unconsumed_tail
            if inflate.eof:  # a member ended: what follows may be the next one
                self.members, self.in_member, self.between = self.members + 1, False, True
                chunk = inflate.unused_data + chunk

    def end(self) -> None:
        """The body has all come: an inflated one must have reached its own end.

        A gzip or deflate stream cut short (a dropped connection, a proxy's limit) inflates
        to a part of the answer, or to nothing: taken as it was, a read's answer was "no
        result" and a write's "done, no data". So is a later member cut short.
        """
        cut = self.in_member or (self.received and not self.members)
        if self.inflate is not None and cut and len(self.data) <= self.cap:
            raise ToolOutputInvalidError(f"{self.label}: the compressed response was cut short")


def _auth_header(auth: AuthConfig) -> tuple[str, str]:
    """The auth header's value and the secret in it, read from the environment now."""
    secret = os.environ.get(auth.env, "")
    if not secret:
        raise ConfigInvalidError(
            f"the auth variable {auth.env} is not set", hint=f"export {auth.env}=..."
        )
    if not sendable(secret):  # a token read from a file keeps its newline
        raise ConfigInvalidError(
            f"the auth variable {auth.env} is not one line of printable ASCII",
            hint="strip its trailing newline",
        )
    return (f"{auth.scheme} {secret}" if auth.scheme else secret), secret


def endpoint_spec(config: HttpToolConfig, transport: HttpTransport) -> ToolSpec:
    """The ``ToolSpec`` of one declared endpoint, called over ``transport``."""
    properties, _ = object_fields(config.input, config.name)
    endpoint = HttpEndpoint(config, transport, {python_name(n): n for n in properties})
    return declared_spec(
        config.name,
        config.description,
        endpoint.call,
        input_schema=config.input,
        output_schema=config.output,
        policy=config.policy.to_policy(),
        summary=config.summary,
    )


def http_tools(
    declared: Sequence[HttpToolConfig],
    openapi: Sequence[OpenApiConfig],
    *,
    root: Path | None,
    deps: Mapping[str, Any],
) -> tuple[list[ToolSpec], HttpTransport | None]:
    """The agent's HTTP tools (declared, then imported) and the transport they share."""
    from corral.tools.openapi import openapi_tools

    configs = [*declared]
    for source in openapi:
        configs.extend(openapi_tools(source, root or Path.cwd()))
    if not configs:
        return [], None
    if importlib.util.find_spec("httpx") is None:  # found, not imported: that waits for a call
        raise ConfigInvalidError(
            "HTTP tools need httpx, which is not installed", hint="pip install 'corral[http]'"
        )
    transport = HttpTransport(deps)
    return [endpoint_spec(config, transport) for config in configs], transport
