"""Tools every agent may register: reply generation from the agent's templates."""

from __future__ import annotations

from pydantic import BaseModel

from corral.tools.context import ToolContext
from corral.tools.policy import LOCAL_COMPUTE
from corral.tools.spec import tool


class Reply(BaseModel):
    """A reply text for the user."""

    text: str


@tool(policy=LOCAL_COMPUTE, summary="{text}")
def generate_reply(template: str, ctx: ToolContext, variant_fact: str | None = None) -> Reply:
    """Write the reply from a template over verified facts (template-based; a model later).

    With ``variant_fact``, the template ``<template>_yes`` or ``<template>_no`` is chosen by
    that fact's truth. Generation is a tool like any other (seed 000), so it is recorded,
    verified and replayed like one.
    """
    assert ctx.render is not None, "the runtime always sets ToolContext.render"
    name = template
    if variant_fact is not None:
        name = f"{template}_{'yes' if ctx.facts.get(variant_fact) else 'no'}"
    return Reply(text=ctx.render(name, ctx.facts))
