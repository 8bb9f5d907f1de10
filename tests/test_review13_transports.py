"""Review of issue 13's transports: what a demanding user hits, each pinned by a test.

HTTP tools are called against a real loopback service that records the raw request line;
MCP servers are real processes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT
from tests.extras import REQUIRE_ALL, import_extra

import_extra("fastapi", REQUIRE_ALL)
import_extra("httpx", REQUIRE_ALL)

from fastapi import FastAPI, Request, Response  # noqa: E402

from corral import Agent, FixedEffects, MemoryStore, Runtime, parse_config  # noqa: E402
from corral.errors import ConfigInvalidError  # noqa: E402
from corral.events import ToolAttempt, tool_attempts  # noqa: E402
from tests.one_intent import one_intent  # noqa: E402
from tests.serving import serve_app  # noqa: E402


def gzip_bomb(size: int, head: bytes = b"") -> bytes:
    """``head`` then ``size`` spaces, gzipped: spaces take a thousandth on the wire."""
    import zlib

    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    return packer.compress(head + b" " * size) + packer.flush()


def make_app() -> tuple[FastAPI, list[dict[str, Any]]]:
    """A service that answers every path and records what each request looked like."""
    app = FastAPI()
    seen: list[dict[str, Any]] = []

    @app.middleware("http")
    async def record(request: Request, call_next: Any) -> Response:
        raw = {
            "raw_path": request.scope["raw_path"].decode(),
            "query": request.scope["query_string"].decode(),
            "headers": dict(request.headers),
        }
        seen.append(raw)
        response: Response = await call_next(request)
        return response

    @app.get("/bomb/{name}")
    async def bomb(name: str) -> Response:
        headers = {"Content-Encoding": "gzip"}
        return Response(BOMB, media_type="application/json", headers=headers)

    @app.get("/zipped/{encoding}")
    async def zipped(encoding: str) -> Response:
        import zlib

        body = json.dumps({"name": "zipped"}).encode()
        packed = zlib.compress(body) if encoding == "deflate" else gzip_bomb(0, body)
        headers = {"Content-Encoding": encoding}
        return Response(packed, media_type="application/json", headers=headers)

    @app.api_route("/status/{code}", methods=["GET", "POST"])
    async def status(code: int) -> Response:
        headers = {"Location": "/elsewhere"} if 300 <= code < 400 else {}
        return Response(b'{"error": "x"}', status_code=code, headers=headers)

    @app.get("/gbk/{name}")
    async def gbk(name: str) -> Response:
        body = json.dumps({"name": name}, ensure_ascii=False).encode("gbk")
        return Response(body, headers={"Content-Type": "application/json; charset=gbk"})

    @app.api_route("/empty/{code}", methods=["GET", "POST", "DELETE"])
    async def empty(code: int) -> Response:
        return Response(status_code=code)

    @app.post("/mcp-echo")
    async def mcp_echo(request: Request) -> Response:
        """A minimal streamable-HTTP MCP server whose one tool echoes the auth header."""
        message = await request.json()
        if "id" not in message:
            return Response(status_code=202)  # a notification
        method = message["method"]
        result: dict[str, Any] = {}
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "echo", "version": "0"},
            }
        elif method == "tools/list":
            schema = {"type": "object", "properties": {}}
            result = {"tools": [{"name": "whoami", "inputSchema": schema}]}
        elif method == "tools/call":
            said = request.headers.get("authorization", "").removeprefix("Bearer ")
            result = {"content": [{"type": "text", "text": f"you are {said}"}]}
        answer = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        return Response(json.dumps(answer), media_type="application/json")

    @app.api_route("/mcp-echo", methods=["GET", "DELETE"])
    async def mcp_echo_other() -> Response:
        return Response(status_code=405)

    @app.get("/deep/{name}")
    async def deep(name: str) -> Response:
        return Response(b"[" * 100_000 + b"]" * 100_000, media_type="application/json")

    @app.api_route("/{rest:path}", methods=["GET", "POST", "DELETE"])
    async def anything(rest: str) -> Response:
        return Response(json.dumps({"name": rest}), media_type="application/json")

    return app, seen


BOMB = gzip_bomb(200 << 20)


@pytest.fixture(scope="module")
def service() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    app, seen = make_app()
    with serve_app(app) as base:
        yield base, seen


@pytest.fixture
def seen(service: tuple[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    service[1].clear()
    return service[1]


RAW_SERVER = ROOT / "tests" / "mcp_servers" / "raw_server.py"
NAME_IN = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
NAME_OUT = {"type": "object", "properties": {"name": {"type": "string"}}}


def http_tool(url: str, method: str = "GET", **fields: Any) -> dict[str, Any]:
    return {
        "name": "t",
        "method": method,
        "url": "${BASE}" + url,
        "input": NAME_IN,
        "output": NAME_OUT,
        "policy": {"max_retries": 0},
        **fields,
    }


async def attempts_of(base: str, tool: dict[str, Any], args: dict[str, Any]) -> list[ToolAttempt]:
    steps = [{"id": "s1", "tool": tool["name"], "args": args}]
    config = parse_config(one_intent("go", steps=steps, http_tools=[tool]))
    agent = Agent.build(config, [], deps={"BASE": base})
    async with Runtime(agent, MemoryStore(), effects=FixedEffects()) as runtime:
        summary = await runtime.start("go")
        events = await runtime.events(summary.run_id)
    return list(tool_attempts(e.payload for e in events))


@pytest.mark.parametrize("name", ["..", "."])
async def test_a_path_argument_of_dots_stays_in_its_segment(
    service: tuple[str, list[dict[str, Any]]], seen: list[dict[str, Any]], name: str
) -> None:
    """``DELETE /users/{name}/sessions`` with ``name=".."`` must not become ``DELETE /sessions``."""
    attempts = await attempts_of(service[0], http_tool("/users/{name}/sessions"), {"name": name})
    assert [a.status for a in attempts] == ["success"]
    assert [s["raw_path"] for s in seen] == ["/users/" + "%2E" * len(name) + "/sessions"]


async def test_an_empty_path_argument_is_refused_before_anything_is_sent(
    service: tuple[str, list[dict[str, Any]]], seen: list[dict[str, Any]]
) -> None:
    """``/users/{name}`` with ``name=""`` would be ``/users/``: the collection, not a user."""
    tool = http_tool("/users/{name}", method="DELETE", policy={"kind": "write"})
    attempts = await attempts_of(service[0], tool, {"name": ""})
    assert [(a.error_code, a.applied) for a in attempts] == [("INVALID_ARGUMENT", False)]
    assert seen == []


def test_an_mcp_server_that_never_lists_its_tools_fails_the_load_in_time(tmp_path: Path) -> None:
    """It answers ``initialize`` and then nothing: loading must not hang forever."""
    import_extra("mcp", REQUIRE_ALL)
    mute = {
        "name": "mute",
        "command": ["python", str(RAW_SERVER), "mute"],
        "startup_timeout_s": 1,
        "tools": {"anything": None},
    }
    folder = tmp_path / "agent"
    folder.mkdir()
    config = one_intent("go", steps=[], mcp_servers=[mute])
    (folder / "agent.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    command = [sys.executable, "-m", "corral", "run", str(folder), "go", "--json"]
    done = subprocess.run(
        [*command, "--home", str(tmp_path / "home")],
        capture_output=True,
        text=True,
        timeout=60,  # on a hang: TimeoutExpired, the test fails (and the child is killed)
        cwd=ROOT,
    )
    assert done.returncode != 0
    assert "CONFIG_INVALID" in done.stdout + done.stderr
    assert "mute" in done.stdout + done.stderr


CHARGES = {
    "openapi": "3.0.3",
    "info": {"title": "payments", "version": "1"},
    "paths": {
        "/charges": {
            "post": {
                "operationId": "createCharge",
                "parameters": [
                    {
                        "name": "Idempotency-Key",
                        "in": "header",
                        "required": True,
                        "schema": {"type": "string"},
                    },
                    {
                        "name": "Authorization",
                        "in": "header",
                        "required": True,
                        "schema": {"type": "string"},
                    },
                    {
                        "name": "X-Tenant",
                        "in": "header",
                        "required": True,
                        "schema": {"type": "string"},
                    },
                ],
                "requestBody": {
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {"amount": {"type": "integer"}},
                                "required": ["amount"],
                            }
                        }
                    }
                },
                "responses": {
                    "200": {
                        "description": "ok",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {"name": {"type": "string"}},
                                }
                            }
                        },
                    }
                },
            }
        }
    },
}


async def test_headers_corral_sends_itself_are_not_arguments_of_an_imported_operation(
    service: tuple[str, list[dict[str, Any]]],
    seen: list[dict[str, Any]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stripe-like documents declare ``Idempotency-Key`` and ``Authorization`` parameters.

    Were they arguments, a plan (or a model) would have to invent the key, the same on
    every retry and resume only by luck, and to hold the token; corral sends both itself.
    """
    monkeypatch.setenv("R1_PAY_TOKEN", "r1-pay-token-Qx7")
    (tmp_path / "openapi.json").write_text(json.dumps(CHARGES), encoding="utf-8")
    source = {
        "document": "openapi.json",
        "base_url": "${BASE}",
        "operations": {"createCharge": "charge"},
        "auth": {"env": "R1_PAY_TOKEN", "scheme": "Bearer"},
        "headers": {"X-Tenant": "acme"},
        "policies": {"charge": {"kind": "write"}},
    }
    steps = [{"id": "s1", "tool": "charge", "args": {"amount": 5}}]
    config = parse_config(one_intent("go", steps=steps, openapi=[source]))
    agent = Agent.build(config, [], root=tmp_path, deps={"BASE": service[0]})
    assert set(agent.tools.get("charge").input_model.model_fields) == {"amount"}
    async with Runtime(agent, MemoryStore(), effects=FixedEffects()) as runtime:
        summary = await runtime.start("go")
    assert [s.status.value for s in summary.steps] == ["succeeded"]
    (request,) = seen
    assert request["headers"]["authorization"] == "Bearer r1-pay-token-Qx7"
    assert request["headers"]["x-tenant"] == "acme"
    assert len(request["headers"]["idempotency-key"]) >= 16


