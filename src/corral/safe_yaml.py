"""Reading a developer's YAML file without letting its shape exhaust memory or time.

``yaml.safe_load`` runs no code, but it still accepts three things that hurt later: an
alias bomb (a 1.4 KB file whose anchors expand to billions of nodes for every walk that
follows: validation, references, JSON), nesting deep enough to exhaust the stack, and
non-finite numbers (``.inf``, ``.nan``) that quietly turn a limit off. This loader
measures the document while it is composed, before anything walks it, and refuses:

- a file over ``MAX_YAML_BYTES`` bytes, or one that is not UTF-8;
- nesting deeper than ``MAX_YAML_DEPTH``;
- a document whose size with every alias expanded (nodes plus scalar characters) is over
  ``MAX_YAML_EXPANDED``; aliases themselves (``&a``/``*a``, ``<<: *a``) stay allowed;
- recursive aliases, and non-finite numbers anywhere;
- a key written twice in one mapping (YAML would keep the last, silently).

Every refusal is ``CONFIG_INVALID`` naming the file and line. ``Lines`` keeps where each
value was written, so a problem found later (the config's schema) can name its line too.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.events import AliasEvent, Event
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from corral.errors import ConfigInvalidError

MAX_YAML_BYTES = 1_048_576
"""Largest ``agent.yaml`` (or eval file) read, in bytes."""
MAX_YAML_DEPTH = 64
"""Deepest nesting of mappings and sequences."""
MAX_YAML_EXPANDED = 2_000_000
"""Largest document with every alias expanded, counted as nodes plus scalar characters:
about twice what the largest file can hold without aliases."""

_FLOAT_TAG = "tag:yaml.org,2002:float"
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _BoundedLoader(yaml.SafeLoader):
    """``SafeLoader`` that measures every node as it is composed.

    It is the pure-Python loader on purpose: libyaml's composer recurses in C and
    crashes the whole process on deep nesting.
    """

    def __init__(self, text: str, name: str) -> None:
        super().__init__(text)
        self.name = name  # marks (file, line) name the file, not "<unicode string>"
        self._depth = 0
        self._sizes: dict[int, int] = {}
        """id(node) -> its size with aliases expanded; nodes stay alive while loading."""

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        """Compose one node, refusing depth, recursion and expansion beyond the limits."""
        event: Event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, AliasEvent):
            target = self.anchors.get(event.anchor)
            if target is not None and id(target) not in self._sizes:
                raise _refusal(f"alias *{event.anchor} refers to itself", event.start_mark)
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise _refusal(f"nested deeper than {MAX_YAML_DEPTH} levels", event.start_mark)
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if node is not None:
            self._measure(node)
        return node

    def _measure(self, node: Node) -> None:
        known = self._sizes.get(id(node))
        if known is not None:
            return  # an alias: its size is added again by the collection that holds it
        if isinstance(node, ScalarNode):
            self._check_number(node)
            size = 1 + len(node.value)
        elif isinstance(node, SequenceNode):
            size = 1 + sum(self._sizes[id(child)] for child in node.value)
        elif isinstance(node, MappingNode):
            self._check_keys(node)
            size = 1 + sum(self._sizes[id(k)] + self._sizes[id(v)] for k, v in node.value)
        else:  # pragma: no cover - the composer makes only these three kinds
            size = 1
        if size > MAX_YAML_EXPANDED:
            raise _refusal(
                f"with its aliases expanded this value is larger than {MAX_YAML_EXPANDED:,} "
                "nodes and characters (an alias bomb?)",
                node.start_mark,
            )
        self._sizes[id(node)] = size

    def _check_keys(self, node: MappingNode) -> None:
        """Refuse a key written twice in one mapping.

        YAML keeps the last silently, so a second ``business_rules:`` block would drop the
        first's rules unseen. Keys are compared as the mapping built holds them (``yes``
        and ``true``, ``1`` and ``0x1`` are one key). Keys that a merge (``<<: *a``) brings
        in may still be overridden, as YAML means them to be.
        """
        first: dict[Any, int] = {}
        for key, _ in node.value:
            if not isinstance(key, ScalarNode) or key.tag == _MERGE_TAG:
                continue
            seen = self.construct_object(key)  # as the mapping will hold it: True == 1 too
            if seen in first:
                raise _refusal(
                    f"duplicate key {key.value!r} (first on line {first[seen] + 1}); YAML "
                    "would keep only the last",
                    key.start_mark,
                )
            first[seen] = key.start_mark.line

    def _check_number(self, node: ScalarNode) -> None:
        if node.tag != _FLOAT_TAG:
            return
        try:
            value = self.construct_yaml_float(node)
        except ValueError:
            raise _refusal(f"{node.value!r} is not a number", node.start_mark) from None
        if not math.isfinite(value):
            raise _refusal(f"{node.value!r} is not a finite number", node.start_mark)


Lines = dict[tuple[str, ...], int]
"""A value's line (from 1) by its path of mapping keys and sequence indexes, as text."""


