"""Review of issue 10: ``run_plan`` validates the caller's entities as a message's are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from corral import MemoryStore, Runtime, load_agent
from corral.errors import InvalidArgumentError, MissingArgumentError
from corral.testing import FixedEffects
from tests.conftest import AFTERSALES


@pytest.mark.parametrize(
    "entities",
    [
        {"order_id": "not an order id"},  # does not match the entity's patterns
        {"order_id": "HD20240501", "product": "banana"},  # not in the vocabulary
    ],
)
async def test_run_plan_refuses_entities_the_config_could_never_produce(
    tmp_path: Path, entities: dict[str, Any]
) -> None:
    """A message run only ever sees pattern matches and canonical vocabulary values
    (model extraction drops the rest); ``run_plan`` checks only the Python type."""
    agent = load_agent(AFTERSALES, data_dir=tmp_path / "business")
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    with pytest.raises(InvalidArgumentError):
        await runtime.run_plan("repair", entities=entities)


async def test_run_plan_normalises_an_upper_entity_as_extraction_does(tmp_path: Path) -> None:
    agent = load_agent(AFTERSALES, data_dir=tmp_path / "business")
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    summary = await runtime.run_plan("repair", entities={"order_id": "hd20240501"})
    state = await runtime.load_state(summary.run_id)
    assert state.entities["order_id"] == "HD20240501"  # ``upper: true`` in agent.yaml


async def test_run_plan_without_an_entity_the_intent_requires_is_refused_before_a_run(
    tmp_path: Path,
) -> None:
    """``repair`` is for 报修, which ``requires: [order_id]``: a message run asks for it.

    ``run_plan`` starts the run anyway, the first step fails MISSING_ARGUMENT and the run
    is handed off to a person (a handoff packet and a reply for nobody)."""
    agent = load_agent(AFTERSALES, data_dir=tmp_path / "business")
    store = MemoryStore()
    runtime = Runtime(agent, store, effects=FixedEffects())
    with pytest.raises(MissingArgumentError):
        await runtime.run_plan("repair")
    assert store.runs == {}


def test_run_plan_from_the_shell_can_give_a_date_range_entity(tmp_path: Path) -> None:
    """``--entity NAME=VALUE`` passes VALUE as a string; a ``date_range`` entity is a
    mapping, so no value given on the command line is ever accepted for one."""
    from tests.helpers import corral_cli

    value = '{"start": "2024-05-01", "end": "2024-05-31", "text": "May"}'
    done = corral_cli(
        tmp_path,
        "run-plan",
        str(AFTERSALES),
        "repair",
        "--entity",
        "order_id=HD20240501",
        "--entity",
        f"purchase_date={value}",
        ok=False,
    )
    assert done.returncode == 0, done.stderr + done.stdout


@pytest.mark.parametrize("value", ["nan", "inf", float("nan"), float("-inf")])
async def test_run_plan_refuses_a_non_finite_amount(value: object) -> None:
    """An ``amount`` from a message is always finite (model-extracted values are checked
    by ``_check_finite``); ``run_plan`` lets NaN and infinities through to the tools, where
    ``nan > limit`` is False and so passes any "too large" business rule."""
    from corral import tool
    from tests.helpers import build_agent

    @tool
    def refund(amount: float) -> float:
        """Stands for a write that moves money."""
        return amount

    agent = build_agent(
        [refund],
        [{"id": "s1", "tool": "refund", "args": {"amount": "$entities.amount"}}],
        entities={"amount": {"kind": "amount"}},
    )
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    with pytest.raises(InvalidArgumentError):
        await runtime.run_plan("p", entities={"amount": value})


async def test_run_plan_in_a_session_keeps_its_open_question_answerable(tmp_path: Path) -> None:
    """A message in a session with an open question answers it; ``run_plan`` in that
    session finishes and clears the session's ``open_run_id``, so the run that asked is
    left awaiting an answer that can no longer reach it (the next message starts anew)."""
    agent = load_agent(AFTERSALES, data_dir=tmp_path / "business")
    store = MemoryStore()
    runtime = Runtime(agent, store, effects=FixedEffects())
    asking = await runtime.start("my printer is broken, can I get a replacement?", session_id="s")
    assert asking.status.value == "awaiting_user"
    await runtime.run_plan("repair", entities={"order_id": "HD20240501"}, session_id="s")
    answered = await runtime.start("HD20240501", session_id="s")
    assert answered.run_id == asking.run_id  # the answer reached the run that asked


ORDERS_DIR = Path(__file__).resolve().parents[1] / "examples" / "orders"


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ({"start": "yesterday", "end": "2026-11-30"}, "Invalid isoformat string: 'yesterday'"),
        ({"start": "2026-11-30", "end": "2026-11-01"}, "it starts after it ends"),
        ({"start": "2026-11-01"}, "no 'end'"),
        ({"start": "2026-11-01", "end": "2026-11-02", "from": "x"}, "unknown keys ['from']"),
        ("上周", "Input should be a valid dictionary"),
    ],
)
async def test_a_date_range_entity_is_refused_unless_it_is_one_the_normaliser_writes(
    tmp_path: Path, value: Any, says: str
) -> None:
    """The defect: any mapping of strings passed, and the run was made; a word such as
    "yesterday" then failed the tool, a reversed range searched nothing, both handed off."""
    agent = load_agent(ORDERS_DIR, data_dir=tmp_path / "business")
    store = MemoryStore()
    runtime = Runtime(agent, store, effects=FixedEffects())
    with pytest.raises(InvalidArgumentError) as info:
        await runtime.run_plan("order_search", entities={"order_date": value})
    assert says in info.value.message
    assert '{"start": "2026-11-01", "end": "2026-11-30"}' in (info.value.hint or "")
    assert store.runs == {}


async def test_a_date_range_without_text_is_given_one_so_the_reply_can_show_it(
    tmp_path: Path,
) -> None:
    """The defect: the well-formed range of the README was searched, and then the reply's
    ``{period}`` had nothing to show: TEMPLATE_INVALID, handed off."""
    agent = load_agent(ORDERS_DIR, data_dir=tmp_path / "business")
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    done = await runtime.run_plan(
        "order_search", entities={"order_date": {"start": "2026-11-01", "end": "2026-11-30"}}
    )
    assert done.status.value == "finished", done.reply
    assert done.reply is not None and "2026-11-01 – 2026-11-30" in done.reply


async def test_an_entity_value_that_gives_two_values_is_refused(tmp_path: Path) -> None:
    """The defect: "HD20240501 or HD20240502" ran on the first, silently; a message
    giving two would have been asked which one."""
    agent = load_agent(AFTERSALES, data_dir=tmp_path / "business")
    store = MemoryStore()
    runtime = Runtime(agent, store, effects=FixedEffects())
    with pytest.raises(InvalidArgumentError, match="gives 2 values"):
        await runtime.run_plan("repair", entities={"order_id": "HD20240501 or HD20240502"})
    assert store.runs == {}
    done = await runtime.run_plan("repair", entities={"order_id": "订单 HD20240501"})
    assert done.status.value != "handed_off"


def test_run_plan_refuses_an_entity_given_twice_on_the_command_line(tmp_path: Path) -> None:
    """The defect: the last --entity of a name won, with no notice."""
    from tests.helpers import corral_cli

    done = corral_cli(
        tmp_path,
        "run-plan",
        str(AFTERSALES),
        "repair",
        "--entity",
        "order_id=HD20240501",
        "--entity",
        "order_id=HD20240502",
        ok=False,
    )
    assert done.returncode == 2 and "gives order_id twice" in done.stderr
    assert (
        not (tmp_path / "corral.db").exists() or "run_" not in corral_cli(tmp_path, "runs").stdout
    )
