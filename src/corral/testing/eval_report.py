"""What an eval report says beyond its figures: changes since a baseline, and Markdown.

``corral eval --json`` prints the report as one JSON object; saved, it is the baseline of
the next run (``--baseline``), which then lists the cases that regressed (passed then, fail
now), the ones fixed, and the failure modes (how a case ended) that are new. The Markdown
form is for a pull request or ``docs/``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from corral.errors import ConfigInvalidError


def load_baseline(path: Path) -> dict[str, Any]:
    """A report saved from ``corral eval --json``; ``CONFIG_INVALID`` when it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigInvalidError(f"baseline {path}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise ConfigInvalidError(
            f"baseline {path} is not a report of `corral eval --json`",
            hint="save one with: corral eval AGENT_DIR --json > baseline.json",
        )
    return data


def _by_case(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    rows = report.get("results", [])
    return {str(r["case"]): r for r in rows if isinstance(r, dict) and "case" in r}


def compare(report: dict[str, Any], baseline: dict[str, Any]) -> dict[str, list[str]]:
    """Cases that regressed or were fixed since ``baseline``, and failure modes new now."""
    now, then = _by_case(report), _by_case(baseline)
    shared = sorted(set(now) & set(then))
    old_modes = {r.get("outcome") for r in then.values() if not r.get("passed")}
    new_modes = sorted(
        {str(r.get("outcome")) for r in now.values() if not r.get("passed")} - old_modes
    )
    return {
        "regressions": [c for c in shared if then[c].get("passed") and not now[c].get("passed")],
        "fixes": [c for c in shared if not then[c].get("passed") and now[c].get("passed")],
        "new_failure_modes": new_modes,
        "new_cases": sorted(set(now) - set(then)),
    }


def _rate(value: Any) -> str:
    return "n/a" if value is None else f"{float(value) * 100:.1f} %"


def markdown(report: dict[str, Any], title: str) -> str:
    """The report as Markdown: tiers, the five metrics, the must-be-zero counts, failures."""
    metrics, zero = report.get("metrics", {}), report.get("must_be_zero", {})
    lines = [f"# {title}", "", f"{report.get('cases', 0)} cases", ""]
    faults = report.get("faults", {})
    if report.get("fault_profile"):
        injected = ", ".join(f"{k} ×{n}" for k, n in faults.get("injected", {}).items())
        lines += [
            f"Faults: `{report['fault_profile']}`, seed {report.get('seed', 0)} "
            f"({faults.get('cases_with_faults', 0)} cases met a fault: {injected or 'none'})",
            "",
        ]
    lines += ["| tier | pass rate |", "|---|---|"]
    lines += [f"| {tier} | {_rate(rate)} |" for tier, rate in report.get("tiers", {}).items()]
    lines += ["", "| metric | value |", "|---|---|"]
    for name in ("task_success_rate", "partial_completion_rate", "recoverability"):
        lines.append(f"| {name.replace('_', ' ')} | {_rate(metrics.get(name))} |")
    lines.append(f"| verifiability | {_rate(metrics.get('verifiability'))} |")
    for name, spread in metrics.get("cost", {}).items():
        lines.append(
            f"| {name.replace('_', ' ')} per case (mean / p50 / p95) | "
            f"{spread['mean']:g} / {spread['p50']:g} / {spread['p95']:g} |"
        )
    lines += ["", "| must be zero | count |", "|---|---|"]
    lines += [f"| {name.replace('_', ' ')} | {count} |" for name, count in zero.items()]
    changes = report.get("since_baseline")
    if changes:
        lines += ["", "## Since the baseline", ""]
        for name, cases in changes.items():
            lines.append(f"- {name.replace('_', ' ')}: {', '.join(cases) or 'none'}")
    failures = report.get("failures", [])
    if failures:
        lines += ["", "## Failures", ""]
        lines += [f"- [{f['tier']}] {f['case']}: {'; '.join(f['problems'])}" for f in failures]
    return "\n".join(lines) + "\n"
