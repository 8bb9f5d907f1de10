"""Entities and normalisers: amounts, phones, fuzzy products, corrections, carry-over."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral import Agent, MemoryStore, RunStatus, Runtime, parse_config
from corral.intent.amounts import chinese_amount, find_amount
from corral.intent.entities import EntityExtractor
from corral.testing import FixedEffects
from corral.textfold import fold_letters_and_digits

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("三百块", 300),
        ("退我三百五十块钱", 350),
        ("两千五块", 2500),
        ("两千五百元", 2500),
        ("一万二块", 12000),
        ("三块五", 3.5),
        ("十块", 10),
        ("一百零五元", 105),
        ("300元", 300),
        ("¥1,299.50", 1299.5),
        ("1.5万元", 15000),
        ("refund 25 dollars", 25),
        ("99 yuan", 99),
        ("没有金额", None),
        ("订单 OD2611250001", None),
        # digits with a Chinese unit or k (a walkthrough: "3百块" was read as 百块, 100,
        # and the refund went through at 100)
        ("订单 OD2611200002 退款 3百块", 300),
        ("5千块", 5000),
        ("2十块", 20),
        ("2k元", 2000),
        ("¥1.2k", 1200),
        ("3百五十块", None),  # digits and a numeral mixed: not read, never guessed
        ("5千5百块", None),  # review: read as 500
        ("两千5百块", None),
        ("1万2千元", None),  # review: read as 2000
        ("¥3千万", None),  # review: read as 3000
        # a walkthrough: "1e3 元" was read as 3; odd forms are read whole or not at all
        ("1e3 元", 1000),
        ("退1E3元", 1000),
        ("2.5e2块", 250),
        ("¥1e3", 1000),
        ("1e3k元", None),
        ("1e999元", None),  # no finite amount
        ("1,000元", 1000),
        ("１０００元", 1000),
        ("1.5k元", 1500),
        ("1.5k", None),  # no currency: no amount
        ("-50元", None),  # was 50
        ("退款-50元", None),
        ("10-50元", None),  # a range, was 50
        ("1,00元", None),  # was 100
        ("1,,000元", None),  # was 1000
        ("12,3456元", None),  # was 123456
        ("1.2.3元", None),  # was 2.3
        (".5元", None),  # was 5
        ("0x10元", None),  # was 10
        ("1_000元", None),  # was 0
        ("1 000元", None),  # was 0
        ("1，500元", None),  # a Chinese input method's 1,500; was 500
        ("１．５万元", None),  # was 50000
        ("OD2611250001元", None),  # an id, was 2611250001
        ("OD2611250001 退款 500元", 500),
        ("退款，50元", 50),
        # a review: a currency code before the sign is no glue, nor a slash after words
        ("US$20", 20),
        ("refund HK$100", 100),
        ("RMB¥500", 500),
        ("退款/50元", 50),
        ("1/50元", None),
        # a second review: a sign before the currency sign, a number running on after it
        ("退款 -¥50", None),
        ("refund -$50", None),
        ("ABC$50", None),
        ("¥1，500元", None),  # was 1
        ("$1,00", None),  # was 1
        ("¥1 500", None),  # was 1
        ("¥1,500", 1500),
    ],
)
def test_amounts(text: str, value: float | None) -> None:
    assert find_amount(text) == value


@given(st.integers(0, 10**9), st.sampled_from(["{}元", "{:,}元", "¥{:,}", "{} 块", "{:,} yuan"]))
def test_a_written_number_is_read_as_its_value(number: int, form: str) -> None:
    text = form.format(number)
    assert find_amount(text) == number
    assert find_amount(fold_letters_and_digits(text.translate(_FULL_WIDTH))) == number


_FULL_WIDTH = str.maketrans("0123456789", "０１２３４５６７８９")
_NUMBERISH = st.text(alphabet="0123456789.,eE+-", min_size=1, max_size=12).filter(
    # a comma after a letter, or first, parts a list ("E,50元", ",50元"): 50 is an amount
    lambda s: any(c.isdigit() for c in s) and not re.search(r"(^|[eE]),", s)
)


@given(_NUMBERISH, st.sampled_from(["元", " 块", "", "退"]))
def test_a_number_like_token_is_read_whole_or_not_at_all(token: str, before: str) -> None:
    """Never the tail of the token ("1e3" as 3, "-50" as 50, "1,00" as 0)."""
    found = find_amount(f"{before}{token}元")
    assert found is None or found == _whole_value(token), token


def _whole_value(token: str) -> float | None:
    """What the whole token means as a plain number, if anything."""
    if re.fullmatch(r"\d{1,3}(,\d{3})+(\.\d+)?", token):
        return float(token.replace(",", ""))
    if "," in token:
        return None
    try:
        return float(token)
    except ValueError:
        return None


def test_chinese_amount_forms() -> None:
    assert chinese_amount("三百五") == 350
    assert chinese_amount("两万") == 20000
    assert chinese_amount("abc") is None


def test_orders_entities(orders: Agent) -> None:
    extract = orders.intent.entities.extract
    found = extract("手机号13800138001，订单 od2611250001，上个月买的耳机，退三百块", NOW)
    assert found["phone"] == "13800138001"
    assert found["order_id"] == "OD2611250001"
    assert found["order_date"]["start"] == "2026-10-01"
    assert found["product"] == "earphones"
    assert found["refund_amount"] == 300
    assert "phone" not in extract("订单号 23800138001 不是手机号", NOW)


def test_an_entity_is_not_read_from_a_message_its_unless_finds_in() -> None:
    """``unless``: the message speaks of another thing of its kind; an answer still counts."""
    from corral.config import EntitySpec

    specs = {"fee": EntitySpec(kind="amount", unless=["运费", r"(?i)\bshipping\b"])}
    extract = EntityExtractor(specs, "Asia/Shanghai").extract
    assert extract("退我30元", NOW) == {"fee": 30}
    assert extract("运费30元我自己出", NOW) == {}
    assert extract("I paid 30 dollars for SHIPPING", NOW) == {}
    assert extract("运费30元", NOW, answering="fee") == {"fee": 30}


def test_a_whole_answer_its_not_an_answer_finds_in_does_not_fit() -> None:
    from corral.config import EntitySpec

    specs = {"address": EntitySpec(whole_answer=True, not_an_answer=["^稍等", r"(?i)^hold on"])}
    fits = EntityExtractor(specs, "Asia/Shanghai").answer_fits
    assert fits("address", "上海市徐汇区漕溪北路100号")
    assert not fits("address", "稍等一下") and not fits("address", "HOLD ON")
    assert fits("other", "稍等")  # an entity that declares none takes any answer


def test_fuzzy_catalogue_matches_close_misspellings(orders: Agent) -> None:
    extract = orders.intent.entities.extract
    assert extract("my coffe machine is broken", NOW)["product"] == "coffee_machine"
    assert "product" not in extract("nothing close here", NOW)


def test_address_is_extracted(orders: Agent) -> None:
    found = orders.intent.entities.extract("地址改成北京市海淀区中关村大街 1 号，谢谢", NOW)
    assert found["new_address"] == "北京市海淀区中关村大街 1 号"


@pytest.mark.parametrize(
    ("line", "address"),
    [
        # found by a walkthrough: the address in the request line was asked for again
        ("OD2611250001 改地址到上海市徐汇区漕溪北路100号", "上海市徐汇区漕溪北路100号"),
        ("OD2611250001 改地址 上海市徐汇区漕溪北路100号", "上海市徐汇区漕溪北路100号"),
        ("OD2611250001 改收货地址为北京市朝阳区建国路88号", "北京市朝阳区建国路88号"),
        ("改地址：上海市徐汇区漕溪北路100号，OD2611250001", "上海市徐汇区漕溪北路100号"),
        ("OD2611250001 改地址 我还没想好", None),  # no place named after it
        ("OD2611250001 改地址", None),
        # a review of 4cf5000: a correction in English names a number and a street
        ("no, make it 88 Jianguo Road, Beijing", "88 Jianguo Road, Beijing"),
        ("no, make it the same way as last time", None),
        ("no, make it Building 5, Room 302", "Building 5, Room 302"),
        ("不对，改成订单 OD2611280008", None),
        ("不对，改成 OD 2611280008", None),
        ("不对，改成 2611280008", None),
        ("不对，改成 OD2611280008", None),  # an order id is never the address
    ],
)
def test_an_address_after_the_words_asking_to_change_it_is_taken(
    orders: Agent, line: str, address: str | None
) -> None:
    assert orders.intent.entities.extract(line, NOW).get("new_address") == address


def test_a_correction_overrides_and_is_recorded(orders: Agent) -> None:
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    asked = asyncio_run(runtime.start("改地址 OD2611250001"))
    assert asked.status is RunStatus.AWAITING_USER
    answered = asyncio_run(
        runtime.resume(asked.run_id, answer="不对，是 OD2611280008，改成广州市越秀区北京路 10 号")
    )
    assert answered.status is RunStatus.AWAITING_CONFIRM
    assert "OD2611280008" in (answered.reply or "")
    events = runtime.store.load_events(answered.run_id)
    merged = [e.data for e in events if e.type.value == "entities_merged"]
    assert any(m.get("replaced", {}).get("order_id") == "OD2611250001" for m in merged)


def test_entities_carry_over_in_a_session_but_dates_do_not(orders: Agent) -> None:
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    first = asyncio_run(runtime.start("查一下 OD2611200002 上周的物流", session_id="s1"))
    assert first.status is RunStatus.FINISHED
    second = asyncio_run(runtime.start("那帮我退款吧", session_id="s1"))
    assert second.status is RunStatus.AWAITING_CONFIRM  # order id came from the session
    state = asyncio_run(runtime.load_state(second.run_id))
    assert state.entities["order_id"] == "OD2611200002"
    assert "order_date" not in state.entities
    other = asyncio_run(runtime.start("那帮我退款吧", session_id="s2"))
    assert other.status is RunStatus.AWAITING_USER  # another session knows nothing


def test_vocabulary_without_fuzzy_is_exact() -> None:
    config = parse_config(
        {
            "name": "t",
            "intents": [{"name": "x", "route": "reply", "reply": "done"}],
            "entities": {"p": {"kind": "vocabulary", "vocabulary": {"coffee machine": "cm"}}},
        }
    )
    extractor = EntityExtractor(config.entities, "UTC")
    assert extractor.extract("coffe machine", NOW) == {}
    assert extractor.extract("Coffee Machine", NOW) == {"p": "cm"}


def test_a_pattern_with_alternatives_takes_the_group_that_matched() -> None:
    """``order (\\d+)|ref (\\d+)``: the second form's number, not None (which crashed with
    ``upper`` and was silently missed as a mention)."""
    config = parse_config(
        {
            "name": "t",
            "intents": [{"name": "x", "route": "reply", "reply": "done"}],
            "entities": {
                "ref": {"patterns": [r"order (\w+)|ref (\w+)"], "upper": True},
            },
        }
    )
    extractor = EntityExtractor(config.entities, "UTC")
    assert extractor.extract("my ref ab12", NOW) == {"ref": "AB12"}
    assert extractor.extract("my order cd34", NOW) == {"ref": "CD34"}
    assert extractor.mentions("order cd34 or ref ab12", ["ref"]) == {"ref": ["CD34", "AB12"]}


def asyncio_run(coro):  # type: ignore[no-untyped-def]
    import asyncio

    return asyncio.run(coro)
