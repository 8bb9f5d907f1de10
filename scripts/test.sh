#!/usr/bin/env bash
# Set up (a .venv with corral and its dev tools) and run every check: ruff, mypy --strict,
# pytest. Usage: bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/venv.sh dev,postgres
echo "== ruff"
.venv/bin/ruff check src tests examples benchmarks
.venv/bin/ruff format --check src tests examples benchmarks
echo "== mypy --strict"
.venv/bin/mypy src
echo "== pytest"
.venv/bin/python -m pytest "$@"
