"""The one-intent agent config that the failure-path tests vary.

One intent (``ask``), chosen when a message contains ``keyword``, replying ``done``. Given
``steps`` it runs them as plan template ``p``; otherwise the model plans with ``tools``.
"""

from __future__ import annotations

from typing import Any

ORDER_ID = {"order_id": {"kind": "pattern", "patterns": [r"\b(A\d+)\b"]}}


def one_intent(
    keyword: str,
    *,
    steps: list[dict[str, Any]] | None = None,
    tools: list[str] | None = None,
    entities: dict[str, Any] | None = None,
    requires: list[str] | None = None,
    route: str = "plan",
    reply: str = "done",
    **extra: Any,
) -> dict[str, Any]:
    """An agent config dict; ``extra`` adds top-level keys (``model``, ``budget``...)."""
    intent: dict[str, Any] = {
        "name": "ask",
        "rules": [{"keywords": [keyword], "confidence": 0.95}],
        "route": route,
        "reply": "done",
        "requires": requires or [],
    }
    config: dict[str, Any] = {
        "name": "one-intent",
        "default_language": "en",
        "entities": ORDER_ID if entities is None else entities,
        "intents": [intent],
        "templates": {"done": {"zh": "好了", "en": reply}},
        **extra,
    }
    if steps is None:
        intent.update(planner="model", tools=tools or [])
    else:
        intent["plan"] = "p"
        config["plans"] = {"p": {"steps": steps}}
    return config
