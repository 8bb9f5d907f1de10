"""An agent's own ``handoff`` (or ``failed``) template never costs the run its handoff.

The defect (reproduced through ``corral run`` and ``Runtime.start``): an agent that gave
corral's ``handoff`` template its own text with ``{order_id}`` loaded fine, and every
handoff then raised ``TEMPLATE_INVALID`` out of the run: the handoff template was filled
with no values at all, so the order id the user had given was "provided by no successful
step". The run was never stored (``corral runs`` did not list it, though its tool had
been called), and the person it was meant for never saw it.

Now the handoff reply is filled with what the run knows (the entities the user gave, the
facts of successful steps), as every other reply is. A value the run does not have yet
(a handoff before the order id was asked for) falls back to corral's own handoff text:
the safety net never fails. A placeholder no run could ever fill is refused at load.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from corral import Agent, MemoryStore, Runtime, SqlStore, parse_config, tool
from corral.errors import ConfigInvalidError
from corral.reply.render import DEFAULT_TEMPLATES
from tests.helpers import corral_cli

LOOKUP = {"id": "s1", "tool": "boom", "args": {"order_id": "$entities.order_id"}}
HANDOFF_EN = "Passed on to a colleague, order {order_id}."


@tool()
def boom(order_id: str) -> str:
    """Stands for a lookup whose service is down."""
    raise ValueError(f"the service is down for {order_id}")


def config(handoff: dict[str, str] | None = None) -> dict[str, Any]:
    """An order desk whose lookup always fails, and whose complaints go to a person."""
    return {
        "name": "edge",
        "default_language": "en",
        "entities": {"order_id": {"kind": "pattern", "patterns": [r"\b(A\d{3})\b"]}},
        "intents": [
            {
                "name": "lookup",
                "rules": [{"keywords": ["lookup"], "confidence": 0.9}],
                "route": "plan",
                "plan": "p",
                "requires": ["order_id"],
            },
            {
                "name": "complain",
                "rules": [{"keywords": ["complain"], "confidence": 0.9}],
                "route": "handoff",
            },
        ],
        "plans": {"p": {"steps": [LOOKUP]}},
        "templates": {
            "handoff": handoff or {"zh": "已转人工，订单 {order_id}。", "en": HANDOFF_EN}
        },
    }


def agent(**changes: Any) -> Agent:
    return Agent.build(parse_config(config(**changes)), [boom])


async def test_the_handoff_reply_shows_the_entity_the_user_gave() -> None:
    store = MemoryStore()
    summary = await Runtime(agent(), store).start("lookup A123 please")
    assert summary.status.value == "handed_off"
    assert summary.error_code == "TOOL_FAILED"  # the reason is the tool's, not the template's
    assert summary.reply == "Passed on to a colleague, order A123."
    assert summary.handoff is not None and summary.handoff.reason_code == "TOOL_FAILED"
    stored = store.get_run(summary.run_id)
    assert stored is not None and stored.status == "handed_off"


async def test_a_handoff_before_the_value_is_known_says_corral_s_own_text() -> None:
    store = MemoryStore()
    summary = await Runtime(agent(), store).start("I want to complain")
    assert summary.status.value == "handed_off"
    assert summary.reply == DEFAULT_TEMPLATES["handoff"].en
    assert summary.handoff is not None
    stored = store.get_run(summary.run_id)
    assert stored is not None and stored.status == "handed_off"


async def test_in_chinese_too() -> None:
    summary = await Runtime(agent()).start("lookup 订单 A123，查一下")
    assert summary.status.value == "handed_off"
    assert summary.reply == "已转人工，订单 A123。"


def test_a_placeholder_no_run_could_fill_is_refused_at_load() -> None:
    bad = {"zh": "已转人工 {ticket}", "en": "Passed on: {ticket}"}
    with pytest.raises(ConfigInvalidError, match=r"'handoff' uses \{ticket\}"):
        agent(handoff=bad)


def test_failed_is_checked_as_handoff_is() -> None:
    cfg = config()
    cfg["templates"]["failed"] = {"zh": "失败 {nope}", "en": "Failed {nope}"}
    with pytest.raises(ConfigInvalidError, match=r"'failed' uses \{nope\}"):
        Agent.build(parse_config(cfg), [boom])


def test_through_the_cli_the_run_is_stored_and_listed(tmp_path: Path) -> None:
    folder = tmp_path / "edge"
    folder.mkdir()
    (folder / "agent.yaml").write_text(yaml.safe_dump(config(), allow_unicode=True))
    (folder / "tools.py").write_text(
        "from corral import tool\n\n\n"
        "@tool()\n"
        "def boom(order_id: str) -> str:\n"
        '    """Stands for a lookup whose service is down."""\n'
        '    raise ValueError(f"down for {order_id}")\n'
    )
    home = tmp_path / "home"
    ran = corral_cli(home, "run", str(folder), "lookup A123", "--json")
    summary = json.loads(ran.stdout)
    assert summary["status"] == "handed_off"
    assert summary["reply"] == "Passed on to a colleague, order A123."
    listed = corral_cli(home, "runs", "--json")
    assert summary["run_id"] in listed.stdout
    store = SqlStore.open(home / "corral.db")
    try:
        record = store.get_run(summary["run_id"])
        assert record is not None and record.status == "handed_off"
    finally:
        store.engine.dispose()


def test_an_agent_yaml_given_for_its_folder_is_named_so(tmp_path: Path) -> None:
    """Found by the same review: ``load_agent(".../agent.yaml")`` said the file "has no
    agent.yaml"; ``corral run`` with the file said the same."""
    from corral import load_agent

    folder = tmp_path / "edge"
    folder.mkdir()
    (folder / "agent.yaml").write_text(yaml.safe_dump(config()))
    with pytest.raises(ConfigInvalidError, match="is a file; an agent is loaded from its folder"):
        load_agent(folder / "agent.yaml")
    done = corral_cli(tmp_path / "home", "run", str(folder / "agent.yaml"), "lookup A1", ok=False)
    assert done.returncode == 2 and "is a file" in done.stdout + done.stderr


