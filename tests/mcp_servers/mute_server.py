"""An MCP server over stdio that answers ``initialize`` and then nothing, ever.

Raw JSON-RPC (no SDK), as a wedged or half-written server behaves: a client that waits
for its ``tools/list`` without a deadline waits forever. It exits when its stdin closes.
"""

from __future__ import annotations

import json
import sys

for line in sys.stdin:
    message = json.loads(line)
    if message.get("method") == "initialize":
        answer = {
            "jsonrpc": "2.0",
            "id": message["id"],
            "result": {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "mute", "version": "0"},
            },
        }
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
