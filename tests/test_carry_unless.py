"""An entity's ``carry_unless``: a message about another one does not reuse the last turn's.

Found by a conversation walkthrough: in one session, "OD2611250001 到哪了" and then
"另一个订单到哪了" answered for OD2611250001 again (the order of the last turn carried
over), and in the aftersales desk "打印机保修多久" and then "HD20250920 黑屏了，帮我修一下"
refused the repair: the carried product (a printer) was not the order's (a monitor), a
product the customer never named in that message.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest

from corral import MemoryStore, Runtime, load_agent, parse_config
from corral.config import EntitySpec
from corral.contracts import RunStatus
from corral.errors import ConfigInvalidError
from corral.intent.entities import EntityExtractor
from tests.conftest import AFTERSALES, ORDERS

NOW = datetime(2026, 11, 29, tzinfo=UTC)
OTHER = [r"(另一|另外一|其他|别的)\s*(个|笔)?\s*订单", r"\b(another|other)\s+order"]


def extractor(**specs: EntitySpec) -> EntityExtractor:
    return EntityExtractor(specs, "UTC")


def order(carry_unless: object = OTHER) -> EntitySpec:
    return EntitySpec.model_validate(
        {"patterns": [r"(OD\d{4})"], "upper": True, "carry_unless": carry_unless}
    )


@pytest.mark.parametrize(
    ("message", "kept_from_carrying"),
    [
        ("另一个订单到哪了", {"order_id"}),
        ("我的另外一笔订单呢", {"order_id"}),
        ("what about my OTHER order?", {"order_id"}),  # case-insensitive, as patterns are
        ("ａｎｏｔｈｅｒ order", {"order_id"}),  # full-width letters read as ASCII ones
        ("订单到哪了", set()),
        ("where is my order", set()),
        ("the mother ordered it", set()),
    ],
)
def test_a_message_about_another_one_keeps_it_from_carrying(
    message: str, kept_from_carrying: set[str]
) -> None:
    found = extractor(order_id=order(), phone=EntitySpec(patterns=[r"(1\d{10})"]))
    assert found.not_carried(message, {"order_id": "OD0001"}) == kept_from_carrying


def test_without_carry_unless_nothing_is_kept_from_carrying() -> None:
    assert extractor(order_id=order(None)).not_carried("另一个订单", {}) == frozenset()


def test_a_bad_carry_unless_is_config_invalid_naming_the_entity_and_field() -> None:
    with pytest.raises(ConfigInvalidError, match=r"entity 'order_id': bad carry_unless"):
        extractor(order_id=order("(另一"))


def test_a_carry_unless_that_could_run_for_minutes_is_refused() -> None:
    with pytest.raises(ConfigInvalidError, match="order_id"):
        extractor(order_id=order(r"(a+)+b"))


def intent_layer_of(entities: dict[str, object]) -> None:
    """Build the intent layer of an agent declaring ``entities``: where entities are checked."""
    from corral.intent.pipeline import IntentLayer

    config = parse_config(
        {
            "name": "carry",
            "entities": entities,
            "intents": [{"name": "hi", "rules": [{"keywords": ["hi"]}], "route": "reply"}],
            "templates": {"clarify": {"zh": "嗯", "en": "hm"}},
        }
    )
    IntentLayer(config, [])


def test_carry_unless_is_checked_when_the_agent_is_built() -> None:
    with pytest.raises(ConfigInvalidError, match="carry_unless"):
        intent_layer_of({"order_id": {"patterns": [r"(OD\d{4})"], "carry_unless": "(另一"}})


def test_another_order_in_a_session_is_asked_for_not_taken_from_the_last_turn(
    tmp_path: Path,
) -> None:
    async def talk() -> None:
        runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path), MemoryStore())
        first = await runtime.start("OD2611250001 到哪了", session_id="s")
        assert first.status is RunStatus.FINISHED and "OD2611250001" in (first.reply or "")
        other = await runtime.start("另一个订单到哪了", session_id="s")
        assert other.status is RunStatus.AWAITING_USER, other
        assert "OD2611250001" not in (other.reply or "") and "订单号" in (other.reply or "")
        given = await runtime.start("OD2611200002", session_id="s")
        assert given.status is RunStatus.FINISHED and "OD2611200002" in (given.reply or "")
        same = await runtime.start("它到哪了", session_id="s")  # no other: the last one
        assert "OD2611200002" in (same.reply or ""), same

    asyncio.run(talk())


@pytest.mark.parametrize(
    "line",
    [
        "查下我所有的订单",
        "我有哪些订单",
        "我下了几个订单",
        "list all my orders",
        "show me my orders",
    ],
)
def test_all_of_one_s_orders_after_one_order_s_answer_lists_them(tmp_path: Path, line: str) -> None:
    """Found on main: each answered for the order of the turn before, alone ("我有哪些订单"
    was not understood at all), and "never mind, show me my orders" at that order's
    address question did the same."""

    async def talk() -> None:
        runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path), MemoryStore())
        first = await runtime.start("OD2611280008 到哪了", session_id="s")
        assert first.status is RunStatus.FINISHED and "OD2611280008" in (first.reply or "")
        listed = await runtime.start(line, session_id="s")
        assert listed.status is RunStatus.FINISHED and listed.outcome == "success", listed
        for order in ("OD2611280008", "OD2611250001", "OD2611200002"):
            assert order in (listed.reply or ""), listed.reply

    asyncio.run(talk())


@pytest.mark.parametrize(
    ("line", "said"),
    [
        # a review of 24ee22d: each is about the order of the turn before
        ("这个订单有哪些商品", "OD2611200002"),
        ("这个订单有哪些物流信息", "顺丰"),
        ("refund it, I've had problems with all my orders from you", "459"),
        ("cancel this, my orders always arrive late", "already shipped"),
    ],
)
def test_this_order_beside_words_of_all_orders_is_still_that_order(
    tmp_path: Path, line: str, said: str
) -> None:
    async def talk() -> None:
        runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path), MemoryStore())
        await runtime.start("OD2611200002 到哪了", session_id="s")
        answered = await runtime.start(line, session_id="s")
        reply = answered.reply or ""
        assert said in reply and "OD2611280008" not in reply, reply

    asyncio.run(talk())


@pytest.mark.parametrize(
    ("line", "label"),
    [
        ("我下了几个订单", "query_order"),
        ("都有哪些订单？", "query_order"),
        # a review of 24ee22d: a count of orders before a request is that request's
        ("我下了几个订单，帮我取消一个", "cancel"),
        ("下了几个单子，有一个发错地址了", "change_address"),
    ],
)
def test_a_count_of_orders_asks_for_the_list_unless_a_request_follows(
    tmp_path: Path, line: str, label: str
) -> None:
    orders = load_agent(ORDERS, data_dir=tmp_path)
    assert orders.intent.understand(line, datetime.now(UTC)).label == label


def test_a_product_of_an_earlier_turn_does_not_refuse_an_order_named_now(
    tmp_path: Path,
) -> None:
    async def talk() -> None:
        runtime = Runtime(load_agent(AFTERSALES, data_dir=tmp_path), MemoryStore())
        asked = await runtime.start("打印机保修多久", session_id="s")
        assert asked.status is RunStatus.FINISHED
        repair = await runtime.start("HD20250920 黑屏了，帮我修一下", session_id="s")
        assert repair.status is RunStatus.FINISHED and repair.outcome == "success", repair
        assert "显示器" in (repair.reply or "") and "报修单" in (repair.reply or "")

    asyncio.run(talk())


def test_a_value_kept_from_carrying_is_dropped_from_the_session_not_kept_for_later(
    tmp_path: Path,
) -> None:
    """A review: the product skipped for the repair stayed in the session, and the turn
    after it ("还在保修期吗") carried it beside the order, and was refused again."""

    async def talk() -> None:
        runtime = Runtime(load_agent(AFTERSALES, data_dir=tmp_path), MemoryStore())
        await runtime.start("打印机保修多久", session_id="s")
        repair = await runtime.start("HD20250920 黑屏了，帮我修一下", session_id="s")
        assert repair.outcome == "success", repair
        later = await runtime.start("还在保修期吗", session_id="s")
        assert later.status is RunStatus.FINISHED and later.outcome == "success", later
        assert "HD20250920" in (later.reply or "") and "2028-09-20" in (later.reply or "")

    asyncio.run(talk())


def test_another_order_taken_back_leaves_no_order_for_the_next_request(tmp_path: Path) -> None:
    async def talk() -> None:
        runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path), MemoryStore())
        await runtime.start("OD2611250001 到哪了", session_id="s")
        asked = await runtime.start("另一个订单到哪了", session_id="s")
        assert asked.status is RunStatus.AWAITING_USER
        await runtime.start("算了", session_id="s")
        again = await runtime.start("它到哪了", session_id="s")
        assert again.status is RunStatus.AWAITING_USER, again  # which order: asked, not guessed
        assert "OD2611250001" not in (again.reply or "")

    asyncio.run(talk())


def test_a_run_that_carried_a_value_replays_on_the_same_path(tmp_path: Path) -> None:
    """A review: ``corral replay`` started every run with no session, so a run that
    carried an order from an earlier turn replayed without it and diverged."""
    from corral.runtime.replay import replay_run

    async def talk() -> None:
        agent = load_agent(ORDERS, data_dir=tmp_path)
        runtime = Runtime(agent, MemoryStore())
        await runtime.start("OD2611250001 到哪了", session_id="s")
        carried = await runtime.start("它到哪了", session_id="s")
        assert "OD2611250001" in (carried.reply or "")
        other = await runtime.start("另一个订单到哪了", session_id="s")  # carried: none
        for run_id in (carried.run_id, other.run_id):
            report = await replay_run(agent, await runtime.events(run_id))
            assert report.same_path, report

    asyncio.run(talk())


def test_a_product_named_now_is_not_refused_for_the_last_turn_s_order(tmp_path: Path) -> None:
    """A walkthrough: after a monitor's repair, "那我的打印机呢？也坏了" was refused as
    "订单 HD20250920 买的不是您说的这个产品", an order the customer did not name then."""

    async def talk() -> None:
        runtime = Runtime(load_agent(AFTERSALES, data_dir=tmp_path), MemoryStore())
        await runtime.start("HD20250920 黑屏了，帮我修一下", session_id="s")
        printer = await runtime.start("那我的打印机呢？也坏了", session_id="s")
        assert printer.status is RunStatus.AWAITING_USER, printer
        assert "订单号" in (printer.reply or "") and "不是您说的" not in (printer.reply or "")
        booked = await runtime.start("HD20240501", session_id="s")
        assert booked.outcome == "success" and "打印机" in (booked.reply or ""), booked

    asyncio.run(talk())


def product_and_order(changed: list[str]) -> EntityExtractor:
    spec = {"patterns": [r"(OD\d{4})"], "carry_unless_changed": changed}
    return extractor(
        order_id=EntitySpec.model_validate(spec),
        product=EntitySpec(
            kind="vocabulary", vocabulary={"打印机": "printer", "显示器": "monitor"}
        ),
    )


@pytest.mark.parametrize(
    ("message", "held", "kept_from_carrying"),
    [
        ("那我的打印机呢？也坏了", {"order_id": "OD0001", "product": "monitor"}, {"order_id"}),
        ("那我的打印机呢？也坏了", {"order_id": "OD0001"}, {"order_id"}),  # which one: asked
        ("打印机还在保修期吗", {"order_id": "OD0001", "product": "printer"}, set()),
        ("还在保修期吗", {"order_id": "OD0001", "product": "monitor"}, set()),
    ],
)
def test_another_value_of_a_named_entity_keeps_it_from_carrying(
    message: str, held: dict[str, str], kept_from_carrying: set[str]
) -> None:
    assert product_and_order(["product"]).not_carried(message, held) == kept_from_carrying


@pytest.mark.parametrize("named", ["prodcut", "order_id"])
def test_carry_unless_changed_naming_no_other_entity_is_config_invalid(named: str) -> None:
    entities = {
        "order_id": {"patterns": [r"(OD\d{4})"], "carry_unless_changed": [named]},
        "product": {"kind": "vocabulary", "vocabulary": {"打印机": "printer"}},
    }
    with pytest.raises(ConfigInvalidError, match=rf"carry_unless_changed names '{named}'"):
        intent_layer_of(entities)


def test_an_extractor_of_one_entity_reads_it_without_the_others() -> None:
    """run_plan reads a given value with an extractor of that entity alone: the example's
    order (carry_unless_changed: [product]) failed every run_plan as CONFIG_INVALID."""
    spec = EntitySpec.model_validate(
        {"patterns": [r"(OD\d{4})"], "carry_unless_changed": ["product"]}
    )
    alone = extractor(order_id=spec)
    assert alone.not_carried("那我的打印机呢", {"order_id": "OD0001"}) == frozenset()


def test_the_same_product_asked_about_keeps_the_order_of_the_last_turn(tmp_path: Path) -> None:
    """A review: "打印机还在保修期吗" after the printer's repair was answered for printers
    in general (the order was not carried, and was dropped from the session)."""

    async def talk() -> None:
        runtime = Runtime(load_agent(AFTERSALES, data_dir=tmp_path), MemoryStore())
        await runtime.start("HD20240501 打印机卡纸了", session_id="s")
        asked = await runtime.start("打印机还在保修期吗", session_id="s")
        assert asked.status is RunStatus.FINISHED, asked
        assert "HD20240501" in (asked.reply or "") and "2029-05-01" in (asked.reply or "")
        later = await runtime.start("那它还有多久过保？", session_id="s")
        assert "2029-05-01" in (later.reply or ""), later

    asyncio.run(talk())