def _lines_of(root: Node) -> Lines:
    """Where each value of the document starts: a mapping entry at its key's line.

    Walked in document order, so a node reached twice (an anchor, then its alias) keeps
    the path of the anchor, where it is written; the alias's path is given the same line,
    and what lies under it the line of the nearest parent. A value brought in by a merge
    key has none of its own, and is placed by its mapping's line.
    """
    lines: Lines = {}
    seen: set[int] = set()
    pending: list[tuple[tuple[str, ...], Node]] = [((), root)]
    while pending:
        path, node = pending.pop()
        lines.setdefault(path, node.start_mark.line + 1)
        if id(node) in seen:
            continue
        seen.add(id(node))
        children: list[tuple[tuple[str, ...], Node]] = []
        if isinstance(node, MappingNode):
            for key, value in node.value:
                if isinstance(key, ScalarNode) and key.tag != _MERGE_TAG:
                    lines.setdefault((*path, key.value), key.start_mark.line + 1)
                    children.append(((*path, key.value), value))
        elif isinstance(node, SequenceNode):
            children = [((*path, str(i)), item) for i, item in enumerate(node.value)]
        pending.extend(reversed(children))  # the first child is taken next: document order
    return lines


def line_of(lines: Lines, location: tuple[Any, ...]) -> int | None:
    """The line of ``location`` (a pydantic error's ``loc``), or of its nearest parent.

    ``None`` for the document as a whole (a problem of the whole config has no line).
    """
    path = tuple(map(str, location))
    while path not in lines and path:
        path = path[:-1]
    return lines.get(path) if path else None


def _refusal(problem: str, mark: Any) -> ComposerError:
    return ComposerError(problem=problem, problem_mark=mark)


def _where(source: str, exc: yaml.YAMLError) -> str:
    """``file:line: problem`` from a YAML error, whatever its kind."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if isinstance(exc, yaml.MarkedYAMLError) and mark is not None:
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        return f"{source}:{mark.line + 1}: {problem}"
    return f"{source}: {exc}"


def load_yaml_text(text: str, source: str = "<yaml>", lines: Lines | None = None) -> Any:
    """Parse one YAML document within the limits above; ``ConfigInvalidError`` otherwise.

    ``lines``, when given, is filled with where each value was written (``line_of``).
    """
    loader = _BoundedLoader(text, source)
    try:
        node = loader.get_single_node()
        if node is not None and lines is not None:
            lines.update(_lines_of(node))
        return None if node is None else loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ConfigInvalidError(_where(source, exc)) from None
    except (ValueError, TypeError, OverflowError) as exc:  # a bad ``!!int`` or ``!!timestamp``
        raise ConfigInvalidError(f"{source}: {exc}") from None
    finally:
        loader.dispose()


def read_yaml_file(path: Path, lines: Lines | None = None) -> Any:
    """Read a UTF-8 YAML file of at most ``MAX_YAML_BYTES`` and parse it (see above)."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_YAML_BYTES + 1)
    except OSError as exc:
        raise ConfigInvalidError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_YAML_BYTES:
        raise ConfigInvalidError(f"{path}: larger than {MAX_YAML_BYTES:,} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigInvalidError(
            f"{path}:{line}: not UTF-8 text (byte {raw[exc.start]:#04x} at offset {exc.start})",
            hint="save the file as UTF-8",
        ) from None
    return load_yaml_text(text, str(path), lines)
