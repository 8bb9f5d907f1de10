"""Rule-based intent classification: regexes and keywords, each with a fixed confidence."""

from __future__ import annotations

import re
from dataclasses import dataclass

from corral.config import IntentSpec, patterns_of
from corral.contracts import IntentResult
from corral.errors import ConfigInvalidError
from corral.regex_checks import refuse_explosive
from corral.textfold import fold_word_characters


@dataclass(frozen=True)
class _CompiledRule:
    intent: str
    priority: int
    confidence: float
    pattern: re.Pattern[str]
    source: str
    unless: tuple[re.Pattern[str], ...] = ()
    """Any of these found in the message, the rule does not vote: its own ``unless``
    (``IntentRule.unless``) and its intent's (``IntentSpec.unless``)."""


RuleMatch = _CompiledRule
"""The rule that decided a message: its ``intent``, ``confidence`` and ``source`` text."""


def _keyword_pattern(word: str) -> str:
    escaped = re.escape(word)
    # ASCII words match whole words; CJK words match as substrings (no spaces in Chinese).
    return rf"\b{escaped}\b" if word.isascii() else escaped


def compile_rule(intent: str, source: str) -> re.Pattern[str]:
    """A rule's regex, case-insensitive; ``CONFIG_INVALID`` naming the intent if it is bad."""
    try:
        compiled = re.compile(source, re.IGNORECASE)
    except (re.error, ValueError) as exc:  # (?a)(?u) is a ValueError
        raise ConfigInvalidError(f"intent {intent!r}: bad rule {source!r}: {exc}") from None
    refuse_explosive(source, f"intent {intent!r}", re.IGNORECASE)
    if compiled.search("") is not None and compiled.search("\x00") is not None:
        raise ConfigInvalidError(
            f"intent {intent!r}: rule {source!r} matches every message (it matches an empty"
            " text): an empty regex, or one whose every part is optional"
        )
    return compiled


class RuleClassifier:
    """The first and cheapest layer of intent: deterministic, explainable, always on."""

    def __init__(self, intents: list[IntentSpec]) -> None:
        self._rules: list[_CompiledRule] = []
        made: dict[str, re.Pattern[str]] = {}  # a pattern shared by YAML aliases: once

        def compiled_once(intent: str, source: str) -> re.Pattern[str]:
            found = made.get(source)
            if found is None:
                found = made[source] = compile_rule(intent, source)
            return found

        for spec in intents:
            for rule in spec.rules:
                sources: list[str] = []
                sources.extend(patterns_of(rule.pattern))
                sources.extend(_keyword_pattern(k) for k in rule.keywords)
                negations = [*patterns_of(rule.unless), *patterns_of(spec.unless)]
                unless = tuple(compiled_once(spec.name, n) for n in negations)
                for source in sources:
                    compiled = compiled_once(spec.name, source)
                    self._rules.append(
                        _CompiledRule(
                            spec.name, spec.priority, rule.confidence, compiled, source, unless
                        )
                    )

    def match(self, text: str) -> RuleMatch | None:
        """The best matching rule, or ``None`` when no rule matches.

        Full-width letters and digits are read as ASCII ones, as entities read them, and
        typographic apostrophes as ``'`` ("don’t").
        """
        text = fold_word_characters(text)
        best: _CompiledRule | None = None
        for rule in self._rules:
            if (
                rule.pattern.search(text)
                and (
                    best is None
                    or (rule.confidence, rule.priority) > (best.confidence, best.priority)
                )
                and not (rule.unless and any(n.search(text) for n in rule.unless))
            ):
                best = rule
        return best

    def classify(self, text: str) -> IntentResult | None:
        """The best matching rule's intent, or ``None`` when no rule matches."""
        best = self.match(text)
        if best is None:
            return None
        return IntentResult(
            label=best.intent, confidence=best.confidence, source="rule", evidence=best.source
        )
