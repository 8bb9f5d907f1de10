"""The ops example (seed 001): weather, a weekly sales report to the work group, flights.

Its tools are real services that the example ships and starts itself: an HTTP API on
loopback (``services/api.py``) and an MCP server over stdio (``services/groupchat_mcp.py``).
Nothing here is mocked in the process: the tests go through ``corral`` in fresh processes,
as a user would, or through the public API on the example's real services.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.extras import REQUIRE_ALL, import_extra
from tests.helpers import corral_cli

import_extra("fastapi", REQUIRE_ALL)
import_extra("uvicorn", REQUIRE_ALL)
import_extra("httpx", REQUIRE_ALL)
import_extra("mcp", REQUIRE_ALL)

OPS = ROOT / "examples" / "ops"
WAIT_S = 30.0
"""How long a process may take to exit after it was told to (a busy machine is slow)."""


def alive(pid: int) -> bool:
    """Whether ``pid`` runs: an exited process, reaped or a zombie, is not alive."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc (macOS): ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def gone(pid: int) -> bool:
    """Wait (up to ``WAIT_S``) for ``pid`` to end: an event awaited, not a timing."""
    deadline = time.monotonic() + WAIT_S
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def request(url: str, method: str = "GET", body: dict[str, Any] | None = None) -> Any:
    import httpx

    answer = httpx.request(method, url, json=body, timeout=10)
    return answer


