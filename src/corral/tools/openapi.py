"""OpenAPI 3 operations imported as HTTP tools.

An import is a translation: each chosen operation becomes the ``HttpToolConfig`` a person
would have written by hand (method, URL template, input and output schemas), and from
there it is an HTTP tool like any other. So an imported tool and a hand-declared one for
the same endpoint have the same schemas, and are called by the same code.

- input: the operation's ``parameters`` (path-level ones too; ``path``, ``query`` and
  ``header``) and the properties of its JSON ``requestBody`` (an object), side by side;
- output: the JSON schema of its ``200`` response, else ``201``, else the first 2xx;
  none (a ``204``) is an empty object;
- ``$ref`` within the document is inlined (a reference to itself is left open: ``{}``).

The document is a file in the agent folder, read at load; nothing is fetched.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from corral.errors import ConfigInvalidError
from corral.tools.declared import ToolPolicyConfig
from corral.tools.http_config import HttpToolConfig, OpenApiConfig, ParamIn, own_headers
from corral.tools.schema_models import NOWHERE, pointed_to
from corral.validation import validation_problems

_METHODS = ("get", "post", "put", "patch", "delete")
_IN: dict[str, ParamIn] = {"path": "path", "query": "query", "header": "header"}


def openapi_tools(source: OpenApiConfig, root: Path) -> list[HttpToolConfig]:
    """The chosen operations of ``source.document`` as HTTP tool declarations."""
    path = root / source.document
    document = _read(path)
    found = list(_operations(document))
    operations = dict(found)
    places: dict[str, list[str]] = {}
    for operation_id, (method, route, _, _) in found:
        places.setdefault(operation_id, []).append(f"{method.upper()} {route}")
    ambiguous = {i: p for i, p in places.items() if len(p) > 1 and i in source.operations}
    if ambiguous:  # the last one was imported, silently: a DELETE for a GET, say
        raise ConfigInvalidError(
            f"{path}: operationId "
            + "; ".join(f"{i} names {' and '.join(p)}" for i, p in sorted(ambiguous.items())),
            hint="an operationId names one operation: fix the document",
        )
    missing = sorted(set(source.operations) - set(operations))
    if missing:
        raise ConfigInvalidError(
            f"{path}: no operation {', '.join(missing)}",
            hint=f"operationIds in the document: {', '.join(sorted(operations)) or 'none'}",
        )
    base_url = source.base_url or _first_server(document)
    if not base_url:
        raise ConfigInvalidError(f"{path}: no base_url in config and no servers in the document")
    tools: list[HttpToolConfig] = []
    for operation_id, name in source.operations.items():
        method, route, operation, item = operations[operation_id]
        refs = _Refs(document, f"{path}: {operation_id}")
        own = own_headers(source.auth, source.headers)
        input_schema, params_in = _input(refs, item, operation, own)
        tools.append(
            _declared(
                f"{path}: {operation_id}",
                name=name,
                description=_text(operation.get("summary") or operation.get("description")),
                method=method.upper(),
                url=base_url.rstrip("/") + route,
                input=input_schema,
                output=_output(refs, operation),
                params_in=params_in,
                auth=source.auth,
                headers=source.headers,
                policy=source.policies.get(name, ToolPolicyConfig()),
                summary=source.summaries.get(name),
                max_response_bytes=source.max_response_bytes,
                not_found=source.not_found,
            )
        )
    return tools


def _declared(where: str, **fields: Any) -> HttpToolConfig:
    """The declaration of one operation; what it cannot be is a ``ConfigInvalidError``."""
    try:
        return HttpToolConfig(**fields)
    except ValidationError as exc:
        raise ConfigInvalidError(f"{where}: {validation_problems(exc, 5)}") from None


def _read(path: Path) -> dict[str, Any]:
    """The document, as JSON or (any other suffix) bounded YAML."""
    from corral.safe_yaml import read_yaml_file

    if not path.is_file():
        raise ConfigInvalidError(f"no OpenAPI document at {path}")
    if path.suffix == ".json":
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, OSError) as exc:
            raise ConfigInvalidError(f"{path}: not a JSON document ({exc})") from None
    else:
        loaded = read_yaml_file(path)
    if not isinstance(loaded, dict) or not str(loaded.get("openapi", "")).startswith("3"):
        raise ConfigInvalidError(f"{path}: not an OpenAPI 3 document")
    return loaded


def _first_server(document: Mapping[str, Any]) -> str | None:
    servers = document.get("servers") or []
    url = servers[0].get("url") if servers and isinstance(servers[0], Mapping) else None
    return url if isinstance(url, str) and url != "/" else None


def _operations(
    document: Mapping[str, Any],
) -> Iterator[tuple[str, tuple[str, str, Mapping[str, Any], Mapping[str, Any]]]]:
    """``operationId`` -> (method, path, operation, path item), for every operation."""
    for route, item in (document.get("paths") or {}).items():
        if not isinstance(item, Mapping):
            continue
        for method in _METHODS:
            operation = item.get(method)
            if isinstance(operation, Mapping) and isinstance(operation.get("operationId"), str):
                yield operation["operationId"], (method, route, operation, item)


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


class _Refs:
    """``$ref`` resolution within one document, for one operation's error messages."""

    def __init__(self, document: Mapping[str, Any], where: str) -> None:
        self.document = document
        self.where = where

    def target(self, ref: Any) -> Mapping[str, Any]:
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise ConfigInvalidError(f"{self.where}: only local $ref are read, not {ref!r}")
        node = pointed_to(self.document, ref)
        if node is NOWHERE:
            raise ConfigInvalidError(f"{self.where}: $ref {ref!r} points to nothing")
        if not isinstance(node, Mapping):
            raise ConfigInvalidError(f"{self.where}: $ref {ref!r} is not an object")
        return node

    def deref(self, node: Mapping[str, Any]) -> Mapping[str, Any]:
        """A parameter, request body or response behind its ``$ref``."""
        seen: set[str] = set()
        while "$ref" in node and node["$ref"] not in seen:
            seen.add(node["$ref"])
            node = self.target(node["$ref"])
        return node

    def inline(self, schema: Any, seen: tuple[str, ...] = ()) -> Any:
        """A schema with every ``$ref`` replaced by what it points to; a cycle is ``{}``."""
        if isinstance(schema, list):
            return [self.inline(item, seen) for item in schema]
        if not isinstance(schema, Mapping):
            return schema
        if "$ref" in schema:
            ref = schema["$ref"]
            if ref in seen:
                return {}
            return self.inline(self.target(ref), (*seen, ref))
        return {key: self.inline(value, seen) for key, value in schema.items()}


