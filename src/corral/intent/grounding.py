"""Grounding: is a value a model wrote one that somebody gave it, after normalisation?

A model may only repeat values; it must never invent them. Strings were always checked
against the user's words; this module does the same for numbers, dates and booleans, so
``amount_cny: 9999`` is as invented as ``"9999"``, and ``300`` is as grounded as the
``三百`` the user typed. The planner, model extraction and the reply check share it.

Normalisation: ``1,299`` and ``¥1,299`` are 1299, ``2k`` is 2000, ``1.5万`` is 15000,
``三百`` is 300, ``两千五`` is 2500 (``corral.intent.amounts``). Digits inside an id
(``A123``, ``ORD-2024-0012``) are not numbers. An ISO date, or a date the user said
relatively (明天, 下周一, "May 3"; ``corral.intent.dates``), is resolved against the run's
recorded clock, never the wall clock, so a replay grounds the same way.

The rules, by the value's type (``None`` is always allowed: it means "not given"):

- A value equal to one the parameter declares (a ``Literal`` or ``Enum`` member, or the
  parameter's default: writing the default changes nothing) is a choice, not an invention.
- A string: it occurs in what the user said, or equals a known value (an entity, a tool
  result); a string that reads as a date or a number is also grounded the way those are.
- A number: the same number occurs in what the user said, or in a known value, in a
  compatible unit (``amount_cny`` takes yuan, not dollars: each currency is a unit). The
  parts of a date or clock time (2026 of 2026-05-03, 10 of 10:30) ground only a calendar
  field (``year``, ``hour``).
- A date: the same day is written or said (relative words resolved) by the user, or is a
  known value.
- A boolean: a known value has it, or the user stated it: ``true`` needs an explicit
  confirmation word (yes, confirm, 是的, 确认, 同意) in a sentence that is not a question
  ("ok?" and 可以帮我看看吗 are not consent); ``false`` a no-word (no, not, don't, 不要, 别,
  没有...). Strict on purpose: a refusal costs a re-ask and a handoff, never a side effect.
- A list or object: every value inside it is grounded.

A plan argument (``ground_argument``) is first coerced with its parameter's type, as the
tool's input model will coerce it, and grounded as what it became: ``"200"`` for an
``int`` is the number 200, and a string argument must occur as whole tokens.
"""

from __future__ import annotations

import contextlib
import enum
import re
import types
import typing
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, PydanticSchemaGenerationError, TypeAdapter, ValidationError

from corral.intent.amounts import chinese_amount
from corral.intent.dates import find_relative_date

# Each currency is a unit of its own: 128 dollars is not grounded by ``amount_cny: 128``.
_UNITS = {
    "cny": r"块钱|块|元|人民币|[¥￥]|yuan|cny|rmb",
    "usd": r"美元|美金|[$]|usd|dollars?",
    "eur": r"欧元|€|eur|euros?",
    "gbp": r"英镑|£|gbp",
    "percent": r"%|percent|pct|个百分点",
    "day": r"天|days?",
    "week": r"个?星期|周|weeks?",
    "month": r"个月|months?",
    "year": r"年|years?",
    "hour": r"个?小时|hours?|hrs",
    "minute": r"分钟|minutes?|mins",
}
# ``(?:-\s*)?``, not ``-?\s*``: two ``\s*`` in a row backtrack quadratically over a run of
# spaces after a number (a padded tool-result row).
_UNIT = re.compile(
    r"\s*(?:-\s*)?(?:" + "|".join(f"(?P<{k}>{v})" for k, v in _UNITS.items()) + r")(?![A-Za-z])",
    re.IGNORECASE,
)
_MAGNITUDES = {"k": 1000, "千": 1000, "百": 100, "万": 10_000, "百万": 1_000_000}
_DIGITS = re.compile(
    r"(?P<cur>[¥￥$€£]\s*)?(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?:\s*(?P<mag>百万|[kK千百万])(?![A-Za-z]))?"
)
_CHINESE = re.compile(r"(?P<pct>百分之)?(?P<cn>[零〇一二两三四五六七八九十百千万]+)")
_WORDS = (
    *("zero", "one", "two", "three", "four", "five", "six"),
    *("seven", "eight", "nine", "ten", "eleven", "twelve"),
)
_WORD = re.compile(r"\b(?:" + "|".join(_WORDS) + r")\b", re.IGNORECASE)
_DATE_OR_TIME = re.compile(
    r"(?<!\d)(?P<y>\d{4})[-/.年](?P<m>\d{1,2})[-/.月](?P<d>\d{1,2})日?"
    r"|(?<!\d)(?P<h>\d{1,2}):(?P<min>\d{2})(?::(?P<s>\d{2}))?"
)
_YEARLESS = re.compile(
    r"^(?!.*\d{4})(?:.*\d\s*月\s*\d|.*\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))",
    re.IGNORECASE,
)
_MAX_DATES = 16
"""Date expressions read per text: a message names a few; "明天 " x 1333 is an attack."""
_LONG_RUN = re.compile(r"[0-9零〇一二两三四五六七八九十百千万]{13,}")
_ID_CHAR = re.compile(r"[A-Za-z0-9_.]")
# ``true`` needs an explicit confirmation, never "ok?" or the 可以 of 可以帮我看看吗: a
# model's ``permanent: true`` must not ride on politeness.
_YES = re.compile(r"\b(?:yes|confirm(?:ed)?)\b|是的|确认|同意", re.IGNORECASE)
_NO = re.compile(
    r"\b(?:no|not|don't|dont|never|without)\b"
    r"|不同意|不确认|不是|不需要|不用|不要|不必|不想|别|没有|无需|取消|否",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"[^.!?。！？\n]+[.!?。！？]?")
