"""A small, safe expression language for success criteria and business rules.

Expressions look like Python (``result.status == "valid" and facts.in_warranty``) but are
evaluated by ``simpleeval``, never ``eval``: no imports, no dunder access, no calls but a
short allow-list. They are parsed and checked once, when the plan is validated.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from simpleeval import EvalWithCompoundTypes

from corral.errors import ExpressionInvalidError
from corral.planning.typecheck import field_type

ALLOWED_NAMES = frozenset({"result", "args", "facts", "entities"})
CONSTANTS: dict[str, Any] = {"true": True, "false": False, "null": None, "none": None}
FUNCTIONS: dict[str, Callable[..., Any]] = {"len": len, "lower": str.lower, "upper": str.upper}
_ALLOWED_NODES = (
    ast.Expression,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.UnaryOp,
    ast.Not,
    ast.USub,
    ast.Compare,
    ast.Eq,
    ast.NotEq,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
    ast.In,
    ast.NotIn,
    ast.Is,
    ast.IsNot,
    ast.BinOp,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.Mod,
    ast.Name,
    ast.Load,
    ast.Attribute,
    ast.Constant,
    ast.Call,
    ast.List,
    ast.Tuple,
    ast.Subscript,
    ast.IfExp,
)


@dataclass(frozen=True)
class Expression:
    """A parsed, checked expression; ``evaluate`` is cheap and side-effect free."""

    text: str
    tree: ast.Expression

    def evaluate(self, names: Mapping[str, Any]) -> Any:
        """Evaluate with the given names; a missing field raises ``ExpressionInvalidError``."""
        evaluator = EvalWithCompoundTypes(names={**CONSTANTS, **names}, functions=FUNCTIONS)
        try:
            return evaluator.eval(self.text, previously_parsed=self.tree.body)
        except Exception as exc:  # simpleeval raises many kinds; all mean "cannot judge"
            raise ExpressionInvalidError(f"{self.text!r}: {exc}") from None


def _attribute_chain(node: ast.AST) -> tuple[str, ...] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return tuple(reversed(parts))
    return None


def read_paths(expression: Expression, scope: str = "facts") -> frozenset[tuple[str, ...]]:
    """The paths under ``scope`` an expression reads: ``facts.a.b`` gives ``("a", "b")``.

    Static checks use it to prove that what a rule reads exists before the rule runs.
    ``facts["a"]`` counts as ``("a",)``; a bare ``facts`` (``len(facts)``) gives ``()``,
    which means "some fact, unknown which" and cannot be proven either way.
    """
    found: set[tuple[str, ...]] = set()

    def path_of(node: ast.AST) -> tuple[str, ...] | None:
        parts: list[str] = []
        while True:
            if isinstance(node, ast.Attribute):
                parts.append(node.attr)
                node = node.value
            elif (
                isinstance(node, ast.Subscript)
                and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, str)
            ):
                parts.append(node.slice.value)
                node = node.value
            elif isinstance(node, ast.Subscript):
                visit(node.slice)  # a computed key reads names of its own
                parts.clear()  # and only the part before it is known
                node = node.value
            else:
                break
        if isinstance(node, ast.Name) and node.id == scope:
            return tuple(reversed(parts))
        return None

    def visit(node: ast.AST) -> None:
        path = path_of(node)
        if path is not None:
            found.add(path)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(expression.tree)
    return frozenset(found)


def fact_names(expression: Expression) -> frozenset[str]:
    """The fact names an expression reads (the first part of each ``facts.*`` path)."""
    return frozenset(path[0] for path in read_paths(expression, "facts") if path)


def compile_expression(text: str, result_model: type[BaseModel] | None = None) -> Expression:
    """Parse and check an expression; ``result.x`` paths are checked against ``result_model``."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExpressionInvalidError(f"{text!r} is not an expression: {exc.msg}") from None
    problems: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            problems.append(f"{type(node).__name__} is not allowed")
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            problems.append(f"private attribute {node.attr!r} is not allowed")
        elif isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS
        ):
            problems.append(f"only these calls are allowed: {', '.join(sorted(FUNCTIONS))}")
        elif isinstance(node, ast.Name) and node.id not in ALLOWED_NAMES | set(CONSTANTS) | set(
            FUNCTIONS
        ):
            problems.append(f"unknown name {node.id!r} (use {', '.join(sorted(ALLOWED_NAMES))})")
    if result_model is not None:
        for node in ast.walk(tree):
            chain = _attribute_chain(node) if isinstance(node, ast.Attribute) else None
            if chain and chain[0] == "result":
                _, problem = field_type(result_model, chain[1:])
                if problem:
                    problems.append(f"result: {problem}")
    if problems:
        raise ExpressionInvalidError(f"{text!r}: " + "; ".join(dict.fromkeys(problems)))
    return Expression(text.strip(), tree)
