"""Intent layer: rules with confidence, entities, relative dates, the threshold."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from corral import Agent, load_agent, tool
from corral.contracts import Language
from corral.intent.dates import chinese_number, find_relative_date
from corral.intent.entities import answer_language, detect_language
from tests.conftest import AFTERSALES

# Sunday 2026-11-29 10:00 UTC = 18:00 in Shanghai.
NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def test_time_zone_changes_the_day() -> None:
    late = datetime(2026, 11, 29, 20, 0, tzinfo=UTC)  # already 30 Nov in Shanghai
    assert find_relative_date("今天", late, "UTC").start.isoformat() == "2026-11-29"  # type: ignore[union-attr]
    shanghai = find_relative_date("今天", late, "Asia/Shanghai")
    assert shanghai is not None and shanghai.start.isoformat() == "2026-11-30"


def test_no_date_is_none() -> None:
    assert find_relative_date("打印机坏了", NOW, "UTC") is None


@pytest.mark.parametrize(
    ("text", "value"),
    [("三", 3), ("十", 10), ("十二", 12), ("二十", 20), ("两", 2), ("21", 21), ("abc", None)],
)
def test_chinese_numbers(text: str, value: int | None) -> None:
    assert chinese_number(text) == value


@pytest.fixture(scope="module")
def shared_agent(tmp_path_factory: pytest.TempPathFactory) -> Agent:
    """One after-sales agent for the property tests (understanding is read-only)."""
    return load_agent(AFTERSALES, data_dir=tmp_path_factory.mktemp("intent"))


FRAGMENTS = [
    "换新",
    "I want a replacement ",
    "打印机",
    "喷墨打印机",
    "scanner",
    "坏了",
    "卡纸",
    "保修多久",
    "气死我了",
    "worst service",
    "你好",
    " HD20240501 ",
    "单号hd20230315，",
    "上周买的",
    "yesterday",
    "最近三天",
]
MESSAGES = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=6).map(
    "".join
)
"""Arbitrary text with the agent's intent words and entities mixed in."""


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(MESSAGES)
def test_any_message_gets_a_declared_label_or_clarification_and_grounded_entities(
    shared_agent: Agent, text: str
) -> None:
    """Any text: the same answer every time, a declared label or none, clarification
    exactly when below the threshold, and entities taken from the text itself."""
    config = shared_agent.config
    result = shared_agent.intent.understand(text, NOW)
    assert shared_agent.intent.understand(text, NOW) == result
    assert result.label is None or result.label in {intent.name for intent in config.intents}
    threshold = config.limits.intent_confidence
    assert result.need_clarification == (result.label is None or result.confidence < threshold)
    order_id = result.entities.get("order_id")
    assert order_id is None or (order_id == order_id.upper() and order_id in text.upper())
    products = set(config.entities["product"].vocabulary.values())
    assert result.entities.get("product") in products | {None}
    found = find_relative_date(text, NOW, config.timezone)
    cued = any(cue in text.lower() for cue in config.entities["purchase_date"].cues)
    assert result.entities.get("purchase_date") == (found.as_json() if found and cued else None)


def test_language_detection() -> None:
    assert detect_language("我的打印机") == "zh"
    assert detect_language("my printer") == "en"
    assert detect_language("12345", default="en") == "en"
    assert detect_language("OD2611200002", default="zh") == "zh"  # an id is no English word
    assert detect_language("OD2611200002 please", default="zh") == "en"


@pytest.mark.parametrize(
    ("answer", "current", "spoken"),
    [
        ("The order number is HD20240501, thanks", "zh", "en"),
        ("it's HD20240501", "zh", "en"),
        ("订单号是HD20240501", "en", "zh"),
        ("我的订单 HD20240501", "en", "zh"),
        # names and ids say nothing of the language: the run keeps its own
        ("HD20240501", "zh", "zh"),
        ("iPhone 15", "zh", "zh"),
        ("LaserJet Pro M404", "zh", "zh"),
        ("北京市朝阳区建国路1号", "en", "en"),
        ("张三", "en", "en"),
        # a review: these names turned the run over
        ("Tower A, 88 Jianguo Road, Chaoyang", "zh", "zh"),
        ("Canon PIXMA G3010 (A4)", "zh", "zh"),
        ("Dr. No", "zh", "zh"),
        ("王美好", "en", "en"),
        ("上海市黄浦区好望角大厦5楼", "en", "en"),
        ("不对", "en", "zh"),
        ("想取消", "en", "zh"),
        ("The order number is HD20240501", "en", "en"),
        ("订单号是HD20240501", "zh", "zh"),
    ],
)
def test_an_answer_changes_the_language_only_when_it_is_a_sentence(
    answer: str, current: Language, spoken: Language
) -> None:
    assert answer_language(answer, current) == spoken


