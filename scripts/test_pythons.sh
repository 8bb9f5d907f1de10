#!/usr/bin/env bash
# The run loop on the newer Pythons corral supports, beside the main suite's 3.11: the core
# install (and PostgreSQL's driver, for CI's database) and the tests of the scheduler and its
# eager start (3.12 and newer start a task eagerly themselves; 3.11 takes another path, in
# corral/eager.py), deadlines, concurrency, crash points and the stored log.
# Usage: bash scripts/test_pythons.sh [VERSION...]   (default: 3.12 3.13)
# A version with no interpreter (on PATH or under pyenv) is skipped with a notice, or fails
# the script when CORRAL_REQUIRE_PYTHONS=1 (CI sets it).
set -euo pipefail
cd "$(dirname "$0")/.."
TESTS=(
  tests/test_eager_calls.py tests/test_scheduler.py tests/test_scheduler_paths.py
  tests/test_scheduler_events.py tests/test_concurrency.py tests/test_completion_order.py
  tests/test_tool_deadlines.py tests/test_runtime.py tests/test_sole_attempt.py
  tests/test_stored_format.py tests/test_run_plan.py tests/test_async_tool_calls.py
  tests/test_call_path.py tests/test_gates_and_verifiers.py tests/test_crash_points.py
  tests/test_run_end_cleanup.py tests/test_step_book.py tests/test_stand_in_tools.py
)
find_python() {  # the first that runs: a pyenv shim on PATH may not run this version
  local version=$1 candidate
  for candidate in "$(command -v "python$version" 2>/dev/null || true)" \
    $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$version".*/bin/"python$version" \
      2>/dev/null | sort -rV); do
    if [ -n "$candidate" ] && "$candidate" --version >/dev/null 2>&1; then
      echo "$candidate"
      return
    fi
  done
}
versions=("$@")
[ "${#versions[@]}" -gt 0 ] || versions=(3.12 3.13)
for version in "${versions[@]}"; do
  if ! [[ $version =~ ^3\.[0-9]+$ ]]; then
    echo "not a Python version: '$version' (3.12, 3.13...)" >&2
    exit 2
  fi
  python=$(find_python "$version")
  if [ -z "$python" ]; then
    echo "== python$version: not found"
    [ "${CORRAL_REQUIRE_PYTHONS:-0}" = 1 ] && exit 1
    continue
  fi
  echo "== pytest on $("$python" --version) ($python)"
  venv=".venv-py$version"
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet -c constraints.txt -e ".[postgres]" \
    pytest pytest-asyncio hypothesis
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "${TESTS[@]}"
done
