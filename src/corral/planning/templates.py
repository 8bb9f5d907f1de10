"""Plans from the fixed DAG templates declared in config."""

from __future__ import annotations

from corral.config import AgentConfig
from corral.contracts import Plan
from corral.errors import ConfigInvalidError


def plan_from_template(config: AgentConfig, template: str, intent: str, plan_id: str) -> Plan:
    """Instantiate the named template as a ``Plan``."""
    try:
        declared = config.plans[template]
    except KeyError:
        raise ConfigInvalidError(
            f"intent {intent!r} names unknown plan template {template!r}",
            hint=f"templates: {', '.join(sorted(config.plans))}",
        ) from None
    return Plan(
        plan_id=plan_id,
        intent=intent,
        steps=list(declared.steps),
        source="template",
        template=template,
    )
