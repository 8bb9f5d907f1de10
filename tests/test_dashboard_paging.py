"""The runs page past the API's 500 runs a request lists, in a real browser.

Found by a walkthrough: after 520 runs, "Older runs" clicked ten times asked for
``limit=550``; the API refused it (422), the list froze (new runs never appeared, the
refresh's error swallowed) and the button stayed. The page now stops at 500 and says so.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.browser import CHROMIUM, ROOT, chromium, serving
from tests.extras import REQUIRE_ALL, import_extra

if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed at /usr/bin/chromium", allow_module_level=True)
import_extra("fastapi", REQUIRE_ALL)
import_extra("playwright.sync_api", REQUIRE_ALL)

from corral import Runtime, SqlStore, load_agent  # noqa: E402
from corral.cli.examples import LEFT_BEHIND  # noqa: E402

RUNS = 510
WAIT_MS = 30_000


async def _many_runs(agent_dir: Path, home: Path) -> None:
    store = SqlStore.open(home / "corral.db")
    agent = load_agent(agent_dir, data_dir=home / "data" / "aftersales")
    runtime = Runtime(agent, store)
    for i in range(RUNS):
        await runtime.start(f"你好 {i}")
    await runtime.aclose()
    store.engine.dispose()


def test_the_runs_page_stops_at_the_apis_limit_and_keeps_refreshing(tmp_path: Path) -> None:
    desk = tmp_path / "aftersales"
    shutil.copytree(ROOT / "examples" / "aftersales", desk, ignore=LEFT_BEHIND)
    home = tmp_path / "home"
    home.mkdir()
    asyncio.run(_many_runs(desk, home))
    with serving(desk, home=home) as served, chromium() as browser:
        context = browser.new_context(locale="en-US", bypass_csp=True)
        page: Any = context.new_page()
        page.set_default_timeout(WAIT_MS)
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(served.dashboard())
        page.wait_for_selector("#runs-table tbody tr")
        for _ in range(20):
            if page.locator("#more").is_hidden():
                break
            shown = page.locator("#runs-table tbody tr").count()
            page.click("#more")
            page.wait_for_function(
                "n => document.querySelectorAll('#runs-table tbody tr').length > n", arg=shown
            )
        assert page.locator("#runs-table tbody tr").count() == 500
        assert page.locator("#runs-capped").is_visible()
        assert "narrow the filters" in page.locator("#runs-capped").inner_text()
        fresh = served.call("POST", "/agents/aftersales/runs", {"message": "你好 again"})
        page.wait_for_selector(f"#runs-table tr[data-run={fresh['run_id']}]")  # still refreshed
        context.close()
    assert errors == [], errors
