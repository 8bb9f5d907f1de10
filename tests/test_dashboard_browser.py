"""The dashboard in a real browser: Debian's Chromium, driven by Playwright, on `corral serve`.

One server (the real command, in a subprocess) serves the aftersales example and a small
desk whose one tool waits for the test, over a home of this module's own. The demo's
scenarios are run through the HTTP API, as a client would, and left as the demo leaves
them, except the exchange, which waits for a person: the test approves it from the page.

What is checked is what a person sees: the list and its filters, the exchange run's
timeline with the two parallel lookups side by side (read from the bars the chart drew),
one exchange order after the approval from the page (counted in the example's own
database, where the tool writes it), a run followed live over its event stream, the stats
page, and hostile text that stays text. Screenshots go to ``.ci/artifacts/``.

Without ``/usr/bin/chromium`` the module skips; CI installs it and turns skips into failures.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import urllib.error
from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser import CHROMIUM, ROOT, Served, chromium, serving
from tests.extras import REQUIRE_ALL, import_extra

if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed at /usr/bin/chromium", allow_module_level=True)
import_extra("fastapi", REQUIRE_ALL)
import_extra("uvicorn", REQUIRE_ALL)
import_extra("playwright.sync_api", REQUIRE_ALL)

from corral.cli.conversation import DEMO_SCRIPT  # noqa: E402
from corral.cli.examples import LEFT_BEHIND  # noqa: E402

ARTIFACTS = ROOT / ".ci" / "artifacts"
EXCHANGE = DEMO_SCRIPT[0][1]
"""The demo's in-warranty exchange: two lookups in parallel, then a confirmation."""
HOSTILE = 'asdf <img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script> ？？？'
SECRETS = (
    "13812345678",
    "li.lei@example.com",
    "sk-proj-AbCdEf0123456789AbCdEf0123456789",
    "hunter2hunter2",
)
"""A phone number, an e-mail address, an API key and a password: the API redacts them."""
WAIT_MS = 20_000

GATED_YAML = """\
name: gated
default_language: en
budget: {max_wall_clock_s: 120}
intents:
  - name: hold
    rules: [{keywords: [hold], confidence: 0.95}]
    route: plan
    plan: p
    reply: done
  - name: flaky
    rules: [{keywords: [flaky], confidence: 0.95}]
    route: plan
    plan: f
    reply: done
plans:
  p:
    steps:
      - {id: s1, tool: wait_for_gate, args: {}}
  f:
    steps:
      - {id: s1, tool: flaky_lookup, args: {}}
templates:
  done: {zh: 好了, en: released}
"""
GATED_TOOLS = '''\
"""A desk whose tools wait for the test's gate (a file in its data folder), or fail once."""
import asyncio
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from corral import RetryPolicy, ToolContext, ToolPolicy, tool


def setup(data_dir: Path) -> dict[str, Any]:
    data_dir.mkdir(parents=True, exist_ok=True)
    return {"gate": data_dir / "open"}


class Released(BaseModel):
    released: bool


@tool(policy=ToolPolicy(kind="read", timeout_s=90))
async def wait_for_gate(ctx: ToolContext) -> Released:
    """Return once the gate file exists (90 s at most)."""
    for _ in range(9000):
        if ctx.deps["gate"].exists():
            return Released(released=True)
        await asyncio.sleep(0.01)
    return Released(released=False)


@tool(policy=ToolPolicy(kind="read", retry=RetryPolicy(max_retries=2, backoff_s=(0.05,))))
def flaky_lookup(ctx: ToolContext) -> Released:
    """Fail once, as a dropped connection does (retryable), then answer."""
    mark = ctx.deps["gate"].with_name("failed-once")
    if not mark.exists():
        mark.touch()
        raise ConnectionError("connection dropped")
    return Released(released=True)
'''


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The server, with the demo's scenarios run through its API."""
    root = tmp_path_factory.mktemp("dashboard")
    desk = root / "aftersales"
    shutil.copytree(ROOT / "examples" / "aftersales", desk, ignore=LEFT_BEHIND)
    gated = root / "gated"
    gated.mkdir()
    (gated / "agent.yaml").write_text(GATED_YAML, encoding="utf-8")
    (gated / "tools.py").write_text(GATED_TOOLS, encoding="utf-8")
    home = root / "home"
    home.mkdir()
    with serving(desk, gated, home=home) as server:
        for _title, message, follow_ups in DEMO_SCRIPT:
            summary = server.call("POST", "/agents/aftersales/runs", {"message": message})
            if message == EXCHANGE:
                continue  # left waiting: the test approves it from the page
            for kind, value in follow_ups:
                body = {"approve": bool(value)} if kind == "approve" else {"answer": str(value)}
                summary = server.call("POST", f"/runs/{summary['run_id']}/resume", body)
        yield server


