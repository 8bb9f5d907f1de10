"""Redaction: what logs, ``traces``, ``show``, ``handoff`` and handoff packets never show.

Built-in detectors find phone numbers (Chinese mobiles and international), e-mail
addresses, Chinese ID-card numbers (checksum verified), bank-card numbers (Luhn
verified), API keys and bearer tokens. An agent adds tool fields marked
``Annotated[str, Sensitive()]`` and its own ``redaction.patterns``; the values of
sensitive fields are also hidden wherever else they appear (a user message, a summary).

What to redact is recorded in each run's ``run_started`` event, so commands that do not
load the agent (``traces``, ``show``) redact as the agent would. The event store itself
keeps the real values: a resumed run must call its tools with them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from corral.contracts import Event, EventType

if TYPE_CHECKING:
    from corral.agent import Agent

REDACTED = "[REDACTED]"
MIN_LITERAL = 4
"""Sensitive values shorter than this are hidden under their field only, not everywhere."""

_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"
_SECRET_KEY = re.compile(
    r"(?i)(?:.*[_-])?(?:api[_-]?key|apikey|access[_-]?token|auth[_-]?token|token|secret"
    r"|password|passwd|authorization|private[_-]?key)"
)
_SECRETS = (
    (re.compile(r"(?i)bearer\s+[A-Za-z0-9\-._~+/]+=*"), "Bearer [SECRET]"),
    (re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{6,}"), "[API_KEY]"),
    (re.compile(r"sk-[A-Za-z0-9_\-]{16,}"), "[API_KEY]"),  # glued to a word
    (
        re.compile(
            r"(?i)((?:api[_-]?)?key|apikey|access[_-]?token|token|secret"
            r"|password|passwd|pwd)([\"']?\s*[=:]\s*[\"']?)[^\s\"'&,;]+"
        ),
        r"\1\2[SECRET]",
    ),
    (
        re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}"),
        "[EMAIL]",
    ),
)
_MAY_HOLD_SECRET = re.compile(r"(?i)bearer|sk-|key|token|secret|passw|pwd|@")
_SEVEN_DIGITS = re.compile(r"\d(?:[ ()\-]{0,2}\d){6}")
_ID_NUMBER = re.compile(r"(?<!\d)\d{17}[\dXx](?!\d)")
_CARD = re.compile(r"(?<!\d)(?:\d{13,19}|\d{4}(?:[ -]\d{4}){2,3}(?:[ -]\d{1,3})?)(?!\d)")
_PHONES = (
    re.compile(r"(?<![\d+])(?:(?:\+|00)86[ -]?)?1[3-9]\d(?:[ -]?\d{4}){2}(?!\d)"),
    re.compile(r"(?<![\d+])\+\d{1,3}[ -]?(?:\(\d{1,4}\)[ -]?)?\d(?:[ -]?\d){5,13}(?!\d)"),
)


def id_number_valid(text: str) -> bool:
    """The checksum of an 18-character Chinese resident ID (GB 11643)."""
    total = sum(int(d) * w for d, w in zip(text[:17], _ID_WEIGHTS, strict=True))
    return _ID_CHECK[total % 11] == text[17].upper()


def luhn_valid(digits: str) -> bool:
    """The Luhn check of a card number (digits only)."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char) * (2 if index % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


def _id_number(match: re.Match[str]) -> str:
    return "[ID_NUMBER]" if id_number_valid(match.group()) else match.group()


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"[ -]", "", match.group())
    return "[CARD]" if 13 <= len(digits) <= 19 and luhn_valid(digits) else match.group()


def redact_builtin(text: str) -> str:
    """``text`` with the built-in kinds of personal data and secrets replaced by markers."""
    if _MAY_HOLD_SECRET.search(text):
        for pattern, marker in _SECRETS:
            text = pattern.sub(marker, text)
    if _SEVEN_DIGITS.search(text):  # the shortest number redacted has seven digits
        text = _ID_NUMBER.sub(_id_number, text)
        text = _CARD.sub(_card, text)
        for phone in _PHONES:
            text = phone.sub("[PHONE]", text)
    return text


def _compile(patterns: Iterable[str]) -> tuple[re.Pattern[str], ...]:
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except (re.error, TypeError):
            continue  # checked at agent load; a stored spec is never a reason to crash
    return tuple(compiled)


@dataclass(frozen=True)
class Redactor:
    """Replaces secrets in text and in JSON-like values; immutable, cheap to derive."""

    fields: frozenset[str] = frozenset()
    """Keys whose values are hidden wholesale (tool fields marked ``Sensitive``)."""
    patterns: tuple[re.Pattern[str], ...] = ()
    """The agent's own patterns (``redaction.patterns``)."""
    literals: tuple[str, ...] = field(default=())
    """Values seen under sensitive keys, hidden wherever else they appear (longest first)."""

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any] | None) -> Redactor:
        """From the ``redact`` entry of a ``run_started`` event (``None``: built-ins only)."""
        spec = spec or {}
        return cls(
            fields=frozenset(str(f) for f in spec.get("fields") or ()),
            patterns=_compile(spec.get("patterns") or ()),
        )

    def learn(self, *values: Any) -> Redactor:
        """A redactor that also hides the sensitive values found in ``values``."""
        found = set(self.literals)

        def walk(value: Any, sensitive: bool) -> None:
            if isinstance(value, Mapping):
                for key, inner in value.items():
                    walk(inner, sensitive or key in self.fields)
            elif isinstance(value, list | tuple):
                for inner in value:
                    walk(inner, sensitive)
            elif sensitive and value is not None and not isinstance(value, bool):
                text = str(value)
                if len(text) >= MIN_LITERAL:
                    found.add(text)

        if self.fields:
            for value in values:
                walk(value, False)
        ordered = tuple(sorted(found, key=lambda s: (-len(s), s)))
        return Redactor(self.fields, self.patterns, ordered)

    def text(self, text: str) -> str:
        """``text`` with sensitive values, configured patterns and built-in kinds hidden."""
        for literal in self.literals:
            text = text.replace(literal, REDACTED)
        for pattern in self.patterns:
            text = pattern.sub(REDACTED, text)
        return redact_builtin(text)

    def value(self, value: Any) -> Any:
        """A JSON-like value with every string redacted and sensitive keys hidden."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {key: self._keyed(str(key), inner) for key, inner in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(inner) for inner in value]
        if isinstance(value, int | float) and not isinstance(value, bool):
            shown = self.text(str(value))
            return value if shown == str(value) else shown
        return value

    def _keyed(self, key: str, value: Any) -> Any:
        if value is None or isinstance(value, bool):
            return value
        if key in self.fields or (isinstance(value, str) and _SECRET_KEY.fullmatch(key)):
            return REDACTED
        return self.value(value)


def redactor_for(events: Iterable[Event]) -> Redactor:
    """The redactor of a stored run: its recorded spec, plus the sensitive values it holds."""
    listed = list(events)
    spec = next((e.data.get("redact") for e in listed if e.type is EventType.RUN_STARTED), None)
    base = Redactor.from_spec(spec if isinstance(spec, Mapping) else None)
    return base.learn(*(e.data for e in listed))


def redaction_spec(agent: Agent) -> dict[str, list[str]]:
    """What an agent redacts, as recorded in ``run_started``: sensitive fields and patterns."""
    from corral.tools.sensitive import sensitive_fields

    fields = set(agent.config.redaction.fields)
    for spec in agent.tools:
        fields |= sensitive_fields(spec.input_model) | sensitive_fields(spec.output_model)
    return {"fields": sorted(fields), "patterns": list(agent.config.redaction.patterns)}
