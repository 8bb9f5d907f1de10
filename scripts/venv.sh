#!/usr/bin/env bash
# Create .venv if needed and install corral into it (editable) with the given extras.
# Usage: bash scripts/venv.sh [EXTRAS], e.g. bash scripts/venv.sh dev,postgres
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
# llama-cpp-python (the `local` extra) is built from source: portable, without llava.
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# Ranges live in pyproject.toml; the exact versions CI tested are pinned in constraints.txt.
.venv/bin/python -m pip install --quiet -c constraints.txt -e ".${1:+[$1]}"
