"""``corral eval`` exits 1 when a tier misses its bar, through the real CLI.

The agent is real and its answers are right; the suites' expectations are what differs,
so the exit code follows the tier bars (core 100 %, regular 95 %, exploratory none), not
whether the agent ran.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import corral_cli, write_agent

AGENT = """
    name: shop
    default_language: en
    entities:
      order_id: {kind: pattern, patterns: ['\\b(A\\d+)\\b']}
    intents:
      - name: track
        rules: [{keywords: [track], confidence: 0.95}]
        route: plan
        plan: track
        requires: [order_id]
        reply: tracked
      - name: greet
        rules: [{keywords: [hello], confidence: 0.95}]
        route: reply
        reply: hi
    plans:
      track:
        steps:
          - {id: s1, tool: locate, args: {order_id: $entities.order_id}, facts: {city: result.city}}
    templates:
      tracked: {zh: "在 {city}", en: "Order {order_id} is in {city}"}
      hi: {zh: 你好, en: Hello there}
"""

TOOLS = """
    from pydantic import BaseModel
    from corral import tool


    class Place(BaseModel):
        city: str


    @tool
    def locate(order_id: str) -> Place:
        \"\"\"Where an order is.\"\"\"
        return Place(city="Lyon")
"""

RIGHT = [
    "{tier: core, m: 'track A1', intent: track, status: finished, tools: [locate], "
    "reply_contains: 'Order A1 is in Lyon'}",
    "{tier: core, m: 'hello', intent: greet, status: finished, reply_contains: Hello}",
]
WRONG_CORE = (
    "{tier: core, name: expects paris, m: 'track A2', status: finished, reply_contains: Paris}"
)
WRONG_EXPLORATORY = "{tier: exploratory, m: 'hello', intent: track}"


def suite(tmp_path: Path, name: str, cases: list[str]) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text("cases:\n" + "".join(f"  - {c}\n" for c in cases), encoding="utf-8")
    return path


@pytest.fixture
def agent_dir(tmp_path: Path) -> Path:
    return write_agent(tmp_path / "shop", AGENT, TOOLS, eval_yaml="cases:\n  - " + RIGHT[0])


def evaluate(tmp_path: Path, agent_dir: Path, *args: str) -> tuple[int, str]:
    done = corral_cli(tmp_path / "home", "eval", str(agent_dir), *args, ok=False)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout


def test_a_missed_core_case_exits_1_and_names_it(tmp_path: Path, agent_dir: Path) -> None:
    path = suite(tmp_path, "core", [*RIGHT, WRONG_CORE])
    code, out = evaluate(tmp_path, agent_dir, "--suite", str(path), "--json")
    assert code == 1
    report = json.loads(out)
    assert report["tiers_met"] is False and report["cases"] == 3
    assert report["tiers"] == {"core": round(2 / 3, 4)}
    assert report["failures"] == [
        {
            "case": "expects paris",
            "tier": "core",
            "problems": ["reply 'Order A2 is in Lyon' lacks 'Paris'"],
        }
    ]
    code, out = evaluate(tmp_path, agent_dir, "--suite", str(path))
    assert code == 1
    assert "✗ [core] expects paris: reply 'Order A2 is in Lyon' lacks 'Paris'" in out


def test_a_regular_tier_below_95_percent_exits_1(tmp_path: Path, agent_dir: Path) -> None:
    cases = [c.replace("tier: core", "tier: regular") for c in [*RIGHT, WRONG_CORE]]
    code, out = evaluate(tmp_path, agent_dir, "--suite", str(suite(tmp_path, "r", cases)), "--json")
    assert code == 1 and json.loads(out)["tiers"] == {"regular": round(2 / 3, 4)}


def test_met_bars_exit_0_even_with_an_exploratory_miss(tmp_path: Path, agent_dir: Path) -> None:
    path = suite(tmp_path, "ok", [*RIGHT, WRONG_EXPLORATORY])
    code, out = evaluate(tmp_path, agent_dir, "--suite", str(path), "--json")
    assert code == 0, out
    report = json.loads(out)
    assert report["tiers_met"] is True
    assert report["tiers"] == {"core": 1.0, "exploratory": 0.0}
    assert [f["tier"] for f in report["failures"]] == ["exploratory"]
    # the default suite is AGENT_DIR/eval.yaml
    code, out = evaluate(tmp_path, agent_dir, "--json")
    assert code == 0 and json.loads(out)["cases"] == 1


def test_the_agent_yaml_is_read_once_for_the_whole_suite(tmp_path: Path) -> None:
    """Each case gets a fresh agent and fresh data, but one reading of its config.

    Reading and validating agent.yaml for every case was most of an eval's time (the
    orders example: 9 of 14 s). Here ``setup`` spoils the file once the first agent is
    built: read again per case, every later case would fail to load.
    """
    spoiler = TOOLS + (
        "\n\n    from pathlib import Path\n\n\n"
        "    def setup(data_dir):\n"
        "        Path(__file__).with_name('agent.yaml').write_text('name: [unclosed')\n"
        "        return {}\n"
    )
    agent_dir = write_agent(tmp_path / "shop", AGENT, spoiler)
    path = suite(tmp_path, "three", [*RIGHT, RIGHT[0].replace("A1", "A3")])
    code, out = evaluate(tmp_path, agent_dir, "--suite", str(path), "--json")
    assert code == 0, out
    report = json.loads(out)
    assert report["cases"] == 3 and report["tiers"] == {"core": 1.0}
