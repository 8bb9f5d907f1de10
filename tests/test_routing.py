"""Route layer: per-intent policy decides, by code."""

from __future__ import annotations

from corral import Agent, IntentResult, RouteAction
from corral.routing.router import allowed_tools, route


def understood(label: str | None, confidence: float = 0.95) -> IntentResult:
    return IntentResult(
        label=label,
        confidence=confidence,
        source="rule",
        need_clarification=confidence < 0.8 or label is None,
    )


def test_complaint_is_handed_off_with_no_tools(aftersales: Agent) -> None:
    decision = route(aftersales.config, understood("投诉"), {})
    assert decision.action is RouteAction.HANDOFF
    assert decision.allowed_tools == []


def test_chitchat_gets_a_canned_reply(aftersales: Agent) -> None:
    decision = route(aftersales.config, understood("无关闲聊"), {})
    assert decision.action is RouteAction.REPLY and decision.template == "chitchat"


def test_low_confidence_clarifies(aftersales: Agent) -> None:
    decision = route(aftersales.config, understood("申请换新", 0.5), {"order_id": "HD20240501"})
    assert decision.action is RouteAction.CLARIFY


def test_missing_required_entity_is_reported(aftersales: Agent) -> None:
    decision = route(aftersales.config, understood("申请换新"), {})
    assert decision.action is RouteAction.PLAN
    assert decision.missing_entities == ["order_id"]


def test_allow_list_defaults_to_the_plan_tools(aftersales: Agent) -> None:
    assert allowed_tools(aftersales.config, "申请换新") == [
        "check_evidence",
        "create_exchange_order",
        "generate_reply",
        "query_order",
        "query_policy",
    ]
    assert "create_exchange_order" not in allowed_tools(aftersales.config, "报修")


def test_allow_list_includes_equivalent_tools_when_the_registry_is_known(
    aftersales: Agent,
) -> None:
    allowed = allowed_tools(aftersales.config, "报修", aftersales.tools)
    assert "query_order_archive" in allowed
    assert "create_exchange_order" not in allowed


def test_a_plan_template_asks_for_the_entities_it_needs(aftersales: Agent) -> None:
    """A warranty question names a product or an order: each picks the template that reads
    it, and only the chosen template's entities are asked for (walkthrough: "How long is
    the warranty on order HD20240501?" was asked which product)."""
    by_order = route(aftersales.config, understood("咨询"), {"order_id": "HD20240501"})
    assert (by_order.template, by_order.missing_entities) == ("consult_order", [])
    by_product = route(aftersales.config, understood("咨询"), {"product": "monitor"})
    assert (by_product.template, by_product.missing_entities) == ("consult", [])
    neither = route(aftersales.config, understood("咨询"), {})
    assert (neither.template, neither.missing_entities) == ("consult", ["product"])