def forget_exchanges(served: Served) -> None:
    """Empty the desk's exchanges, so that the demo's order is exchangeable again."""
    with sqlite3.connect(served.home / "data" / "aftersales" / "aftersales.db") as db:
        db.execute("DELETE FROM exchanges")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    # The pages' Content-Security-Policy forbids eval, which Playwright's waits use; what
    # keeps hostile text inert is that the pages write data as text (tested below), and
    # test_the_pages_are_served_with_a_strict_policy checks the policy itself.
    context = browser.new_context(
        viewport={"width": 1200, "height": 800}, locale="en-US", bypass_csp=True
    )
    opened = context.new_page()
    opened.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    context.close()
    assert errors == [], errors  # no script error on any page


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"dashboard-{name}.png"), full_page=True)


def exchanges(served: Served) -> int:
    """Exchange orders in the example's own database, where create_exchange_order writes."""
    with sqlite3.connect(served.home / "data" / "aftersales" / "aftersales.db") as conn:
        return int(conn.execute("SELECT count(*) FROM exchanges").fetchone()[0])


def exchange_run(served: Served) -> str:
    """The demo's exchange, left waiting for a confirmation (the oldest waiting run)."""
    runs = served.call("GET", "/runs?agent=aftersales&status=awaiting_confirm")["runs"]
    return str(runs[-1]["run_id"])  # newest first


def statuses_shown(page: Any) -> list[str]:
    rows = page.locator("#runs-table tbody tr")
    return [rows.nth(i).get_attribute("data-status") for i in range(rows.count())]


def statuses_listed(served: Served, query: str) -> list[str]:
    return [r["status"] for r in served.call("GET", f"/runs?{query}")["runs"]]


def wait_for_statuses(page: Any, statuses: list[str]) -> None:
    """Wait until the table shows exactly these runs' statuses, in this order."""
    page.wait_for_function(
        "want => [...document.querySelectorAll('#runs-table tbody tr')]"
        ".map(r => r.dataset.status).join() === want.join()",
        arg=statuses,
    )


def test_runs_page_lists_filters_and_keeps_the_token_out_of_the_address(
    served: Served, page: Any
) -> None:
    page.goto(served.dashboard())
    page.wait_for_selector("#runs-table tbody tr")
    assert "token" not in page.evaluate("location.href")  # taken from the fragment, then dropped
    assert page.evaluate("sessionStorage.getItem('corral.token')") == served.token
    listed = statuses_listed(served, "limit=200")
    assert len(listed) >= len(DEMO_SCRIPT)
    assert statuses_shown(page) == listed
    glance = {
        chip.get_attribute("data-status"): int(chip.get_attribute("data-count"))
        for chip in page.locator("#glance .chip").all()
    }
    assert glance == {status: listed.count(status) for status in set(listed)}
    assert glance["handed_off"] == 1  # the demo's complaint
    shot(page, "runs")

    page.select_option("#filter-status", "handed_off")
    wait_for_statuses(page, ["handed_off"])
    assert "status=handed_off" in page.evaluate("location.hash")  # a filter is a link

    page.select_option("#filter-status", "")
    wait_for_statuses(page, listed)
    page.fill("#filter-intent", "申请换新")  # the demo's three exchange requests
    page.dispatch_event("#filter-intent", "change")
    wait_for_statuses(page, statuses_listed(served, "intent=%E7%94%B3%E8%AF%B7%E6%8D%A2%E6%96%B0"))
    assert len(statuses_shown(page)) == 3
    shot(page, "runs-filtered")

    # the list follows new runs without a reload
    page.click("nav a[data-route=runs]")  # no filter
    wait_for_statuses(page, statuses_listed(served, "limit=50"))  # drawn before the run
    fresh = served.call("POST", "/agents/aftersales/runs", {"message": DEMO_SCRIPT[4][1]})
    page.wait_for_selector(f"#runs-table tr[data-run={fresh['run_id']}]")

    # the language: the toggle switches every label, and the choice outlives a reload
    page.click("#lang-toggle")
    page.wait_for_selector("text=运行列表")
    assert page.locator("nav a[data-route=runs]").inner_text() == "运行"
    page.reload()
    page.wait_for_selector("text=运行列表")
    page.click("#lang-toggle")
    page.wait_for_selector("text=Runs")


