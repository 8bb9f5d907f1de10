#!/usr/bin/env bash
# Set up (a .venv with corral and its dev tools) and run every check: ruff, mypy --strict,
# pytest under coverage (CLI subprocesses and xdist workers counted), over up to 4 cores.
# Usage: bash scripts/test.sh [pytest args]
# The whole suite must keep line coverage at or above the floor in scripts/coverage_gate.py;
# a run with pytest args (a subset) prints its coverage without holding the floor.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/venv.sh dev,postgres
echo "== ruff"
.venv/bin/ruff check src tests examples benchmarks
.venv/bin/ruff format --check src tests examples benchmarks
echo "== mypy --strict"
.venv/bin/mypy src
echo "== pytest (under coverage)"
rm -rf .coverage-data && mkdir .coverage-data
# pytest-xdist spreads the tests over the cores (each worker its own PostgreSQL database:
# tests/conftest.py); CORRAL_TEST_WORKERS=0 runs them in this one process.
cores=$(nproc 2>/dev/null || echo 2)
workers=${CORRAL_TEST_WORKERS:-$((cores < 4 ? cores : 4))}
.venv/bin/python -m coverage run -m pytest -n "$workers" --dist worksteal "$@"
echo "== coverage"
if [ "$#" -eq 0 ]; then
  .venv/bin/python scripts/coverage_gate.py
else
  .venv/bin/python scripts/coverage_gate.py --floor 0
fi
