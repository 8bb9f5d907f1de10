"""Review of the ops example (issue 13) as a user meets it: `corral run examples/ops ...`.

Each test is a defect a user saw in the reply, pinned through the CLI in a fresh process
on the example's real services (nothing mocked).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from tests.extras import REQUIRE_ALL, import_extra
from tests.helpers import corral_cli
from tests.test_example_ops import OPS, arm, no_process_left, run_ops, tools_of

import_extra("fastapi", REQUIRE_ALL)
import_extra("mcp", REQUIRE_ALL)


def test_a_morning_flight_search_quotes_only_morning_flights(tmp_path: Path) -> None:
    """ "明天上午" is tomorrow morning: the reply once quoted a 20:50 flight as the cheapest."""
    summary = run_ops(tmp_path, "明天上午去上海的航班，急！")
    assert tools_of(summary) == ["resolve_trip", "search_flights_fast", "generate_reply"]
    reply = summary["reply"]
    assert "明天上午" in reply, reply
    departures = re.findall(r"(\d\d):(\d\d) 起飞", reply)
    assert len(departures) == 2, reply  # the earliest and the cheapest
    assert all(6 <= int(hour) < 12 for hour, _ in departures), reply
    no_process_left(tmp_path)


def test_an_eval_case_naming_the_fast_search_fails_when_the_cheap_one_is_picked(
    tmp_path: Path,
) -> None:
    """`corral eval` passed "urgent flights take the fast search" on an agent that picked
    the cheap one: a tools expectation took any equivalent, even one no fault forced."""
    agent = tmp_path / "ops"
    shutil.copytree(OPS, agent, ignore=shutil.ignore_patterns("__pycache__"))
    yaml_path = agent / "agent.yaml"
    text = yaml_path.read_text(encoding="utf-8")
    fast = "equivalent_group: flights, latency_ms: 60, cost: 5}"
    assert fast in text
    yaml_path.write_text(text.replace(fast, fast.replace("60", "9000")), encoding="utf-8")
    suite = agent / "urgent.yaml"
    suite.write_text(
        "now: '2026-11-30T02:00:00+00:00'\n"
        "cases:\n"
        "  - name: urgent flights take the fast search\n"
        "    tier: core\n"
        "    messages: ['明天上午去上海的航班，急！']\n"
        "    expect:\n"
        "      tools: [resolve_trip, search_flights_fast, generate_reply]\n",
        encoding="utf-8",
    )
    done = corral_cli(tmp_path, "eval", str(agent), "--suite", str(suite), "--json", ok=False)
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["tiers"]["core"] == 0.0, done.stdout[-2000:]
    assert "search_flights_cheap" in json.dumps(report["failures"], ensure_ascii=False)


def test_a_rain_question_about_where_the_user_flies_is_weather(tmp_path: Path) -> None:
    """ "明天飞上海，那边会下雨吗" asks about the rain: it once searched flights (飞上海
    outranked 下雨), and the user got a flight list instead of the forecast."""
    summary = run_ops(tmp_path, "明天飞上海，那边会下雨吗")
    assert summary["intent"]["label"] == "weather", summary["reply"]
    assert tools_of(summary) == ["resolve_weather", "get_forecast", "generate_reply"]
    assert summary["reply"].startswith("上海明天"), summary["reply"]
    no_process_left(tmp_path)


def test_an_english_flight_reply_names_the_cities_in_english(tmp_path: Path) -> None:
    """ "cheapest flight to Chengdu next week" was answered "35 flights from 北京 to 成都"."""
    summary = run_ops(tmp_path, "cheapest flight to Chengdu next week")
    assert tools_of(summary) == ["resolve_trip", "search_flights_cheap", "generate_reply"]
    assert "flights from Beijing to Chengdu, next week" in summary["reply"], summary["reply"]
    assert not re.search(r"[\u4e00-\u9fff]", summary["reply"]), summary["reply"]
    no_process_left(tmp_path)


def test_the_eval_clock_tells_the_agents_day_from_utcs(tmp_path: Path) -> None:
    """The suite's clock was 10:00 in Shanghai, the same day in UTC: an agent that took
    "明天" from UTC's date passed every case. Run its first case on such an agent."""
    import yaml

    agent = tmp_path / "ops"
    shutil.copytree(OPS, agent, ignore=shutil.ignore_patterns("__pycache__"))
    yaml_path = agent / "agent.yaml"
    text = yaml_path.read_text(encoding="utf-8")
    assert "timezone: Asia/Shanghai\n" in text
    yaml_path.write_text(
        text.replace("timezone: Asia/Shanghai\n", "timezone: UTC\n"), encoding="utf-8"
    )
    shipped = yaml.safe_load((OPS / "eval.yaml").read_text(encoding="utf-8"))
    first = shipped["cases"][0]
    assert first["messages"] == ["明天要不要带伞"] and "reply_contains" in first["expect"]
    suite = agent / "one.yaml"
    suite.write_text(yaml.safe_dump({"now": shipped["now"], "cases": [first]}), encoding="utf-8")
    done = corral_cli(tmp_path, "eval", str(agent), "--suite", str(suite), "--json", ok=False)
    assert done.returncode == 1, done.stdout[-2000:]  # the UTC agent's 明天 is another day


