"""Entity extraction by declared rules: patterns, vocabularies and relative dates."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from corral.config import EntitySpec, patterns_of
from corral.contracts import Language
from corral.errors import ConfigInvalidError
from corral.intent.politeness import without_politeness_tail
from corral.regex_checks import refuse_explosive
from corral.textfold import fold_letters_and_digits

_CJK = re.compile(r"[\u3400-\u9fff]")
_LATIN_WORD = re.compile(r"(?<![A-Za-z0-9_])[A-Za-z]+(?![A-Za-z0-9_])")
"""Letters standing as a word, not part of an id mixed with digits."""


def detect_language(text: str, default: Language = "zh") -> Language:
    """``zh`` when the text has any CJK character, ``en`` when it has an English word.

    Letters inside an id (``OD2611200002``, ``HD20240501``) are no word: a message that
    is only an id says nothing of its language, and ``default`` (the conversation's, or
    the agent's) is kept.
    """
    if _CJK.search(text):
        return "zh"
    if _LATIN_WORD.search(text):
        return "en"
    return default


_ENGLISH_WORDS = frozenset(
    (  # noqa: SIM905  (a list literal would take a line per word)
        "i i'm me my mine you your it it's its is are was were be the an this that these "
        "those here there of for to in on at from with and or but not yes please thanks "
        "thank sorry what which when where who how can could would will do does did have has "
        "had number order bought"
    ).split()
)
"""Words of English sentences, never of a name: an answer with one is written in English
(not "a" or "no": "Tower A", "(A4)", "Dr. No" are names)."""
_CHINESE_GRAMMAR = frozenset("的是我你您了吗吧呢啊请这那就还不没谢想帮给")
"""Characters of Chinese sentences rather than of names and addresses (not 好, 有, 在,
要: 王美好, 好望角大厦 are names)."""


def answer_language(text: str, current: Language) -> Language:
    """The language a run speaks after the answer ``text``: ``current`` unless it says another.

    A new message sets its run's language (``detect_language``). An answer is held to
    more: a Chinese run is answered ``iPhone 15`` or ``LaserJet Pro M404`` and an
    English one ``北京市朝阳区建国路1号``, which are names, not a change of language.
    Only a sentence switches: English words such as "the", "is", "my" with no CJK at all,
    or CJK with characters of Chinese grammar (的, 是, 我, 了...).
    """
    if _CJK.search(text):
        return "zh" if any(char in _CHINESE_GRAMMAR for char in text) else current
    words = {word.lower() for word in re.findall(r"[A-Za-z]+(?:'[A-Za-z]+)?", text)}
    return "en" if words & _ENGLISH_WORDS else current


def names_entity(text: str, name: str, spec: EntitySpec | None) -> bool:
    """Whether ``text`` speaks of the entity: its label in either language, or its name.

    "记性太差了，订单号忘了" and "I don't have my customer id" say what they are about: a
    message typed at a question for that entity is about the question, whatever other
    words it holds ("太差" is a complaint's). Case and ``_`` are ignored (``customer_id``
    is "customer id").
    """
    lowered = text.casefold()
    words = [name.replace("_", " ")]
    if spec is not None and spec.label is not None:
        words += [spec.label.zh, spec.label.en]
    # a one-character label (号, "#") is in almost every message: it says nothing
    return any(word.casefold() in lowered for word in words if len(word.strip()) > 1)


@dataclass(frozen=True)
class _CompiledEntity:
    name: str
    spec: EntitySpec
    patterns: tuple[re.Pattern[str], ...]
    vocabulary: tuple[tuple[str, str], ...]
    unless: tuple[re.Pattern[str], ...] = ()
    """``EntitySpec.unless``: a message any of these find in gives no value of it."""


def _fuzzy(entity: _CompiledEntity, lowered: str, threshold: int) -> str | None:
    """The catalogue entry closest to some part of the text, if close enough."""
    from rapidfuzz import fuzz, process

    words = [word.lower() for word, _ in entity.vocabulary if len(word) >= 3]
    best = process.extractOne(lowered, words, scorer=fuzz.partial_ratio, score_cutoff=threshold)
    if best is None:
        return None
    matched = best[0]
    return next(canonical for word, canonical in entity.vocabulary if word.lower() == matched)


class EntityExtractor:
    """Finds the agent's declared entities in a message. Compiled once per agent."""

    def __init__(self, specs: Mapping[str, EntitySpec], timezone: str) -> None:
        self._timezone = timezone
        self._entities: list[_CompiledEntity] = []
        self._carry_unless = {
            name: _compiled(name, "carry_unless", patterns_of(spec.carry_unless))
            for name, spec in specs.items()
            if spec.carry_unless
        }
        self._not_answers = {
            name: _compiled(name, "not_an_answer", patterns_of(spec.not_an_answer))
            for name, spec in specs.items()
            if spec.not_an_answer
        }
        # an extractor of some of the entities (run_plan reads one) reads those it has
        self._carry_unless_changed = {
            name: tuple(other for other in spec.carry_unless_changed if other in specs)
            for name, spec in specs.items()
            if spec.carry_unless_changed
        }
        for name, spec in specs.items():
            patterns = _compiled(name, "pattern", spec.patterns)
            # Longest surface words first, so "激光打印机" wins over "打印机".
            vocab = tuple(sorted(spec.vocabulary.items(), key=lambda kv: -len(kv[0])))
            unless = _compiled(name, "unless", patterns_of(spec.unless))
            self._entities.append(_CompiledEntity(name, spec, patterns, vocab, unless))
            if spec.kind in ("date_range", "amount"):
                # their readers (tables of Chinese numerals, calendars) are loaded with the
                # first agent that declares such an entity, not by every import of corral
                import corral.intent.amounts
                import corral.intent.dates  # noqa: F401

    def extract(self, text: str, now: datetime, answering: str | None = None) -> dict[str, Any]:
        """Every declared entity found in ``text``; a missing one is absent, never guessed.

        Full-width letters and digits (an input method's ＨＤ２０２４０５０１) are read as
        ASCII ones, so a pattern written for the one finds the other. An entity with
        ``cues`` is taken only from a text that says one, and one with ``unless`` only from
        a text that says none of them, unless the text answers a question about it
        (``answering``).
        """
        found: dict[str, Any] = {}
        text = fold_letters_and_digits(text)
        lowered = text.lower()
        for entity in self._entities:
            cues = entity.spec.cues
            if cues and entity.name != answering and not any(c.lower() in lowered for c in cues):
                continue
            unless = entity.unless
            if unless and entity.name != answering and any(p.search(text) for p in unless):
                continue
            value = self._extract_one(entity, text, lowered, now)
            if value is not None:
                found[entity.name] = value
        return found

    def answer_fits(self, name: str, text: str) -> bool:
        """Whether ``text`` may be taken whole as the entity's value.

        It may unless one of the entity's ``not_an_answer`` finds something in it.
        """
        refusals = self._not_answers.get(name)
        if not refusals:
            return True
        folded = fold_letters_and_digits(text)
        return not any(refusal.search(folded) for refusal in refusals)

    def not_carried(self, text: str, held: Mapping[str, Any]) -> frozenset[str]:
        """The entities a new message keeps from carrying over from ``held`` (the session's).

        Their ``carry_unless`` found in it ("另一个订单到哪了" is about another order than
        the session's last: its run asks which one instead of answering for the wrong one),
        or a value of one of their ``carry_unless_changed`` other than ``held``'s.
        """
        if not self._carry_unless and not self._carry_unless_changed:
            return frozenset()
        folded = fold_letters_and_digits(text)
        names = {
            name
            for name, patterns in self._carry_unless.items()
            if any(pattern.search(folded) for pattern in patterns)
        }
        for name, others in self._carry_unless_changed.items():
            said = self.mentions(text, others)
            if any(v != held.get(o) for o, values in said.items() for v in values):
                names.add(name)
        return frozenset(names)

    def mentions(self, text: str, names: Iterable[str]) -> dict[str, list[str]]:
        """The values ``text`` gives for the entities of ``names``; two or more: ambiguous.

        Only patterns and vocabularies can be ambiguous (two order ids, two cities): a
        date range or an amount is one value by construction, and is not listed. A
        vocabulary word inside a longer matched word ("打印机" in "激光打印机") is not a
        second value, nor is a synonym of the same canonical value ("上海", "Shanghai").
        """
        wanted = set(names)
        found: dict[str, list[str]] = {}
        text = fold_letters_and_digits(text)
        for entity in self._entities:
            if entity.name not in wanted:
                continue
            values = self._all_values(entity, text)
            if values:
                found[entity.name] = values
        return found

    def without_values(self, text: str) -> tuple[str, frozenset[str]]:
        """``text`` (folded) less the words that give a pattern or vocabulary entity a value.

        And the entities they gave values. What is left says what the line asks of the
        values it names (``read_follow_up``: "那 OD2611250002 呢？" leaves "那   呢？").
        """
        rest = fold_letters_and_digits(text)
        named: set[str] = set()
        for entity in self._entities:
            for _, word in self._found(entity, rest):
                spoken = re.compile(re.escape(word), re.IGNORECASE).search(rest)
                if spoken is not None:
                    rest = f"{rest[: spoken.start()]} {rest[spoken.end() :]}"
                    named.add(entity.name)
        return rest, frozenset(named)

    def spoken(self, text: str, name: str) -> dict[str, str]:
        """Each value ``text`` gives entity ``name``, with the word of the text that gave it.

        What a question about the values shows the user ("支付、接口", not the canonical
        "payments、api"): a vocabulary word as the text writes it (the first of several
        words of one value), a pattern's match as found.
        """
        for entity in self._entities:
            if entity.name == name:
                return dict(reversed(self._found(entity, text)))  # the first word wins
        return {}

    def _all_values(self, entity: _CompiledEntity, text: str) -> list[str]:
        return list(dict.fromkeys(value for value, _ in self._found(entity, text)))

    def _found(self, entity: _CompiledEntity, text: str) -> list[tuple[str, str]]:
        """(value, word) for each value ``text`` gives the entity, in the order found."""
        spec = entity.spec
        found: list[tuple[str, str]] = []
        if spec.kind == "vocabulary":
            rest = text.lower()
            aligned = len(rest) == len(text)  # lower-casing kept every character's place
            for word, canonical in entity.vocabulary:  # longest first
                lowered = word.lower()
                if lowered and lowered in rest:
                    at = rest.index(lowered)
                    said = text[at : at + len(lowered)] if aligned else word
                    rest = rest.replace(lowered, "\0" * len(lowered))
                    found.append((canonical, said))
        elif spec.kind == "pattern":
            for pattern in entity.patterns:
                for match in pattern.finditer(text):
                    value = _matched(match)
                    if value:
                        found.append((value.upper() if spec.upper else value, value))
        return found

    def _extract_one(self, entity: _CompiledEntity, text: str, lowered: str, now: datetime) -> Any:
        spec = entity.spec
        if spec.kind == "date_range":
            from corral.intent.dates import find_relative_date

            found = find_relative_date(text, now, self._timezone, entity.spec.weekday)
            return found.as_json() if found else None
        if spec.kind == "amount":
            from corral.intent.amounts import find_amount

            return find_amount(text)
        if spec.kind == "vocabulary":
            for word, canonical in entity.vocabulary:
                if word.lower() in lowered:
                    return canonical
            if spec.fuzzy_threshold is not None:
                return _fuzzy(entity, lowered, spec.fuzzy_threshold)
            return None
        for pattern in entity.patterns:
            match = pattern.search(text)
            value = _matched(match) if match else ""
            if value:  # a capture of nothing but "谢谢" gives no value
                return value.upper() if spec.upper else value
        return None


def check_carry_references(specs: Mapping[str, EntitySpec]) -> None:
    """``CONFIG_INVALID`` for a ``carry_unless_changed`` naming no other declared entity.

    Checked over the agent's whole set (``IntentLayer``), not per extractor: a misspelt
    name would otherwise never match, and the value would carry over silently.
    """
    for name, spec in specs.items():
        unknown = [o for o in spec.carry_unless_changed if o not in specs or o == name]
        if unknown:
            raise ConfigInvalidError(
                f"entity {name!r}: carry_unless_changed names {unknown[0]!r}, which is not "
                "another declared entity"
            )


def _compiled(name: str, field: str, sources: Iterable[str]) -> tuple[re.Pattern[str], ...]:
    """An entity's regexes, case-insensitive; ``CONFIG_INVALID`` naming it and the field."""
    compiled = []
    for source in sources:
        try:
            compiled.append(re.compile(source, re.IGNORECASE))
        except (re.error, ValueError) as exc:  # (?a)(?u) is a ValueError
            raise ConfigInvalidError(f"entity {name!r}: bad {field}: {exc}") from None
        refuse_explosive(source, f"entity {name!r}", re.IGNORECASE)
    return tuple(compiled)


def _matched(match: re.Match[str]) -> str:
    """A pattern's value: the first capture group that took part in the match.

    Else the whole match: ``order ([0-9]+)|ref ([0-9]+)`` gives the number for either form.
    A thanks or please at its end is cut off (``corral.intent.politeness``): free text
    captured up to the end of the message took the "谢谢" typed after the value with it.
    """
    value = next((group for group in match.groups() if group is not None), match.group(0))
    return without_politeness_tail(value)
