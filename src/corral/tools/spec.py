"""The ``@tool`` decorator: a typed Python function becomes a described, validated tool.

Like a FastAPI endpoint, the signature is the schema: parameters give the input model,
the return annotation gives the output model, the docstring gives the description.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, Union, overload

from pydantic import BaseModel, ConfigDict, TypeAdapter, create_model

from corral.clipping import clip
from corral.errors import ConfigInvalidError
from corral.tools.context import ToolContext
from corral.tools.outputs import derive_output
from corral.tools.policy import ToolPolicy

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class ToolSpec:
    """A registered tool: its function, schemas and policy. Built once, at declaration."""

    name: str
    description: str
    fn: Callable[..., Any]
    input_model: type[BaseModel]
    output_model: type[BaseModel]
    policy: ToolPolicy
    context_param: str | None
    may_return_none: bool
    summary_template: str | None = None
    returns: Any = None
    """The return annotation as declared (``None`` stripped); ``output_model`` reads it."""
    wrapped: bool = False
    """The tool returns a plain value (``str``, ``dict``...), kept as ``{"value": ...}``."""
    reconcile: ToolSpec | None = None
    """For writes: a read that finds this tool's effect by ``ctx.idempotency_key``. It is
    called when the write's outcome is unknown (a timeout, an ambiguous failure, a crash
    while the tool was running): its result settles the step, ``None`` proves the write
    did not happen, and an error leaves the outcome unknown."""

    @functools.cached_property
    def output_adapter(self) -> TypeAdapter[BaseModel]:
        """Dumps a result as the declared model; built once, not on every call."""
        return TypeAdapter(self.output_model)

    @functools.cached_property
    def may_hold_float(self) -> bool:
        """Whether a result may hold a float (so NaN or an infinity) anywhere."""
        from corral.typecheck import may_hold_float

        return may_hold_float(self.output_model)

    @functools.cached_property
    def may_key_by_other_than_text(self) -> bool:
        """Whether a result may hold a mapping whose keys are not ``str`` (JSON's are)."""
        from corral.typecheck import may_key_by_other_than_text

        return may_key_by_other_than_text(self.output_model)

    @functools.cached_property
    def may_be_long(self) -> bool:
        """Whether a result may be long (text, a list...), so is measured against the limit."""
        from corral.typecheck import may_be_long

        return may_be_long(self.output_model)

    @functools.cached_property
    def is_async(self) -> bool:
        """True for ``async def`` tools; sync tools run in a worker thread."""
        return inspect.iscoroutinefunction(self.fn)

    def summarize(self, data: dict[str, Any]) -> str:
        """A short, human summary of a result: what replies and logs are built from."""
        if self.summary_template:
            try:
                return self.summary_template.format_map(_SafeFields(data))
            except (ValueError, IndexError):
                pass
        shown = ", ".join([f"{k}={_short(v)}" for k, v in itertools.islice(data.items(), 4)])
        return clip(f"{self.name}: {shown}", 200)

    def returns_as(self, other: ToolSpec) -> bool:
        """Whether this tool's result can stand for ``other``'s: same type, or a subclass."""
        mine, theirs = self.returns, other.returns
        if isinstance(mine, type) and isinstance(theirs, type):
            return issubclass(mine, theirs)
        return bool(mine == theirs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly (handy in unit tests)."""
        return self.fn(*args, **kwargs)


class _SafeFields(dict[str, Any]):
    """format_map mapping that renders a missing field as '?' instead of raising."""

    def __missing__(self, key: str) -> str:
        return "?"


def _short(value: Any) -> str:
    text = str(value)
    if len(text) <= 40:
        return text
    cut = clip(text, 37)  # never inside a token: a cut one would escape redaction
    return cut + "..." if len(cut) < len(text) else cut


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1 and len(members) != len(typing.get_args(annotation)):
            return members[0], True
    return annotation, False


Reconciler = ToolSpec | Callable[..., Any]
"""A read tool, or a plain function with the same kind of signature, used as ``reconcile``."""


def _reconciler(write: ToolSpec, given: Reconciler) -> ToolSpec:
    """Check a write's reconciler against the write; raises ``ConfigInvalidError``.

    It must be a read, take only parameters the write also takes (they are filled from the
    write's arguments), and return the write's output model or ``None`` ("not found").
    """
    spec = given if isinstance(given, ToolSpec) else build_spec(given, policy=ToolPolicy())
    problems = []
    if write.policy.kind != "write":
        problems.append("only write tools have a reconciler")
    if spec.policy.kind == "write":
        problems.append(f"the reconciler {spec.name!r} must be a read, not a write")
    extra = set(spec.input_model.model_fields) - set(write.input_model.model_fields)
    if extra:
        problems.append(
            f"the reconciler {spec.name!r} takes {sorted(extra)}, which the write does not"
        )
    if not spec.returns_as(write) or not spec.may_return_none:
        shown = getattr(write.returns, "__name__", write.returns)
        problems.append(f"the reconciler {spec.name!r} must return {shown} | None")
    if problems:
        raise ConfigInvalidError(
            f"tool {write.name!r}: {'; '.join(problems)}",
            hint="a reconciler is a read that finds the write's effect by ctx.idempotency_key",
        )
    return spec


def build_spec(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    policy: ToolPolicy | None = None,
    summary: str | None = None,
    reconcile: Reconciler | None = None,
) -> ToolSpec:
    """Read a function's signature into a ``ToolSpec``; raises ``ConfigInvalidError``."""
    tool_name = name or fn.__name__
    hints = typing.get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            star = "*" if param.kind is param.VAR_POSITIONAL else "**"
            raise ConfigInvalidError(
                f"tool {tool_name!r}: parameter {star}{param.name} takes any number of "
                "values, which no schema can say",
                hint="name each parameter with its type (a list parameter for many values)",
            )
        if param.kind is param.POSITIONAL_ONLY:  # corral passes arguments by name
            raise ConfigInvalidError(
                f"tool {tool_name!r}: parameter {param.name!r} is positional-only",
                hint="remove the '/': corral passes a tool's arguments by name",
            )
        annotation = hints.get(param.name)
        if annotation is None:
            raise ConfigInvalidError(
                f"tool {tool_name!r}: parameter {param.name!r} has no type annotation",
                hint="every tool parameter needs a type; it becomes the input schema",
            )
        if annotation is ToolContext:
            context_param = param.name
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (annotation, default)
    returned = hints.get("return")
    if returned is None:
        raise ConfigInvalidError(
            f"tool {tool_name!r}: it has no return annotation",
            hint="annotate what it returns (a pydantic model, a dataclass, a TypedDict, "
            "str, int, float, bool or dict): it declares what may become facts",
        )
    if returned is type(None):
        raise ConfigInvalidError(
            f"tool {tool_name!r}: it is annotated '-> None', so it can never give a result",
            hint="return what it did (a pydantic model, a dataclass, a dict, str or bool: "
            "'-> bool', returning True, say); corral reads a result of None as 'nothing "
            "found', so a write would end as not found or with its outcome unknown",
        )
    declared, may_return_none = _unwrap_optional(returned)
    output = derive_output(tool_name, declared)
    input_model = create_model(
        f"{tool_name}_input",
        __config__=ConfigDict(extra="forbid"),
        **fields,
    )
    doc = inspect.getdoc(fn) or ""
    spec = ToolSpec(
        name=tool_name,
        description=doc.split("\n\n")[0].strip(),
        fn=fn,
        input_model=input_model,
        output_model=output.model,
        policy=policy or ToolPolicy(),
        context_param=context_param,
        may_return_none=may_return_none,
        summary_template=summary,
        returns=declared,
        wrapped=output.wrapped,
    )
    if reconcile is None:
        return spec
    return dataclasses.replace(spec, reconcile=_reconciler(spec, reconcile))


@overload
def tool(fn: F, /) -> ToolSpec: ...


@overload
def tool(
    *,
    name: str | None = None,
    policy: ToolPolicy | None = None,
    summary: str | None = None,
    reconcile: Reconciler | None = None,
) -> Callable[[F], ToolSpec]: ...


def tool(
    fn: Any = None,
    /,
    *,
    name: str | None = None,
    policy: ToolPolicy | None = None,
    summary: str | None = None,
    reconcile: Reconciler | None = None,
) -> Any:
    """Declare a tool. Use bare (``@tool``) or with options (``@tool(policy=...)``).

    ``summary`` is a ``str.format`` template over output fields, used in logs and replies.
    ``reconcile`` (writes only) is a read that finds the write's effect by idempotency key,
    e.g. ``reconcile=find_exchange_by_key``; it settles a write whose outcome is unknown.

    A sync tool runs in a worker thread, which cannot be stopped: after its timeout it may
    still be running, so a sync write that timed out has an unknown outcome. An async tool
    is cancelled at its timeout.
    """
    if fn is not None:
        return build_spec(fn)

    def decorate(inner: F) -> ToolSpec:
        return build_spec(inner, name=name, policy=policy, summary=summary, reconcile=reconcile)

    return decorate
