"""A malformed eval suite is refused when it loads (``CONFIG_INVALID``, exit 2), never run.

Each defect below was reproduced on ``corral eval``: an unknown tier's bar was 0, so a
suite of failing cases exited 0; a string under ``messages:`` ran one character per turn;
a suite with no cases passed at 100 %; ``expect: {status: bogus}`` loaded and then failed
as if the agent had regressed; and a wrong shape crashed with a traceback and exit 1, the
code of a missed bar, so CI could not tell a broken suite from a failing agent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corral.errors import ConfigInvalidError
from corral.testing.evaluation import load_suite
from tests.conftest import AFTERSALES
from tests.helpers import corral_cli


def refused(tmp_path: Path, text: str) -> str:
    """The message ``corral eval --suite`` refuses the suite ``text`` with (exit 2)."""
    path = tmp_path / "suite.yaml"
    path.write_text(text, encoding="utf-8")
    done = corral_cli(
        tmp_path / "home", "eval", str(AFTERSALES), "--suite", str(path), "--json", ok=False
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "CONFIG_INVALID"
    assert str(path) in error["message"]
    return str(error["message"])


def test_an_unknown_tier_is_refused_not_given_a_bar_of_zero(tmp_path: Path) -> None:
    message = refused(
        tmp_path,
        "cases:\n  - {name: a, tier: Core, messages: [我想申请换新], expect: {status: finished}}\n",
    )
    assert "eval case 'a'" in message and "tier" in message
    assert "'core', 'regular' or 'exploratory'" in message


def test_messages_written_as_one_string_are_refused_not_split_into_characters(
    tmp_path: Path,
) -> None:
    message = refused(tmp_path, "cases:\n  - {name: a, messages: 我想申请换新}\n")
    assert "messages: Input should be a valid list" in message
    message = refused(tmp_path, "cases:\n  - {m: 我想申请换新, then: C10001}\n")
    assert "then: Input should be a valid list" in message


def test_a_suite_without_cases_is_refused(tmp_path: Path) -> None:
    for text in ("", "now: 2026-11-29T10:00:00+08:00\n", "cases: []\n"):
        assert "cases" in refused(tmp_path, text)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("cases: 5\n", "cases: Input should be a valid list"),
        ("cases:\n  - just a string\n", "cases.0: Input should be a valid dictionary"),
        ("cases:\n  - {foo: 1}\n", "name: Field required"),
        ("cases:\n  - {name: a, messages: [hi], expect: {status: bogus}}\n", "expect.status"),
        ("cases:\n  - {name: a, messages: [hi], expect: {reply: x}}\n", "expect.reply"),
        ("cases:\n  - {m: hi, reply_contain: x}\n", "reply_contain: Extra inputs"),
        ("cases:\n  - {m: 12345}\n", "m: Input should be a valid string"),
        ("cases:\n  - {m: ''}\n", "m: Value error, is blank"),
        ("cases:\n  - {name: a, messages: []}\n", "messages: List should have at least 1"),
        ("now: 5\ncases:\n  - {m: hi}\n", "now"),
        ("now: soon\ncases:\n  - {m: hi}\n", "now: 'soon' is not an ISO time"),
        ("cases:\n  - {m: hi}\nrounds: 3\n", "rounds: Extra inputs"),
        # found by review: these loaded, then crashed (exit 1) or could never pass
        ("cases:\n  - {m: hi, tools: null}\n", "tools: Value error, null is no expectation"),
        ("cases:\n  - {name: a, messages: [hi], expect: {status: null}}\n", "expect.status"),
        ("cases:\n  - {m: hi, reply_contains: yes}\n", "reply_contains"),
        ("cases:\n  - {m: '   '}\n", "m: Value error, is blank"),
        # found on main: an outcome no run ends with loaded, and failed its case as if
        # the agent had gone wrong (exit 1)
        ("cases:\n  - {m: hi, outcome: sucess}\n", "outcome: Input should be 'success'"),
        ("cases:\n  - {name: a, messages: [hi], expect: {outcome: done}}\n", "expect.outcome"),
        ("cases:\n  - {m: hi}\n  - {m: hi, then: ['  ']}\n", "then.0: Value error, is blank"),
    ],
)
def test_each_wrong_shape_is_named_with_where_it_is(tmp_path: Path, text: str, says: str) -> None:
    assert says in refused(tmp_path, text)


def test_a_recorded_case_with_an_unknown_tier_or_status_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "suite.yaml"
    for case, says in (
        ("{recorded: runs/x.jsonl, tier: gold}", "tier 'gold' is not one of core"),
        ("{recorded: runs/x.jsonl, expect: {status: done}}", "expect: status"),
        ("{recorded: runs/x.jsonl, expect: {outcome: sucess}}", "expect: outcome"),
    ):
        path.write_text(f"cases:\n  - {case}\n", encoding="utf-8")
        with pytest.raises(ConfigInvalidError) as info:
            load_suite(path)
        assert says in info.value.message


def test_the_examples_suites_load_as_they_are() -> None:
    """The shapes refused above are none of the shapes the shipped suites use."""
    examples = Path(__file__).resolve().parents[1] / "examples"
    sizes = {p.parent.name: len(load_suite(p).cases) for p in examples.glob("*/eval.yaml")}
    assert sizes == {"aftersales": 43, "orders": 155, "triage": 116, "ops": 50}


def test_null_says_nothing_was_recognised_where_that_is_an_expectation(tmp_path: Path) -> None:
    """Found by review: ``intent: null`` (no intent recognised) and ``outcome: null`` are
    expectations that pass; ``status``, ``source``, ``tools`` and ``reply_contains`` refuse
    null (the first two could never pass, ``tools`` crashed)."""
    path = tmp_path / "suite.yaml"
    path.write_text("cases:\n  - {m: asdfghjkl, intent: null, outcome: null}\n", "utf-8")
    (case,) = load_suite(path).cases
    assert case.expect == {"intent": None, "outcome": None}
    # an intent always has a source ("none" when nothing was recognised): never null
    path.write_text("cases:\n  - {m: asdfghjkl, source: null}\n", "utf-8")
    with pytest.raises(ConfigInvalidError, match="source"):
        load_suite(path)


@pytest.mark.parametrize(
    ("case", "says"),
    [
        ("{m: 我想申请换新, intent: exchang}", "expects intent 'exchang'"),
        ("{name: a, messages: [hi], expect: {tools: [order_lookup, nope]}}", "expects tools"),
        ("{m: hi, source: rules}", "source: Input should be 'rule'"),
    ],
)
def test_a_case_expecting_what_the_agent_does_not_declare_is_refused_before_any_runs(
    tmp_path: Path, case: str, says: str
) -> None:
    """Found by review: a misspelt intent or tool failed its case after the suite ran,
    as if the agent had gone wrong; it could never pass. The suite is refused instead,
    naming the case, with the agent's intents and tools in the hint."""
    # the first case would run (and show up) if the check came after it
    message = refused(tmp_path, f"cases:\n  - {{m: 你好}}\n  - {case}\n")
    assert says in message


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("cases:\n  - {m: hi, name: same}\n  - {m: yo, name: same}\n", "named 'same'"),
        ('cases:\n  - {m: "查物流 \\ud800"}\n', "lone surrogate"),
    ],
)
def test_a_suite_the_run_would_fail_midway_is_refused_before_any_case(
    tmp_path: Path, text: str, says: str
) -> None:
    """Found by a hostile review: two cases of one name loaded, and a baseline compared by
    name then hid a regression; a message with a lone surrogate ran the cases before it,
    then aborted the eval with INVALID_INPUT, naming no case and keeping no result."""
    assert says in refused(tmp_path, text)


