"""A small, safe expression language for success criteria and business rules.

Expressions look like Python (``result.status == "valid" and facts.in_warranty``) but are
evaluated by ``simpleeval``, never ``eval``: no imports, no dunder access, no calls but a
short allow-list. They are parsed and checked once, when the plan is validated.

A rule that passes the check runs in bounded time and memory, whatever values it meets:
its text and nesting are limited, there are no loops, ``**``, string formatting
(``'%999999999d' % 1``, f-strings, ``.format``) or repetition (``'a' * n``), and the
operators left refuse results beyond ``MAX_RESULT_LENGTH`` items or ``MAX_INT_BITS`` bits.
simpleeval's own guards (``MAX_STRING_LENGTH``, ``MAX_POWER``) leave ``%`` unbounded and
its recursion unguarded, hence this table.
"""

from __future__ import annotations

import ast
import cmath
import operator
from collections.abc import Callable, Mapping, Sized
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel
from simpleeval import EvalWithCompoundTypes

from corral.errors import ExpressionInvalidError
from corral.typecheck import describe, field_type, scalar_kind, value_kind

ALLOWED_NAMES = frozenset({"result", "args", "facts", "entities"})
CONSTANTS: Mapping[str, Any] = MappingProxyType(
    {"true": True, "false": False, "null": None, "none": None}
)
FUNCTIONS: Mapping[str, Callable[..., Any]] = MappingProxyType(
    {"len": len, "lower": str.lower, "upper": str.upper}
)
"""The only calls a rule may make. Read-only: simpleeval adds ``list``, ``dict``... to the
table it is given, so each evaluation gets a copy and the compile check stays the same."""
MAX_EXPRESSION_CHARS = 2000
"""Longest expression text accepted."""
MAX_EXPRESSION_DEPTH = 32
"""Deepest syntax tree accepted (``not not ... x``, ``a + b + ... + z``, nested calls)."""
MAX_RESULT_LENGTH = 100_000
"""Longest string or list that ``+`` may build at evaluation."""
MAX_INT_BITS = 4096
"""Largest integer operand of arithmetic (about 1e1233); larger ones cannot be judged."""
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


def _number(value: Any, symbol: str) -> Any:
    """Arithmetic takes numbers only: ``%`` on a string formats, ``*`` on one repeats."""
    if not isinstance(value, int | float):
        raise ExpressionInvalidError(f"{symbol} takes numbers, not {type(value).__name__}")
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise ExpressionInvalidError(f"an integer larger than 2**{MAX_INT_BITS}")
    return value


def _arithmetic(symbol: str, apply: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    """``apply`` to two numbers, each checked by ``_number``."""
    return apply(_number(a, symbol), _number(b, symbol))


def _add(a: Any, b: Any) -> Any:
    """Numbers add; strings and lists concatenate up to ``MAX_RESULT_LENGTH``."""
    if isinstance(a, Sized) and isinstance(b, Sized):
        if len(a) + len(b) > MAX_RESULT_LENGTH:
            raise ExpressionInvalidError(f"a result longer than {MAX_RESULT_LENGTH:,}")
        return operator.add(a, b)
    return _number(a, "+") + _number(b, "+")


OPERATORS: dict[type[ast.AST], Callable[..., Any]] = {
    ast.Add: _add,
    ast.Sub: partial(_arithmetic, "-", operator.sub),
    ast.Mult: partial(_arithmetic, "*", operator.mul),
    ast.Div: partial(_arithmetic, "/", operator.truediv),
    ast.Mod: partial(_arithmetic, "%", operator.mod),
    ast.USub: lambda a: -_number(a, "-"),
    ast.Not: operator.not_,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
"""The only operators evaluated, each bounded (simpleeval's defaults let ``%`` format)."""


@dataclass(frozen=True)
class Expression:
    """A parsed, checked expression; ``evaluate`` is cheap and side-effect free."""

    text: str
    tree: ast.Expression

    def evaluate(self, names: Mapping[str, Any]) -> Any:
        """Evaluate with the given names; a missing field raises ``ExpressionInvalidError``."""
        evaluator = EvalWithCompoundTypes(
            operators=OPERATORS, names={**CONSTANTS, **names}, functions=dict(FUNCTIONS)
        )
        try:
            return evaluator.eval(self.text, previously_parsed=self.tree.body)
        except ExpressionInvalidError as exc:  # an operator refused an unbounded result
            raise ExpressionInvalidError(f"{self.text!r}: {exc.message}") from None
        except Exception as exc:  # simpleeval raises many kinds; all mean "cannot judge"
            raise ExpressionInvalidError(f"{self.text!r}: {exc}") from None


def _attribute_chain(node: ast.AST) -> tuple[str, ...] | None:
    """``facts.a.b`` (or ``facts['a']['b']``: a constant key reads the same) as its names."""
    parts: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
        ):
            parts.append(node.slice.value)
        else:
            break
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return tuple(reversed(parts))
    return None


def _depth(tree: ast.AST) -> int:
    """Height of the syntax tree, computed without recursion."""
    deepest = 0
    pending = [(tree, 1)]
    while pending:
        node, depth = pending.pop()
        deepest = max(deepest, depth)
        pending.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _parse(text: str) -> ast.Expression:
    """The syntax tree of a short, shallow expression; ``ExpressionInvalidError`` otherwise."""
    shown = text if len(text) <= 80 else f"{text[:80]}..."
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ExpressionInvalidError(f"{shown!r} is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ExpressionInvalidError(f"{shown!r} is not an expression: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes; deep nesting
        raise ExpressionInvalidError(f"{shown!r} cannot be parsed: {exc}") from None
    if _depth(tree) > MAX_EXPRESSION_DEPTH:
        raise ExpressionInvalidError(f"{shown!r} is nested deeper than {MAX_EXPRESSION_DEPTH}")
    return tree


def _forbidden(node: ast.AST) -> str | None:
    """Why a node of an allowed type is still refused: it formats, repeats or is infinite."""
    if isinstance(node, ast.JoinedStr | ast.FormattedValue):
        return "f-strings are not allowed (string formatting)"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return f"method calls such as .{node.func.attr}() are not allowed"
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, float | complex)
        and not cmath.isfinite(node.value)
    ):
        return "a number literal too large to be finite (such as 1e999) is not allowed"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod | ast.Mult):
        mod = isinstance(node.op, ast.Mod)
        for side in [node.left] if mod else [node.left, node.right]:
            if isinstance(side, ast.List | ast.Tuple) or (
                isinstance(side, ast.Constant) and not isinstance(side.value, int | float)
            ):
                what = "string formatting with %" if mod else "repetition with *"
                return f"{what} is not allowed"
    return None


