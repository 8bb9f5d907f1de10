"""Mutation testing of the modules where a silent bug costs most (mutmut).

Usage: python scripts/mutation.py [--quick] [--json] [--sample N] [--seed S] [--jobs N]

Plants one small bug at a time (a flipped comparison, a dropped call, a changed constant)
in the modules listed under ``[tool.mutmut] only_mutate`` in pyproject.toml, runs the tests
that reach the mutated function, and counts the mutants the suite kills. ``--quick``
checks a fixed, seeded sample of the mutants (``--sample``, ``--seed``), so its figure is
comparable from run to run; without it every mutant is checked.

Prints a table per module (on stderr with ``--json``) and, with ``--json``, one JSON object
``{"killed", "survived", "timeout", "score"}`` on stdout, where score = (killed + timeout)
/ (killed + survived + timeout): a mutant that hangs the tests is caught, and a mutant no
test reaches counts as survived. The survivors, each with its diff, go to
``mutants/survivors.txt``; the per-module figures to ``mutants/report.json``.

Runs under .venv (created with the ``mutation`` extra if missing), from the repository root.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
QUICK_SAMPLE = 100
QUICK_SEED = 8

# mutmut's verdicts, folded into the three this report counts.
KILLED = {"killed", "caught by type check"}
TIMEOUT = {"timeout", "segfault"}  # segfault here is mutmut's SIGKILL after its time limit


def main() -> int:
    args = parse_args()
    ensure_mutmut()
    os.chdir(ROOT)
    log = sys.stderr if args.json else sys.stdout
    names = generate_mutants()
    chosen = sorted(random.Random(args.seed).sample(names, min(args.sample, len(names))))
    if not args.quick:
        chosen = names
    print(f"mutation testing: {len(chosen)} of {len(names)} mutants", file=log, flush=True)
    run_mutmut(chosen, args.jobs, log)
    verdicts = read_verdicts(chosen)
    summary = summarise(verdicts)
    by_module = per_module(verdicts)
    write_reports(verdicts, by_module, summary)
    print_table(by_module, summary, log)
    if args.json:
        print(json.dumps(summary))
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="check a fixed, seeded sample")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--sample", type=int, default=QUICK_SAMPLE, help="mutants in --quick")
    parser.add_argument("--seed", type=int, default=QUICK_SEED, help="seed of the --quick sample")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="parallel workers")
    return parser.parse_args()


def ensure_mutmut() -> None:
    """Re-run this script under .venv with mutmut installed (the ``mutation`` extra)."""
    try:
        import mutmut  # noqa: F401
    except ImportError:
        if Path(sys.prefix).resolve() == VENV_PYTHON.parents[1].resolve():
            raise  # already in .venv: the extra failed to install
        subprocess.run(
            ["bash", "scripts/venv.sh", "dev,postgres,mutation"],
            cwd=ROOT,
            check=True,
            stdout=sys.stderr,
        )
        os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), *sys.argv])


def generate_mutants() -> list[str]:
    """Write every mutant into mutants/ and return their names, sorted.

    This is the first step of ``mutmut run`` (mutmut 3.8's own functions, in its order),
    without the test run that follows it: the sample is drawn from these names.
    """
    from mutmut.__main__ import create_mutants, store_lines_covered_by_tests
    from mutmut.mutation.trampoline import set_mutant_under_test
    from mutmut.utils.file_utils import copy_also_copy_files, copy_src_dir, setup_source_paths

    set_mutant_under_test("mutant_generation")
    Path("mutants").mkdir(exist_ok=True)
    with contextlib.redirect_stdout(sys.stderr):  # stdout is for the JSON summary
        copy_src_dir()
        copy_also_copy_files()
        setup_source_paths()
        store_lines_covered_by_tests()
        create_mutants(os.cpu_count() or 2)
    set_mutant_under_test("")
    return sorted(name for data in mutation_data() for name in data.exit_code_by_key)


def mutation_data() -> list[Any]:
    """The record mutmut keeps of each mutated file: its mutants and their exit codes."""
    from mutmut.mutation.data import SourceFileMutationData
    from mutmut.utils.file_utils import walk_mutatable_files

    records = []
    for path in walk_mutatable_files():
        record = SourceFileMutationData(path=path)
        record.load()
        records.append(record)
    return records


def run_mutmut(names: list[str], jobs: int, log: Any) -> None:
    """Check ``names`` afresh (named mutants are re-run even when mutmut has a verdict)."""
    mutmut = Path(sys.executable).with_name("mutmut")
    done = subprocess.run(
        [str(mutmut), "run", "--max-children", str(jobs), *names],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"mutmut run failed with exit code {done.returncode}")


def read_verdicts(names: list[str]) -> dict[str, str]:
    """Each chosen mutant's verdict: killed, survived or timeout."""
    from mutmut.stats import status_by_exit_code

    wanted = set(names)
    verdicts = {}
    for data in mutation_data():
        for name, code in data.exit_code_by_key.items():
            if name in wanted:
                status = status_by_exit_code[code]
                verdicts[name] = (
                    "killed" if status in KILLED else "timeout" if status in TIMEOUT else "survived"
                )
    return verdicts


def summarise(verdicts: dict[str, str]) -> dict[str, Any]:
    counts = Counter(verdicts.values())
    killed, survived, timeout = counts["killed"], counts["survived"], counts["timeout"]
    checked = killed + survived + timeout
    score = round((killed + timeout) / checked, 4) if checked else 0.0
    return {"killed": killed, "survived": survived, "timeout": timeout, "score": score}


def module_of(name: str) -> str:
    """``corral.runtime.scheduler.x_f__mutmut_3`` -> ``runtime/scheduler.py``."""
    dotted = name.split(".x", 1)[0].removeprefix("corral.")
    return dotted.replace(".", "/") + ".py"


def per_module(verdicts: dict[str, str]) -> dict[str, dict[str, Any]]:
    modules: dict[str, dict[str, str]] = {}
    for name, verdict in verdicts.items():
        modules.setdefault(module_of(name), {})[name] = verdict
    return {module: summarise(group) for module, group in sorted(modules.items())}


def write_reports(
    verdicts: dict[str, str], by_module: dict[str, dict[str, Any]], summary: dict[str, Any]
) -> None:
    from mutmut.mutation.diff_apply import find_mutant, get_diff_for_mutant

    survivors = sorted(name for name, verdict in verdicts.items() if verdict == "survived")
    blocks = []
    for name in survivors:
        diff = get_diff_for_mutant(name, path=find_mutant(name).path)
        blocks.append(f"# {name}\n{diff.rstrip()}\n")
    Path("mutants/survivors.txt").write_text("\n".join(blocks), encoding="utf-8")
    report = {"summary": summary, "modules": by_module, "survivors": survivors}
    Path("mutants/report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")


def print_table(by_module: dict[str, dict[str, Any]], summary: dict[str, Any], log: Any) -> None:
    header = f"{'module':<28} {'killed':>7} {'survived':>9} {'timeout':>8} {'score':>7}"
    print(header, file=log)
    print("-" * len(header), file=log)
    for module, row in [*by_module.items(), ("all", summary)]:
        print(
            f"{module:<28} {row['killed']:>7} {row['survived']:>9} {row['timeout']:>8}"
            f" {row['score']:>7.1%}",
            file=log,
        )
    print("survivors and their diffs: mutants/survivors.txt", file=log, flush=True)


if __name__ == "__main__":
    sys.exit(main())