@pytest.mark.parametrize("tier", ["[core]", "{a: 1}"])
def test_a_recorded_case_whose_tier_is_no_text_is_refused(tmp_path: Path, tier: str) -> None:
    """Found by a hostile review: a list or mapping as a recorded case's tier was a
    TypeError traceback (unhashable), exit 1, where an ordinary case got CONFIG_INVALID."""
    path = tmp_path / "suite.yaml"
    path.write_text(f"cases:\n  - {{recorded: runs/x.json, tier: {tier}}}\n", encoding="utf-8")
    with pytest.raises(ConfigInvalidError, match="is not one of core"):
        load_suite(path)


def test_an_eval_leaves_no_scratch_behind_and_checks_its_report_path_first(
    tmp_path: Path,
) -> None:
    """Found by a hostile review: every eval left a ``corral-eval-*`` folder in /tmp with
    a copy of the business database per case (1 346 of them on one machine); and
    ``--markdown`` naming a folder ran the whole eval, then died with a traceback."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    suite = tmp_path / "suite.yaml"
    suite.write_text("cases:\n  - {m: 你好}\n  - {m: 我的打印机坏了}\n", encoding="utf-8")
    run = ("eval", str(AFTERSALES), "--suite", str(suite), "--json")
    env = {"TMPDIR": str(scratch)}
    done = corral_cli(tmp_path / "home", *run, ok=False, env=env)
    assert done.returncode in (0, 1), done.stderr
    assert json.loads(done.stdout)["cases"] == 2
    assert list(scratch.iterdir()) == []
    folder = corral_cli(tmp_path / "home", *run, "--markdown", str(tmp_path), ok=False, env=env)
    assert folder.returncode == 2 and "Traceback" not in folder.stderr
    assert "is a folder" in json.loads(folder.stdout)["error"]["message"]


async def test_a_case_s_turns_share_a_session_as_a_chat_client_s_do(tmp_path: Path) -> None:
    """A later request of a case reuses what an earlier turn found, as in production.

    Each finished turn's next message started a run with no session, so an eval could not
    see what carries over between requests (nor what must not: "另一个订单" answered for
    the last turn's order in the orders example, and no case could show it).
    """
    from corral import load_agent
    from corral.testing.evaluation import run_suite
    from tests.conftest import ORDERS

    suite = tmp_path / "eval.yaml"
    suite.write_text(
        "cases:\n"
        "  - name: the order of the last turn\n"
        "    messages: ['OD2611250001 到哪了', '它现在到哪了']\n"
        "    expect: {intent: logistics, status: finished, reply_contains: OD2611250001}\n",
        encoding="utf-8",
    )
    report = await run_suite(
        lambda: load_agent(ORDERS, data_dir=tmp_path / "data"), load_suite(suite)
    )
    assert report.as_json()["failures"] == []
