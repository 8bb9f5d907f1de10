"""Issue 7, defect 3: arguments are validated before a person is asked to approve a call.

Literal arguments are type-checked against the tool's schema at load, every bound
argument is validated before confirmation, and the confirmation shows the arguments.
"""

from __future__ import annotations

import json
import textwrap
from datetime import date
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, StringConstraints

from corral import EventType, MemoryStore, RunStatus, Runtime, ToolPolicy, tool
from corral.config import TemplateText
from corral.errors import ConfigInvalidError
from corral.reply.render import ReplyRenderer
from corral.testing import FixedEffects
from tests.helpers import build_agent, corral_cli

ENTERED: list[dict[str, Any]] = []


class Exchange(BaseModel):
    exchange_id: str


@tool(policy=ToolPolicy(kind="write"))
def exchange_items(
    order_id: Annotated[str, StringConstraints(pattern=r"^HD\d{8}$")],
    item_ids: list[str],
    quantity: int = 1,
    ship_on: date | None = None,
) -> Exchange:
    """Create an exchange for some items of an order."""
    ENTERED.append({"order_id": order_id, "item_ids": item_ids, "quantity": quantity})
    return Exchange(exchange_id="EX1")


ORDER_ENTITY = {"order_id": {"kind": "pattern", "patterns": [r"\b([A-Z]{1,2}\d+)\b"]}}


def exchange_step(**args: Any) -> dict[str, Any]:
    return {
        "id": "s1",
        "tool": "exchange_items",
        "args": {"order_id": "$entities.order_id", "item_ids": ["X1", "X2"], **args},
        "requires_confirmation": True,
    }


# ------------------------------------------------------------------ literals, at load


@pytest.mark.parametrize(
    ("args", "argument", "expected"),
    [
        ({"quantity": "two"}, "s1.quantity", "expects int"),
        ({"item_ids": ["X1", 3]}, "s1.item_ids", "expects list[str]"),
        ({"item_ids": "X1"}, "s1.item_ids", "expects list[str]"),
        ({"ship_on": "next tuesday"}, "s1.ship_on", "expects date | None"),
    ],
)
def test_a_literal_of_the_wrong_type_is_rejected_at_load(
    args: dict[str, Any], argument: str, expected: str
) -> None:
    with pytest.raises(ConfigInvalidError) as info:
        build_agent([exchange_items], [exchange_step(**args)], entities=ORDER_ENTITY)
    message = info.value.message
    assert info.value.code.value == "CONFIG_INVALID"
    assert f"plan p: {argument}: literal" in message, message
    assert expected in message and "exchange_items" in message, message


def test_literals_that_validate_as_the_call_would_are_accepted() -> None:
    # YAML writes dates as text; the call would accept it, so the load does too.
    agent = build_agent(
        [exchange_items],
        [exchange_step(quantity=2, ship_on="2026-12-01", item_ids=["$$X1"])],
        entities=ORDER_ENTITY,
    )
    assert ("do", "p") in agent.template_graphs


# ------------------------------------------------------------------ bound arguments, before asking


async def test_an_invalid_bound_argument_fails_before_any_confirmation() -> None:
    ENTERED.clear()
    agent = build_agent([exchange_items], [exchange_step()], entities=ORDER_ENTITY)
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.start("go A1")  # "A1" is not an order id the tool accepts
    events = await runtime.events(summary.run_id)
    kinds = [e.type for e in events]
    assert EventType.CONFIRMATION_REQUESTED not in kinds
    assert summary.status is not RunStatus.AWAITING_CONFIRM
    assert ENTERED == [] and EventType.TOOL_ATTEMPT not in kinds
    (step,) = summary.steps
    assert step.error_code == "INVALID_ARGUMENT"
    (finished,) = [e.data for e in events if e.type is EventType.STEP_FINISHED]
    assert "order_id" in finished["reason"]


async def test_a_valid_call_is_confirmed_with_its_arguments_shown() -> None:
    ENTERED.clear()
    agent = build_agent(
        [exchange_items],
        [exchange_step()],
        entities=ORDER_ENTITY,
        plan_extra={"confirm": {"s1": "confirm_items"}},
        templates={
            "confirm_items": {
                "zh": "为订单 {args.order_id} 换 {args.item_ids}，可以吗？",
                "en": "I will exchange {args.item_ids} of order {args.order_id}. Shall I go ahead?",
            }
        },
    )
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start("go HD20240501")
    assert paused.status is RunStatus.AWAITING_CONFIRM and ENTERED == []
    prompts = [
        e.data["prompt"]
        for e in await runtime.events(paused.run_id)
        if e.type is EventType.CONFIRMATION_REQUESTED
    ]
    assert prompts == ["I will exchange X1, X2 of order HD20240501. Shall I go ahead?"]
    done = await runtime.resume(paused.run_id, approve=True)
    assert done.status is RunStatus.FINISHED
    assert ENTERED == [{"order_id": "HD20240501", "item_ids": ["X1", "X2"], "quantity": 1}]


