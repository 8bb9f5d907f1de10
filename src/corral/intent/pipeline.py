"""The intent layer: rules, then trained classifiers, then a model fallback, with a threshold."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from corral.config import AgentConfig
from corral.contracts import IntentResult
from corral.intent.entities import EntityExtractor
from corral.intent.rules import RuleClassifier


class IntentClassifier(Protocol):
    """The seam for a trained classifier or a model fallback.

    It must return a label from the agent's declared intents, or ``None``.
    """

    def classify(self, text: str) -> IntentResult | None:
        """Classify one message."""
        ...


class IntentLayer:
    """Message -> ``IntentResult``. The label always comes from the declared enum."""

    def __init__(
        self,
        config: AgentConfig,
        classifiers: list[IntentClassifier] | None = None,
    ) -> None:
        self._declared = {spec.name for spec in config.intents}
        self._threshold = config.limits.intent_confidence
        self._rules = RuleClassifier(config.intents)
        self._layers: list[IntentClassifier] = [self._rules, *(classifiers or [])]
        self.entities = EntityExtractor(config.entities, config.timezone)

    def understand(self, text: str, now: datetime) -> IntentResult:
        """Classify and extract; a result below the threshold asks for clarification."""
        rule = self._rules.match(text)
        if (
            rule is not None
            and rule.confidence >= self._threshold
            and rule.intent in self._declared
        ):
            # the rules decide (the common case): one result, built once
            return IntentResult(
                label=rule.intent,
                confidence=rule.confidence,
                entities=self.entities.extract(text, now),
                source="rule",
                need_clarification=False,
                evidence=rule.source,
            )
        best: IntentResult | None = None
        for layer in self._layers:
            result = layer.classify(text)
            if result is None or result.label not in self._declared:
                continue
            if best is None or result.confidence > best.confidence:
                best = result
            if best.confidence >= self._threshold:
                break
        entities = self.entities.extract(text, now)
        if best is None:
            return IntentResult(
                label=None,
                confidence=0.0,
                entities=entities,
                source="none",
                need_clarification=True,
            )
        return best.model_copy(
            update={
                "entities": entities,
                "need_clarification": best.confidence < self._threshold,
            }
        )
