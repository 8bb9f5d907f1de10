"""An intent's ``unless``: a message that negates the intent is not it, by any layer.

Found by a walkthrough: "please do not cancel my order OD2611250001" and "我还要这个订单，
不要取消" were taken as the cancel intent (the trained classifier voted for it where the
rules did not), and the cancellation was proposed.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from corral import parse_config
from corral.contracts import IntentResult
from corral.errors import ConfigInvalidError
from corral.intent.pipeline import IntentLayer
from tests.conftest import ROOT

NOW = datetime(2026, 11, 29, tzinfo=UTC)


class Votes:
    """A trained classifier that always votes for one intent."""

    def __init__(self, label: str) -> None:
        self.label = label

    def classify(self, text: str) -> IntentResult:
        return IntentResult(label=self.label, confidence=0.97, source="classifier")


def layer(unless: str | list[object] | None, label: str = "cancel") -> IntentLayer:
    cancel: dict[str, object] = {
        "name": "cancel",
        "rules": [{"keywords": ["cancel", "取消"], "confidence": 0.93}],
        "route": "reply",
        "reply": "ok",
    }
    if unless is not None:
        cancel["unless"] = unless
    track = {
        "name": "track",
        "rules": [{"keywords": ["where"], "confidence": 0.9}],
        "route": "reply",
        "reply": "ok",
    }
    config = parse_config(
        {
            "name": "negation",
            "intents": [cancel, track],
            "templates": {"ok": {"zh": "好", "en": "ok"}},
        }
    )
    return IntentLayer(config, [Votes(label)])


NEGATION = r"(不要|别)\s*取消|\b(don'?t|do not)\s+cancel"


@pytest.mark.parametrize(
    "message",
    [
        "please do not cancel my order",
        "我还要这个订单，不要取消",
        "DON'T cancel it",
        # typed on a phone or pasted from a document: the apostrophe is not ASCII's
        "don’t cancel it",
        "I donʼt cancel",
        "ＤＯＮ’Ｔ cancel it",
    ],
)
def test_no_layer_chooses_an_intent_its_message_negates(message: str) -> None:
    understood = layer(NEGATION).understand(message, NOW)
    assert understood.label != "cancel"
    assert understood.need_clarification  # nothing else fits: ask, never cancel
    before = layer(None).understand(message, NOW)  # without it, the cancel was chosen
    assert before.label == "cancel"


def test_a_negated_rule_leaves_the_next_rule_to_decide() -> None:
    understood = layer(NEGATION).understand("do not cancel, where is it?", NOW)
    assert understood.label == "track" and understood.source == "rule"


def test_a_message_that_does_not_negate_it_is_still_it() -> None:
    understood = layer(NEGATION).understand("cancel my order please", NOW)
    assert understood.label == "cancel" and not understood.need_clarification


def test_a_bad_unless_is_refused_at_load() -> None:
    with pytest.raises(ConfigInvalidError, match="intent 'cancel'"):
        layer("(unclosed")


def test_the_orders_example_heeds_it() -> None:
    from corral import load_agent

    agent = load_agent(ROOT / "examples" / "orders")
    understood = agent.intent.understand("please do not cancel my order OD2611250001", NOW)
    assert understood.label != "cancel"


def test_an_unless_and_a_pattern_may_be_lists_of_any_of_their_regexes() -> None:
    """A long alternation one case a line, and a part shared by two intents written once
    (a YAML anchor, which makes lists within the list): any one of them decides."""
    shared = [r"(不要|别)\s*取消", [r"\b(don'?t|do not)\s+cancel"]]
    config = parse_config(
        {
            "name": "lists",
            "intents": [
                {
                    "name": "cancel",
                    "rules": [{"pattern": [r"\bcancel\b", "取消"], "confidence": 0.93}],
                    "unless": [shared, r"\bnever\s+mind\b"],
                    "route": "reply",
                    "reply": "ok",
                },
                {
                    "name": "track",
                    "rules": [{"pattern": [[r"\bwhere\b"], "到哪"], "confidence": 0.9}],
                    "route": "reply",
                    "reply": "ok",
                },
            ],
            "templates": {"ok": {"zh": "好", "en": "ok"}},
        }
    )
    intents = IntentLayer(config)
    assert intents.understand("cancel it", NOW).label == "cancel"
    assert intents.understand("帮我取消", NOW).label == "cancel"
    for negated in ("don't cancel, where is it", "不要取消，到哪了", "never mind cancel, where"):
        assert intents.understand(negated, NOW).label == "track", negated


def test_a_bad_regex_in_a_list_is_refused_at_load() -> None:
    with pytest.raises(ConfigInvalidError, match="intent 'cancel'"):
        layer([r"\bfine\b", "(unclosed"])


def test_each_regex_of_a_list_is_its_own() -> None:
    """A review: joined into one alternation, a part's leading flags ((?a), (?i)(?s)), its
    backreferences and its group names broke or changed the others, and two broken parts
    could make one that compiled. Each is compiled and searched alone."""
    understood = layer([r"(?x) do \s+ not \s+ cancel  # spoken", r"(?a)(?i)never\s+cancel"])
    assert understood.understand("do not cancel, where?", NOW).label == "track"
    assert understood.understand("NEVER cancel it", NOW).label != "cancel"
    assert understood.understand("cancel it", NOW).label == "cancel"
    twice = layer([r"(?P<w>a)(?P=w) cancel", r"(b)\1 cancel"])
    assert twice.understand("bb cancel", NOW).label != "cancel"
    with pytest.raises(ConfigInvalidError, match=r"bad rule '\(a'"):
        layer(["(a", "b)"])


@pytest.mark.parametrize("everything", ["", "a*", "(?i)", "()", "|", "(?:)"])
def test_a_regex_that_matches_every_message_is_refused(everything: str) -> None:
    """A review: ``(?i)`` or ``a*`` in a list matched every message, so no layer could
    choose the intent; as a rule's pattern it would vote on anything."""
    with pytest.raises(ConfigInvalidError, match="matches every message"):
        layer([r"\bfine\b", everything])
    with pytest.raises(ConfigInvalidError, match="matches every message"):
        layer(everything)


def test_an_empty_list_of_regexes_is_refused() -> None:
    with pytest.raises(ConfigInvalidError, match="empty list of regexes"):
        layer([])


def test_the_evidence_of_a_list_pattern_is_the_regex_that_matched() -> None:
    """Joined into one, every run's log held the whole list (4 KB of regexes a message in
    the orders example's refund_status)."""
    config = parse_config(
        {
            "name": "evidence",
            "intents": [
                {
                    "name": "track",
                    "rules": [{"pattern": [r"\bwhere\b", ["(?i)到哪", r"\btrack\b"]]}],
                    "route": "reply",
                    "reply": "ok",
                }
            ],
            "templates": {"ok": {"zh": "好", "en": "ok"}},
        }
    )
    intents = IntentLayer(config)
    assert intents.understand("包裹到哪了", NOW).evidence == "(?i)到哪"
    assert intents.understand("track it", NOW).evidence == r"\btrack\b"