@pytest.mark.parametrize(
    ("message", "label"),
    [
        ("我的打印机坏了，订单号 HD20240501，能换新吗", "申请换新"),
        ("I want a replacement, order HD20240501", "申请换新"),
        ("打印机卡纸了", "报修"),
        ("my scanner stopped working", "报修"),
        ("打印机保修多久", "咨询"),
        ("你们这个打印机真是气死我了", "投诉"),
        ("this is the worst service", "投诉"),
        ("你好", "无关闲聊"),
        # a rule's `unless` (a negation) keeps it from voting: found by a walkthrough
        ("不要换新，HD20240501 帮我修一下", "报修"),
        ("I do not want an exchange for HD20240501, just repair it", "报修"),
        ("我不想投诉，只想问问打印机保修多久", "咨询"),
    ],
)
def test_rules_pick_the_declared_intent(aftersales: Agent, message: str, label: str) -> None:
    result = aftersales.intent.understand(message, NOW)
    assert result.label == label
    assert result.source == "rule"
    assert result.confidence >= 0.8
    assert not result.need_clarification


def test_gibberish_needs_clarification(aftersales: Agent) -> None:
    result = aftersales.intent.understand("asdfgh qwerty", NOW)
    assert result.label is None and result.need_clarification and result.source == "none"


def test_entities_are_extracted_and_normalised(aftersales: Agent) -> None:
    result = aftersales.intent.understand("上周买的打印机坏了，单号hd20240501", NOW)
    assert result.entities["order_id"] == "HD20240501"
    assert result.entities["product"] == "printer"
    assert result.entities["purchase_date"]["start"] == "2026-11-16"


@pytest.mark.parametrize(
    "message", ["Hello! Nice weather today, isn't it?", "打印机上周坏了", "昨天开始卡纸"]
)
def test_a_date_without_a_cue_is_no_purchase_date(aftersales: Agent, message: str) -> None:
    """Found by a walkthrough (and in the demo's chit-chat): any date was taken as the
    date of purchase ("today", "上周" when it broke)."""
    assert "purchase_date" not in aftersales.intent.understand(message, NOW).entities


def test_longest_vocabulary_word_wins(aftersales: Agent) -> None:
    result = aftersales.intent.understand("喷墨打印机坏了", NOW)
    assert result.entities["product"] == "inkjet"


def test_missing_entity_is_absent_not_guessed(aftersales: Agent) -> None:
    result = aftersales.intent.understand("我想换新", NOW)
    assert "order_id" not in result.entities


def test_below_threshold_is_flagged() -> None:
    from corral import parse_config
    from corral.intent.pipeline import IntentLayer

    config = parse_config(
        {
            "name": "t",
            "intents": [
                {
                    "name": "weak",
                    "route": "reply",
                    "reply": "done",
                    "rules": [{"keywords": ["maybe"], "confidence": 0.5}],
                }
            ],
        }
    )
    result = IntentLayer(config).understand("maybe", NOW)
    assert result.label == "weak" and result.need_clarification


def test_classifier_seam_is_used_after_rules_and_limited_to_declared_labels() -> None:
    from corral import IntentResult, parse_config
    from corral.intent.pipeline import IntentLayer

    class Fake:
        def __init__(self, label: str) -> None:
            self.label = label

        def classify(self, text: str) -> IntentResult | None:
            return IntentResult(label=self.label, confidence=0.95, source="classifier")

    config = parse_config(
        {"name": "t", "intents": [{"name": "known", "route": "reply", "reply": "done"}]}
    )
    assert IntentLayer(config, [Fake("known")]).understand("x", NOW).source == "classifier"
    invented = IntentLayer(config, [Fake("invented")]).understand("x", NOW)
    assert invented.label is None


def test_a_rule_whose_unless_is_no_regex_is_refused_at_load() -> None:
    from corral import parse_config
    from corral.errors import ConfigInvalidError
    from tests.one_intent import one_intent

    config = one_intent("swap", steps=[{"id": "s1", "tool": "generate_reply", "args": {}}])
    config["intents"][0]["rules"][0]["unless"] = "(不要"
    with pytest.raises(ConfigInvalidError, match="bad rule"):
        Agent.build(parse_config(config), [])


class Checked(BaseModel):
    ok: bool


@tool
def check() -> Checked:
    """Stands for a warranty check."""
    return Checked(ok=True)


async def test_an_answer_to_a_question_about_an_entity_needs_no_cue() -> None:
    """``cues`` keep a date out of a message that does not say what it is; an answer to
    "when did you buy it?" says so by answering."""
    from corral import MemoryStore, Runtime, parse_config
    from corral.testing import FixedEffects
    from tests.one_intent import one_intent

    entities = {"bought": {"kind": "date_range", "cues": ["买", "bought"]}}
    steps = [{"id": "s1", "tool": "check", "args": {}}]
    config = one_intent("warranty", steps=steps, requires=["bought"], entities=entities)
    agent = Agent.build(parse_config(config), [check])
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    asked = await runtime.start("warranty question, it broke yesterday")
    assert asked.status.value == "awaiting_user"  # "yesterday" is not when it was bought
    answered = await runtime.resume(asked.run_id, answer="last week")
    state = await runtime.load_state(answered.run_id)
    assert "bought" in state.entities and answered.status.value == "finished"