def _input(
    refs: _Refs, item: Mapping[str, Any], operation: Mapping[str, Any], own: frozenset[str]
) -> tuple[dict[str, Any], dict[str, ParamIn]]:
    """The input schema: parameters and body properties side by side, and where each goes.

    ``own``: headers corral sends itself (the idempotency key, the auth, config headers),
    in lower case; the document's parameters for them are not arguments.
    """
    properties: dict[str, Any] = {}
    required: list[str] = []
    params_in: dict[str, ParamIn] = {}
    listed = [*item.get("parameters", []), *operation.get("parameters", [])]
    parameters = [refs.deref(p) for p in listed]
    by_name = {(p.get("name"), p.get("in")): p for p in parameters}  # the operation's win
    for (name, where), parameter in by_name.items():
        if not isinstance(name, str):
            continue
        if where == "cookie" and parameter.get("required"):
            raise ConfigInvalidError(f"{refs.where}: the required cookie {name!r} cannot be sent")
        if where not in _IN:
            continue  # an optional cookie is not an argument a plan can give
        if where == "header" and name.lower() in own:
            continue
        if name in properties:  # one argument cannot go to two places
            raise ConfigInvalidError(
                f"{refs.where}: {name!r} is both a {params_in[name]} and a {where} parameter"
            )
        declared = dict(refs.inline(parameter.get("schema") or {}))
        if isinstance(parameter.get("description"), str):
            declared.setdefault("description", parameter["description"])
        properties[name] = declared
        params_in[name] = _IN[where]
        if parameter.get("required") or where == "path":
            required.append(name)
    body = refs.deref(operation.get("requestBody") or {})
    schema = _json_schema(refs, body)
    if schema is None and body.get("content"):
        media = ", ".join(map(str, body["content"]))
        raise ConfigInvalidError(
            f"{refs.where}: the request body is {media}; only a JSON body can be sent"
        )
    if schema is not None:
        if schema.get("type", "object") != "object":
            raise ConfigInvalidError(f"{refs.where}: a request body must be a JSON object")
        for name, sub in (schema.get("properties") or {}).items():
            if name in properties:
                raise ConfigInvalidError(
                    f"{refs.where}: {name!r} is both a parameter and a body field"
                )
            properties[name] = sub
            params_in[name] = "body"
        required.extend(n for n in schema.get("required") or () if n in properties)
    shown: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        shown["required"] = required
    return shown, params_in


def _output(refs: _Refs, operation: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON schema of the success response (200, else 201, else the first 2xx)."""
    responses = {str(code): answer for code, answer in (operation.get("responses") or {}).items()}
    successes = [code for code in sorted(responses) if code.startswith("2")]
    chosen = next((c for c in ("200", "201", *successes) if c in responses), None)
    if chosen is None:
        return {"type": "object", "properties": {}}
    schema = _json_schema(refs, refs.deref(responses[chosen]))
    return dict(schema) if schema is not None else {"type": "object", "properties": {}}


def _json_schema(refs: _Refs, holder: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The inlined schema of a body's JSON content (``application/json`` or ``+json``)."""
    content = holder.get("content") or {}
    for media, entry in content.items():
        if media.split(";")[0].strip().endswith(("/json", "+json")) and isinstance(entry, Mapping):
            schema = refs.inline(entry.get("schema") or {})
            return schema if isinstance(schema, Mapping) else None
    return None