def test_a_confirmation_may_only_show_parameters_of_its_tool() -> None:
    with pytest.raises(ConfigInvalidError) as info:
        build_agent(
            [exchange_items],
            [exchange_step()],
            entities=ORDER_ENTITY,
            plan_extra={"confirm": {"s1": "confirm_items"}},
            templates={"confirm_items": {"zh": "{args.sku}?", "en": "{args.sku}?"}},
        )
    assert "{args.sku}" in info.value.message and "exchange_items" in info.value.message


def test_templates_render_dotted_paths_and_lists_readably() -> None:
    from corral.reply.render import display

    renderer = ReplyRenderer({})
    values = {"args": {"order_id": "HD1", "item_ids": ["a", "b"], "n": {"k": 1}}}
    assert display(["a", "b"], "en") == "a, b"
    assert display({"k": 1}, "en") == "k: 1"
    assert renderer.render("confirm", {"call": "t (n: 1)", **values}, "en") == (
        "Next I will run t (n: 1). Shall I go ahead?"
    )
    custom = ReplyRenderer(
        {"x": TemplateText(zh="{args.item_ids}", en="{args.order_id}: {args.item_ids}")}
    )
    assert custom.render("x", values, "en") == "HD1: a, b"
    assert custom.render("x", values, "zh") == "a、b"


# ------------------------------------------------------------------ end to end, through the CLI

TOOLS_PY = """
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, StringConstraints

from corral import ToolPolicy, tool

MARK = Path(__file__).with_name("entered")


class Exchange(BaseModel):
    exchange_id: str


@tool(policy=ToolPolicy(kind="write"))
def exchange_items(
    order_id: Annotated[str, StringConstraints(pattern=r"^HD\\d{8}$")], item_ids: list[str]
) -> Exchange:
    \"\"\"Create an exchange for some items of an order.\"\"\"
    MARK.write_text(order_id)
    return Exchange(exchange_id="EX1")
"""

AGENT_YAML = """
name: validate-first
default_language: en
entities:
  order_id: {kind: pattern, patterns: ['\\b([A-Z]{1,2}\\d+)\\b']}
intents:
  - name: exchange
    rules: [{keywords: [exchange], confidence: 0.95}]
    route: plan
    plan: exchange
    reply: done
plans:
  exchange:
    steps:
      - id: s1
        tool: exchange_items
        args: {order_id: $entities.order_id, item_ids: [X1, X2]}
        requires_confirmation: true
    confirm: {s1: confirm_items}
templates:
  done: {zh: 好了, en: done}
  confirm_items:
    zh: 为订单 {args.order_id} 换 {args.item_ids}，可以吗？
    en: I will exchange {args.item_ids} of order {args.order_id}. Shall I go ahead?
"""


def _agent_dir(tmp_path: Path, yaml_text: str = AGENT_YAML) -> Path:
    root = tmp_path / "agent"
    root.mkdir()
    (root / "tools.py").write_text(textwrap.dedent(TOOLS_PY), encoding="utf-8")
    (root / "agent.yaml").write_text(yaml_text, encoding="utf-8")
    return root


def test_cli_never_asks_to_approve_a_call_that_cannot_run(tmp_path: Path) -> None:
    root = _agent_dir(tmp_path)
    home = tmp_path / "home"
    bad = json.loads(corral_cli(home, "run", str(root), "exchange A1", "--json").stdout)
    assert bad["status"] != "awaiting_confirm"
    assert bad["steps"][0]["error_code"] == "INVALID_ARGUMENT"
    assert "Shall I go ahead" not in (bad["reply"] or "")
    assert not (root / "entered").exists()

    good = json.loads(corral_cli(home, "run", str(root), "exchange HD20240501", "--json").stdout)
    assert good["status"] == "awaiting_confirm"
    assert good["reply"] == "I will exchange X1, X2 of order HD20240501. Shall I go ahead?"
    done = json.loads(corral_cli(home, "resume", good["run_id"], "--approve", "--json").stdout)
    assert done["status"] == "finished"
    assert (root / "entered").read_text() == "HD20240501"


def test_cli_rejects_a_wrong_literal_at_load(tmp_path: Path) -> None:
    root = _agent_dir(tmp_path, AGENT_YAML.replace("item_ids: [X1, X2]", "item_ids: 7"))
    done = corral_cli(tmp_path / "home", "run", str(root), "exchange HD20240501", ok=False)
    assert done.returncode == 2
    assert "CONFIG_INVALID" in done.stderr
    assert "s1.item_ids" in done.stderr and "list[str]" in done.stderr
    assert not (root / "entered").exists()
