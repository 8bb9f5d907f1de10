"""Imports between corral's packages flow one way: no package imports one that imports it back.

The graph is read from the source (the AST), not from ``sys.modules``, so an import
hidden inside a function counts as much as one at the top of a module: it still runs,
only later, and a cycle behind it is still a cycle between layers. A node is a subpackage
(``corral.runtime``) or a top-level module (``corral.contracts``, ``corral.agent``);
imports inside one node are its own business, except in the run loop (last test below).

Imports under ``if TYPE_CHECKING:`` never run. They still couple two packages, so they
count too, except for the few typing-only edges listed in ``TYPING_ONLY_ALLOWED``, each
with the reason it is there. A listed edge that becomes a real import counts again.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import corral

SRC = Path(corral.__file__).parent

TYPING_ONLY_ALLOWED: dict[tuple[str, str], str] = {
    ("corral.effects", "corral.tools"): (
        "the Effects protocol names ToolSpec and ToolContext in call_tool's signature; "
        "the tools layer calls effects at run time, so the names can only go this way"
    ),
    ("corral.observe", "corral.runtime"): (
        "observe.tree annotates its argument as the folded RunState, which the run loop "
        "owns (runtime.state folds the typed events); observe reads it, never imports it"
    ),
}


@dataclass(frozen=True)
class Edge:
    """One import statement from one node to another."""

    source: str
    target: str
    typing_only: bool
    where: str
    """``path:line  statement``, to show where the edge comes from."""


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def node_of(module: str, depth: int = 2) -> str:
    """``corral.runtime.loop`` -> ``corral.runtime``; ``corral.errors`` stays itself."""
    return ".".join(module.split(".")[:depth])


def _typing_only_ids(tree: ast.Module) -> set[int]:
    """The ids of nodes under ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``)."""
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in (
            "TYPE_CHECKING",
            "typing.TYPE_CHECKING",
        ):
            for statement in node.body:
                ids.update(id(inner) for inner in ast.walk(statement))
    return ids


def _targets(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """The modules an import statement names (``from a import b`` names ``a`` and ``a.b``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
        module = ".".join([*base, node.module] if node.module else base)
    else:
        module = node.module or ""
    return [module, *(f"{module}.{alias.name}" for alias in node.names)]


def import_edges(root: Path, depth: int = 2) -> Iterator[Edge]:
    """Every import between two different nodes of the package at ``root``.

    A node is a module's name cut to ``depth`` parts: 2 gives corral's subpackages, 3 the
    modules of one subpackage.
    """
    modules = {module_name(p, root) for p in root.rglob("*.py")}
    for path in sorted(root.rglob("*.py")):
        name = module_name(path, root)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        typing_only = _typing_only_ids(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for target in _targets(node, package):
                source, to = node_of(name, depth), node_of(target, depth)
                if target not in modules or source == to:
                    continue
                where = f"{path.relative_to(root.parent)}:{node.lineno}  {ast.unparse(node)}"
                yield Edge(source, to, id(node) in typing_only, where)


def _graph(edges: list[Edge]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
    return graph


def cycle_groups(edges: list[Edge]) -> list[list[str]]:
    """The groups of nodes that all reach each other (strongly connected, two or more)."""
    graph = _graph(edges)
    backward: dict[str, set[str]] = {}
    for source, targets in graph.items():
        for target in targets:
            backward.setdefault(target, set()).add(source)
    groups: list[list[str]] = []
    grouped: set[str] = set()
    for start in sorted(graph):
        if start not in grouped:
            group = _reaching(graph, start) & _reaching(backward, start)
            grouped |= group
            if len(group) > 1:
                groups.append(sorted(group))
    return groups


def _reaching(graph: dict[str, set[str]], start: str) -> set[str]:
    reached, stack = {start}, [start]
    while stack:
        for nxt in graph.get(stack.pop(), ()):
            if nxt not in reached:
                reached.add(nxt)
                stack.append(nxt)
    return reached


def shortest_cycle(edges: list[Edge], start: str) -> list[str]:
    """A shortest cycle through ``start``, as ``[start, ..., start]`` (empty if none)."""
    graph = _graph(edges)
    parent: dict[str, str] = {}
    queue = deque([start])
    while queue:
        current = queue.popleft()
        for nxt in sorted(graph.get(current, ())):
            if nxt == start:
                path = [current]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return [*reversed(path), start]
            if nxt not in parent:
                parent[nxt] = current
                queue.append(nxt)
    return []


def counted(edges: list[Edge]) -> list[Edge]:
    """The edges that must not form a cycle: all but the allowed typing-only ones."""
    return [e for e in edges if not (e.typing_only and (e.source, e.target) in TYPING_ONLY_ALLOWED)]


def explain(group: list[str], edges: list[Edge]) -> str:
    """The group, a shortest cycle through it, and every import between its members."""
    lines = [
        f"{len(group)} nodes reach each other: {', '.join(group)}",
        f"  e.g. {' -> '.join(shortest_cycle(edges, group[0]))}",
    ]
    for e in sorted(edges, key=lambda e: (e.source, e.target, e.where)):
        if e.source in group and e.target in group:
            note = "  [typing only]" if e.typing_only else ""
            lines.append(f"    {e.source} -> {e.target}: {e.where}{note}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- corral itself


def test_no_import_cycle_between_corral_packages() -> None:
    edges = counted(list(import_edges(SRC)))
    groups = cycle_groups(edges)
    assert not groups, "import cycles between corral packages:\n" + "\n".join(
        explain(g, edges) for g in groups
    )


def test_no_import_cycle_between_the_run_loops_modules() -> None:
    """The loop drives the scheduler, the gate, the model calls and the conclusion.

    They see the run through ``runtime.view``'s protocols, never by naming ``RunLoop``, so
    not even a typing-only import leads back to the loop.
    """
    edges = [e for e in import_edges(SRC, depth=3) if e.source.startswith("corral.runtime.")]
    groups = cycle_groups(edges)
    assert not groups, "\n".join(explain(g, edges) for g in groups)


def test_every_allowed_typing_only_edge_still_exists() -> None:
    """A typing-only import that was removed leaves its allowance behind: delete the entry."""
    typing_edges = {(e.source, e.target) for e in import_edges(SRC) if e.typing_only}
    assert sorted(set(TYPING_ONLY_ALLOWED) - typing_edges) == []


# ---------------------------------------------------------------------------- the checker


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


def test_a_cycle_behind_a_function_level_import_is_found(tmp_path: Path) -> None:
    pkg = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a/__init__.py": "",
            "a/one.py": "from pkg.b.two import thing\n",
            "b/__init__.py": "",
            "b/two.py": "def thing():\n    from ..a import one\n    return one\n",
            "c.py": "import pkg.a.one\n",
        },
    )
    edges = list(import_edges(pkg))
    assert cycle_groups(edges) == [["pkg.a", "pkg.b"]]
    assert shortest_cycle(edges, "pkg.a") == ["pkg.a", "pkg.b", "pkg.a"]
    assert "pkg.b -> pkg.a: pkg/b/two.py:2" in explain(["pkg.a", "pkg.b"], edges)


def test_a_typing_only_import_is_marked_and_still_counts(tmp_path: Path) -> None:
    pkg = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "import pkg.b\n",
            "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\n",
        },
    )
    edges = list(import_edges(pkg))
    assert [(e.source, e.target, e.typing_only) for e in edges] == [
        ("pkg.a", "pkg.b", False),
        ("pkg.b", "pkg.a", True),
    ]
    assert cycle_groups(edges) == [["pkg.a", "pkg.b"]]