def test_sign_in_refuses_a_wrong_token_and_follows_the_browser_language(
    served: Served, browser: Any
) -> None:
    context = browser.new_context(locale="zh-CN", bypass_csp=True)
    try:
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        page.goto(f"{served.base}/ui/")
        page.wait_for_selector("#login-form")
        assert page.inner_text("#login-form h1") == "登录"  # navigator.language is zh-CN
        page.fill("#login-form input[name=token]", "not-the-token")
        page.click("#login-form button")
        page.wait_for_selector("#login-form p.error")  # 401: asked again, told why
        assert page.evaluate("sessionStorage.getItem('corral.token')") is None
        page.fill("#login-form input[name=token]", served.token)
        page.click("#login-form button")
        page.wait_for_selector("#runs-table tbody tr")
        assert page.inner_text("main h1") == "运行列表"
        page.click("#logout")
        page.wait_for_selector("#login-form")
        assert page.evaluate("sessionStorage.getItem('corral.token')") is None
    finally:
        context.close()


def test_exchange_run_shows_parallel_steps_and_is_approved_from_the_page(
    served: Served, page: Any
) -> None:
    run_id = exchange_run(served)
    before = exchanges(served)
    page.goto(served.dashboard())
    page.click(f"a[href='#/runs/{run_id}']")
    page.wait_for_selector("#timeline[data-bars]")
    bars = page.evaluate("window.corralTimeline.bars")
    steps = {b["step"]: b for b in bars if b["kind"] == "step"}
    assert sorted(steps) == ["s1", "s2", "s3"]  # s4 waits for the approval
    s2, s3 = steps["s2"], steps["s3"]
    # the two lookups that depend only on s1 ran side by side: rows apart, times overlapping
    assert s2["row"] != s3["row"]
    assert s2["x0"] < s3["x1"] and s3["x0"] < s2["x1"], (s2, s3)
    assert steps["s1"]["x1"] <= min(s2["x0"], s3["x0"])  # and both after the order lookup
    graph = page.evaluate("JSON.parse(document.querySelector('#plan').dataset.graph)")
    assert {(e["source"], e["target"]) for e in graph["edges"]} == {
        ("s1", "s2"),
        ("s1", "s3"),
        ("s2", "s4"),
        ("s3", "s4"),
        ("s4", "s5"),
    }
    assert "HD20240501" in page.inner_text("section.two")  # the entities
    assert page.locator("details.step").count() == 5
    shot(page, "run-waiting")

    shown = served.call("GET", f"/runs/{run_id}")["pending"]["call"]
    with page.expect_request(lambda request: request.url.endswith("/resume")) as sent:
        page.click("#approve")  # the decision names the call the page showed
    assert shown and json.loads(sent.value.post_data or "{}")["call"] == shown
    page.wait_for_selector("h1 .badge.s-finished")
    assert exchanges(served) == before + 1  # exactly one exchange order
    assert served.call("GET", f"/runs/{run_id}")["status"] == "finished"
    bars = page.evaluate("window.corralTimeline.bars")
    assert {b["step"] for b in bars if b["kind"] == "step"} == {"s1", "s2", "s3", "s4", "s5"}
    pauses = page.evaluate("window.corralTimeline.pauses")
    assert len(pauses) == 1 and pauses[0]["reason"] == "awaiting_confirm"  # drawn as a gap
    assert all(b["x0"] >= pauses[0]["x1"] for b in bars if b.get("step") in ("s4", "s5"))
    shot(page, "run-approved")


def test_a_question_is_answered_and_a_confirmation_rejected_from_the_page(
    served: Served, page: Any
) -> None:
    message, follow_ups = DEMO_SCRIPT[2][1], DEMO_SCRIPT[2][2]  # no order id: asked for
    answer = follow_ups[0][1]
    run = served.call("POST", "/agents/aftersales/runs", {"message": message})
    assert run["status"] == "awaiting_user", run
    before = exchanges(served)
    page.goto(served.dashboard(f"/runs/{run['run_id']}"))
    page.fill("#answer", answer)
    page.click("#send-answer")
    page.wait_for_selector("#reject")  # the answer led to the exchange's confirmation
    assert answer in page.inner_text("#conversation")
    page.click("#reject")
    page.wait_for_selector("h1 .badge.s-finished")
    assert page.locator("#actions").count() == 0
    assert served.call("GET", f"/runs/{run['run_id']}")["outcome"] != "success"
    assert exchanges(served) == before  # declined: no exchange order


