"""A hand-written MCP server over stdio (raw JSON-RPC, no SDK), misbehaving on purpose.

``raw_server.py MODE``:
- ``silent``: reads its requests and answers none, not even ``initialize``;
- ``mute``: answers ``initialize`` and then nothing, ever (a wedged server: a client that
  waits for ``tools/list`` without a deadline waits for ever);
- ``bad_output``: offers ``balance()`` with an output schema (``{"balance": integer}``)
  and answers it with structured content that breaks it, holding a value that must
  never reach a log (``ACCOUNT-SECRET-42``);
- ``deep``: offers ``deep()`` without an output schema, and answers text that is JSON
  nested 40 000 levels deep;
- ``malformed``: offers ``balance()`` without an output schema, and answers it with a
  result that is no MCP tool result (its content a string, holding ``SECRET``);
- ``doubled``: lists ``balance`` twice, the second time taking a required ``account``
  (a listing that swaps the schema a plan was checked against);
- ``repeated``: lists ``balance`` twice, the same entry both times.
- ``echo``: answers ``balance()`` with text quoting ``$RAW_ECHO`` (a value the config
  passes in ``env``);
- ``nan``: answers ``balance()`` with text ``{"balance": NaN}``.

It exits when its stdin closes.
"""

from __future__ import annotations

import json
import os
import sys

MODE = sys.argv[1]
SECRET = "ACCOUNT-SECRET-42"
BALANCE = {
    "name": "balance",
    "description": "The account's balance.",
    "inputSchema": {"type": "object", "properties": {}},
    "outputSchema": {
        "type": "object",
        "properties": {"balance": {"type": "integer"}},
        "required": ["balance"],
    },
}


def answer(message: dict[str, object], result: dict[str, object]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}))
    sys.stdout.write("\n")
    sys.stdout.flush()


for line in sys.stdin:
    message = json.loads(line)
    method = message.get("method")
    if "id" not in message or MODE == "silent":
        continue  # a notification, or a server that never answers
    if method == "initialize":
        params = message["params"]
        assert isinstance(params, dict)
        answer(
            message,
            {
                "protocolVersion": params["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": MODE, "version": "0"},
            },
        )
    elif MODE == "deep" and method == "tools/list":
        answer(message, {"tools": [{"name": "deep", "inputSchema": BALANCE["inputSchema"]}]})
    elif MODE == "deep" and method == "tools/call":
        nested = "[" * 40_000 + "]" * 40_000
        answer(message, {"content": [{"type": "text", "text": nested}], "isError": False})
    elif MODE == "malformed" and method == "tools/list":
        listed = {k: v for k, v in BALANCE.items() if k != "outputSchema"}
        answer(message, {"tools": [listed]})
    elif MODE == "malformed" and method == "tools/call":
        answer(message, {"content": SECRET, "isError": False})
    elif MODE == "doubled" and method == "tools/list":
        account = {"type": "object", "properties": {"account": {"type": "string"}}}
        swapped = {**BALANCE, "inputSchema": {**account, "required": ["account"]}}
        answer(message, {"tools": [BALANCE, swapped]})
    elif MODE == "repeated" and method == "tools/list":
        answer(message, {"tools": [BALANCE, BALANCE]})
    elif MODE == "bad_output" and method == "tools/list":
        answer(message, {"tools": [BALANCE]})
    elif MODE == "bad_output" and method == "tools/call":
        wrong = {"balance": SECRET}
        text = [{"type": "text", "text": json.dumps(wrong)}]
        answer(message, {"content": text, "structuredContent": wrong, "isError": False})
    elif MODE in ("echo", "nan") and method == "tools/list":
        listed = {k: v for k, v in BALANCE.items() if k != "outputSchema"}
        answer(message, {"tools": [listed]})
    elif MODE == "echo" and method == "tools/call":
        text = [{"type": "text", "text": "your value is " + os.environ.get("RAW_ECHO", "")}]
        answer(message, {"content": text, "isError": False})
    elif MODE == "nan" and method == "tools/call":
        answer(message, {"content": [{"type": "text", "text": '{"balance": NaN}'}]})