_QUESTION = re.compile(r"[?？]$|[吗么呢]")
_CALENDAR = frozenset({"year", "month", "day", "date", "hour", "minute", "second", "time"})
_WORDY = re.compile(r"[a-z0-9_]")


@dataclass(frozen=True)
class Quantity:
    """A number stated in a text, with its unit when one follows it (``money``, ``day``...)."""

    value: float
    unit: str | None
    start: int
    end: int
    in_date: bool = False
    """A part of a date or clock time (2026 of 2026-05-03, 10 of 10:30): not an amount."""


def _unit_at(text: str, pos: int) -> tuple[str | None, int]:
    match = _UNIT.match(text, pos)
    if match is None:
        return None, pos
    return next(k for k, v in match.groupdict().items() if v), match.end()


def _glued_before(text: str, start: int) -> bool:
    """Digits after a letter, or after another number and ``-``/``/``, belong to an id."""
    before = text[start - 1] if start else ""
    if _ID_CHAR.fullmatch(before):
        return True
    return bool(before) and before in "-/" and start >= 2 and text[start - 2].isalnum()


def _digit_quantities(text: str) -> Iterator[Quantity]:
    for match in _DIGITS.finditer(text):
        if not match["cur"] and _glued_before(text, match.start()):
            continue
        value = float(match["num"].replace(",", ""))
        if match["mag"]:
            value *= _MAGNITUDES[match["mag"].lower()]
        unit, end = _unit_at(text, match.end())
        if match["cur"]:
            unit = _unit_at(match["cur"].strip(), 0)[0]
        elif unit is None and re.match(r"[A-Za-z0-9_]", text[end : end + 1]):
            continue  # "12a", "1026_x": letters after the digits, so an id too
        yield Quantity(value, unit, match.start(), end)


def _word_quantities(text: str, bare: bool) -> Iterator[Quantity]:
    for match in _WORD.finditer(text):
        unit, end = _unit_at(text, match.end())
        if unit is not None or bare:
            yield Quantity(float(_WORDS.index(match[0].lower())), unit, match.start(), end)


def _chinese_quantities(text: str, bare: bool) -> Iterator[Quantity]:
    for match in _CHINESE.finditer(text):
        value = chinese_amount(match["cn"])
        if value is None:
            continue
        unit, end = _unit_at(text, match.end())
        unit = "percent" if match["pct"] else unit
        if unit is not None or bare:
            yield Quantity(float(value), unit, match.start(), end)


def quantities(text: str, *, bare_words: bool = True) -> list[Quantity]:
    """Every number stated in ``text``, normalised, in order.

    Dates and clock times count as their parts (``2026-05-03`` states 2026, 5 and 3),
    marked ``in_date``: they are not amounts.
    Number words (``三``, ``three``) without a unit (``一下``, ``十分``, "one moment") are
    words as often as numbers: ``bare_words=False`` skips them, for checking what a model
    wrote.
    """
    found: list[Quantity] = []
    masked = list(text)
    for match in _DATE_OR_TIME.finditer(text):
        parts = [match[g] for g in ("y", "m", "d", "h", "min", "s") if match[g] is not None]
        found += [Quantity(float(p), None, match.start(), match.end(), True) for p in parts]
        masked[match.start() : match.end()] = " " * (match.end() - match.start())
    digits = list(_digit_quantities("".join(masked)))
    for quantity in digits:  # "1.5万": the 万 is read, not a Chinese numeral of its own
        masked[quantity.start : quantity.end] = " " * (quantity.end - quantity.start)
    found += digits
    found += _chinese_quantities("".join(masked), bare_words)
    found += _word_quantities(text, bare_words)
    return sorted(found, key=lambda q: q.start)


