"""Recorded regressions (issue 11 §3, seed 000 §5.6): every failed conversation is recorded
with ``corral record`` and replayed by ``corral eval`` after each change.

A recorded case replays the run's own inputs, model answers and tool results: it passes
while the code takes the recorded path, and turns red, naming the first divergent event,
when a change of plan or threshold makes the code take another.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from corral import Agent, EventType, MemoryStore, RunStatus, Runtime, SqlStore, parse_config
from corral.errors import ConfigInvalidError, InvalidInputError
from corral.models import ScriptedModel
from corral.safe_yaml import MAX_YAML_BYTES
from corral.store.codec import FORMAT
from corral.testing import FixedEffects
from corral.testing.evaluation import load_suite, run_suite
from corral.testing.recording import failed_runs, parse_since, record_run
from tests import test_models
from tests.conftest import ORDERS
from tests.helpers import corral_cli

TOOLS = [test_models.lookup, test_models.forecast]
LOGISTICS = "我的快递到哪了 OD2611200002"


def run_json(home: Path, *args: str) -> dict[str, Any]:
    done = corral_cli(home, *args, "--json")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def eval_json(home: Path, agent: Path, suite: Path, *, passes: bool) -> dict[str, Any]:
    done = corral_cli(home, "eval", str(agent), "--suite", str(suite), "--json", ok=False)
    assert done.returncode == (0 if passes else 1), done.stderr + done.stdout
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def handed_off_run(home: Path) -> str:
    """A conversation that asks twice for the order number, then goes to a person."""
    run_id = str(run_json(home, "run", str(ORDERS), "查物流")["run_id"])
    run_json(home, "resume", run_id, "--answer", "不记得了")
    assert run_json(home, "resume", run_id, "--answer", "真的忘了")["status"] == "handed_off"
    return run_id


def changed_agent(tmp_path: Path, old: str, new: str) -> Path:
    """A copy of the orders agent with one line of its agent.yaml changed."""
    folder = tmp_path / "orders-changed"
    shutil.copytree(ORDERS, folder, ignore=shutil.ignore_patterns("__pycache__"))
    config = folder / "agent.yaml"
    text = config.read_text(encoding="utf-8")
    assert text.count(old) == 1
    config.write_text(text.replace(old, new), encoding="utf-8")
    return folder


def test_a_recorded_run_replays_green_and_turns_red_after_a_change_of_plan(
    tmp_path: Path,
) -> None:
    home, suite = tmp_path / "home", tmp_path / "suites" / "regressions.yaml"
    run_id = str(run_json(home, "run", str(ORDERS), LOGISTICS)["run_id"])
    done = run_json(home, "record", run_id, "--suite", str(suite), "--tier", "core")
    assert [r["run_id"] for r in done["recorded"]] == [run_id] and done["skipped"] == []

    # the case is short and reviewable; the log is beside it, in the stored format
    [case] = yaml.safe_load(suite.read_text(encoding="utf-8"))["cases"]
    assert case == {
        "name": f"recorded {run_id}: {LOGISTICS}",
        "tier": "core",
        "run_id": run_id,
        "recorded": f"recorded/{run_id}.json",
        "expect": {"status": "finished", "outcome": "success"},
    }
    assert f"# user: {LOGISTICS}" in suite.read_text(encoding="utf-8")
    log = json.loads((suite.parent / "recorded" / f"{run_id}.json").read_text(encoding="utf-8"))
    assert log["format"] == FORMAT and log["run_id"] == run_id
    stated = [row["data"].get("v") for row in log["events"]]
    assert stated == [FORMAT] + [None] * (len(stated) - 1)  # once, in the log's first row

    report = eval_json(home, ORDERS, suite, passes=True)
    assert (report["cases"], report["pass_rate"], report["outcomes"]) == (1, 1.0, {"success": 1})

    # the reply step now takes other arguments: the recorded tool result no longer answers
    changed = changed_agent(
        tmp_path,
        "args: {template: order_status, variant_fact: stage}",
        "args: {template: order_status_delivered}",
    )
    report = eval_json(home, changed, suite, passes=False)
    [failure] = report["failures"]
    # s3's tool answered at its first attempt: its step_finished stands for that attempt
    # (``sole_attempt``), and the divergence is reported at that event's seq
    reply_attempt = next(
        row["seq"]
        for row in log["events"]
        if row["type"] == "step_finished" and row["data"]["step_id"] == "s3"
    )
    problem = failure["problems"][0]
    assert problem.startswith(
        f"took another path at event seq {reply_attempt} (tool_attempt s3 generate_reply): "
        "status 'success' recorded, 'error' now"
    )
    assert "with other arguments" in problem
    assert "status 'handed_off', expected 'finished'" in failure["problems"]


def test_a_recorded_handoff_turns_red_when_a_threshold_changes(tmp_path: Path) -> None:
    home, suite = tmp_path / "home", tmp_path / "regressions.yaml"
    run_id = handed_off_run(home)
    corral_cli(home, "record", run_id, "--suite", str(suite))
    [case] = load_suite(suite).cases
    assert (case.tier, case.messages) == ("regular", ["查物流", "不记得了", "真的忘了"])
    assert case.expect == {"status": "handed_off", "outcome": "handoff"}
    eval_json(home, ORDERS, suite, passes=True)

    changed = changed_agent(tmp_path, "  max_questions: 2\n", "  max_questions: 1\n")
    report = eval_json(home, changed, suite, passes=False)
    recorded = json.loads((tmp_path / "recorded" / f"{run_id}.json").read_text(encoding="utf-8"))
    second_question = [r["seq"] for r in recorded["events"] if r["type"] == "question_asked"][1]
    [problem] = report["failures"][0]["problems"]
    assert problem.startswith(
        f"took another path at event seq {second_question} (question_asked): "
        "type 'question_asked' recorded, 'handed_off' now"
    )


def test_failed_since_collects_handoffs_once_and_leaves_finished_runs(tmp_path: Path) -> None:
    home, suite = tmp_path / "home", tmp_path / "regressions.yaml"
    suite.write_text(
        "# hand-written: this comment stays\nnow: '2026-11-29T10:00:00+00:00'\ncases:\n"
        f"  - {{tier: core, m: '{LOGISTICS}', status: finished}}\n",
        encoding="utf-8",
    )
    handed_off = handed_off_run(home)
    finished = str(run_json(home, "run", str(ORDERS), LOGISTICS)["run_id"])

    done = run_json(home, "record", "--failed", "--since", "1d", "--suite", str(suite))
    assert ([r["run_id"] for r in done["recorded"]], done["skipped"]) == ([handed_off], [])
    again = run_json(home, "record", "--failed", "--since", "1h", "--suite", str(suite))
    assert (again["recorded"], again["skipped"]) == ([], [handed_off])
    one = run_json(home, "record", handed_off, "--suite", str(suite))
    assert (one["recorded"], one["skipped"]) == ([], [handed_off])

    text = suite.read_text(encoding="utf-8")
    assert text.startswith("# hand-written: this comment stays\n")
    cases = yaml.safe_load(text)["cases"]
    assert [c.get("run_id") for c in cases] == [None, handed_off]
    assert finished not in text
    # the suite mixes an ordinary case and a recorded one; both pass
    report = eval_json(home, ORDERS, suite, passes=True)
    assert (report["cases"], report["tiers"]) == (2, {"core": 1.0, "regular": 1.0})


@pytest.mark.parametrize("since", ["1", "0d", "1x", "-1d", "1.5h", "1 d", "d", "10000d"])
def test_parse_since_is_strict(since: str) -> None:
    with pytest.raises(InvalidInputError):
        parse_since(since)


def test_parse_since_reads_each_unit() -> None:
    assert [parse_since(s) for s in ("30m", "1h", "1d", "2w", "9999d")] == [
        timedelta(minutes=30),
        timedelta(hours=1),
        timedelta(days=1),
        timedelta(weeks=2),
        timedelta(days=9999),
    ]


def test_bad_since_and_bad_arguments_fail_with_a_stable_code(tmp_path: Path) -> None:
    home, suite = tmp_path / "home", str(tmp_path / "s.yaml")
    for args in (
        ("--failed", "--since", "yesterday", "--suite", suite),
        ("--suite", suite),  # neither a run nor --failed
        ("run_0123456789abcdef", "--since", "1d", "--suite", suite),
        ("run_0123456789abcdef", "--suite", suite, "--tier", "sometimes"),
    ):
        done = corral_cli(home, "record", *args, "--json", ok=False)
        assert done.returncode == 2, done.stdout + done.stderr
        assert json.loads(done.stdout)["error"]["code"] == "INVALID_INPUT"
    assert not Path(suite).exists()


async def test_a_run_planned_by_a_model_replays_with_no_model(tmp_path: Path) -> None:
    """The recorded model answer stands in for the model: the agent under test has none."""
    scripted = ScriptedModel([test_models.GOOD_PLAN])
    config = parse_config(test_models.CONFIG)
    tools = TOOLS
    runtime = Runtime(
        Agent.build(config, tools, model=scripted), MemoryStore(), effects=FixedEffects()
    )
    summary = await runtime.start("weather for A1?")
    assert summary.status is RunStatus.FINISHED and len(scripted.requests) == 1
    suite = tmp_path / "suite.yaml"
    events = await runtime.events(summary.run_id)
    record_run(events, suite, tier="core")

    calls_before = len(test_models.CALLS)
    without_model = Agent.build(config, tools)
    assert without_model.model is None
    report = await run_suite(lambda: without_model, load_suite(suite))
    assert report.pass_rate() == 1.0 and report.results[0].tools == ["lookup", "forecast"]
    assert len(test_models.CALLS) == calls_before  # no live tool was called

    # the same case against a model planner that now refuses the intent's tools: red
    narrowed = parse_config(
        {
            **test_models.CONFIG,
            "intents": [
                {**test_models.CONFIG["intents"][0], "tools": ["lookup"]},
                test_models.CONFIG["intents"][1],
            ],
        }
    )
    red = await run_suite(lambda: Agent.build(narrowed, tools), load_suite(suite))
    assert not red.tiers_met()
    [planned] = [e.seq for e in events if e.type is EventType.MODEL_CALL]
    assert (
        red.results[0]
        .problems[0]
        .startswith(
            f"took another path at event seq {planned} (model_call): type 'model_call' recorded"
        )
    )


async def test_failed_runs_take_only_the_period(tmp_path: Path) -> None:
    store = MemoryStore()
    now = datetime(2026, 11, 30, 12, tzinfo=UTC)
    agent = Agent.build(parse_config(test_models.CONFIG), TOOLS)
    ids = {}
    for label, when in (("old", now - timedelta(days=3)), ("new", now - timedelta(hours=2))):
        effects = FixedEffects(start=when)
        for _ in ids:  # the second run must not take the first one's id in the same store
            effects.new_id("run")
        runtime = Runtime(agent, store, effects=effects)
        summary = await runtime.start("weather for A1?")  # no model: handed off
        assert summary.status is RunStatus.HANDED_OFF
        ids[label] = summary.run_id
    assert [r.run_id for r in failed_runs(store, timedelta(days=1), now)] == [ids["new"]]
    assert [r.run_id for r in failed_runs(store, timedelta(weeks=1), now)] == [
        ids["old"],
        ids["new"],
    ]


def test_a_suite_whose_cases_are_not_last_is_refused_not_rewritten(tmp_path: Path) -> None:
    suite = tmp_path / "suite.yaml"
    original = "cases:\n  - {m: hello}\nnow: '2026-11-29T10:00:00+00:00'\n"
    suite.write_text(original, encoding="utf-8")
    events = _one_run_events()
    with pytest.raises(ConfigInvalidError, match="not its last block"):
        record_run(events, suite)
    assert suite.read_text(encoding="utf-8") == original


def test_a_log_in_a_newer_layout_is_refused_with_config_invalid(tmp_path: Path) -> None:
    suite = tmp_path / "suite.yaml"
    new = record_run(_one_run_events(), suite)
    data = json.loads(new.log.read_text(encoding="utf-8"))
    data["corral_recorded_run"] = 99
    new.log.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ConfigInvalidError, match="layout 99"):
        load_suite(suite)


def _one_run_events() -> list[Any]:
    import asyncio

    return asyncio.run(_events_of("hello there"))


async def _events_of(message: str) -> list[Any]:
    agent = Agent.build(parse_config(test_models.CONFIG), TOOLS)
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start(message)
    return await runtime.events(summary.run_id)


async def test_a_replay_that_goes_further_than_the_log_names_the_extra_event(
    tmp_path: Path,
) -> None:
    events = await _events_of("hello there")
    suite = tmp_path / "suite.yaml"
    record_run(events[:-1], suite)  # a log cut before its last event
    report = await run_suite(
        lambda: Agent.build(parse_config(test_models.CONFIG), TOOLS), load_suite(suite)
    )
    last = events[-1]
    assert report.results[0].problems[0] == (
        f"took another path at replayed event seq {last.seq} ({last.type.value}): "
        "the recorded run has no such event"
    )


def test_a_recorded_case_hides_what_logs_hide_and_still_replays(tmp_path: Path) -> None:
    """Found by a walkthrough: the suite's comment and case name held the user's email and
    phone number, and suites are committed."""
    home = tmp_path / "home"
    said = "查一下手机号 13800138001 的订单，邮箱 bob@example.com"
    run_id = str(run_json(home, "run", str(ORDERS), said)["run_id"])
    suite = tmp_path / "suite.yaml"
    corral_cli(home, "record", run_id, "--suite", str(suite))
    text = suite.read_text(encoding="utf-8")
    assert "13800138001" not in text and "bob@example.com" not in text
    assert "[PHONE]" in text and "[EMAIL]" in text
    assert eval_json(home, ORDERS, suite, passes=True)["pass_rate"] == 1.0


def _edited(rows: list[dict[str, Any]], how: str) -> list[dict[str, Any]]:
    if how == "seq repeated":
        rows[2]["seq"] = rows[1]["seq"]
    elif how == "seq swapped":
        rows[1]["seq"], rows[2]["seq"] = rows[2]["seq"], rows[1]["seq"]
    elif how == "no message":
        rows = [rows[0]] + [{**r, "seq": r["seq"] - 1} for r in rows[2:]]
    return rows


@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("format", "is in format 99"),
        ("seq repeated", "event 3 is missing or out of order"),
        ("seq swapped", "event 2 is missing or out of order"),
        ("no message", "holds no message that started the run"),
    ],
)
def test_a_log_no_run_could_have_written_is_refused_at_load(
    tmp_path: Path, how: str, says: str
) -> None:
    """Found by a hostile review: a log without its user message was a StopIteration
    traceback mid-eval; a future format in its header and edited seq numbers passed, with
    divergences reported at positions that were not the run's."""
    suite = tmp_path / "suite.yaml"
    new = record_run(_one_run_events(), suite)
    data = json.loads(new.log.read_text(encoding="utf-8"))
    assert data["events"][1]["type"] == "user_message"
    if how == "format":
        data["format"] = 99
    else:
        data["events"] = _edited(data["events"], how)
    new.log.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ConfigInvalidError, match=says):
        load_suite(suite)


