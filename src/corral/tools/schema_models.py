"""Pydantic models from JSON Schema: how tools declared in config get typed inputs and outputs.

A function tool's signature is its schema. An HTTP endpoint, an OpenAPI operation or an
MCP tool declares a JSON Schema instead; ``model_from_schema`` turns it into the same
kind of model, so plan validation, reference type checks and output normalisation treat
every tool alike.

What is understood: objects (``properties``, ``required``, nested objects),
``string``/``number``/``integer``/``boolean``/``null``, arrays, ``enum`` and ``const``
(as ``Literal``), unions (a list of types, ``anyOf``/``oneOf``, OpenAPI's ``nullable``),
``allOf`` of objects (one object with all their fields),
``default`` and ``description``, and ``$ref`` to ``#/...`` inside ``document``. Formats
(``date``, ``date-time``...) stay ``str``: the service's own text is kept, never
reinterpreted. Anything else is ``Any``: accepted as it comes, and a plan may only pass it
on to a parameter that is itself ``Any``.

Outputs ignore undeclared fields (``extra="ignore"``), so that only the declared fields of
a response reach the run; inputs forbid them, as a function tool's do.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Mapping
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

from corral.errors import ConfigInvalidError

_SCALARS: dict[str, Any] = {
    "string": str,
    "number": float,
    "integer": int,
    "boolean": bool,
    "null": type(None),
}


def model_from_schema(
    name: str,
    schema: Mapping[str, Any],
    *,
    extra: Literal["ignore", "forbid"] = "ignore",
    document: Mapping[str, Any] | None = None,
) -> type[BaseModel]:
    """A pydantic model for an object schema; raises ``ConfigInvalidError`` for a non-object.

    ``extra``: ``ignore`` (outputs: undeclared fields are dropped) or ``forbid`` (inputs).
    ``document``: what ``$ref: "#/..."`` points into (an OpenAPI document); by default
    ``schema`` itself.
    """
    if not isinstance(schema, Mapping):
        raise ConfigInvalidError(f"{name}: a tool's schema must be a mapping")
    builder = _Builder(document if document is not None else schema, extra)
    try:
        resolved, refs = builder.resolve(schema, ())
        resolved = builder.merged(resolved, refs, name)
        if resolved and _kind(resolved) != "object":
            raise ConfigInvalidError(
                f"{name}: a tool's schema must be an object, not {_kind(resolved) or 'untyped'}"
            )
        return builder.model(name, resolved, refs)
    except (TypeError, AttributeError, KeyError, ValueError) as exc:  # a shape not foreseen
        raise ConfigInvalidError(
            f"{name}: the schema cannot be read ({type(exc).__name__}: {str(exc)[:200]})"
        ) from None


NOWHERE = object()
"""What ``pointed_to`` answers for a pointer that leads to nothing."""


def pointed_to(document: Mapping[str, Any], ref: str) -> Any:
    """The node a local JSON pointer (``#/a/b``) names in ``document``, or ``NOWHERE``.

    ``~1`` and ``~0`` are unescaped. Shared by schema ``$ref``s and OpenAPI's own.
    """
    node: Any = document
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            return NOWHERE
        node = node[part]
    return node


def object_fields(schema: Mapping[str, Any], where: str) -> tuple[Mapping[str, Any], list[str]]:
    """An object schema's ``properties`` and ``required``, checked: ``CONFIG_INVALID`` else.

    A schema comes from a config, an OpenAPI document or an MCP server's listing: a
    ``properties: 5`` or ``required: [[a]]`` is their mistake, named, not a traceback.
    """
    properties = schema.get("properties") or {}
    required = schema.get("required") or []
    if not isinstance(properties, Mapping) or not all(isinstance(k, str) for k in properties):
        raise ConfigInvalidError(
            f"{where}: 'properties' must map field names to schemas, not "
            f"{type(properties).__name__}"
        )
    if not isinstance(required, list) or not all(isinstance(n, str) for n in required):
        raise ConfigInvalidError(f"{where}: 'required' must be a list of field names")
    return properties, required


def _kind(schema: Mapping[str, Any]) -> str | None:
    kind = schema.get("type")
    if kind is None and "properties" in schema:
        return "object"
    return kind if isinstance(kind, str) else None


def python_name(field: str) -> str:
    """The attribute name of a JSON field: itself when it can be one, else a safe variant.

    ``high-c`` is ``high_c``; ``json``, ``model_config`` or ``Config`` (names ``BaseModel``
    uses) get a trailing ``_``. The JSON name stays the field's alias, used on the wire.
    Two fields with one attribute (``x-y`` and ``x_y``) fail the model's build.
    """
    safe = re.sub(r"\W", "_", field) or "field"
    if safe[0].isdigit() or safe.startswith("_"):
        safe = f"f{safe}"
    taken = hasattr(BaseModel, safe) or safe.startswith("model_") or safe == "Config"
    if keyword.iskeyword(safe) or taken:  # pydantic reads ``Config`` as the model's settings
        safe = f"{safe}_"
    return safe


class _Builder:
    """One schema's conversion: the document its ``$ref`` point into, and the extra mode."""

    def __init__(self, document: Mapping[str, Any], extra: Literal["ignore", "forbid"]) -> None:
        self.document = document
        self.extra = extra

    def resolve(
        self, schema: Mapping[str, Any], seen: tuple[str, ...]
    ) -> tuple[Mapping[str, Any], tuple[str, ...]]:
        """Follow ``$ref`` (within the document) to a schema without one.

        ``seen``: the references followed on the way here; one met again is a cycle, and
        a cycle is ``{}`` (``Any``), not an endless nesting of models.
        """
        while "$ref" in schema:
            ref = schema["$ref"]
            if not isinstance(ref, str) or not ref.startswith("#/") or ref in seen:
                return {}, seen
            seen = (*seen, ref)
            target = pointed_to(self.document, ref)
            if target is NOWHERE:
                raise ConfigInvalidError(f"$ref {ref!r} points to nothing in the document")
            if not isinstance(target, Mapping):
                raise ConfigInvalidError(f"$ref {ref!r} is not a schema")
            schema = target
        return schema, seen

    def merged(
        self, schema: Mapping[str, Any], refs: tuple[str, ...], name: str
    ) -> Mapping[str, Any]:
        """An ``allOf`` of objects as one object: the members' fields side by side.

        OpenAPI documents compose this way (``allOf: [{$ref: Base}, {properties: ...}]``).
        Left as ``Any``, such an output would let the whole raw answer through; as one
        object it keeps only the declared fields. Any other ``allOf`` is left as it is.
        """
        members = schema.get("allOf")
        if not isinstance(members, list) or not members:
            return schema
        own, needed = object_fields(schema, name)
        properties, required = dict(own), list(needed)
        for member in members:
            if not isinstance(member, Mapping):
                return schema
            part = self.merged(*self.resolve(member, refs), name)
            if _kind(part) not in (None, "object") or {"allOf", "anyOf", "oneOf"} & set(part):
                return schema
            more, also = object_fields(part, f"{name}: allOf")
            properties.update(more)
            required.extend(also)
        rest = {key: value for key, value in schema.items() if key != "allOf"}
        return {**rest, "type": "object", "properties": properties, "required": required}

    def model(self, name: str, schema: Mapping[str, Any], refs: tuple[str, ...]) -> type[BaseModel]:
        properties, needed = object_fields(schema, name)
        required = set(needed)
        fields: dict[str, Any] = {}
        named: dict[str, str] = {}
        for field, sub in properties.items():
            attribute = python_name(field)
            if attribute in named:  # one would shadow the other, and its data be lost
                raise ConfigInvalidError(
                    f"{name}: fields {named[attribute]!r} and {field!r} would both be "
                    f"the attribute {attribute!r}"
                )
            named[attribute] = field
            annotation = self.annotation(f"{name}_{attribute}", sub, refs)
            info: dict[str, Any] = {}
            if isinstance(sub, Mapping) and isinstance(sub.get("description"), str):
                info["description"] = sub["description"]
            if attribute != field:
                info["alias"] = field
            if field in required:
                fields[attribute] = (annotation, Field(..., **info))
            else:
                default = sub.get("default") if isinstance(sub, Mapping) else None
                optional = annotation if annotation is Any else annotation | None
                fields[attribute] = (optional, Field(default, **info))
        config = ConfigDict(extra=self.extra, populate_by_name=True)
        return create_model(name, __config__=config, **fields)

    def annotation(self, name: str, raw: Any, refs: tuple[str, ...]) -> Any:
        """The Python type of one schema; ``Any`` for what is not understood."""
        if not isinstance(raw, Mapping):
            return Any
        schema, refs = self.resolve(raw, refs)
        schema = self.merged(schema, refs, name)
        nullable = bool(schema.get("nullable"))
        if "const" in schema:
            found: Any = Literal[schema["const"]] if _literal_ok([schema["const"]]) else Any
        elif isinstance(schema.get("enum"), list) and _literal_ok(schema["enum"]):
            found = Literal[tuple(schema["enum"])]
        elif "anyOf" in schema or "oneOf" in schema:
            members = schema.get("anyOf") or schema.get("oneOf") or []
            found = self.union(name, members, refs)
        elif isinstance(schema.get("allOf"), list) and len(schema["allOf"]) == 1:
            found = self.annotation(name, schema["allOf"][0], refs)
        elif isinstance(schema.get("type"), list):
            found = self.union(name, [{**schema, "type": t} for t in schema["type"]], refs)
        else:
            found = self.typed(name, schema, refs)
        return found | None if nullable and found is not Any else found

    def union(self, name: str, members: list[Any], refs: tuple[str, ...]) -> Any:
        types = [self.annotation(f"{name}_{i}", m, refs) for i, m in enumerate(members)]
        if not types or Any in types:
            return Any
        return Union[tuple(dict.fromkeys(types))]  # noqa: UP007 (built from a list)

    def typed(self, name: str, schema: Mapping[str, Any], refs: tuple[str, ...]) -> Any:
        kind = _kind(schema)
        if kind in _SCALARS:
            return _SCALARS[kind]
        if kind == "array":
            return list[self.annotation(f"{name}_item", schema.get("items"), refs)]  # type: ignore[misc]
        if kind == "object":
            if schema.get("properties"):
                return self.model(name, schema, refs)
            return dict[str, Any]
        return Any


def _literal_ok(values: list[Any]) -> bool:
    """Values a ``Literal`` can hold: a non-empty list of str, int, bool or None."""
    return bool(values) and all(v is None or isinstance(v, str | int | bool) for v in values)