def test_a_weather_question_naming_no_day_is_about_today(tmp_path: Path) -> None:
    """ "北京天气怎么样" was answered "北京2026-12-01（2026-12-01）": the date twice, no 今天."""
    summary = run_ops(tmp_path, "北京天气怎么样")
    assert summary["reply"].startswith("北京今天（"), summary["reply"]
    no_process_left(tmp_path)


def test_a_run_handed_off_does_not_promise_customer_service(tmp_path: Path) -> None:
    """A forecast that failed was answered "这个问题我已经转给人工客服": the team's ops
    assistant has no customer service; it hands over to the on-call colleague."""
    arm(tmp_path, path="/weather", status=400, times=1)
    summary = run_ops(tmp_path, "明天上海多少度")
    assert (summary["status"], summary["outcome"]) == ("handed_off", "handoff")
    assert "客服" not in summary["reply"] and "值班同事" in summary["reply"], summary["reply"]
    no_process_left(tmp_path)


def test_two_destinations_are_asked_about_and_a_bare_city_answers(tmp_path: Path) -> None:
    """ "下周去成都或者广州的机票" searched Chengdu's flights without asking (corral never
    picks one of two values the user gave), and a bare "广州" did not answer "which one?"."""
    summary = run_ops(tmp_path, "下周去成都或者广州的机票")
    assert summary["status"] == "awaiting_user", summary["reply"]
    assert "成都" in summary["reply"] and "广州" in summary["reply"]
    assert "destination" not in summary["reply"]  # no config name in a Chinese question
    done = corral_cli(tmp_path, "resume", summary["run_id"], "--answer", "广州", "--json")
    answered = json.loads(done.stdout)
    assert answered["status"] == "finished", answered["reply"]
    assert answered["reply"].startswith("北京飞广州，下周"), answered["reply"]
    no_process_left(tmp_path)


def test_a_city_answered_in_english_is_named_in_chinese(tmp_path: Path) -> None:
    """ "查机票", then "Chengdu": the reply said "北京飞Chengdu" (the user's answer, a fact
    named like the service's field, outranked the service's "成都")."""
    summary = run_ops(tmp_path, "查机票")
    done = corral_cli(tmp_path, "resume", summary["run_id"], "--answer", "Chengdu", "--json")
    answered = json.loads(done.stdout)
    assert answered["reply"].startswith("北京飞成都，明天"), answered["reply"]
    no_process_left(tmp_path)


def test_a_flight_in_english_to_where_we_are_is_refused_not_handed_off(tmp_path: Path) -> None:
    """ "flights to Beijing tomorrow" went to the service as 北京 -> Beijing, failed there,
    and was handed to a person; "明天去北京的航班" gets the same_city answer."""
    summary = run_ops(tmp_path, "flights to Beijing tomorrow")
    assert (summary["status"], summary["outcome"]) == ("finished", "not_found"), summary
    assert "That is where you already are" in summary["reply"]
    no_process_left(tmp_path)
