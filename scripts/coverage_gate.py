"""Combine the coverage of the test run and its CLI subprocesses; print it; hold the floor.

Usage: python scripts/coverage_gate.py [--floor PERCENT]

Prints line and branch coverage of ``src/corral`` separately (coverage's own total mixes
the two) and exits 1 when line coverage is below the floor. The floor only rises: raise
``LINE_FLOOR`` when the figure does.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import coverage

LINE_FLOOR = 95.0
ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / ".coverage-data"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--floor", type=float, default=LINE_FLOOR, help="minimum line %%")
    parser.add_argument("--report", action="store_true", help="also list uncovered lines")
    args = parser.parse_args()
    cov = coverage.Coverage(config_file=str(ROOT / "pyproject.toml"))
    if list(DATA.glob("coverage.*")):
        cov.combine()
        cov.save()
    cov.load()
    if args.report:
        cov.report(file=sys.stdout)
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "coverage.json"
        cov.json_report(outfile=str(out))
        report = json.loads(out.read_text())
    totals, files = report["totals"], len(report["files"])
    lines, hit_lines = totals["num_statements"], totals["covered_lines"]
    branches, hit_branches = totals["num_branches"], totals["covered_branches"]
    line_pct = 100.0 * hit_lines / max(lines, 1)
    branch_pct = 100.0 * hit_branches / max(branches, 1)
    print(f"coverage of src/corral, CLI subprocesses included ({files} files)")
    print(f"  lines:    {line_pct:5.1f} %  ({hit_lines}/{lines})")
    print(f"  branches: {branch_pct:5.1f} %  ({hit_branches}/{branches})")
    if line_pct < args.floor:
        print(f"FAIL: line coverage {line_pct:.1f} % is below the floor of {args.floor:.1f} %")
        return 1
    print(f"ok: line coverage is at or above the floor of {args.floor:.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
