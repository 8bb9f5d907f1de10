"""``--model`` on every command that runs an agent, through the agent's own model settings.

Each test drives ``python -m corral`` in a fresh process against the loopback fake of the
OpenAI protocol (tests/fake_openai.py), and counts what reached it: a model name given on
the command line must use the agent's ``base_url`` and layer switches, a resumed run (or a
continued chat) must keep asking the model it began with, and the shipped examples must
call a model once one is named.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import AFTERSALES
from tests.fake_openai import Behaviour, FakeOpenAI
from tests.helpers import corral_cli

EXCHANGE = "我的打印机上周坏了，订单号 HD20240501，能换新吗？"
GIBBERISH = "asdfgh 啊啊啊 ？？？"
CHITCHAT = '{"label": "无关闲聊", "confidence": 0.95}'
NOWHERE = "http://127.0.0.1:9/v1"
"""The discard port: nothing answers there, so a call that ignores the agent's base URL
fails instead of reaching the fake."""


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI().start()
    yield server
    server.stop()


def agent_copy(tmp_path: Path, **model: Any) -> Path:
    """The after-sales example with its ``model:`` section replaced by ``model``."""
    folder = tmp_path / "agent"
    shutil.copytree(AFTERSALES, folder, ignore=shutil.ignore_patterns(".data"))
    config = yaml.safe_load((folder / "agent.yaml").read_text("utf-8"))
    config["model"] = model
    (folder / "agent.yaml").write_text(yaml.safe_dump(config, allow_unicode=True), "utf-8")
    return folder


def env_for(base_url: str) -> dict[str, str]:
    """Variables of a model-using CLI run: ``OPENAI_BASE_URL`` as given, a dummy key."""
    return {"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "test"}


def model_calls(home: Path, run_id: str) -> list[dict[str, Any]]:
    """The ``model_call`` lines of ``corral traces RUN --json``."""
    done = corral_cli(home, "traces", run_id, "--json")
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    return [line for line in lines if line["event"] == "model_call"]


def test_model_option_keeps_the_agents_base_url_and_switches(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    """``--model`` replaces the name only: the call goes to the agent's ``base_url``."""
    agent = agent_copy(tmp_path, base_url=fake.base_url, timeout_s=20, intent_fallback=True)
    fake.script(CHITCHAT)
    done = corral_cli(
        tmp_path / "home",
        "run",
        str(agent),
        GIBBERISH,
        "--json",
        "--model",
        "openai:fake-model",
        env=env_for(NOWHERE),
    )
    summary = json.loads(done.stdout)
    assert len(fake.requests) == 1, "the call did not reach the agent's base_url"
    assert fake.requests[0]["model"] == "fake-model"
    assert summary["intent"] == {"label": "无关闲聊", "confidence": 0.95, "source": "model"}


def test_resume_keeps_the_model_the_run_started_with(fake: FakeOpenAI, tmp_path: Path) -> None:
    """A run started with ``--model`` and resumed without one still asks that model."""
    home = tmp_path / "home"
    agent = agent_copy(tmp_path, base_url=fake.base_url, replies=True)
    started = corral_cli(
        home, "run", str(agent), EXCHANGE, "--json", "--model", "openai:fake-model"
    )
    run = json.loads(started.stdout)
    assert run["status"] == "awaiting_confirm"
    assert fake.requests == []  # nothing asked a model before the pause
    fake.script(*['{"text": "换新单已经建好了，新机会尽快寄出。"}'] * 3)
    resumed = corral_cli(home, "resume", run["run_id"], "--approve", "--json")
    assert json.loads(resumed.stdout)["status"] == "finished"
    assert fake.requests, "the resumed run asked no model"
    calls = model_calls(home, run["run_id"])
    assert [c["stage"] for c in calls][:1] == ["reply"]
    assert all(isinstance(c["duration_ms"], int | float) for c in calls)