def test_a_refused_record_leaves_no_log_of_the_users_words(tmp_path: Path) -> None:
    """Found by a hostile review: ``corral record`` into a suite whose ``cases:`` is not its
    last block was refused, but the log (the user's words, mode 0600) was written."""
    suite = tmp_path / "flow.yaml"
    suite.write_text("cases: [{m: 查物流}]\nnow: '2026-11-29T10:00:00+00:00'\n", encoding="utf-8")
    events = _one_run_events()
    with pytest.raises(ConfigInvalidError, match="not its last block"):
        record_run(events, suite)
    assert not (tmp_path / "recorded").exists() or list((tmp_path / "recorded").iterdir()) == []


def test_corral_replay_names_the_divergent_event_by_its_seq(tmp_path: Path) -> None:
    """Found by a hostile review: ``corral replay`` printed "diverged at event 28", a
    position in a list, where ``corral eval`` (and ``corral show``) say seq 29."""
    home = tmp_path / "home"
    run_id = handed_off_run(home)
    changed = changed_agent(tmp_path, "  max_questions: 2\n", "  max_questions: 1\n")
    done = corral_cli(home, "replay", run_id, "--agent", str(changed), ok=False)
    assert done.returncode == 1
    events = SqlStore.open(home / "corral.db").load_events(run_id)
    asked = [e.seq for e in events if e.type is EventType.QUESTION_ASKED]
    said = " ".join(done.stdout.split())
    assert f"diverged: took another path at event seq {asked[1]}" in said
    # what differed is named, as an eval of a recorded case names it (it printed two
    # tuples of unlabelled values: "('question_asked', None, None, ...)")
    assert "None" not in said and "recorded," in said, said


