"""The intent layer: rules, then trained classifiers, then a model fallback, with a threshold."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Protocol

from corral.config import AgentConfig, patterns_of
from corral.contracts import IntentResult
from corral.intent.confirmation import says_nothing_more
from corral.intent.entities import EntityExtractor, check_carry_references
from corral.intent.follow_up import FollowUp, read_follow_up
from corral.intent.questions import reads_as_question
from corral.intent.rules import RuleClassifier, RuleMatch, compile_rule
from corral.textfold import fold_word_characters


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
        self._unless = {
            spec.name: tuple(compile_rule(spec.name, n) for n in patterns_of(spec.unless))
            for spec in config.intents
            if spec.unless
        }
        self._layers: list[IntentClassifier] = [self._rules, *(classifiers or [])]
        check_carry_references(config.entities)
        self.entities = EntityExtractor(config.entities, config.timezone)

    def understand(self, text: str, now: datetime) -> IntentResult:
        """Classify and extract; a result below the threshold asks for clarification."""
        rule = self._decisive_rule(text)
        if rule is not None:
            # the rules decide (the common case): one result, from values typed already
            return IntentResult.whole(
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
            if self._negated(result.label, text):  # the rules heed it themselves
                continue  # the message says it is not this (``IntentSpec.unless``)
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

    def follow_up(self, text: str) -> FollowUp | None:
        """``text`` read as a follow-up ("那 OD… 呢？", "不对，是 OD…"), or ``None``.

        A line that says no intent of its own, which the run loop reads as the session's
        last request (``corral.runtime.follow``) when no rule or classifier understood
        it, and which at a confirmation may correct it.
        """
        return read_follow_up(*self.entities.without_values(text))

    def rule_intent(self, text: str) -> str | None:
        """The intent the rules give ``text`` with confidence, or ``None``.

        A free-text answer (``whole_answer``) that is a request of another intent ("发货了
        吗?" asked for a new address) is not taken as the value asked for.
        """
        rule = self._decisive_rule(text)
        return rule.intent if rule is not None else None

    def another_request(
        self,
        text: str,
        found: Mapping[str, object],
        slot: str,
        label: str | None,
        whole_answer: bool = False,
    ) -> bool:
        """Whether ``text``, typed at a ``label`` run's question for ``slot``, asks another thing.

        Code decides, from what the message says, not from a guess: it does not give the
        value asked for (``found``: what the extractor found, answering ``slot``), and a rule
        of another intent matches it with confidence ("我要投诉你们的客服" asked for an order
        id). A slot whose answer is free text (``whole_answer``: an address) takes almost
        anything, so the message must also name something or ask ("OD2611250001 发货了吗"),
        not merely match ("物流园路8号" is an address all the same).
        """
        if slot in found or self.rule_intent(text) in (None, label):
            return False
        return not whole_answer or bool(found) or reads_as_question(text)

    def _decisive_rule(self, text: str) -> RuleMatch | None:
        """The best matching rule when it decides alone: a declared intent, confident enough."""
        rule = self._rules.match(text)
        if rule is None or rule.confidence < self._threshold or rule.intent not in self._declared:
            return None
        return rule

    def negates(self, label: str, text: str) -> bool:
        """Whether ``text`` says it is not ``label``'s request (the intent's ``unless``).

        "还是别取消了" or "please do not cancel order OD…" at a cancellation's prompt:
        a no to it, never a line to answer "didn't understand" and take a yes after.
        """
        return self._negated(label, text)

    def only_negates(self, label: str, text: str) -> bool:
        """Whether ``text`` says it is not ``label``'s request and nothing more.

        What is left once the ``unless`` match is taken out says nothing of its own
        (``says_nothing_more``: "我…了", "还是…吧", "I …", "please"): "我不想改地址了",
        "还是用原来的地址吧". Not "别送到原来的地址，送到上海市…100号" nor "别用之前的地址",
        which give or ask for a new one. What a word before the match turns around ("不用
        原来的地址" refuses the old address) is the pattern's to exclude (a lookbehind):
        only it knows which of its words a 不 may stand before.
        """
        folded = fold_word_characters(text)
        for negation in self._unless.get(label, ()):
            found = negation.search(folded)
            if found is not None:
                left = f"{folded[: found.start()]} {folded[found.end() :]}"
                if says_nothing_more(left):
                    return True
        return False

    def _negated(self, label: str | None, text: str) -> bool:
        """Whether the message negates the intent (its ``unless``), read as rules read it."""
        unless = self._unless.get(label, ()) if label is not None else ()
        folded = fold_word_characters(text) if unless else text
        return any(negation.search(folded) for negation in unless)
