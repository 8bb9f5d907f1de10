"""Replies written by a model from fact summaries, checked before anyone reads them.

The model sees only facts from successful tools and the completed steps' one-line
summaries, never raw payloads. A reply is rejected (and re-asked) when it states a
number or id that no fact contains, gives a link or an email address that none does, when
it contains a table, or when it is too long; after
the re-asks the template reply is used instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from corral.contracts import Language
from corral.intent.grounding import (
    Quantity,
    number_key,
    parse_number,
    quantities,
    units_agree,
    value_quantities,
)
from corral.models.base import Message, ModelRequest

MAX_REPLY_CHARS = 400
_TOKEN = re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9][A-Za-z0-9_-]*")
_ORDINAL = re.compile(r"(?<![A-Za-z0-9_-])(\d{1,2})(?:st|nd|rd|th)(?![A-Za-z0-9_])", re.IGNORECASE)
_URL_CHARS = r"[A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=%-]"
_TLDS = (
    "com|net|org|cn|io|co|info|biz|xyz|top|me|app|dev|shop|store|site|online|vip|cc|tv|"
    "ly|gg|ai|us|uk|de|fr|jp|hk|tw|sg|ru|link|click|example"
)
_LINK = re.compile(
    rf"(?:https?://|www\.){_URL_CHARS}+"  # a URL: ASCII only, so 查看 after it ends it
    r"|[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"  # an email
    # a host: with a path or a port (any top-level name), or bare with a common one
    rf"|(?<![A-Za-z0-9_@.-])[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.(?:[A-Za-z]{{2,}}"
    rf"(?=[:/])(?::\d+)?(?:/{_URL_CHARS}*)?|(?:{_TLDS})(?![A-Za-z0-9-]))",
    re.IGNORECASE,
)
"""Where a reply could send the customer: each must come from a tool or their own words."""
# Set phrases whose numeral is not a claim: "have a nice day" (愉快的一天), "a moment" (一下).
_PHRASES = re.compile(r"(?:愉快|美好|开心|快乐|顺利|好)的一天|每一天|一天天")


class ReplyAnswer(BaseModel):
    """The model's reply."""

    model_config = ConfigDict(extra="ignore")

    text: str = Field(min_length=1, max_length=MAX_REPLY_CHARS)


def reply_request(
    goal: str,
    facts: Mapping[str, Any],
    summaries: Iterable[str],
    language: Language,
    temperature: float,
) -> ModelRequest:
    """The reply prompt: the user's goal and the verified facts, nothing else."""
    style = (
        "用口语化的中文回答，一到三句话，不要用表格、列表或 Markdown。"
        if language == "zh"
        else "Answer in plain, friendly English, one to three sentences, no tables."
    )
    system = (
        "You write the final answer to a customer from verified facts only. Never state a "
        "number, id, date or promise that is not in the facts. "
        + style
        + ' Reply with JSON only: {"text": "..."}.'
    )
    known = json.dumps(dict(facts), ensure_ascii=False, default=str)[:3000]
    user = f"Customer: {goal}\nFacts: {known}\nDone: " + " | ".join(summaries)
    return ModelRequest(
        "reply",
        (Message("system", system), Message("user", user[:5000])),
        ReplyAnswer.model_json_schema(),
        "reply",
        temperature,
        300,
    )


def _ids(text: str) -> list[str]:
    """Tokens mixing letters and digits that are not a number with its unit ("60-month").

    An ordinal ("3rd") is a day of a month, checked as a number (``_claims``), not an id.
    """
    return [
        token
        for token in _TOKEN.findall(text)
        if re.search(r"[A-Za-z]", token)
        and re.search(r"\d", token)
        and parse_number(token) is None
        and not _ORDINAL.fullmatch(token)
    ]


def _claims(text: str) -> list[Quantity]:
    """The numbers a reply states: set phrases blanked, ordinals ("December 3rd") as days."""
    plain = _PHRASES.sub(lambda m: " " * len(m[0]), text)
    ordinals = [Quantity(float(m[1]), None, m.start(), m.end()) for m in _ORDINAL.finditer(plain)]
    return sorted([*quantities(plain, bare_words=False), *ordinals], key=lambda q: q.start)


def _matches(claim: Quantity, known: Quantity) -> bool:
    """The same number in the same unit, or one side has none: "2 days" by ``{"eta": 2}``.

    A percentage is also grounded by the fraction a field holds: "20% off" by
    ``discount: 0.2``.
    """
    value = number_key(abs(known.value))
    if units_agree(claim.unit, known.unit) and number_key(claim.value) == value:
        return True
    fraction = known.unit is None and 0 < value <= 1
    return (
        claim.unit == "percent" and fraction and number_key(claim.value) == number_key(value * 100)
    )


def reply_problems(text: str, facts: Mapping[str, Any], said: str) -> list[str]:
    """What is wrong with a reply: ungrounded claims, tables, raw payloads.

    An id (letters and digits) must occur in the facts or the user's words. A number is
    compared as a number with its unit (``corral.intent.grounding``): "60-month" is
    grounded by ``term_months: 60``, while "6 yuan" is not grounded by the 6 inside an id,
    nor "128 dollars" by ``amount_cny: 128`` (each currency is its own unit).
    """
    grounded = json.dumps(dict(facts), ensure_ascii=False, default=str) + " " + said
    known = [*value_quantities(dict(facts)), *quantities(said)]
    invented = [token for token in _ids(text) if token not in grounded]
    invented += [
        text[claim.start : claim.end]
        for claim in _claims(text)
        if not any(_matches(claim, k) for k in known)
    ]
    links = [m[0].rstrip(".,;:!?)]'\"") for m in _LINK.finditer(text)]
    sent = [link for link in links if link not in grounded]
    problems = []
    if invented:
        problems.append("states values no tool returned: " + ", ".join(invented[:5]))
    if sent:  # an injected "pay here" link, or a made-up support address
        problems.append("gives a link or address no tool returned: " + ", ".join(sent[:3]))
    if re.search(r"^\s*\|.*\|\s*$", text, re.MULTILINE) or "---" in text:
        problems.append("contains a table; write plain sentences")
    if text.lstrip().startswith(("{", "[")):
        problems.append("is a raw payload; write plain sentences")
    return problems