async def test_an_agent_in_one_language_writes_its_templates_once() -> None:
    """Found by the same review: ``templates: {done: {en: ...}}`` was CONFIG_INVALID
    (``templates.done.zh: Field required``): an English-only desk had to write Chinese it
    cannot read. The text given stands for both languages."""
    cfg = config(handoff={"en": HANDOFF_EN})
    cfg["templates"]["greeting"] = {"zh": "您好！"}
    cfg["intents"].append(
        {
            "name": "hello",
            "rules": [{"keywords": ["hello", "你好"], "confidence": 0.9}],
            "route": "reply",
            "reply": "greeting",
        }
    )
    runtime = Runtime(Agent.build(parse_config(cfg), [boom]))
    english = await runtime.start("lookup A123 please")
    chinese = await runtime.start("lookup 订单 A123，查一下")
    assert english.reply == chinese.reply == "Passed on to a colleague, order A123."
    assert (await runtime.start("hello there")).reply == "您好！"


@pytest.mark.parametrize(
    ("text", "says"),
    [({}, "zh: Field required"), ({"fr": "Bonjour"}, "fr: Extra inputs"), ({"en": 5}, "en:")],
)
def test_a_template_with_no_text_is_still_refused(text: dict[str, Any], says: str) -> None:
    cfg = config()
    cfg["templates"]["greeting"] = text
    with pytest.raises(ConfigInvalidError, match=f"templates.greeting.{says}") as info:
        Agent.build(parse_config(cfg), [boom])
    if text == {"en": 5}:  # found on main: the language left out was named as missing too
        assert "greeting.zh" not in info.value.message


def test_an_agent_whose_plans_a_model_writes_may_show_their_facts() -> None:
    """Found by the review of this change: a model's plan may publish any fact, so the
    check at load refused a handoff text an agent with a model planner could fill."""
    cfg = config(handoff={"en": "Passed on; ticket {ticket_id}."})
    cfg["intents"][0] = {**cfg["intents"][0], "planner": "model", "tools": ["boom"]}
    del cfg["intents"][0]["plan"]
    del cfg["plans"]
    agent = Agent.build(parse_config(cfg), [boom])
    assert agent.renderer.uses("handoff") == {"ticket_id"}


def test_a_template_corral_does_not_ship_falls_back_to_its_handoff_text() -> None:
    from corral.config import TemplateText
    from corral.reply.render import ReplyRenderer

    renderer = ReplyRenderer({"refused": TemplateText(zh="不行 {x}", en="No {x}")})
    assert renderer.own_text("refused", "en") == DEFAULT_TEMPLATES["handoff"].en
    assert renderer.own_text("failed", "zh") == DEFAULT_TEMPLATES["failed"].zh