def test_a_waiting_run_resumed_elsewhere_updates_the_page(served: Served, page: Any) -> None:
    forget_exchanges(served)  # an order is exchanged once: this one asks again
    run = served.call("POST", "/agents/aftersales/runs", {"message": EXCHANGE})
    page.goto(served.dashboard(f"/runs/{run['run_id']}"))
    page.wait_for_selector("#approve")
    served.call("POST", f"/runs/{run['run_id']}/resume", {"approve": True})  # another client
    page.wait_for_selector("h1 .badge.s-finished")  # no reload, no click
    assert page.locator("#approve").count() == 0
    assert "s5" in {b.get("step") for b in page.evaluate("window.corralTimeline.bars")}


def test_a_refused_decision_shows_what_the_run_asks_now(served: Served, page: Any) -> None:
    """A 409 (decided elsewhere, or another call asked now) reloads the run, so that the
    buttons send what it asks now instead of the same refused decision again."""
    forget_exchanges(served)  # an order is exchanged once: this one asks again
    run_id = served.call("POST", "/agents/aftersales/runs", {"message": EXCHANGE})["run_id"]
    page.goto(served.dashboard(f"/runs/{run_id}"))
    page.wait_for_selector("#approve")
    refusal = {"error": {"code": "RUN_NOT_RESUMABLE", "message": "another call", "hint": None}}
    page.route(
        "**/resume",
        lambda route: route.fulfill(
            status=409, content_type="application/json", body=json.dumps(refusal)
        ),
    )
    reloaded = f"/runs/{run_id}"
    with page.expect_request(
        lambda r: r.method == "GET" and r.url.endswith(reloaded), timeout=10_000
    ):
        page.click("#approve")
    page.wait_for_selector("#action-result:has-text('RUN_NOT_RESUMABLE')")
    assert page.locator("#approve").is_enabled()  # the page as it is now, ready for a click
    assert served.call("GET", reloaded)["status"] == "awaiting_confirm"


def test_a_run_in_progress_is_followed_live(served: Served, page: Any) -> None:
    gate = served.home / "data" / "gated" / "open"
    started = served.call("POST", "/agents/gated/runs", {"message": "hold", "wait": False})
    run_id = started["run_id"]
    page.goto(served.dashboard(f"/runs/{run_id}"))
    page.wait_for_selector("#live-note:not([hidden])")  # the page follows the stream
    page.wait_for_function("window.corralTimeline.bars.some(b => b.step === 's1')")
    gate.touch()  # the tool returns; the run ends; the stream tells the page
    page.wait_for_selector("h1 .badge.s-finished")
    assert page.inner_text("#reply") == "released"
    shot(page, "run-live")


def test_a_retry_is_marked_on_the_timeline(served: Served, page: Any) -> None:
    run = served.call("POST", "/agents/gated/runs", {"message": "flaky"})
    assert run["status"] == "finished" and run["steps"][0]["attempts"] == 2, run
    page.goto(served.dashboard(f"/runs/{run['run_id']}"))
    page.wait_for_selector("#timeline[data-bars]")
    attempts = [b for b in page.evaluate("window.corralTimeline.bars") if b["kind"] == "attempt"]
    assert [(a["attempt"], a["retry"], a["status"]) for a in attempts] == [
        (1, False, "error"),
        (2, True, "success"),
    ]
    assert attempts[0]["x1"] < attempts[1]["x0"]  # the backoff between the tries
    assert len({a["row"] for a in attempts}) == 1  # both on the step's row
    assert "↻" in page.inner_text("details.step[data-step=s1] summary")
    page.click("details.step[data-step=s1] summary")
    assert "connection dropped" in page.inner_text("details.step[data-step=s1]")


