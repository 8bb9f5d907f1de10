"""The envelope of a call built without validating it again, and outputs checked as before.

``invoke_tool`` builds its ``ToolResult`` from values it typed itself (``ToolResult.made``)
and validates a result that is an instance of the tool's declared model by its values
(pydantic hands an instance back unchecked). These tests pin that what users, the log and
HTTP see is what a validated envelope gave, and that every result is validated against the
declared model.
"""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, field_validator

from corral import MemoryStore, Runtime, ToolContext, ToolStatus, tool
from corral.contracts import ToolResult
from corral.errors import ErrorCode
from corral.testing import FixedEffects
from corral.tools.invoke import invoke_tool, validate_args
from corral.tools.spec import ToolSpec
from tests.helpers import build_agent


class Out(BaseModel):
    value: int


class Checked(BaseModel):
    """A model that asks for its instances to be validated again whenever they are passed."""

    model_config = ConfigDict(revalidate_instances="always")
    value: int

    @field_validator("value")
    @classmethod
    def _positive(cls, value: int) -> int:
        if value <= 0:
            raise ValueError("must be positive")
        return value


async def _call(spec: ToolSpec) -> ToolResult:
    context = ToolContext(run_id="r", step_id="s1", idempotency_key="k")
    return await invoke_tool(spec, validate_args(spec, {}), context, FixedEffects())


@pytest.mark.parametrize(
    "values",
    [
        {
            "tool": "t",
            "status": ToolStatus.SUCCESS,
            "data": {"value": 1, "nested": {"a": [1, 2]}},
            "summary": "t: value=1",
            "error_code": None,
            "error_message": None,
            "retryable": False,
            "attempts": 1,
            "duration_ms": 0.25,
        },
        {
            "tool": "t",
            "status": ToolStatus.ERROR,
            "data": None,
            "summary": "boom",
            "error_code": "TOOL_FAILED",
            "error_message": "boom",
            "retryable": True,
            "attempts": 3,
            "duration_ms": 12.5,
        },
    ],
)
def test_a_made_envelope_is_the_validated_one_in_every_view(values: dict[str, Any]) -> None:
    made = ToolResult.made(**values)
    validated = ToolResult(**values)
    assert made == validated
    assert repr(made) == repr(validated)
    assert made.model_dump() == validated.model_dump()
    assert made.model_dump_json() == validated.model_dump_json()
    assert made.model_dump(mode="json", exclude_defaults=True) == validated.model_dump(
        mode="json", exclude_defaults=True
    )
    assert made.model_fields_set == validated.model_fields_set
    assert made.model_copy(update={"attempts": 9}) == validated.model_copy(update={"attempts": 9})
    assert pickle.loads(pickle.dumps(made)) == validated
    assert made.ok is validated.ok


def test_made_envelopes_share_one_fields_set_that_nothing_changes() -> None:
    """One set for every made envelope (memory), which copies and dumps never change."""
    first = ToolResult.made("t", ToolStatus.SUCCESS, {"value": 1}, "", None, None, False, 1, 0.0)
    second = ToolResult.made("u", ToolStatus.ERROR, None, "x", "E", "x", False, 2, 1.0)
    assert first.model_fields_set is second.model_fields_set
    everything = set(ToolResult.model_fields)
    copied = first.model_copy(update={"attempts": 2})
    deep = first.model_copy(update={"summary": "s"}, deep=True)
    restored = pickle.loads(pickle.dumps(first))
    for other in (copied, deep, restored):
        assert other.model_fields_set is not first.model_fields_set
    assert first.model_fields_set == second.model_fields_set == everything
    for change in (
        lambda shared: shared.add("x"),
        lambda shared: shared.discard("summary"),
        lambda shared: shared.clear(),
        lambda shared: shared.update({"x"}),
    ):  # through one instance, it would change them all: it raises instead
        with pytest.raises(TypeError, match="read-only"):
            change(first.model_fields_set)
    assert second.model_fields_set == everything
    for other in (copied, deep, restored):
        assert type(other.model_fields_set) is set  # a copy may change: its own
        other.model_fields_set.add("x")
    assert first.model_dump(exclude_unset=True) == ToolResult(**first.model_dump()).model_dump(
        exclude_unset=True
    )