@pytest.fixture
def service(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The example's setup run as corral runs it: the deps, then the teardown."""
    from corral.tools.loader import import_tools, run_setup

    module = import_tools(OPS / "tools.py")
    started = run_setup(module, tmp_path / "data", OPS)
    try:
        yield started.deps
    finally:
        if started.teardown is not None:
            started.teardown()


# --------------------------------------------------------------------------- the services


def test_the_shipped_openapi_document_is_the_apps() -> None:
    """services/openapi.json is what the app serves, so `openapi:` imports today's API."""
    done = subprocess.run(
        [sys.executable, str(OPS / "services" / "api.py"), "--openapi"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    shipped = json.loads((OPS / "services" / "openapi.json").read_text(encoding="utf-8"))
    assert json.loads(done.stdout) == shipped
    operations = {op["operationId"] for path in shipped["paths"].values() for op in path.values()}
    assert {"fetchSales", "searchFlightsFast", "searchFlightsCheap", "getForecast"} <= operations


def test_setup_serves_on_loopback_and_teardown_stops_the_service(tmp_path: Path) -> None:
    from corral.tools.loader import import_tools, run_setup

    started = run_setup(import_tools(OPS / "tools.py"), tmp_path / "data", OPS)
    deps = started.deps
    pid = int(deps["OPS_API_PID"])
    assert deps["OPS_API_URL"].startswith("http://127.0.0.1:")
    assert request(f"{deps['OPS_API_URL']}/health").json() == {"status": "ok"}
    assert alive(pid)
    assert started.teardown is not None
    started.teardown()
    assert not alive(pid)  # stopped and reaped by the teardown itself


def test_a_relative_data_folder_is_the_callers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service runs in the agent's folder; a relative --home still means the caller's."""
    from corral.tools.loader import import_tools, run_setup

    monkeypatch.chdir(tmp_path)
    started = run_setup(import_tools(OPS / "tools.py"), Path("home") / "data", OPS)
    try:
        assert Path(started.deps["GROUPCHAT_DB"]) == tmp_path / "home" / "data" / "ops.db"
        assert (tmp_path / "home" / "data" / "ops.db").is_file()
    finally:
        assert started.teardown is not None
        started.teardown()


def test_the_service_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    """SIGKILL gives no teardown a chance: the service sees its stdin close and exits."""
    script = (
        "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]);"
        "import tools; running = tools.setup(Path(sys.argv[2])); deps = next(running);"
        "print(deps['OPS_API_PID'], flush=True); sys.stdin.read()"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script, str(OPS), str(tmp_path / "data")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert parent.stdout is not None
    pid = int(parent.stdout.readline())
    assert alive(pid)
    parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=WAIT_S)
    assert gone(pid), "the ops API outlived the process that started it"


def test_fault_controls_answer_as_armed(service: dict[str, Any]) -> None:
    """503 twice then the answer; 429 with Retry-After; a delay; faults are used up."""
    url = service["OPS_API_URL"]
    fast = f"{url}/flights/fast?origin=北京&destination=上海&start=2026-12-01&end=2026-12-01"
    armed = {"path": "/flights/fast", "status": 503, "times": 2}
    assert request(f"{url}/faults", "POST", armed).json()["armed"][0]["times"] == 2
    assert [request(fast).status_code for _ in range(3)] == [503, 503, 200]
    request(f"{url}/faults", "POST", {"path": "/sales", "status": 429, "retry_after": 1})
    limited = request(f"{url}/sales/2026-W47")
    assert (limited.status_code, limited.headers["retry-after"]) == (429, "1")
    sales = request(f"{url}/sales/2026-W47").json()
    assert sales["total_cny"] == sum(r["total_cny"] for r in sales["regions"])
    assert request(f"{url}/faults").json() == {"armed": []}


def test_forecasts_and_flights_are_repeatable_on_any_date(service: dict[str, Any]) -> None:
    url = service["OPS_API_URL"]
    one = request(f"{url}/weather/上海?start=2031-02-03&end=2031-02-04").json()
    again = request(f"{url}/weather/Shanghai?start=2031-02-03&end=2031-02-04").json()
    assert one == again and one["city"] == "上海" and len(one["days"]) == 2
    assert one["umbrella"] is (one["rain_probability"] >= 50)
    assert request(f"{url}/weather/Atlantis?start=2031-02-03").status_code == 404
    search = "origin=北京&destination=成都&start=2031-02-03&end=2031-02-09"
    fast = request(f"{url}/flights/fast?{search}").json()
    cheap = request(f"{url}/flights/cheap?{search}").json()
    assert fast == cheap, "equivalent searches find the same flights"
    assert fast["cheapest_price_cny"] == min(f["price_cny"] for f in fast["flights"])


# --------------------------------------------------------------------------- through the CLI


def state_of(home: Path) -> Path:
    """The example's SQLite state under a corral home (posts, armed faults)."""
    return home / "data" / "ops" / "ops.db"


def arm(home: Path, **fault: Any) -> None:
    """Arm a fault before a `corral run` process starts the API (it reads them per request)."""
    spec = importlib.util.spec_from_file_location("ops_state", OPS / "services" / "ops_state.py")
    assert spec is not None and spec.loader is not None
    ops_state = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ops_state)
    state_of(home).parent.mkdir(parents=True, exist_ok=True)
    conn = ops_state.open_state(state_of(home))
    columns = ", ".join(fault)
    marks = ", ".join("?" for _ in fault)
    conn.execute(f"INSERT INTO faults ({columns}) VALUES ({marks})", tuple(fault.values()))
    conn.close()


def posts(home: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(state_of(home)) as conn:
        return conn.execute("SELECT channel, text, idempotency_key FROM posts").fetchall()


def run_ops(home: Path, message: str) -> dict[str, Any]:
    """`corral run examples/ops MESSAGE --json` in a fresh process, nothing started first."""
    done = corral_cli(home, "run", str(OPS), message, "--json")
    summary: dict[str, Any] = json.loads(done.stdout)
    return summary


def tools_of(summary: dict[str, Any]) -> list[str]:
    return [step["tool"] for step in summary["steps"]]


def no_process_left(home: Path) -> None:
    """The API and the MCP server the run started are gone once `corral` exited."""
    for name in ("ops-api.pid", "groupchat.pid"):
        pidfile = home / "data" / "ops" / name
        if pidfile.exists():
            pid = int(pidfile.read_text())
            assert gone(pid), f"{name}: process {pid} outlived corral run"


@pytest.mark.parametrize(
    ("message", "intent", "tools", "words"),
    [
        ("明天要不要带伞", "weather", ["resolve_weather", "get_forecast", "generate_reply"], "伞"),
        (
            "will it rain in Shanghai this weekend",
            "weather",
            ["resolve_weather", "get_forecast", "generate_reply"],
            "Shanghai",
        ),
        (
            "明天上午去上海的航班，急！",
            "flights",
            ["resolve_trip", "search_flights_fast", "generate_reply"],
            "北京飞上海",
        ),
        (
            "下周去成都的机票，越便宜越好",
            "flights",
            ["resolve_trip", "search_flights_cheap", "generate_reply"],
            "北京飞成都",
        ),
    ],
)
def test_corral_run_starts_what_it_needs_and_leaves_nothing(
    tmp_path: Path, message: str, intent: str, tools: list[str], words: str
) -> None:
    summary = run_ops(tmp_path, message)
    assert (summary["status"], summary["intent"]["label"]) == ("finished", intent)
    assert tools_of(summary) == tools
    assert words in summary["reply"]
    no_process_left(tmp_path)


def test_the_sales_report_is_posted_once_over_mcp(tmp_path: Path) -> None:
    """Two weeks side by side, compute_wow, then a confirmed post; a second approval and a
    server killed mid-post (after it stored the post) still leave exactly one post."""
    summary = run_ops(tmp_path, "帮我把上周的销售数据拉出来，做个环比分析，再把结论发到工作群")
    assert summary["status"] == "awaiting_confirm"
    assert tools_of(summary)[:4] == ["resolve_weeks", "fetch_sales", "fetch_sales", "compute_wow"]
    assert summary["pending"]["step_id"] == "s5" and tools_of(summary)[4] == "post_to_group"
    no_process_left(tmp_path)
    arm(tmp_path, path="mcp:post_to_group", crash=1, times=1)
    run_id = summary["run_id"]
    done = corral_cli(tmp_path, "resume", run_id, "--approve", "--json")
    approved = json.loads(done.stdout)
    assert (approved["status"], approved["outcome"]) == ("finished", "success")
    assert tools_of(approved)[-2:] == ["post_to_group", "generate_reply"]
    ((channel, text, key),) = posts(tmp_path)  # stored before the crash, not again after it
    assert channel == "sales" and key
    total = re.search(r"销售额 (\d+) 元", text)
    assert total is not None and f"销售额 {total[1]} 元" in approved["reply"]  # computed, quoted
    again = corral_cli(tmp_path, "resume", run_id, "--approve", "--json", ok=False)
    assert len(posts(tmp_path)) == 1, again.stdout  # a second approval posts nothing
    no_process_left(tmp_path)


def test_a_plain_yes_after_a_call_off_nobody_understood_posts_nothing(tmp_path: Path) -> None:
    """A review: "取消发送" at the post's confirmation was not understood, and the "好的"
    after it posted the report (it may say yes to the call-off as well). Only a yes in
    so many words approves there; the post still waits for it."""
    session = ("--session", "post")
    asked = corral_cli(
        tmp_path,
        "run",
        str(OPS),
        "帮我把上周的销售数据拉出来，做个环比分析，再把结论发到工作群",
        "--json",
        *session,
    )
    assert json.loads(asked.stdout)["status"] == "awaiting_confirm"
    for line in ("取消发送", "好的"):
        said = json.loads(corral_cli(tmp_path, "run", str(OPS), line, "--json", *session).stdout)
        assert said["pending"] is None and "还在等您确认" in said["reply"], said
    assert posts(tmp_path) == []
    done = json.loads(corral_cli(tmp_path, "run", str(OPS), "确认", "--json", *session).stdout)
    assert done["outcome"] == "success" and len(posts(tmp_path)) == 1
    no_process_left(tmp_path)


def test_the_fast_search_down_twice_switches_to_the_cheap_one(tmp_path: Path) -> None:
    arm(tmp_path, path="/flights/fast", status=503, times=2)
    summary = run_ops(tmp_path, "明天上午去上海的航班，急！")
    assert (summary["status"], summary["outcome"]) == ("finished", "success")
    assert tools_of(summary)[1] == "search_flights_cheap"
    with sqlite3.connect(state_of(tmp_path)) as conn:
        assert conn.execute("SELECT count(*) FROM faults").fetchone() == (0,)  # both 503s met
    log = (tmp_path / "logs" / f"{summary['run_id']}.jsonl").read_text(encoding="utf-8")
    lines = [json.loads(line) for line in log.splitlines()]
    tried = [
        (json.loads(line["input_summary"])["tool"], line["status"], line["output_summary"])
        for line in lines
        if line["event"] == "tool_attempt"
    ]
    # the steps whose tool answered at once have no attempt line of their own (their
    # step_finished stands for it); the search's three attempts each have one
    assert [(tool, status) for tool, status, _ in tried] == [
        ("search_flights_fast", "error"),
        ("search_flights_fast", "error"),
        ("search_flights_cheap", "success"),
    ], tried
    assert tried[0][2] == tried[1][2] == "TOOL_TRANSIENT"  # the 503s: retryable, retried once
    chosen = [x["output_summary"] for x in lines if x["event"] == "tool_selected"]
    assert '"reason": "urgent' in chosen[0]  # the run's priority picked the fast search
    assert '"reason": "fallback after search_flights_fast"' in chosen[1]
    assert "共 3 个航班" in summary["reply"] and "北京飞上海" in summary["reply"]  # morning
    # the tree says the step fell back: its three attempts were not all the cheap search's
    tree = corral_cli(tmp_path, "show", summary["run_id"]).stdout
    assert "search_flights_cheap (after search_flights_fast failed 2×)  3 attempts" in tree
    no_process_left(tmp_path)


def test_corral_eval_of_the_example_exits_0(tmp_path: Path) -> None:
    """47 conversations, each on a fresh agent: its own API process and MCP server."""
    done = subprocess.run(
        [sys.executable, "-m", "corral", "eval", str(OPS), "--json", "--home", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,  # a few minutes on a busy machine: one service start per case
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    figures = json.loads(done.stdout)
    assert figures["cases"] >= 40
    assert figures["tiers"]["core"] == 1.0
    assert not any(figures["must_be_zero"].values())


# --------------------------------------------------------------------------- arrange


def test_a_case_arranges_its_world_through_the_services_controls(
    tmp_path: Path, service: dict[str, Any]
) -> None:
    """`arrange:` requests reach the case's own service; a refused one stops the eval."""
    import asyncio

    from corral.errors import ConfigInvalidError
    from corral.testing.arrange import arrange
    from corral.testing.evaluation import load_suite

    suite = tmp_path / "eval.yaml"
    suite.write_text(
        "cases:\n"
        "  - m: 明天要不要带伞\n"
        "    arrange:\n"
        "      - post: '${OPS_API_URL}/faults'\n"
        "        json: {path: /weather, status: 503, times: 2}\n"
        "  - m: 你好\n",
        encoding="utf-8",
    )
    armed, plain = load_suite(suite).cases
    assert plain.arrange == ()
    asyncio.run(arrange(armed.arrange, service, armed.name))
    faults = request(f"{service['OPS_API_URL']}/faults").json()["armed"]
    assert [(f["path"], f["status"], f["times"]) for f in faults] == [("/weather", 503, 2)]
    (refused,) = load_suite(suite).cases[0].arrange
    wrong = type(refused)("POST", "${OPS_API_URL}/no-such-control", {})
    with pytest.raises(ConfigInvalidError, match="404"):
        asyncio.run(arrange([wrong], service, "case"))
    suite.write_text("cases:\n  - m: hi\n    arrange: [{post: a, get: b}]\n", encoding="utf-8")
    with pytest.raises(ConfigInvalidError, match="arrange"):
        load_suite(suite)


def test_corral_demo_shows_the_three_scenarios_on_the_services_it_starts(tmp_path: Path) -> None:
    done = corral_cli(tmp_path, "demo", "--example", "ops", "--json")
    cases = json.loads(done.stdout)["cases"]
    assert [case["status"] for case in cases] == ["finished"] * 6
    assert [tools_of(case)[1] for case in cases] == [
        "get_forecast",
        "get_forecast",
        "fetch_sales",
        "search_flights_fast",
        "search_flights_cheap",
        "search_flights_cheap",  # the fast search answered 503 twice
    ]
    assert tools_of(cases[2])[-2:] == ["post_to_group", "generate_reply"]
    assert len(posts(tmp_path)) == 1
    no_process_left(tmp_path)


def test_a_missing_extra_is_named_before_any_service_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by a new user's walkthrough: on a plain install ``corral demo --example ops``
    said "the ops API did not start ... fix the agent's tools.py"; the cause (no fastapi)
    was in the service's log, and the next try failed again on mcp."""
    from corral import load_agent
    from corral.errors import ConfigInvalidError

    found = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *rest: None if name in ("fastapi", "mcp") else found(name, *rest),
    )
    with pytest.raises(ConfigInvalidError) as refused:
        load_agent(OPS, data_dir=tmp_path / "data")
    assert "the ops example needs corral's mcp, server extra(s)" in refused.value.message
    assert refused.value.hint == "pip install 'corral[server,http,mcp]'"
    assert not (tmp_path / "data" / "ops-api.pid").exists()  # nothing was started
