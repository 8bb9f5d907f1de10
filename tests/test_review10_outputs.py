"""Review of issue 10: ``Sensitive`` fields in the new kinds of tool result are redacted."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, TypedDict

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict as TypedDictX

from corral import MemoryStore, Runtime, Sensitive, tool
from corral.observe.logs import log_records
from corral.testing import FixedEffects
from tests.helpers import build_agent

SECRET = "4111111111111111"


class CardModel(BaseModel):
    number: Annotated[str, Sensitive()]


@dataclass
class CardDC:
    number: Annotated[str, Sensitive()]


class CardTD(TypedDictX):  # pydantic wants typing_extensions' for a nested one on 3.11
    number: Annotated[str, Sensitive()]


@dataclass
class WithModel:
    card: CardModel


@dataclass
class WithDataclass:
    card: CardDC


class WithTypedDict(TypedDict):
    card: CardTD


@tool
def card_model() -> WithModel:
    """A dataclass result holding a pydantic model (the shape corral had before)."""
    return WithModel(CardModel(number=SECRET))


@tool
def card_dataclass() -> WithDataclass:
    """A dataclass result holding a dataclass: the new shape."""
    return WithDataclass(CardDC(SECRET))


@tool
def card_typeddict() -> WithTypedDict:
    """A TypedDict result holding a TypedDict: the new shape."""
    return {"card": {"number": SECRET}}


class PlainInner(TypedDict):
    number: str


class PlainOuter(TypedDict):
    card: PlainInner


async def _logged(spec: object) -> str:
    agent = build_agent([spec], [{"id": "s1", "tool": spec.name, "args": {}}])  # type: ignore[attr-defined]
    store = MemoryStore()
    summary = await Runtime(agent, store, effects=FixedEffects()).start("go")
    assert summary.status.value == "finished", summary
    return json.dumps(log_records(store.events[summary.run_id]), ensure_ascii=False)


async def test_a_nested_model_field_marked_sensitive_is_redacted() -> None:
    assert SECRET not in await _logged(card_model)  # passes: the walk sees BaseModels


async def test_a_nested_dataclass_field_marked_sensitive_is_redacted() -> None:
    assert SECRET not in await _logged(card_dataclass)


async def test_a_nested_typeddict_field_marked_sensitive_is_redacted() -> None:
    assert SECRET not in await _logged(card_typeddict)


def test_a_nested_typing_typeddict_is_a_config_error_not_a_pydantic_one() -> None:
    """``typing.TypedDict`` nested in a result: pydantic refuses it on Python 3.11 with a
    ``PydanticUserError`` that ``derive_output`` does not catch, so ``@tool`` raises it
    raw instead of CONFIG_INVALID ("cannot describe its return annotation")."""
    from corral.errors import ConfigInvalidError

    def card() -> PlainOuter:
        """A TypedDict in a TypedDict, both from ``typing``."""
        return {"card": {"number": "1"}}

    with pytest.raises(ConfigInvalidError):
        tool(card)