def parse_number(text: str) -> float | None:
    """``text`` as one number (``"¥1,299"``, ``"2k"``, ``"1.5万元"``, ``"三百"``), else ``None``."""
    stripped = text.strip()
    found = [q for q in quantities(stripped) if q.start == 0 and q.end == len(stripped)]
    return found[0].value if len(found) == 1 else None


def parse_date(text: str) -> date | None:
    """An ISO date or date-time string as its day, else ``None``."""
    try:
        return datetime.fromisoformat(text.strip()).date()
    except ValueError:
        return None


def said_dates(text: str, now: datetime, timezone: str) -> set[date]:
    """The days ``text`` names: first and last day of each date expression, resolved at ``now``.

    A day of a month said without a year ("May 3", 5月3日) names this year's and next
    year's: ``corral.intent.dates`` reads it as the past one (for queries), a plan may
    need the coming one (a delivery).
    """
    days: set[date] = set()
    # No date has a run of 13 digits or numerals; the date rules backtrack over long ones.
    rest = _LONG_RUN.sub(" ", text)
    # Each search scans the rest of the text: a bounded number of them keeps this linear.
    for _ in range(_MAX_DATES):
        found = find_relative_date(rest, now, timezone)
        if found is None:
            break
        days |= {found.start, found.end}
        if found.start == found.end and _YEARLESS.search(found.text):
            with contextlib.suppress(ValueError):  # 29 February
                days.add(found.start.replace(year=found.start.year + 1))
        cut = rest.find(found.text)
        rest = rest[cut + len(found.text) :] if cut >= 0 and found.text else ""
    return days


def key_unit(key: str) -> str | None:
    """The unit a field name declares: ``eta_days`` holds days, ``amount_cny`` money."""
    for word in re.split(r"[^A-Za-z]+", key):
        unit, end = _unit_at(word, 0)
        if unit is not None and end == len(word):
            return unit
    return None


def value_quantities(value: object, key: str = "") -> Iterator[Quantity]:
    """The numbers inside a JSON-like value; a number's unit comes from its field name."""
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int | float):
        yield Quantity(float(value), key_unit(key), 0, 0)
    elif isinstance(value, str):
        yield from quantities(value)
    elif isinstance(value, Mapping):
        for name, item in value.items():
            yield from value_quantities(item, str(name))
    elif isinstance(value, list | tuple):
        for item in value:
            yield from value_quantities(item, key)


def number_key(value: float) -> float:
    """The form numbers are compared in: 300 == 300.0, float noise ignored."""
    return round(value, 6) + 0.0  # + 0.0 turns -0.0 into 0.0


