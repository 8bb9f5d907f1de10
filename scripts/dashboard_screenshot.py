"""Make the README's screenshot of the dashboard's run page (docs/img/run-page.png).

It serves the aftersales example with ``corral serve`` over a throwaway home, sends the
in-warranty exchange in English (so the picture needs no CJK font), approves it through
the API, and photographs the run page in Debian's headless Chromium at 1200x800: the
timeline with the two parallel lookups, the pause for the confirmation, then the write.

    python scripts/dashboard_screenshot.py [--out docs/img/run-page.png]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from corral.cli.examples import LEFT_BEHIND  # noqa: E402
from tests.browser import chromium, serving  # noqa: E402

MESSAGE = "My printer broke last week, order HD20240501. I want a replacement."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "run-page.png")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="corral-shot-") as tmp:
        desk = Path(tmp) / "aftersales"
        shutil.copytree(ROOT / "examples" / "aftersales", desk, ignore=LEFT_BEHIND)
        home = Path(tmp) / "home"
        home.mkdir()
        with serving(desk, home=home) as served, chromium() as browser:
            run = served.call("POST", "/agents/aftersales/runs", {"message": MESSAGE})
            assert run["status"] == "awaiting_confirm", run
            done = served.call("POST", f"/runs/{run['run_id']}/resume", {"approve": True})
            assert done["status"] == "finished", done
            page = browser.new_page(viewport={"width": 1200, "height": 800}, locale="en-US")
            page.goto(served.dashboard(f"/runs/{run['run_id']}"))
            page.wait_for_selector("#timeline[data-drawn]")
            page.wait_for_selector("#plan canvas")
            args.out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(args.out))
    print(f"{args.out} ({args.out.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
