"""Static type compatibility between a referenced value and a tool parameter.

Deliberately strict: a reference must already have the parameter's type (``int`` may flow
into ``float``). Lax coercions such as ``str`` -> ``date`` are rejected, because a plan
that only works by accident is the bug this check exists to catch.

Shared by ``planning`` (a reference flowing into a tool parameter) and ``verify`` (a field
of a tool's output), so it sits below both, beside ``contracts``.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections import abc
from datetime import date, datetime, time
from decimal import Decimal
from enum import Enum
from typing import Any, Literal, Union
from uuid import UUID

from pydantic import BaseModel
from typing_extensions import is_typeddict


def _members(tp: Any) -> list[Any]:
    """A union's members other than ``None``, each without its ``Annotated`` wrapper.

    ``Annotated[int, Field(ge=1)] | None`` is an optional ``int``.
    """
    if typing.get_origin(tp) in (Union, types.UnionType):
        return [_strip(m) for m in typing.get_args(tp) if m is not type(None)]
    return [tp]


def _strip(tp: Any) -> Any:
    if typing.get_origin(tp) is typing.Annotated:
        return typing.get_args(tp)[0]
    return tp


def _literal_base(tp: Any) -> Any:
    if typing.get_origin(tp) is Literal:
        kinds = {type(v) for v in typing.get_args(tp)}
        return kinds.pop() if len(kinds) == 1 else Any
    return tp


def describe(tp: Any) -> str:
    """A short readable name for a type, for error messages."""
    tp = _strip(tp)
    if typing.get_origin(tp) in (Union, types.UnionType):
        return " | ".join(describe(member) for member in typing.get_args(tp))
    if tp is type(None):
        return "None"
    if isinstance(tp, type) and not typing.get_args(tp):
        return tp.__name__
    return str(tp).replace("typing.", "")


def is_assignable(
    source: Any, target: Any, *, _seen: frozenset[tuple[Any, Any]] = frozenset()
) -> bool:
    """Whether a value of type ``source`` always fits a parameter of type ``target``.

    Two models fit by their fields (``_fields_fit``); ``_seen`` holds the pairs of models
    being compared, so a model that refers to itself is compared once.
    """
    source, target = _strip(source), _strip(target)
    if source is Any or target is Any:
        return True
    if source is type(None):
        return target is type(None) or type(None) in typing.get_args(target)
    sources, targets = _members(source), _members(target)
    if len(sources) > 1:
        return all(is_assignable(s, target, _seen=_seen) for s in sources)
    if len(targets) > 1:
        return any(is_assignable(sources[0], t, _seen=_seen) for t in targets)
    src, dst = sources[0], targets[0]
    if typing.get_origin(dst) is Literal and typing.get_origin(src) is Literal:
        return set(typing.get_args(src)) <= set(typing.get_args(dst))
    src, dst = _literal_base(src), _literal_base(dst)
    if src is Any or dst is Any:
        return True
    if isinstance(dst, type) and issubclass(dst, Enum):
        base = next((b for b in dst.__mro__[1:] if b in (str, int)), None)
        return src is dst or (base is not None and src is base)
    src_origin, dst_origin = typing.get_origin(src), typing.get_origin(dst)
    if src_origin or dst_origin:
        if (src_origin or src) != (dst_origin or dst):
            return False
        src_args, dst_args = typing.get_args(src), typing.get_args(dst)
        if not src_args or not dst_args:
            return True
        return len(src_args) == len(dst_args) and all(
            is_assignable(s, d, _seen=_seen) for s, d in zip(src_args, dst_args, strict=True)
        )
    if src is bool and dst is not bool:
        return False
    if src is int and dst is float:
        return True
    if isinstance(src, type) and isinstance(dst, type) and issubclass(src, dst):
        return True
    return _fields_fit(src, dst, _seen)


def _fields_fit(source: Any, target: Any, seen: frozenset[tuple[Any, Any]]) -> bool:
    """Whether a ``source`` model always validates as the ``target`` model, field by field.

    Each field of ``target`` is in ``source`` with an assignable type, or has a default;
    extra fields of ``source`` are ignored, as pydantic ignores them. This is how the
    result of a declared tool (a model built from JSON Schema) flows into a function
    tool's own model: no two such classes are ever the same class.
    """
    models = all(isinstance(m, type) and issubclass(m, BaseModel) for m in (source, target))
    if not models:
        return False
    if (source, target) in seen:
        return True
    seen = seen | {(source, target)}
    given = source.model_fields
    for name, field in target.model_fields.items():
        if name not in given:
            if field.is_required():
                return False
        elif not is_assignable(given[name].annotation, field.annotation, _seen=seen):
            return False
    return True


def field_type(model: type[BaseModel], path: tuple[str, ...]) -> tuple[Any, str | None]:
    """The type at ``path`` inside ``model``; ``(None, problem)`` when the path does not exist."""
    current: Any = model
    walked: list[str] = []
    for part in path:
        members = _members(_strip(current))
        node = members[0] if len(members) == 1 else None
        named = _named_fields(node)
        if named is not None:
            if part not in named:
                where = ".".join(walked) or getattr(node, "__name__", "value")
                return None, f"{where} has no field {part!r} (fields: {', '.join(named)})"
            current = named[part]
        elif node is Any or node is dict or node is object:
            return Any, None
        elif typing.get_origin(node) in _MAPPINGS:  # any key: its values' type
            args = typing.get_args(node)
            current = args[1] if len(args) == 2 else Any
        else:
            return None, f"{'.'.join(walked) or 'value'} of type {describe(current)} has no fields"
        walked.append(part)
    return current, None


def _named_fields(node: Any) -> dict[str, Any] | None:
    """The fields of a pydantic model, a TypedDict or a dataclass, with their types.

    ``None`` for anything else. A TypedDict's or a dataclass's hints that do not resolve
    read as ``Any``: the path is then known to exist, its type is not.
    """
    if isinstance(node, type) and issubclass(node, BaseModel):
        return {name: field.annotation for name, field in node.model_fields.items()}
    if is_typeddict(node) or (isinstance(node, type) and dataclasses.is_dataclass(node)):
        names = (
            list(node.__annotations__)  # a TypedDict's holds its bases' keys too
            if is_typeddict(node)
            else [f.name for f in dataclasses.fields(node)]
        )
        try:
            hints = typing.get_type_hints(node)
        except (NameError, TypeError):
            return dict.fromkeys(names, Any)
        return {name: hints.get(name, Any) for name in names}
    return None


_ITEMS = (list, set, frozenset, abc.Sequence, abc.MutableSequence, abc.Set, abc.Iterable)
"""Containers whose every item has the one type argument."""
_MAPPINGS = (dict, abc.Mapping, abc.MutableMapping)


def element_type(tp: Any, position: tuple[str, ...]) -> Any | None:
    """The type a value at ``position`` inside a ``tp`` value must have (``None``: unknown).

    ``position`` is the path ``references.iter_references`` gives a reference nested in an
    argument (``("0",)`` for a list's first item, ``("key",)`` for a dict's or a model's
    field). Unknown is a union with several members (which one the value takes is the
    validator's choice), a container without type arguments, a field that is not there:
    the check is then left to the call's own validation, as before.
    """
    for part in position:
        members = _members(_strip(tp))
        if len(members) != 1:
            return None
        node = members[0]
        origin, args = typing.get_origin(node), typing.get_args(node)
        if origin in _ITEMS and args:
            tp = args[0]
        elif origin is tuple and args:
            if len(args) == 2 and args[1] is Ellipsis:
                tp = args[0]
            elif part.isdigit() and int(part) < len(args):
                tp = args[int(part)]
            else:
                return None
        elif origin in _MAPPINGS and len(args) == 2:
            tp = args[1]
        elif isinstance(node, type) and issubclass(node, BaseModel):
            field = node.model_fields.get(part)
            if field is None:
                return None
            tp = field.annotation
        elif is_typeddict(node):
            try:
                tp = typing.get_type_hints(node).get(part)
            except (NameError, TypeError):  # a hint that does not resolve: left to the call
                return None
            if tp is None:
                return None
        else:
            return None
    return tp


def scalar_kind(tp: Any) -> tuple[str | None, tuple[Any, ...] | None]:
    """The kind a value of ``tp`` has where expressions read it: ``number``, ``text``, ``bool``.

    Expressions read results, facts and arguments in their JSON form, so a date, a time,
    a ``Decimal`` or a ``UUID`` is text there (``result.due < "2024-06-01"`` compares two
    strings). With the kind, the only values of a ``Literal`` or an ``Enum`` (as JSON has
    them); ``(None, None)``: unknown. ``X | None`` is ``X`` (``None`` is absent, not a kind).
    """
    members = _members(_strip(tp))
    if len(members) != 1:
        return None, None
    node = members[0]
    if typing.get_origin(node) is Literal:
        values = typing.get_args(node)
    elif isinstance(node, type) and issubclass(node, Enum):
        values = tuple(member.value for member in node)
    elif node is bool:
        return "bool", None
    elif isinstance(node, type) and issubclass(node, int | float):
        return "number", None
    elif isinstance(node, type) and issubclass(node, str | date | time | Decimal | UUID):
        return "text", None  # date and datetime, Decimal: strings in JSON
    else:
        return None, None
    kinds = {value_kind(v) for v in values}
    return (kinds.pop() if len(kinds) == 1 else None), values


def value_kind(value: Any) -> str | None:
    """The kind of a literal value, as ``scalar_kind`` names a type's (``None``: another)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "text"
    return None


def json_native(tp: Any) -> bool:
    """Whether a value of ``tp`` is the same in Python and in JSON (``None`` aside).

    ``str``, numbers, ``bool``, a ``Literal`` of those, a ``str`` enum. A rule reads a
    step's arguments as they are bound: what the plan gave (JSON), or the parameter's
    Python default (a ``Decimal``, a ``date``) when it gave nothing; for the other types
    the kind compared depends on which, and is not checked.
    """
    members = _members(_strip(tp))
    if len(members) != 1:
        return False
    node = members[0]
    if typing.get_origin(node) is Literal:
        return True
    if isinstance(node, type) and issubclass(node, Enum):
        return issubclass(node, str)
    return node in (str, int, float, bool)


_BOUNDED = (int, bool, type(None), Decimal, date, time, UUID)
"""Leaf types whose values never hold a float, nor text of any length."""


def may_hold_float(tp: Any) -> bool:
    """Whether a value of ``tp`` may hold a ``float`` anywhere (so NaN or an infinity).

    Looked at once per tool, so that the results of the many that never hold one are not
    walked value by value. A type it cannot see into (``Any``, an unknown class) may.
    """

    def leaf(member: Any, origin: Any, args: tuple[Any, ...]) -> bool | None:
        if member is float or member is Any or member is object:
            return True
        if member is str or member is bytes or member in _BOUNDED:
            return False
        if origin is Literal:
            return any(isinstance(v, float) for v in args)
        return None

    return _may_hold(tp, leaf, frozenset())


def may_be_long(tp: Any) -> bool:
    """Whether a value of ``tp`` may be long once dumped: text, bytes, or a container.

    Looked at once per tool: the results of one that returns only numbers, flags, dates
    and the like are not measured (``ToolPolicy.max_output_chars``).
    """

    def leaf(member: Any, origin: Any, args: tuple[Any, ...]) -> bool | None:
        if member in (str, bytes, Any, object):
            return True
        if member is float or member in _BOUNDED or origin is Literal:
            return False
        return True if origin is not None else None  # a list, a dict: any length

    return _may_hold(tp, leaf, frozenset())


def may_key_by_other_than_text(tp: Any) -> bool:
    """Whether a value of ``tp`` may hold a mapping keyed by something other than ``str``.

    JSON keys are text: ``{1: "a", "1": "b"}`` is written as one key, and a value is lost
    (``tools.invoke`` compares the keys before and after). Looked at once per tool.
    """

    def leaf(member: Any, origin: Any, args: tuple[Any, ...]) -> bool | None:
        if member is Any or member is object:
            return True
        if isinstance(origin, type) and issubclass(origin, abc.Mapping):
            if not args or args[0] is not str:
                return True
            return None  # keyed by text: what its values hold decides
        if member in (str, bytes, float) or member in _BOUNDED or origin is Literal:
            return False
        return None

    return _may_hold(tp, leaf, frozenset())


def _may_hold(
    tp: Any, leaf: abc.Callable[[Any, Any, tuple[Any, ...]], bool | None], seen: frozenset[Any]
) -> bool:
    """Whether ``leaf`` says True of a member of ``tp``, its fields or its arguments.

    ``leaf`` answers for a member it knows (``None``: look inside); an enum or a datetime
    holds neither a float nor long text; a class it cannot see into may hold anything.
    """
    for member in _members(_strip(tp)):
        if member in seen:
            continue
        inner = seen | {member}
        origin, args = typing.get_origin(member), typing.get_args(member)
        known = leaf(member, origin, args)
        if known is not None:
            if known:
                return True
            continue
        if isinstance(member, type) and issubclass(member, Enum | datetime):
            continue
        named = _named_fields(member)
        if named is not None:
            if any(_may_hold(t, leaf, inner) for t in named.values()):
                return True
            continue
        if origin is not None and args:
            if any(_may_hold(a, leaf, inner) for a in args if a is not Ellipsis):
                return True
            continue
        return True  # a bare container (list, dict) or a type it cannot see into
    return False
