#!/usr/bin/env bash
# Set up (a .venv with corral) and run the offline demo: the after-sales agent on SQLite,
# rules and templates. No model, no network. The install includes the server, http and mcp
# extras, so `scripts/demo.sh --example ops` runs the ops example on its loopback services, and
# `corral serve` and its dashboard run from the same .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/venv.sh server,http,mcp
exec .venv/bin/corral demo "$@"
