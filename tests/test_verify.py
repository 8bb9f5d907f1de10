"""Verify layer: a safe expression language, success criteria, rules, loop guard."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from corral.config import BusinessRule
from corral.errors import ErrorCode, ExpressionInvalidError
from corral.verify import LoopGuard, check_success, compile_expression, compile_rules


class Result(BaseModel):
    status: str
    count: int


def test_expressions_evaluate_over_dicts() -> None:
    expr = compile_expression('result.status == "valid" and result.count > 2', Result)
    assert expr.evaluate({"result": {"status": "valid", "count": 3}}) is True
    assert expr.evaluate({"result": {"status": "valid", "count": 1}}) is False
    assert compile_expression("len(result.status) == 5").evaluate({"result": {"status": "valid"}})
    assert compile_expression("facts.ok == true").evaluate({"facts": {"ok": True}})


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('rm -rf /')",
        "result.__class__",
        "open('/etc/passwd')",
        "[x for x in result]",
        "lambda: 1",
        "os.system",
        "result.status ==",
    ],
)
def test_hostile_expressions_are_rejected_at_compile_time(text: str) -> None:
    with pytest.raises(ExpressionInvalidError) as info:
        compile_expression(text)
    assert info.value.code.value == "EXPRESSION_INVALID"


def test_unknown_result_field_is_rejected_statically() -> None:
    with pytest.raises(ExpressionInvalidError, match="no field 'stat'"):
        compile_expression('result.stat == "valid"', Result)


@given(st.text(max_size=80))
def test_compiler_refuses_any_text_only_with_its_stable_code(text: str) -> None:
    """Any text compiles, or is refused with ``EXPRESSION_INVALID``; nothing else escapes."""
    try:
        compiled = compile_expression(text)
    except ExpressionInvalidError as exc:
        assert exc.code is ErrorCode.EXPRESSION_INVALID
    else:
        assert compiled.text == text.strip()


OPERANDS = st.sampled_from(
    [
        "result.status",
        "result.count",
        "result.missing",
        "facts.ok",
        "args.items",
        "entities",
        "0",
        "7",
        "-2.5",
        '"valid"',
        "true",
        "null",
        '["a", 1]',
        "999999999",
    ]
)
BINARY = st.sampled_from(["+", "-", "*", "/", "%", "==", "!=", "<", ">=", "and", "or", "in"])
EXPRESSIONS = st.recursive(
    OPERANDS,
    lambda inner: st.one_of(
        st.tuples(inner, BINARY, inner)
        .filter(lambda t: t[1] not in ("*", "%") or not {t[0][0], t[2][0]} & {'"', "["})
        .map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        inner.map(lambda e: f"(not {e})"),
        inner.map(lambda e: f"(-{e})"),
        st.tuples(st.sampled_from(["len", "lower", "upper"]), inner).map(
            lambda t: f"{t[0]}({t[1]})"
        ),
    ),
    max_leaves=12,
)
"""Well-formed expressions of allowed names, operators and calls, often ill-typed; never
``*`` or ``%`` on a string or list literal, which the compiler refuses (repetition, formatting)."""
NAMES = {
    "result": {"status": "valid", "count": 3},
    "facts": {"ok": True},
    "args": {"items": ["a", "b"]},
    "entities": {"order_id": "A1"},
}


@given(EXPRESSIONS)
def test_allowed_expressions_compile_and_evaluate_to_a_value_or_their_own_error(
    text: str,
) -> None:
    """Whatever the allowed grammar builds compiles; evaluating it gives the same value
    every time, or ``EXPRESSION_INVALID`` (type errors, missing fields, division by zero,
    huge results): never another exception."""
    compiled = compile_expression(text)
    outcomes = []
    for _ in range(2):
        try:
            outcomes.append(("value", repr(compiled.evaluate(NAMES))))  # repr: nan == nan
        except ExpressionInvalidError as exc:
            outcomes.append(("error", exc.code))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] == "value" or outcomes[0][1] is ErrorCode.EXPRESSION_INVALID


def test_success_check_verdicts() -> None:
    expr = compile_expression('result.status == "valid"', Result)
    assert check_success(expr, {"result": {"status": "valid"}}).passed
    failed = check_success(expr, {"result": {"status": "expired"}})
    assert not failed.passed and failed.code == "SUCCESS_CRITERIA_FAILED"
    assert check_success(None, {}).passed
    missing = check_success(compile_expression("result.count > 1"), {"result": {}})
    assert not missing.passed


def test_business_rule_warranty_expired_means_no_exchange() -> None:
    (rule,) = compile_rules(
        [
            BusinessRule(
                name="warranty",
                before_tool="create_exchange_order",
                require="facts.in_warranty == true",
                refusal="refuse",
            )
        ]
    )
    assert rule.check({"facts": {"in_warranty": True}}).passed
    verdict = rule.check({"facts": {"in_warranty": False}})
    assert not verdict.passed and verdict.code == "BUSINESS_RULE_VIOLATED"
    assert not rule.check({"facts": {}}).passed  # unknown counts as a violation


def test_loop_guard_repeated_identical_calls() -> None:
    guard = LoopGuard(max_identical_calls=2)
    assert guard.observe_call("s1", "search", {"q": "x"}) is None
    assert guard.observe_call("s2", "search", {"q": "x"}) is None
    assert guard.observe_call("s2", "search", {"q": "x"}) is None  # retry of the same step
    assert guard.observe_call("s3", "search", {"q": "y"}) is None
    reason = guard.observe_call("s4", "search", {"q": "x"})
    assert reason is not None and "3 steps" in reason


def test_loop_guard_state_after_a_step_counts_the_facts_known_then() -> None:
    guard = LoopGuard()
    guard.fact_written("a", 1)
    assert guard.observe_result("search", {"q": "x"}, {"n": 1}) is None
    guard.fact_written("a", 2)  # the same call and answer, but the run knows more now
    assert guard.observe_result("search", {"q": "x"}, {"n": 1}) is None
    assert guard.observe_result("search", {"q": "x"}, {"n": 2}) is None  # another answer
    guard.fact_written("a", 1)  # back to what it knew at first: the first state again
    reason = guard.observe_result("search", {"q": "x"}, {"n": 1})
    assert reason is not None and "already been in" in reason


def test_loop_guard_facts_digest_does_not_depend_on_the_order_facts_came_in() -> None:
    first, second = LoopGuard(), LoopGuard()
    for name, value in (("a", 1), ("b", [1, {"z": 2}])):
        first.fact_written(name, value)
    for name, value in (("b", [1, {"z": 2}]), ("a", 0), ("a", 1)):
        second.fact_written(name, value)
    assert first.facts_digest == second.facts_digest != 0


def test_loop_guard_state_hash() -> None:
    guard = LoopGuard()
    assert guard.observe_state({"a": 1}, ["s1"]) is None
    assert guard.observe_state({"a": 2}, ["s1"]) is None
    assert guard.observe_state({"a": 1}, ["s1"]) is not None