def test_the_timeline_shortens_a_long_pause_and_says_how_long_it_was(
    served: Served, page: Any
) -> None:
    # the page's own module, on events as the API gives them: a run that waited 2 hours
    page.goto(served.dashboard())
    page.wait_for_selector("#runs-table")
    timeline = page.evaluate(
        """async () => {
          const { buildTimeline } = await import("./js/timeline.js");
          const at = (ms) => new Date(Date.UTC(2026, 0, 1) + ms).toISOString();
          const e = (seq, ms, type, stage, data) => ({ seq, ts: at(ms), type, stage, data });
          return buildTimeline([
            e(1, 0, "run_started", "run", {}),
            e(2, 5, "step_started", "execute", { step_id: "s1", tool: "t" }),
            e(3, 9, "step_finished", "execute", { step_id: "s1", status: "succeeded" }),
            e(4, 10, "status_changed", "run", { from: "executing", to: "awaiting_confirm" }),
            e(5, 7_200_010, "status_changed", "run", { from: "awaiting_confirm", to: "deciding" }),
            e(6, 7_200_012, "step_started", "execute", { step_id: "s2", tool: "t" }),
            e(7, 7_200_020, "step_finished", "execute", { step_id: "s2", status: "succeeded" }),
          ]);
        }"""
    )
    (pause,) = timeline["pauses"]
    assert pause["end"] - pause["start"] == 7_200_000  # two hours, as the label says
    assert pause["x1"] - pause["x0"] < 5  # drawn as a short gap
    s2 = next(b for b in timeline["bars"] if b["kind"] == "step" and b["step"] == "s2")
    assert s2["x1"] - s2["x0"] == pytest.approx(8)  # active time keeps its length
    assert s2["x0"] == pytest.approx(pause["x1"] + 2)
    assert timeline["span"] < 30


def stats_route_exists(served: Served) -> bool:
    try:
        served.call("GET", "/stats")
    except urllib.error.HTTPError as error:
        assert error.code == 404, error
        return False
    return True


def test_stats_page(served: Served, page: Any) -> None:
    page.goto(served.dashboard("/stats?since="))
    page.wait_for_selector("#chart-stages[data-drawn], #chart-stages p, #stats-missing")
    if not stats_route_exists(served):
        # a server without GET /stats: the page says so plainly instead of drawing nothing
        assert "GET /stats" in page.inner_text("#stats-missing")
        shot(page, "stats")
        return
    charts = {
        el.get_attribute("id"): json.loads(el.get_attribute("data-names") or "[]")
        for el in page.locator(".chart[data-drawn]").all()
    }
    assert "execute" in charts["chart-stages"]  # stage durations
    assert "query_order" in charts["chart-tools"]  # tool success rates (every scenario reads)
    assert charts["chart-reasons"] == ["POLICY_HANDOFF"]  # the complaint's handoff
    assert charts["chart-over-time"]  # runs over time
    shot(page, "stats")


def test_hostile_text_is_shown_as_text(served: Served, page: Any) -> None:
    phone, mail, key, password = SECRETS
    message = f"{HOSTILE} 电话 {phone}, mail {mail}, key {key}, password: {password}"
    summary = served.call("POST", "/agents/aftersales/runs", {"message": message})
    page.goto(served.dashboard(f"/runs/{summary['run_id']}"))
    page.wait_for_selector("#conversation li")
    assert HOSTILE in page.inner_text("#conversation")
    assert page.locator("#view img, #view script").count() == 0
    assert page.evaluate("window.__pwned") is None
    # what the page holds, text and attributes alike, has no secret: the API redacted them
    shown = page.inner_text("#conversation")
    assert all(mark in shown for mark in ("[PHONE]", "[EMAIL]", "[API_KEY]", "[SECRET]")), shown
    whole = page.content()
    assert [secret for secret in SECRETS if secret in whole] == []
    page.goto(served.dashboard("/handoffs"))
    page.wait_for_selector("article.handoff")
    assert page.locator("article.handoff").count() >= 1
    shot(page, "handoffs")


def test_the_pages_are_served_with_a_strict_policy(served: Served) -> None:
    import urllib.request

    with urllib.request.urlopen(served.base + "/ui/") as answer:  # no token: it holds no data
        policy = answer.headers["Content-Security-Policy"]
        page = answer.read().decode()
    assert "script-src 'self'" in policy and "connect-src 'self'" in policy
    assert "unsafe-eval" not in policy and "'unsafe-inline'" not in policy.split("style-src")[0]
    assert 'src="vendor/echarts.min.js"' in page and "http" not in page  # no CDN


def test_the_workers_page_says_when_no_worker_shares_the_store(served: Served, page: Any) -> None:
    """This server's store is SQLite: no worker can share it, and the page says so."""
    page.goto(served.dashboard("/workers"))
    page.wait_for_selector("#view h1")
    assert page.inner_text("#view h1") in ("Workers", "工作进程")
    assert page.locator("nav a[data-route=workers].on").count() == 1
    assert page.locator("table[data-table=queues] tbody tr").count() == 0
    shown = page.inner_text("#view")
    assert "corral worker" in shown  # the empty list's words name the command