def test_resume_model_option_overrides_the_recorded_one(fake: FakeOpenAI, tmp_path: Path) -> None:
    """``corral resume --model`` names another model for the rest of the run."""
    home = tmp_path / "home"
    agent = agent_copy(tmp_path, base_url=fake.base_url, replies=True)
    run = json.loads(corral_cli(home, "run", str(agent), EXCHANGE, "--json").stdout)
    assert run["status"] == "awaiting_confirm"
    fake.script(*['{"text": "换新单已经建好了。"}'] * 3)
    corral_cli(home, "resume", run["run_id"], "--approve", "--model", "openai:other")
    assert fake.requests and fake.requests[0]["model"] == "other"


def test_chat_takes_a_model_and_a_continued_session_keeps_it(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    agent = agent_copy(tmp_path, base_url=fake.base_url, intent_fallback=True)
    fake.script(CHITCHAT, CHITCHAT)
    first = corral_cli(
        home,
        "chat",
        str(agent),
        "--session",
        "s1",
        "--model",
        "openai:fake-model",
        stdin=GIBBERISH + "\n",
    )
    assert len(fake.requests) == 1, first.stdout
    corral_cli(home, "chat", str(agent), "--session", "s1", stdin="qwerty 哦哦 ？？\n")
    assert len(fake.requests) == 2, "the continued session did not ask its model"
    assert {r["model"] for r in fake.requests} == {"fake-model"}


def test_eval_takes_a_model(fake: FakeOpenAI, tmp_path: Path) -> None:
    agent = agent_copy(tmp_path, base_url=fake.base_url, intent_fallback=True)
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        yaml.safe_dump(
            {
                "cases": [
                    {
                        "name": "gibberish goes to the model",
                        "tier": "core",
                        "messages": [GIBBERISH],
                        "expect": {"intent": "无关闲聊"},
                    }
                ]
            },
            allow_unicode=True,
        ),
        "utf-8",
    )
    fake.script(CHITCHAT)
    corral_cli(
        tmp_path / "home",
        "eval",
        str(agent),
        "--suite",
        str(suite),
        "--json",
        "--model",
        "openai:fake-model",
    )
    assert len(fake.requests) == 1


@pytest.mark.parametrize("example", ["aftersales", "orders"])
def test_examples_call_a_model_once_one_is_named(
    fake: FakeOpenAI, tmp_path: Path, example: str
) -> None:
    """The examples ship their model layers switched off only by the missing name."""
    root = AFTERSALES.parent / example
    fake.script(*[CHITCHAT] * 3)
    corral_cli(
        tmp_path / "home",
        "run",
        str(root),
        GIBBERISH,
        "--json",
        "--model",
        "openai:x",
        env=env_for(fake.base_url),
    )
    assert fake.requests, f"examples/{example} asked no model with --model openai:x"


def run_with_one_model_call(
    fake: FakeOpenAI, tmp_path: Path, *before: Behaviour
) -> tuple[Path, str]:
    """A stored run whose intent came from one model call (11 + 7 tokens, the fake's),
    after the failed ones ``before`` (retried)."""
    home = tmp_path / "home"
    agent = agent_copy(tmp_path, base_url=fake.base_url, intent_fallback=True)
    fake.script(*before, CHITCHAT)
    done = corral_cli(
        home,
        "run",
        str(agent),
        GIBBERISH,
        "--json",
        "--model",
        "openai:m1",
        env=env_for(fake.base_url),  # so that the call is made on a base without the fix too
    )
    return home, json.loads(done.stdout)["run_id"]


def test_show_lists_model_calls(fake: FakeOpenAI, tmp_path: Path) -> None:
    home, run_id = run_with_one_model_call(fake, tmp_path)
    shown = corral_cli(home, "show", run_id).stdout
    assert "model calls: 1" in shown
    assert "intent #1 success  11+7 tokens" in shown
    brief = json.loads(corral_cli(home, "show", run_id, "--json").stdout)["model_calls"]
    assert len(brief) == 1
    call = brief[0]
    assert call["purpose"] == "intent" and call["attempt"] == 1 and call["status"] == "success"
    assert (call["prompt_tokens"], call["completion_tokens"], call["estimated"]) == (11, 7, False)
    assert call["model"] == "openai:m1" and call["latency_ms"] > 0


