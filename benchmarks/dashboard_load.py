"""How long the dashboard's run page takes to load, for runs of 5 and 50 steps.

A throwaway agent with a plan of N steps (lanes of ten steps in parallel, each lane a chain)
on a tool that returns at once; one run of it through ``corral serve``'s API; then
Debian's headless Chromium opens the run page ``--loads`` times, each in a fresh tab.
Timed: from the navigation's start to the timeline's chart having drawn its last frame
(ECharts' ``finished``), as the page measures it (``performance.now()``), and the same
wall clock seen from the test driver (goto → drawn). The page's own work is 2 API calls
(the run, its events), the timeline, the plan graph and the step cards.

    python benchmarks/dashboard_load.py [--loads 7] [--steps 5,50] [--markdown]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.browser import CHROMIUM, chromium, serving

TOOLS = '''\
from pydantic import BaseModel

from corral import ToolContext, ToolPolicy, tool


class Done(BaseModel):
    n: int


@tool(policy=ToolPolicy(kind="read"))
def work(n: int, ctx: ToolContext) -> Done:
    """Return at once."""
    return Done(n=n)
'''


def agent_yaml(name: str, steps: int) -> str:
    """An agent whose one plan has ``steps`` steps: lanes of ten in parallel, chained."""
    lines = []
    for i in range(1, steps + 1):
        after = f", depends_on: [s{i - 10}]" if i > 10 else ""
        lines.append(f"      - {{id: s{i}, tool: work, args: {{n: {i}}}{after}}}")
    plan = "\n".join(lines)
    return (
        textwrap.dedent(f"""\
        name: {name}
        default_language: en
        limits: {{max_plan_steps: {steps}, max_plan_steps_without_confirmation: {steps}}}
        budget: {{max_steps: {steps}, max_tool_calls: {steps * 2}, max_wall_clock_s: 120,
                  low_fraction: 0}}
        intents:
          - name: go
            rules: [{{keywords: [go], confidence: 0.95}}]
            route: plan
            plan: p
            reply: done
        templates:
          done: {{zh: 好了, en: done}}
        plans:
          p:
            steps:
        """)
        + plan
        + "\n"
    )


def measure(steps_list: list[int], loads: int) -> list[dict[str, float]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="corral-dashboard-") as tmp:
        root = Path(tmp)
        folders = []
        for steps in steps_list:
            folder = root / f"steps{steps}"
            folder.mkdir()
            (folder / "agent.yaml").write_text(agent_yaml(f"steps{steps}", steps), "utf-8")
            (folder / "tools.py").write_text(TOOLS, "utf-8")
            folders.append(folder)
        home = root / "home"
        home.mkdir()
        with serving(*folders, home=home) as served, chromium() as browser:
            for steps in steps_list:
                run = served.call("POST", f"/agents/steps{steps}/runs", {"message": "go"})
                assert run["status"] == "finished" and len(run["steps"]) == steps, run
                events = len(served.call("GET", f"/runs/{run['run_id']}/events")["events"])
                page_ms, wall_ms = [], []
                for _ in range(loads):
                    context = browser.new_context(viewport={"width": 1200, "height": 800})
                    page = context.new_page()
                    started = time.perf_counter()
                    page.goto(served.dashboard(f"/runs/{run['run_id']}"))
                    page.wait_for_selector("#timeline[data-drawn-ms]", timeout=60_000)
                    wall_ms.append((time.perf_counter() - started) * 1000)
                    drawn = page.get_attribute("#timeline", "data-drawn-ms")
                    page_ms.append(float(drawn or "nan"))
                    context.close()
                rows.append(
                    {
                        "steps": steps,
                        "events": events,
                        "first_ms": page_ms[0],
                        "median_ms": statistics.median(page_ms),
                        "max_ms": max(page_ms),
                        "wall_median_ms": statistics.median(wall_ms),
                    }
                )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", type=int, default=7, help="page loads per run (fresh tabs)")
    parser.add_argument("--steps", default="5,50", help="plan sizes, comma-separated")
    parser.add_argument("--markdown", action="store_true", help="a Markdown table")
    args = parser.parse_args()
    if not CHROMIUM.exists():
        sys.exit(f"{CHROMIUM} is missing (apt-get install chromium)")
    rows = measure([int(n) for n in args.steps.split(",")], args.loads)
    head = ["steps", "events", "first load ms", "median ms", "max ms", "driver median ms"]
    keys = ["steps", "events", "first_ms", "median_ms", "max_ms", "wall_median_ms"]
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
    else:
        print("  ".join(f"{h:>16}" for h in head))
    for row in rows:
        cells = [f"{row[k]:.0f}" if isinstance(row[k], float) else str(row[k]) for k in keys]
        if args.markdown:
            print("| " + " | ".join(cells) + " |")
        else:
            print("  ".join(f"{c:>16}" for c in cells))
    print(f"\n{args.loads} loads each, fresh tabs; ms from navigation start to the timeline drawn")


if __name__ == "__main__":
    main()
