"""Redaction: what logs, ``traces``, ``show``, ``handoff`` and handoff packets never show.

Built-in detectors find phone numbers (Chinese mobiles, with or without separators, and
international), e-mail addresses, Chinese ID-card numbers (checksum verified), bank-card
numbers (Luhn verified), API keys and tokens (``sk-``, GitHub, AWS access keys, Slack,
JWTs), bearer and basic credentials, and the value after a key word (``password:``,
``token=``, ``密码是``, ``验证码：``). Full-width and other compatibility forms
(``１３８…``, ``：``) are folded to ASCII for matching, one character for one, so the span
found is replaced in the original text. An agent adds tool fields marked
``Annotated[str, Sensitive()]`` and its own ``redaction.patterns``; the values of
sensitive fields are also hidden wherever else they appear (a user message, a summary).

What to redact is recorded in each run's ``run_started`` event, so commands that do not
load the agent (``traces``, ``show``) redact as the agent would. The event store itself
keeps the real values: a resumed run must call its tools with them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from corral.events import Event, RunStarted
from corral.textfold import fold_to_ascii
from corral.tools.sensitive import REDACTED, SECRET_NAME

if TYPE_CHECKING:
    from corral.agent import Agent

MIN_LITERAL = 4
"""Sensitive values shorter than this are hidden under their field only, not everywhere."""
VALUE_MAX = 64
"""The most characters hidden after a key word (``password: …``): up to a delimiter."""

_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"


_ID_KEYS = frozenset({"run_id", "trace_id", "open_run_id"})
_CORRAL_ID = re.compile(r"(?:run|trace)_[0-9a-f]{6,32}")
"""Ids corral makes (``run_019ad3f2a1b04e8ea16133994260``): never user data, shown as they are."""


def keeping_ids(redact: Callable[[str], str], text: str, ids: Iterable[str | None]) -> str:
    """``redact(text)``, with each of ``ids`` that is an id corral makes left as it is.

    A run id's hex may read as a phone number (its time prefix is a run of decimal digits
    for hours on end). Only the ids a caller names, and only in corral's own shape, are
    kept: a user's text that merely looks like one is redacted as any other.
    """
    kept = [i for i in dict.fromkeys(ids) if i and _CORRAL_ID.fullmatch(i) and i in text]
    for index, found in enumerate(kept):
        text = text.replace(found, f"\x00{index}\x00")
    text = redact(text)
    for index, found in enumerate(kept):
        text = text.replace(f"\x00{index}\x00", found)
    return text


# The value after a key word: up to a line end, a quote, ``, ; &``, a Chinese stop, or a
# ``. ! ?`` that ends a sentence (followed by a space, the end, or non-ASCII text); at
# most VALUE_MAX characters, never ending in a space.
_VALUE_CHAR = r"(?:[^\r\n\"'<>,;&。、.!?]|[.!?](?=[!-~]))"
_VALUE_EDGE = r"(?:[^\s\"'<>,;&。、.!?]|[.!?](?=[!-~]))"
_VALUE = rf"(?P<value>{_VALUE_EDGE}(?:{_VALUE_CHAR}{{0,{VALUE_MAX - 2}}}{_VALUE_EDGE})?)"
_KEYED_VALUE = re.compile(
    r"(?i)(?:"
    r"(?:(?:api[_\- ]?)?key|apikey|access[_\- ]?token|auth[_\- ]?token|token|secret"
    r"|password|passwd|passcode|pwd)[\"']?\s*[=:]\s*[\"']?"
    r"|(?:password|passwd|passcode)\s+is\s+"
    r"|(?:密码|口令|验证码|校验码|动态码|密钥|秘钥|令牌)\s*(?:(?:[=:]|是|为)\s*|(?=[a-z0-9]))"
    rf"){_VALUE}"
)
_MAY_HOLD_SECRET = re.compile(  # searched in lower case: much faster than (?i)
    r"bearer|basic|authorization|sk-|key|token|secret|pass|pwd|@|gh[pousr]_|github_pat_"
    r"|akia|asia|xox[abprs]-|eyj|密码|口令|验证码|校验码|动态码|密钥|秘钥|令牌"
)
_SEVEN_DIGITS = re.compile(r"\d(?:[ ().\-]{0,2}\d){6}")
_SEPARATORS = re.compile(r"[ .\-]")


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


def _id_number(found: str) -> bool:
    return id_number_valid(_SEPARATORS.sub("", found))


def _card(found: str) -> bool:
    digits = _SEPARATORS.sub("", found)
    return 13 <= len(digits) <= 19 and luhn_valid(digits)


@dataclass(frozen=True)
class _Detector:
    """One built-in kind: where it is found, what replaces it, and a check on the match."""

    pattern: re.Pattern[str]
    marker: str
    group: str | int = 0
    """The part of the match that is hidden (the value, not the key word before it)."""
    valid: Callable[[str], bool] | None = None


_SECRETS = (
    _Detector(_KEYED_VALUE, "[SECRET]", "value"),
    _Detector(re.compile(r"(?i)bearer\s+([A-Za-z0-9\-._~+/]+=*)"), "[SECRET]", 1),
    _Detector(
        re.compile(
            r"(?i)authorization[\"']?\s*[=:]\s*[\"']?(?:(?:basic|bearer|digest|token)\s+)?"
            r"([^\s\"',;]+)"
        ),
        "[SECRET]",
        1,
    ),
    _Detector(  # base64 credentials: a digit, ``+/=``, or a capital after the first letter
        re.compile(r"(?i:basic)\s+((?=\S*[0-9+/=]|[A-Za-z]+[A-Z])[A-Za-z0-9+/]{8,}=*)"),
        "[SECRET]",
        1,
    ),
    _Detector(re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{6,}"), "[API_KEY]"),
    _Detector(re.compile(r"sk-[A-Za-z0-9_\-]{16,}"), "[API_KEY]"),  # glued to a word
    _Detector(re.compile(r"gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}"), "[API_KEY]"),
    _Detector(re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])"), "[API_KEY]"),
    _Detector(re.compile(r"xox[abprs]-[A-Za-z0-9\-]{10,}"), "[API_KEY]"),
    _Detector(
        re.compile(r"eyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*"), "[SECRET]"
    ),
    _Detector(
        re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}"),
        "[EMAIL]",
    ),
)
_NUMBERS = (
    _Detector(
        re.compile(r"(?<!\d)\d{6}[ .\-]?\d{4}[ .\-]?\d{4}[ .\-]?\d{3}[\dXx](?!\d)"),
        "[ID_NUMBER]",
        valid=_id_number,
    ),
    _Detector(
        re.compile(r"(?<!\d)(?:\d{13,19}|\d{4}(?:[ -]\d{4}){2,3}(?:[ -]\d{1,3})?)(?!\d)"),
        "[CARD]",
        valid=_card,
    ),
    _Detector(
        re.compile(r"(?<![\d+])(?:(?:\+|00)86[ .\-]?)?1[3-9]\d(?:[ .\-]?\d{4}){2}(?!\d)"),
        "[PHONE]",
    ),
    _Detector(
        re.compile(r"(?<![\d+])\+\d{1,3}[ .\-]?(?:\(\d{1,4}\)[ .\-]?)?\d(?:[ .\-]?\d){5,13}(?!\d)"),
        "[PHONE]",
    ),
)


def _spans(
    folded: str, detectors: Iterable[_Detector], rank: int
) -> Iterable[tuple[int, int, int, str]]:
    for offset, detector in enumerate(detectors):
        for match in detector.pattern.finditer(folded):
            if detector.valid is None or detector.valid(match.group(detector.group)):
                start, end = match.span(detector.group)
                yield start, rank + offset, end, detector.marker


def redact_builtin(text: str) -> str:
    """``text`` with the built-in kinds of personal data and secrets replaced by markers.

    Every detector runs on the folded text; the spans found are merged (overlapping spans
    become one, shown with the marker of the first) and replaced in the original text.
    """
    folded = fold_to_ascii(text)
    found: list[tuple[int, int, int, str]] = []
    if _MAY_HOLD_SECRET.search(folded.lower()):
        found.extend(_spans(folded, _SECRETS, 0))
    if _SEVEN_DIGITS.search(folded):  # the shortest number redacted has seven digits
        found.extend(_spans(folded, _NUMBERS, len(_SECRETS)))
    if not found:
        return text
    parts: list[str] = []
    shown = 0  # the original text before this offset is already in parts
    for start, _, end, marker in sorted(found):
        if start < shown:  # overlaps the span just hidden: widen it
            shown = max(shown, end)
            continue
        parts += [text[shown:start], marker]
        shown = end
    parts.append(text[shown:])
    return "".join(parts)


def _compile(patterns: Iterable[str]) -> tuple[re.Pattern[str], ...]:
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except (re.error, TypeError, ValueError):
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
    seen: dict[str, str] | None = field(default=None, compare=False, repr=False)
    """What ``text`` gave each text it was given (``remembering``); ``None``: nothing kept."""

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

    def remembering(self) -> Redactor:
        """A copy of this redactor that keeps what it gives each text, until it is dropped.

        For one run's log: its statuses, ids, tool names and messages come back line after
        line, and each would go through every detector again.
        """
        return replace(self, seen={})

    def text(self, text: str) -> str:
        """``text`` with sensitive values, configured patterns and built-in kinds hidden."""
        seen = self.seen
        if seen is not None:
            shown = seen.get(text)
            if shown is None:
                shown = seen[text] = self._hide(text)
            return shown
        return self._hide(text)

    def _hide(self, text: str) -> str:
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
        if key in _ID_KEYS and isinstance(value, str) and _CORRAL_ID.fullmatch(value):
            return value  # corral's own random id: its hex may read as a phone number
        if key in self.fields or (isinstance(value, str) and SECRET_NAME.fullmatch(key)):
            return REDACTED
        return self.value(value)


def redactor_for(events: Iterable[Event]) -> Redactor:
    """The redactor of a stored run: its recorded spec, plus the sensitive values it holds."""
    listed = list(events)
    spec = next((e.payload.redact for e in listed if isinstance(e.payload, RunStarted)), None)
    base = Redactor.from_spec(spec)
    if not base.fields:  # no value is sensitive by its key: nothing to learn, nothing to render
        return base
    return base.learn(*(e.data for e in listed))


def redaction_spec(agent: Agent) -> dict[str, list[str]]:
    """What an agent redacts, as recorded in ``run_started``: sensitive fields and patterns."""
    from corral.tools.sensitive import sensitive_fields

    fields = set(agent.config.redaction.fields)
    for spec in agent.tools:
        fields |= sensitive_fields(spec.input_model) | sensitive_fields(spec.output_model)
    return {"fields": sorted(fields), "patterns": list(agent.config.redaction.patterns)}