def read_paths(expression: Expression, scope: str = "facts") -> frozenset[tuple[str, ...]]:
    """The paths under ``scope`` an expression reads: ``facts.a.b`` gives ``("a", "b")``.

    Static checks use it to prove that what a rule reads exists before the rule runs.
    ``facts["a"]`` counts as ``("a",)``; a bare ``facts`` (``len(facts)``) gives ``()``,
    which means "some fact, unknown which" and cannot be proven either way.
    """
    found: set[tuple[str, ...]] = set()

    def path_of(node: ast.AST) -> tuple[str, ...] | None:
        chain = _attribute_chain(node)  # a computed key (``facts[x]``) ends it: ``visit``
        return chain[1:] if chain is not None and chain[0] == scope else None  # reads parts

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
    return frozenset(path[0] for path in read_paths(expression) if path)


def compile_expression(text: str, result_model: type[BaseModel] | None = None) -> Expression:
    """Parse and check an expression; ``result.x`` paths are checked against ``result_model``."""
    tree = _parse(text.strip())
    problems: list[str] = []
    for node in ast.walk(tree):
        reason = _forbidden(node)
        if reason is not None:
            problems.append(reason)
        elif not isinstance(node, _ALLOWED_NODES):
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
            chain = _attribute_chain(node)
            if chain and chain[0] == "result":
                _, problem = field_type(result_model, chain[1:])
                if problem:
                    problems.append(f"result: {problem}")
    if problems:
        raise ExpressionInvalidError(f"{text!r}: " + "; ".join(dict.fromkeys(problems)))
    return Expression(text.strip(), tree)


_ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_EQUALITY = (ast.Eq, ast.NotEq)


def comparison_problems(
    expression: Expression, type_of: Callable[[tuple[str, ...]], Any]
) -> list[str]:
    """Comparisons of a typed value with a literal that can never hold as written.

    ``type_of`` gives the declared type of a path (``("facts", "fines")``), or ``None``
    when it is not known statically. ``facts.fines < "10"`` (a number and a text) cannot
    be judged at run time, so a rule refused and told the customer its reason, and a
    success criterion failed a step that had succeeded; ``facts.status == "shiped"``
    (not one of a ``Literal``'s values) is never true. Found at load, both are typos.
    """
    problems: list[str] = []
    for node in ast.walk(expression.tree):
        if not isinstance(node, ast.Compare):
            continue
        left = node.left
        for op, right in zip(node.ops, node.comparators, strict=True):
            for side, other in ((left, right), (right, left)):
                chain = _attribute_chain(side)
                literal = _literal(other)
                if chain is None or literal is _NO_LITERAL:
                    continue
                declared = type_of(chain)
                problem = _mismatch(declared, op, literal) if declared is not None else None
                if problem:
                    problems.append(
                        f"{expression.text!r}: {'.'.join(chain)} is {describe(declared)}, "
                        f"so comparing it with {literal!r} {problem}"
                    )
            left = right
    return list(dict.fromkeys(problems))


_NO_LITERAL = object()


def _literal(node: ast.AST) -> Any:
    """The value of a literal operand (``"10"``, ``3``, ``-2.5``, ``true``), else a marker."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _literal(node.operand)
        if isinstance(inner, int | float) and not isinstance(inner, bool):
            return -inner
    if isinstance(node, ast.Name) and node.id in CONSTANTS:
        return CONSTANTS[node.id]
    return _NO_LITERAL


def _mismatch(declared: Any, op: ast.cmpop, literal: Any) -> str | None:
    """Why ``declared <op> literal`` cannot hold (``None``: it may)."""
    if literal is None:
        return None
    kind, choices = scalar_kind(declared)
    given = value_kind(literal)
    if kind is None or given is None:
        return None
    if isinstance(op, _ORDERING):
        if kind != given and not (kind == "bool" and given == "number"):
            return "cannot be judged: the two are not ordered"
        return None
    if isinstance(op, _EQUALITY):
        if kind != given and not {kind, given} <= {"number", "bool"}:
            return "is never equal"
        if choices is not None and literal not in choices:
            return f"is never equal (it is one of {', '.join(map(repr, choices))})"
    return None