def test_traces_give_model_calls_their_duration(fake: FakeOpenAI, tmp_path: Path) -> None:
    home, run_id = run_with_one_model_call(fake, tmp_path)
    (traced,) = model_calls(home, run_id)
    assert isinstance(traced["duration_ms"], float) and traced["duration_ms"] > 0
    assert '"purpose": "intent"' in traced["input_summary"]
    table = corral_cli(home, "traces", run_id).stdout
    row = next(line for line in table.splitlines() if "model_call" in line)
    assert f"{traced['duration_ms']:.1f}" in row


def test_resume_and_chat_help_list_model() -> None:
    home = Path(os.devnull)
    for command in ("resume", "chat", "run", "eval"):
        done = corral_cli(home, command, "--help")
        assert "--model" in done.stdout, command


def test_replay_names_resolve_and_unknown_ones_are_refused(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    """``--model replay:RUN`` answers from a stored run, with the agent's settings around it."""
    home, run_id = run_with_one_model_call(fake, tmp_path)
    agent = tmp_path / "agent"
    again = corral_cli(home, "run", str(agent), GIBBERISH, "--json", "--model", f"replay:{run_id}")
    assert json.loads(again.stdout)["intent"]["source"] == "model"
    assert len(fake.requests) == 1  # answered from the log, not by the server
    wrong = corral_cli(home, "run", str(agent), GIBBERISH, "--model", "nosuch:x", ok=False)
    assert wrong.returncode == 2 and "CONFIG_INVALID" in wrong.stderr


def test_model_name_takes_the_agents_timeout_key_variable_and_base_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model ``--model`` builds has every connection setting of the agent's section."""
    from corral.cli.common import _load

    monkeypatch.setenv("SHOP_MODEL_KEY", "key-from-the-agents-variable")
    agent_dir = agent_copy(
        tmp_path,
        base_url="http://127.0.0.1:9/v1",
        api_key_env="SHOP_MODEL_KEY",
        timeout_s=7.5,
        intent_fallback=True,
    )
    agent = _load(agent_dir, tmp_path / "home", "openai:named-here")
    model: Any = agent.model
    assert (model.model, model.base_url, model.timeout_s) == (
        "named-here",
        "http://127.0.0.1:9/v1",
        7.5,
    )
    assert model.api_key == "key-from-the-agents-variable"
    assert agent.config.model.intent_fallback and agent.config.model.name == "openai:named-here"


def test_the_aftersales_long_tail_intent_is_planned_by_the_model(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    """订单问题 has no rules: only the model's fallback picks it, and the model plans it."""
    agent = agent_copy(tmp_path, base_url=fake.base_url, intent_fallback=True)
    plan = {
        "steps": [{"id": "s1", "tool": "query_order", "args": {"order_id": "$entities.order_id"}}]
    }
    fake.script('{"label": "订单问题", "confidence": 0.9}', json.dumps(plan))
    done = corral_cli(
        tmp_path / "home",
        "run",
        str(agent),
        "订单 HD20240501 的发票能开吗",
        "--json",
        "--model",
        "openai:fake-model",
    )
    summary = json.loads(done.stdout)
    assert summary["intent"]["label"] == "订单问题" and summary["status"] == "finished"
    assert [(s["tool"], s["status"]) for s in summary["steps"]] == [("query_order", "succeeded")]
    assert summary["reply"].startswith("我已经查过订单")
    assert len(fake.requests) == 2  # the intent, then the plan


def test_show_tells_a_retry_of_a_call_from_the_call(fake: FakeOpenAI, tmp_path: Path) -> None:
    """Found by a walkthrough: three retries of one call were each `extract #1`, as if
    the same call were listed three times."""
    home, run_id = run_with_one_model_call(fake, tmp_path, Behaviour(status=503))
    shown = corral_cli(home, "show", run_id).stdout
    assert "intent #1 error" in shown and "intent #1 try 2 success" in shown
    brief = json.loads(corral_cli(home, "show", run_id, "--json").stdout)["model_calls"]
    assert [(c["attempt"], c["try"]) for c in brief] == [(1, 1), (1, 2)]
