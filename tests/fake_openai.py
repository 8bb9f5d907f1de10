"""A real HTTP server on loopback that speaks the OpenAI chat-completions protocol.

Each request pops the next scripted behaviour: a reply text, an HTTP status (with extra
headers such as ``Retry-After``), a delay (or an event to wait for), a body that is not
JSON at all, or a body cut off before its declared length (the connection then closes).
Every request body is kept for assertions.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Behaviour:
    text: str = ""
    status: int = 200
    delay_s: float = 0.0
    until: threading.Event | None = None
    """Answer only once this is set: a reply late by exactly as much as a test needs."""
    raw_body: str | None = None
    usage: bool = True
    headers: dict[str, str] = field(default_factory=dict)
    """Extra response headers (``Retry-After``)."""
    truncate: bool = False
    """Send half the body under the full ``content-length``, then close the connection."""
    content_type: str = "application/json"
    message: Any = None
    """The whole ``message`` of the one choice, in place of ``{"content": text}``."""
    usage_counts: dict[str, Any] | None = None
    """The ``usage`` object as sent, in place of the usual counts."""


LLAMA_CPP_JSON_SCHEMA_500 = json.dumps(
    {
        "error": {
            "message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', "
            "'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\", "
            "'input': 'json_schema'}",
            "type": "internal_server_error",
            "param": None,
            "code": None,
        }
    }
)
"""What llama-cpp-python's server answers (HTTP 500) to a ``json_schema`` response format."""


@dataclass
class FakeOpenAI:
    behaviours: list[Behaviour] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)
    """Each request's ``Authorization`` header (the key a client sent)."""
    server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def script(self, *behaviours: Behaviour | str) -> None:
        self.behaviours.extend(
            b if isinstance(b, Behaviour) else Behaviour(text=b) for b in behaviours
        )

    def start(self) -> FakeOpenAI:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                fake.requests.append(body)
                fake.authorizations.append(self.headers.get("authorization"))
                behaviour = (
                    fake.behaviours.pop(0)
                    if fake.behaviours
                    else Behaviour(
                        status=500, raw_body='{"error": {"message": "script exhausted"}}'
                    )
                )
                if behaviour.delay_s:
                    time.sleep(behaviour.delay_s)
                if behaviour.until is not None:
                    behaviour.until.wait(timeout=60)  # the limit only ends a stuck test
                if behaviour.raw_body is not None:
                    payload = behaviour.raw_body.encode()
                elif behaviour.status != 200:
                    payload = json.dumps(
                        {"error": {"message": f"status {behaviour.status}", "type": "test"}}
                    ).encode()
                else:
                    reply: dict[str, Any] = {
                        "id": "chatcmpl-test",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body.get("model", "fake"),
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": behaviour.message
                                if behaviour.message is not None
                                else {"role": "assistant", "content": behaviour.text},
                            }
                        ],
                    }
                    if behaviour.usage:
                        reply["usage"] = behaviour.usage_counts or {
                            "prompt_tokens": 11,
                            "completion_tokens": 7,
                            "total_tokens": 18,
                        }
                    payload = json.dumps(reply).encode()
                try:
                    self.send_response(behaviour.status)
                    self.send_header("content-type", behaviour.content_type)
                    self.send_header("content-length", str(len(payload)))
                    for name, value in behaviour.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    if behaviour.truncate:
                        self.wfile.write(payload[: len(payload) // 2])
                        self.wfile.flush()
                        self.close_connection = True
                        return
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
