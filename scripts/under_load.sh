#!/usr/bin/env bash
# Run the whole suite N times in a row (default 10) while two busy loops load the machine;
# stop at the first failing run. Usage: bash scripts/under_load.sh [N] [pytest args]
# Proves that no test depends on wall-clock timing (issue 8). Logs go to .under-load/.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}
shift || true
mkdir -p .under-load
sh -c 'while :; do :; done' & busy1=$!
sh -c 'while :; do :; done' & busy2=$!
trap 'kill $busy1 $busy2 2>/dev/null || true' EXIT
for i in $(seq 1 "$runs"); do
  start=$(date +%s)
  if .venv/bin/python -m pytest -q -p no:cacheprovider "$@" > ".under-load/run-$i.txt" 2>&1; then
    echo "run $i/$runs passed in $(( $(date +%s) - start )) s: $(tail -n 1 ".under-load/run-$i.txt")"
  else
    echo "run $i/$runs FAILED (see .under-load/run-$i.txt):"
    grep -E "^(FAILED|ERROR)" ".under-load/run-$i.txt" || tail -n 5 ".under-load/run-$i.txt"
    exit 1
  fi
done
echo "all $runs runs passed under load"