def leaves(value: object) -> Iterator[object]:
    """Every scalar inside nested mappings, lists and tuples (depth first)."""
    if isinstance(value, Mapping):
        for item in value.values():
            yield from leaves(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from leaves(item)
    else:
        yield value


@dataclass(frozen=True)
class Evidence:
    """Everything a model's value may be grounded in, normalised once per check."""

    said: str
    """What the user said, lower-cased."""
    strings: frozenset[str]
    numbers: frozenset[tuple[float, str | None]]
    """Numbers stated (``number_key``) with their unit, or ``None`` when none is known."""
    date_numbers: frozenset[float]
    """The parts of dates and clock times: they ground only a calendar field (``year``)."""
    dates: frozenset[date]
    bools: frozenset[bool]

    @classmethod
    def of(
        cls,
        said: str,
        known: Iterable[object] = (),
        now: datetime | None = None,
        timezone: str = "UTC",
    ) -> Evidence:
        """From the user's words and ``known`` values (entities, tool results, nested).

        ``now`` is the run's recorded clock; without it relative dates are not resolved.
        """
        scalars = [leaf for value in known for leaf in leaves(value)]
        strings = {leaf for leaf in scalars if isinstance(leaf, str)}
        found = [*quantities(said), *(q for leaf in scalars for q in value_quantities(leaf))]
        days = said_dates(said, now, timezone) if now is not None else set()
        days |= {d for s in strings if (d := parse_date(s)) is not None}
        return cls(
            said=said.lower(),
            strings=frozenset(strings),
            numbers=frozenset((number_key(q.value), q.unit) for q in found if not q.in_date),
            date_numbers=frozenset(number_key(q.value) for q in found if q.in_date),
            dates=frozenset(days),
            bools=frozenset(leaf for leaf in scalars if isinstance(leaf, bool)),
        )


def declared_choices(annotation: object) -> set[object]:
    """The values a parameter's type declares (``Literal`` members, ``Enum`` values), nested."""
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return {member.value for member in annotation}
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Literal:
        return set(args)
    return {value for member in args for value in declared_choices(member)}


def _same(a: object, b: object) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return number_key(a) == number_key(b)
    return a == b


def units_agree(a: str | None, b: str | None) -> bool:
    """Two numbers' units are compatible: the same, or one side states none."""
    return a is None or b is None or a == b


def _number_grounded(number: float, evidence: Evidence, key: str) -> bool:
    """The same number, in a compatible unit; a date's parts only for a calendar field."""
    unit = key_unit(key)
    n = number_key(number)
    if any(v == n and units_agree(u, unit) for v, u in evidence.numbers):
        return True
    words = {word.lower() for word in re.split(r"[^A-Za-z]+", key)}
    return bool(words & _CALENDAR) and n in evidence.date_numbers


def _confirmed(said: str) -> bool:
    """A confirmation word in a sentence that is not a question (no-words taken out first)."""
    for sentence in _SENTENCE.findall(_NO.sub(" ", said)):
        if _QUESTION.search(sentence.strip()) is None and _YES.search(sentence):
            return True
    return False


def _said_token(value: str, said: str) -> bool:
    """``value`` occurs in ``said`` as whole tokens: "12" is not in "a12", "1" not in "a1"."""
    text = value.lower()
    if not text:
        return True
    before = r"(?<![a-z0-9_])" if _WORDY.match(text[0]) else ""
    after = r"(?![a-z0-9_])" if _WORDY.match(text[-1]) else ""
    return re.search(before + re.escape(text) + after, said) is not None


def grounded(
    value: object,
    evidence: Evidence,
    declared: Collection[object] = (),
    *,
    key: str = "",
    tokens: bool = False,
) -> bool:
    """Whether ``value`` was given rather than invented (the rules are in the module doc).

    ``key`` is the field's name: its unit (``amount_cny``: yuan) must agree with the
    evidence's, and only a calendar field (``year``, ``hour``) is grounded by a date's parts.
    ``tokens``: a string must occur as whole tokens (plan arguments); without it, anywhere
    (extraction, where the model finds an id the rules missed because it is glued to a word).
    """
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None or any(_same(value, choice) for choice in declared):
        return True
    if isinstance(value, bool):
        if value:
            return value in evidence.bools or _confirmed(evidence.said)
        return value in evidence.bools or _NO.search(evidence.said) is not None
    if isinstance(value, int | float | Decimal):
        return _number_grounded(float(value), evidence, key)
    if isinstance(value, date):
        return (value.date() if isinstance(value, datetime) else value) in evidence.dates
    if isinstance(value, time):
        return all(_number_grounded(n, evidence, "time") for n in (value.hour, value.minute))
    if isinstance(value, str):
        said = _said_token(value, evidence.said) if tokens else value.lower() in evidence.said
        if value in evidence.strings or said:
            return True
        day = parse_date(value)
        if day is not None:
            return day in evidence.dates
        number = parse_number(value)
        return number is not None and _number_grounded(number, evidence, key)
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if isinstance(value, Mapping):
        return all(
            grounded(item, evidence, declared, key=str(k), tokens=tokens)
            for k, item in value.items()
        )
    if isinstance(value, list | tuple | set | frozenset):
        return all(grounded(item, evidence, declared, key=key, tokens=tokens) for item in value)
    return False


def _without_none(annotation: Any) -> Any:
    """``X | None`` as ``X`` (``None`` itself is always grounded)."""
    members = [m for m in typing.get_args(annotation) if m is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(members) == 1:
        return members[0]
    return annotation


def ground_argument(
    value: object,
    annotation: Any,
    evidence: Evidence,
    declared: Collection[object] = (),
    *,
    key: str = "",
) -> bool:
    """Whether a model's argument is grounded as the value the tool will receive.

    The tool's input model coerces leniently, so ``"200"`` for an ``int`` parameter is the
    number 200, ``"0"`` for a ``date`` is 1970-01-01 and ``"on"`` for a ``bool`` is
    ``True``: the value is coerced with the parameter's type first (as the tool will), then
    grounded by the rules for what it became. ``True`` for a number is refused: it is not
    a number anybody said. Elements of a list are coerced one by one (a reference inside
    is ``None``).
    """
    if value is None or any(_same(value, choice) for choice in declared):
        return True
    annotation = _without_none(annotation)
    if isinstance(value, list) and typing.get_origin(annotation) in (list, tuple, set, frozenset):
        inner = (*typing.get_args(annotation), Any)[0]
        return all(ground_argument(v, inner, evidence, declared, key=key) for v in value)
    try:
        typed = TypeAdapter(annotation).validate_python(value)
    except (ValidationError, PydanticSchemaGenerationError):
        # A reference blanked inside an object cannot be coerced: ground what was written,
        # strings as whole tokens. Anything else that does not fit is not the tool's value.
        blanked = any(leaf is None for leaf in leaves(value))
        return blanked and grounded(value, evidence, declared, key=key, tokens=True)
    if isinstance(value, bool) and not isinstance(typed, bool):
        return False
    return grounded(typed, evidence, declared, key=key, tokens=True)
