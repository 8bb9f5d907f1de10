"""``corral.records.fast_init``: the same records as ``dataclass`` makes, made faster."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
import typing
from dataclasses import InitVar, dataclass, field
from typing import Any, ClassVar

import pytest

from corral.decision.gates import Proposal
from corral.events import PAYLOADS, RunStarted, StepFinished
from corral.memory.task import Fact, TaskMemory
from corral.records import fast_init


def _pair() -> tuple[type[Any], type[Any]]:
    """The same record twice: as ``dataclass`` makes it, and with ``fast_init``."""

    def declare() -> type[Any]:
        @dataclass(frozen=True, slots=True)
        class Record:
            kind: ClassVar[str] = "record"
            name: str
            count: int = 0
            tags: list[str] = field(default_factory=list)
            note: str | None = field(default=None, kw_only=True)

        return Record

    return declare(), fast_init(declare())


def test_a_fast_record_is_the_record_dataclass_makes() -> None:
    plain, fast = _pair()
    assert inspect.signature(fast.__init__) == inspect.signature(plain.__init__)
    for args, kwargs in [(("a",), {}), (("a", 2), {}), (("a", 2, ["x"]), {"note": "n"})]:
        made, expected = fast(*args, **kwargs), plain(*args, **kwargs)
        assert dataclasses.astuple(made) == dataclasses.astuple(expected)
        assert repr(made).split("(", 1)[1] == repr(expected).split("(", 1)[1]
    with pytest.raises(TypeError):
        fast("a", 2, [], "positional note")  # kw_only stays keyword-only
    with pytest.raises(TypeError):
        fast()  # a required field stays required


def test_a_default_factory_makes_a_new_value_for_each_record() -> None:
    _, fast = _pair()
    first, second = fast("a"), fast("b")
    assert first.tags == [] and first.tags is not second.tags
    given = ["kept"]
    assert fast("c", tags=given).tags is given


def test_a_fast_record_stays_frozen_and_copies_as_before() -> None:
    finished = StepFinished("s1", "succeeded", None, None, "", 1.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        finished.reason = "changed"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(finished)) == finished
    assert copy.copy(finished) == finished
    assert dataclasses.replace(finished, reason="r").reason == "r"
    started = RunStarted("t", "agent", "2026-12-04T00:00:00+00:00", "en")
    assert started.redact == {} and started.redact is not RunStarted("t", "a", "x", "en").redact


def test_every_payload_record_and_the_hot_records_are_made_fast() -> None:
    """The records a run makes by the dozen (a regression would only show as time)."""
    plain, fast = _pair()
    assert "__setattr__" in plain.__init__.__code__.co_names  # ``dataclass``'s slow way
    assert "__setattr__" not in fast.__init__.__code__.co_names
    hot = [*PAYLOADS.values(), Proposal, TaskMemory]
    slow = [cls.__qualname__ for cls in hot if "__setattr__" in cls.__init__.__code__.co_names]
    assert slow == []


@pytest.mark.parametrize("cls", [Fact, TaskMemory, RunStarted, StepFinished, Proposal])
def test_the_annotations_of_a_fast_init_resolve_in_the_records_module(cls: type[Any]) -> None:
    """Its globals are the module's, as the generated ``__init__``'s were (string hints)."""
    assert typing.get_type_hints(cls.__init__)
    evaluated = inspect.signature(cls, eval_str=True).parameters
    assert list(evaluated) == list(inspect.signature(cls).parameters)


def test_keyword_only_fields_declared_first_are_taken_as_dataclass_takes_them() -> None:
    @dataclass(frozen=True, slots=True)
    class Record:
        a: int = field(kw_only=True)
        b: int
        c: int = 3

    plain = Record(2, a=1)
    fast = fast_init(Record)
    assert fast(2, a=1) == plain and fast(2, 4, a=1).c == 4
    with pytest.raises(TypeError):
        fast(1, 2, 3)


def test_fields_named_like_the_generated_code_are_refused_or_kept_apart() -> None:
    @dataclass(frozen=True, slots=True)
    class Record:
        _set1: int
        _default1: int
        tags: list[str] = field(default_factory=list)

    plain = Record(1, 2)
    assert fast_init(Record)(1, 2) == plain  # the generated names cannot be these

    @dataclass(frozen=True, slots=True)
    class Clash:
        __fast_init_set_0: int  # mangled to _Clash__fast_init_set_0: allowed

    assert fast_init(Clash)(1) == Clash(1)


def test_fast_init_refuses_what_it_would_get_wrong() -> None:
    @dataclass(slots=True)
    class NotFrozen:
        name: str

    @dataclass(frozen=True)
    class NoSlots:
        name: str

    @dataclass(frozen=True, slots=True)
    class PostInit:
        name: str

        def __post_init__(self) -> None:
            pass

    @dataclass(frozen=True, slots=True)
    class WithInitVar:
        name: str
        secret: InitVar[str]

    @dataclass(frozen=True, slots=True)
    class LeftOut:
        name: str
        derived: int = field(default=0, init=False)

    for cls in (NotFrozen, NoSlots, PostInit, WithInitVar, LeftOut):
        with pytest.raises(TypeError, match="fast_init"):
            fast_init(cls)