def test_recording_a_second_case_of_one_name_is_refused(tmp_path: Path) -> None:
    """Review of 7307782: ``corral record R2 --name X`` after ``R1 --name X`` wrote a suite
    that ``corral eval`` then refused whole (two cases of one name)."""
    suite = tmp_path / "suite.yaml"
    record_run(_one_run_events(), suite, name="warranty question")
    with pytest.raises(ConfigInvalidError, match="has a case named 'warranty question'"):
        record_run(_one_run_events(), suite, name="warranty question")
    assert len(load_suite(suite).cases) == 1


def test_recording_into_an_agents_own_config_is_refused_and_leaves_it_loading(
    tmp_path: Path,
) -> None:
    """Found by a hostile review of the CLI: ``corral record R --suite agent.yaml`` took the
    agent's config (a mapping without ``cases:``) for a suite, appended a ``cases:`` block
    to it and wrote ``recorded/`` beside it; the agent then failed to load
    (``cases: Extra inputs are not permitted``). A file with keys no suite has is refused."""
    home, agent = tmp_path / "home", tmp_path / "orders"
    shutil.copytree(ORDERS, agent, ignore=shutil.ignore_patterns("__pycache__"))
    config = agent / "agent.yaml"
    original = config.read_bytes()
    run_id = str(run_json(home, "run", str(agent), LOGISTICS)["run_id"])
    done = corral_cli(home, "record", run_id, "--suite", str(config), ok=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "CONFIG_INVALID" in done.stdout + done.stderr
    assert "not an eval suite" in done.stdout + done.stderr
    assert config.read_bytes() == original
    assert not (agent / "recorded").exists()
    assert run_json(home, "run", str(agent), LOGISTICS)["status"] == "finished"


def test_a_suite_with_only_its_clock_takes_its_first_recorded_case(tmp_path: Path) -> None:
    """A suite file may hold its ``now:`` before any case: it is still a suite."""
    suite = tmp_path / "suite.yaml"
    suite.write_text("now: '2026-11-29T10:00:00+00:00'\n", encoding="utf-8")
    record_run(_one_run_events(), suite)
    loaded = load_suite(suite)
    assert len(loaded.cases) == 1


def test_a_record_that_would_grow_the_suite_past_what_eval_reads_is_refused(
    tmp_path: Path,
) -> None:
    """Found on main: ``corral record`` appended past the 1 MiB an eval suite may hold, and
    ``corral eval`` then refused the whole suite, every case of it, as too large."""
    suite = tmp_path / "flow.yaml"
    filler = "# " + "x" * 98 + "\n"
    text = "cases:\n  - {m: 查物流}\n" + filler * ((MAX_YAML_BYTES - 200) // len(filler))
    suite.write_text(text, encoding="utf-8")
    assert len(load_suite(suite).cases) == 1  # it loads as it is
    with pytest.raises(ConfigInvalidError, match="would grow past 1,048,576 bytes"):
        record_run(_one_run_events(), suite)
    assert suite.read_text(encoding="utf-8") == text  # untouched, and no log left behind
    assert not (tmp_path / "recorded").exists() or list((tmp_path / "recorded").iterdir()) == []