def test_a_declared_header_argument_cannot_replace_the_idempotency_key() -> None:
    tool = http_tool("/x", method="POST", params_in={"name": "header"})
    tool["input"] = {
        "type": "object",
        "properties": {"Idempotency-Key": {"type": "string"}},
        "required": ["Idempotency-Key"],
    }
    tool["params_in"] = {"Idempotency-Key": "header"}
    with pytest.raises(ConfigInvalidError, match="Idempotency-Key"):
        parse_config(one_intent("go", steps=[], http_tools=[tool]))


COMPOSED = {
    "allOf": [
        {"$ref": "#/$defs/Page"},
        {
            "properties": {
                "owner": {"allOf": [{"$ref": "#/$defs/Person"}, {"description": "who"}]},
                "items": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["items"],
        },
    ],
    "$defs": {
        "Page": {"type": "object", "properties": {"next": {"type": "string"}}},
        "Person": {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        },
    },
}


def test_an_all_of_of_objects_is_one_object_that_keeps_only_declared_fields() -> None:
    """OpenAPI's usual composition (``allOf: [$ref Base, {properties}]``): the output is
    the union of the members' fields, and an undeclared field (the owner's password) is
    dropped as in any declared output, not let through as ``Any``."""
    from corral.tools.schema_models import model_from_schema

    model = model_from_schema("page", COMPOSED)
    assert {n: f.is_required() for n, f in model.model_fields.items()} == {
        "next": False,
        "owner": False,
        "items": True,
    }
    answer = {"items": ["a"], "owner": {"name": "ann", "password": "hunter2"}, "raw": 1}
    assert model.model_validate(answer).model_dump(exclude_none=True) == {
        "items": ["a"],
        "owner": {"name": "ann"},
    }
    looped = {"allOf": [{"$ref": "#/$defs/B"}], "$defs": {"B": {"allOf": [{"$ref": "#/$defs/B"}]}}}
    assert model_from_schema("looped", looped).model_fields == {}  # a cycle ends, as for $ref


def test_an_operation_whose_body_is_not_json_is_refused_at_load(tmp_path: Path) -> None:
    """A form body cannot be sent: importing it as a tool without arguments would send
    nothing, and the service would fail every call."""
    form = json.loads(json.dumps(CHARGES))
    operation = form["paths"]["/charges"]["post"]
    operation["parameters"] = []
    schema = operation["requestBody"]["content"].pop("application/json")
    operation["requestBody"]["content"]["application/x-www-form-urlencoded"] = schema
    (tmp_path / "openapi.json").write_text(json.dumps(form), encoding="utf-8")
    source = {
        "document": "openapi.json",
        "base_url": "http://127.0.0.1:9",
        "operations": {"createCharge": "charge"},
    }
    steps = [{"id": "s1", "tool": "charge", "args": {}}]
    config = parse_config(one_intent("go", steps=steps, openapi=[source]))
    with pytest.raises(ConfigInvalidError, match="x-www-form-urlencoded"):
        Agent.build(config, [], root=tmp_path)


@pytest.mark.parametrize("mode", ["bad_output", "malformed"])
async def test_an_mcp_answer_that_breaks_its_output_schema_is_not_quoted_in_the_log(
    tmp_path: Path, mode: str
) -> None:
    """The SDK's schema error quotes the offending content: the envelope must not.

    ``malformed`` (found by a hostile review): an answer that is no tool result at all
    was ``TOOL_FAILED`` quoting it ("ValidationError: ... input_value='...'")."""
    import_extra("mcp", REQUIRE_ALL)
    server = {
        "name": "bank",
        "command": ["python", str(RAW_SERVER), mode],
        "tools": {"balance": {"max_retries": 0}},
    }
    steps = [{"id": "s1", "tool": "balance", "args": {}}]
    config = parse_config(one_intent("go", steps=steps, mcp_servers=[server]))
    agent = Agent.build(config, [], root=tmp_path)
    async with Runtime(agent, MemoryStore(), effects=FixedEffects()) as runtime:
        summary = await runtime.start("go")
        events = await runtime.events(summary.run_id)
    (attempt,) = list(tool_attempts(e.payload for e in events))
    assert attempt.error_code == "TOOL_OUTPUT_INVALID"
    assert "ACCOUNT-SECRET-42" not in json.dumps([e.payload for e in events], default=str)


async def test_a_compressed_body_is_cut_off_at_the_cap_as_it_is_inflated(
    service: tuple[str, list[dict[str, Any]]], seen: list[dict[str, Any]]
) -> None:
    """200 MB of spaces in 200 KB of gzip, under a 1 MiB cap: the cap holds for what is
    inflated, not what was sent; memory never holds more than about the cap."""
    import tracemalloc

    tool = {**http_tool("/bomb/{name}"), "max_response_bytes": 1 << 20}
    tracemalloc.start()
    try:
        attempts = await attempts_of(service[0], tool, {"name": "x"})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [a.error_code for a in attempts] == ["TOOL_OUTPUT_INVALID"]
    assert "larger than 1048576 bytes" in (attempts[0].error_message or "")
    assert peak < 32 << 20  # inflating a whole 64 KiB read at once made 64 MiB


@pytest.mark.parametrize(
    ("encoding", "code"),
    [("gzip", None), ("deflate", None), ("br", "TOOL_OUTPUT_INVALID")],
)
async def test_a_compressed_answer_is_read_when_it_is_one_corral_asked_for(
    service: tuple[str, list[dict[str, Any]]],
    seen: list[dict[str, Any]],
    encoding: str,
    code: str | None,
) -> None:
    attempts = await attempts_of(service[0], http_tool("/zipped/{name}"), {"name": encoding})
    assert [a.error_code for a in attempts] == [code]
    if code is None:
        assert attempts[0].data == {"name": "zipped"}
    assert seen[0]["headers"]["accept-encoding"] == "gzip, deflate"


def test_json_names_that_would_share_one_attribute_are_refused_not_merged() -> None:
    """``x-y`` and ``x_y`` are two fields: one silently shadowing the other loses data."""
    from corral.errors import ConfigInvalidError as Invalid
    from corral.tools.schema_models import model_from_schema

    both = {"type": "object", "properties": {"x-y": {"type": "string"}, "x_y": {"type": "string"}}}
    with pytest.raises(Invalid, match="'x-y' and 'x_y'"):
        model_from_schema("t", both)


def test_a_field_named_like_pydantic_s_own_config_is_an_ordinary_field() -> None:
    from corral.tools.schema_models import model_from_schema

    schema = {
        "type": "object",
        "properties": {"Config": {"type": "string"}},
        "required": ["Config"],
    }
    model = model_from_schema("t", schema, extra="forbid")
    assert model.model_validate({"Config": "x"}).model_dump(by_alias=True) == {"Config": "x"}


@pytest.mark.parametrize("value", ["上海", "a\r\nX-Evil: 1"])
async def test_a_header_argument_that_cannot_be_a_header_is_refused_unsent(
    service: tuple[str, list[dict[str, Any]]], seen: list[dict[str, Any]], value: str
) -> None:
    """Not a traceback, not a retry of a request that was never sent, never an injection."""
    tool = http_tool("/x", method="POST", params_in={"name": "header"}, policy={"kind": "write"})
    attempts = await attempts_of(service[0], tool, {"name": value})
    assert [(a.error_code, a.applied, a.retryable) for a in attempts] == [
        ("INVALID_ARGUMENT", False, False)
    ]
    assert seen == []


async def test_a_token_with_a_line_break_is_a_config_error_that_sends_nothing(
    service: tuple[str, list[dict[str, Any]]],
    seen: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A token read from a file keeps its newline: that is the config's fault, said so once
    (not retried as a network failure, not an unknown write), and the token is not shown."""
    monkeypatch.setenv("R1_NL_TOKEN", "r1-secret-token\n")
    auth = {"env": "R1_NL_TOKEN", "scheme": "Bearer"}
    tool = http_tool("/x", method="POST", auth=auth, policy={"kind": "write"})
    attempts = await attempts_of(service[0], tool, {"name": "a"})
    assert [(a.error_code, a.applied) for a in attempts] == [("CONFIG_INVALID", False)]
    assert "R1_NL_TOKEN" in (attempts[0].error_message or "")
    assert "r1-secret-token" not in (attempts[0].error_message or "")
    assert seen == []


async def test_an_object_in_the_query_is_sent_as_json_not_as_python(
    service: tuple[str, list[dict[str, Any]]], seen: list[dict[str, Any]]
) -> None:
    tool = http_tool("/search")
    tool["input"] = {
        "type": "object",
        "properties": {
            "filter": {"type": "object", "properties": {"city": {"type": "string"}}},
            "tags": {"type": "array", "items": {"type": "string"}},
            "exact": {"type": "boolean"},
        },
    }
    args = {"filter": {"city": "上海"}, "tags": ["a", "b"], "exact": True}
    attempts = await attempts_of(service[0], tool, args)
    assert [a.status for a in attempts] == ["success"]
    from urllib.parse import parse_qsl

    query = parse_qsl(seen[0]["query"])
    assert query == [
        ("filter", '{"city":"上海"}'),
        ("tags", "a"),
        ("tags", "b"),
        ("exact", "true"),
    ]


SETUP_TOOLS = """
from pathlib import Path

from corral import tool

MARKS = Path(__file__).parent / "marks.txt"


def setup(data_dir: Path):
    MARKS.write_text(MARKS.read_text() + "open\\n" if MARKS.exists() else "open\\n")
    yield {}
    MARKS.write_text(MARKS.read_text() + "closed\\n")


@tool
def greet() -> str:
    \"\"\"Say hello.\"\"\"
    return "hello"
"""


def test_a_load_that_fails_after_setup_runs_its_teardown(tmp_path: Path) -> None:
    """``corral run AGENT MSG --model typo``: setup started a service, the model name is
    wrong; the service must be stopped then, not left to the end of the process."""
    from corral import load_agent

    folder = tmp_path / "agent"
    folder.mkdir()
    config = one_intent("hi", steps=[{"id": "s1", "tool": "greet", "args": {}}])
    (folder / "agent.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    (folder / "tools.py").write_text(SETUP_TOOLS, encoding="utf-8")
    with pytest.raises(ConfigInvalidError, match="unknown model"):
        load_agent(folder, model_name="typo")
    assert (folder / "marks.txt").read_text().split() == ["open", "closed"]


@pytest.mark.parametrize("status", [303, 409])
async def test_a_write_answered_303_or_409_may_have_acted_so_its_outcome_is_unknown(
    service: tuple[str, list[dict[str, Any]]], seen: list[dict[str, Any]], status: int
) -> None:
    """303 See Other: done, look there. 409 to a keyed write: a request with the same key
    is still running. Neither proves the write did not happen: "failed" would be a lie."""
    tool = http_tool(f"/status/{status}", method="POST", policy={"kind": "write"})
    config = parse_config(
        one_intent(
            "go", steps=[{"id": "s1", "tool": "t", "args": {"name": "a"}}], http_tools=[tool]
        )
    )
    agent = Agent.build(config, [], deps={"BASE": service[0]})
    async with Runtime(agent, MemoryStore(), effects=FixedEffects()) as runtime:
        summary = await runtime.start("go")
    assert [s.error_code for s in summary.steps] == ["OUTCOME_UNKNOWN"]
    assert len(seen) == 1


async def test_a_read_answered_409_is_a_plain_failure(
    service: tuple[str, list[dict[str, Any]]], seen: list[dict[str, Any]]
) -> None:
    attempts = await attempts_of(service[0], http_tool("/status/409"), {"name": "a"})
    assert [(a.error_code, a.retryable) for a in attempts] == [("TOOL_FAILED", False)]


async def test_a_json_body_in_the_charset_its_content_type_names_is_read(
    service: tuple[str, list[dict[str, Any]]], seen: list[dict[str, Any]]
) -> None:
    """Older Chinese services answer GBK and say so: ``application/json; charset=gbk``."""
    attempts = await attempts_of(service[0], http_tool("/gbk/{name}"), {"name": "上海"})
    assert [(a.status, a.data) for a in attempts] == [("success", {"name": "上海"})]


@pytest.mark.parametrize(("method", "status"), [("DELETE", 204), ("POST", 202), ("POST", 200)])
async def test_a_write_answered_2xx_without_a_body_succeeded(
    service: tuple[str, list[dict[str, Any]]],
    seen: list[dict[str, Any]],
    method: str,
    status: int,
) -> None:
    """``DELETE`` answers 204 No Content; a queued job 202 with nothing to say. The write
    is done: it is not "no result" (a failed step), nor an unparsable body (unknown)."""
    tool = http_tool(f"/empty/{status}", method=method, policy={"kind": "write"})
    tool["output"] = {"type": "object", "properties": {"id": {"type": "string"}}}
    steps = [{"id": "s1", "tool": "t", "args": {"name": "a"}}]
    config = parse_config(one_intent("go", steps=steps, http_tools=[tool]))
    agent = Agent.build(config, [], deps={"BASE": service[0]})
    async with Runtime(agent, MemoryStore(), effects=FixedEffects()) as runtime:
        summary = await runtime.start("go")
    assert [(s.status.value, s.error_code) for s in summary.steps] == [("succeeded", None)]


async def test_a_read_answered_204_has_no_result(
    service: tuple[str, list[dict[str, Any]]], seen: list[dict[str, Any]]
) -> None:
    attempts = await attempts_of(service[0], http_tool("/empty/204"), {"name": "a"})
    assert [a.status for a in attempts] == ["no_result"]


def charges_with(parameters: list[dict[str, Any]]) -> dict[str, Any]:
    """The charges document with these parameters instead of its own."""
    document = json.loads(json.dumps(CHARGES))
    document["paths"]["/charges"]["post"]["parameters"] = parameters
    return document


@pytest.mark.parametrize(
    ("parameters", "problem"),
    [
        (
            [{"name": "session", "in": "cookie", "required": True, "schema": {"type": "string"}}],
            "cookie",
        ),
        (
            [
                {"name": "amount", "in": "query", "schema": {"type": "integer"}},
            ],
            "both a parameter and a body field",
        ),
        (
            [
                {"name": "v", "in": "query", "schema": {"type": "integer"}},
                {"name": "v", "in": "header", "schema": {"type": "string"}},
            ],
            "'v' is both",
        ),
    ],
)
def test_parameters_corral_cannot_send_as_declared_fail_the_load(
    tmp_path: Path, parameters: list[dict[str, Any]], problem: str
) -> None:
    """A required cookie would be missing from every call; a name in two places would
    be sent in one of them only: both are load errors, never a silently broken tool."""
    (tmp_path / "openapi.json").write_text(json.dumps(charges_with(parameters)), "utf-8")
    source = {
        "document": "openapi.json",
        "base_url": "http://127.0.0.1:9",
        "operations": {"createCharge": "charge"},
    }
    steps = [{"id": "s1", "tool": "charge", "args": {"amount": 1}}]
    config = parse_config(one_intent("go", steps=steps, openapi=[source]))
    with pytest.raises(ConfigInvalidError, match=problem):
        Agent.build(config, [], root=tmp_path)


def test_an_mcp_server_echoing_its_auth_header_has_it_redacted(
    service: tuple[str, list[dict[str, Any]]],
    seen: list[dict[str, Any]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As for HTTP tools: a ``${NAME}`` in a header is a secret, and an answer that
    echoes it (a debug endpoint, an error page) has it replaced before it is stored."""
    import_extra("mcp", REQUIRE_ALL)
    monkeypatch.setenv("R1_MCP_TOKEN", "r1-mcp-token-Kd9")
    server = {
        "name": "echo",
        "url": service[0] + "/mcp-echo",
        "headers": {"Authorization": "Bearer ${R1_MCP_TOKEN}"},
        "tools": {"whoami": {"max_retries": 0}},
    }
    steps = [{"id": "s1", "tool": "whoami", "args": {}}]
    config = parse_config(one_intent("go", steps=steps, mcp_servers=[server]))
    agent = Agent.build(config, [], root=tmp_path)

    async def run() -> list[Any]:
        async with Runtime(agent, MemoryStore(), effects=FixedEffects()) as runtime:
            summary = await runtime.start("go")
            return [e.payload for e in await runtime.events(summary.run_id)]

    import asyncio

    events = asyncio.run(run())
    (attempt,) = list(tool_attempts(events))
    assert attempt.data == {"value": "you are [REDACTED]"}
    assert any(s["headers"].get("authorization") == "Bearer r1-mcp-token-Kd9" for s in seen)
    assert "r1-mcp-token-Kd9" not in json.dumps(events, default=str)


def test_corral_run_prints_a_finished_run_even_when_the_teardown_fails(tmp_path: Path) -> None:
    """The run is done and stored (perhaps a write): hiding its summary behind the
    teardown's error invites the user to run it again. The failure is still said."""
    from tests.helpers import corral_cli

    folder = tmp_path / "agent"
    folder.mkdir()
    config = one_intent("hi", steps=[{"id": "s1", "tool": "greet", "args": {}}])
    (folder / "agent.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    failing = SETUP_TOOLS.replace(
        '    MARKS.write_text(MARKS.read_text() + "closed\\n")', '    raise RuntimeError("stuck")'
    )
    assert failing != SETUP_TOOLS
    (folder / "tools.py").write_text(failing, encoding="utf-8")
    done = corral_cli(tmp_path / "home", "run", str(folder), "hi", "--json", ok=False)
    assert json.loads(done.stdout)["status"] == "finished"
    assert "teardown" in done.stderr and "stuck" in done.stderr


async def test_a_boolean_in_the_path_or_a_header_is_written_as_json_writes_it(
    service: tuple[str, list[dict[str, Any]]], seen: list[dict[str, Any]]
) -> None:
    """``true``, as in the query and the body: never Python's ``True``."""
    tool = http_tool("/flags/{on}", params_in={"dry": "header"})
    tool["input"] = {
        "type": "object",
        "properties": {"on": {"type": "boolean"}, "dry": {"type": "boolean"}},
        "required": ["on"],
    }
    attempts = await attempts_of(service[0], tool, {"on": True, "dry": False})
    assert [a.status for a in attempts] == ["success"]
    assert seen[0]["raw_path"] == "/flags/true"
    assert seen[0]["headers"]["dry"] == "false"


async def test_a_json_body_nested_beyond_reason_is_an_invalid_output(
    service: tuple[str, list[dict[str, Any]]], seen: list[dict[str, Any]]
) -> None:
    """100 000 nested arrays in 200 KB: the parser's recursion limit, not a tool failure."""
    tool = http_tool("/deep/{name}")
    tool["output"] = {"type": "array"}
    attempts = await attempts_of(service[0], tool, {"name": "a"})
    assert [(a.error_code, a.retryable) for a in attempts] == [("TOOL_OUTPUT_INVALID", False)]
    assert "nests too deep" in (attempts[0].error_message or "")


async def test_an_mcp_text_answer_nested_beyond_reason_is_an_invalid_output(
    tmp_path: Path,
) -> None:
    import_extra("mcp", REQUIRE_ALL)
    server = {
        "name": "deep",
        "command": ["python", str(RAW_SERVER), "deep"],
        "tools": {"deep": {"max_retries": 0}},
    }
    steps = [{"id": "s1", "tool": "deep", "args": {}}]
    config = parse_config(one_intent("go", steps=steps, mcp_servers=[server]))
    agent = Agent.build(config, [], root=tmp_path)
    async with Runtime(agent, MemoryStore(), effects=FixedEffects()) as runtime:
        summary = await runtime.start("go")
        events = await runtime.events(summary.run_id)
    (attempt,) = list(tool_attempts(e.payload for e in events))
    assert (attempt.error_code, attempt.retryable) == ("TOOL_OUTPUT_INVALID", False)


def test_an_mcp_server_that_never_initializes_fails_the_load_in_time(tmp_path: Path) -> None:
    """A guard (this held before the review): ``startup_timeout_s`` bounds ``initialize``."""
    import_extra("mcp", REQUIRE_ALL)
    server = {
        "name": "silent",
        "command": ["python", str(RAW_SERVER), "silent"],
        "startup_timeout_s": 1,
        "tools": {"anything": None},
    }
    steps = [{"id": "s1", "tool": "anything", "args": {}}]
    config = parse_config(one_intent("go", steps=steps, mcp_servers=[server]))
    with pytest.raises(ConfigInvalidError, match="'silent'"):
        Agent.build(config, [], root=tmp_path)