def test_a_made_envelope_is_frozen_and_keeps_its_own_copy_of_the_data() -> None:
    data = {"value": 1}
    made = ToolResult.made("t", ToolStatus.SUCCESS, data, "", None, None, False, 1, 0.0)
    data["value"] = 2  # the caller's dict is not the envelope's, as after validation
    assert made.data == {"value": 1}
    with pytest.raises(ValueError, match="frozen"):
        made.attempts = 2  # type: ignore[misc]


async def test_an_instance_of_the_declared_model_is_dumped_as_its_fields() -> None:
    @tool
    async def exact() -> Out:
        await asyncio.sleep(0)
        return Out(value=7)

    result = await _call(exact)
    assert result == ToolResult(
        tool="exact",
        status=ToolStatus.SUCCESS,
        data={"value": 7},
        summary="exact: value=7",
        attempts=1,
        duration_ms=result.duration_ms,
    )


async def test_an_instance_built_without_validation_is_still_only_dumped_as_before() -> None:
    """Validation returned such an instance as it was; it is dumped, never trusted more."""

    @tool
    def constructed() -> Out:
        return Out.model_construct(value=5)

    assert (await _call(constructed)).data == {"value": 5}


@pytest.mark.parametrize(
    ("returned", "code"),
    [({"value": "x"}, ErrorCode.TOOL_OUTPUT_INVALID.value), ({"value": 4}, None)],
)
async def test_a_dict_is_still_validated_against_the_declared_model(
    returned: dict[str, Any], code: str | None
) -> None:
    @tool
    def loose() -> Out:
        return returned  # type: ignore[return-value]

    result = await _call(loose)
    assert result.error_code == code
    assert result.data == (None if code else {"value": 4})


async def test_a_model_that_revalidates_its_instances_is_validated_again() -> None:
    @tool
    def sneaky() -> Checked:
        return Checked.model_construct(value=-1)  # skips the validator on purpose

    result = await _call(sneaky)
    assert result.status is ToolStatus.ERROR
    assert result.error_code == ErrorCode.TOOL_OUTPUT_INVALID.value
    assert "must be positive" in (result.error_message or "")


async def test_a_run_logs_and_summarises_a_made_envelope_as_a_validated_one() -> None:
    @tool
    async def lookup(n: int) -> Out:
        return Out(value=n + 1)

    runtime = Runtime(
        build_agent([lookup], [{"id": "s", "tool": "lookup", "args": {"n": 1}}]), MemoryStore()
    )
    summary = await runtime.start("go")
    assert summary.outcome == "success"
    (stored,) = [
        e.as_json()["data"]
        for e in runtime.store.load_events(summary.run_id)
        if e.type == "step_finished"
    ]
    expected = ToolResult(
        tool="lookup",
        status=ToolStatus.SUCCESS,
        data={"value": 2},
        summary="lookup: value=2",
        attempts=1,
        duration_ms=stored["duration_ms"],
    )
    assert stored["result"] == expected.model_dump(mode="json")


class Order(BaseModel):
    order_id: str
    amount: int


class Refund(Order):
    """A subclass with a field of its own: the result is the declared model's."""

    card: str


def _order_tool(make: Any) -> ToolSpec:
    @tool
    def lookup() -> Order:
        return make()  # type: ignore[no-any-return]

    return lookup


def _changed() -> Order:
    order = Order(order_id="OD1", amount=5)
    order.amount = "lots"  # type: ignore[assignment]  # no validate_assignment
    return order


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (_changed, "valid integer"),
        (lambda: Order.model_construct(order_id="OD1"), "Field required"),
        (lambda: Refund.model_construct(order_id="OD1", card="4111"), "Field required"),
    ],
    ids=["changed after it was made", "constructed without a field", "a subclass constructed"],
)
async def test_an_instance_of_the_declared_model_is_validated_by_its_values(
    make: Any, says: str
) -> None:
    """Found by a review: a tool returning an ``OrderInfo`` whose ``amount`` was set to
    "lots" after it was made succeeded, and the user was told "amount lots"; one built by
    ``model_construct`` without its fields succeeded with half a result."""
    result = await _call(_order_tool(make))
    assert result.status is ToolStatus.ERROR
    assert result.error_code == ErrorCode.TOOL_OUTPUT_INVALID.value
    assert says in (result.error_message or "")


async def test_a_valid_instance_is_the_declared_model_s_values() -> None:
    plain = await _call(_order_tool(lambda: Order(order_id="OD1", amount=5)))
    sub = await _call(_order_tool(lambda: Refund(order_id="OD1", amount=5, card="4111")))
    assert plain.data == sub.data == {"order_id": "OD1", "amount": 5}  # no card
