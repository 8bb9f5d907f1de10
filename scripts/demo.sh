#!/usr/bin/env bash
# Set up (a .venv with corral) and run the offline demo: the after-sales agent on SQLite,
# rules and templates. No model, no network.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/venv.sh
exec .venv/bin/corral demo "$@"
