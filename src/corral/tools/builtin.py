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

    With ``variant_fact``, the template is ``<template>_<value>`` for a text fact
    (``order_status_in_transit``) and ``<template>_yes`` / ``<template>_no`` for a true or
    false one. Generation is a tool like any other (seed 000), so it is recorded, verified
    and replayed like one.
    """
    assert ctx.render is not None, "the runtime always sets ToolContext.render"
    name = template
    if variant_fact is not None:
        value = ctx.facts.get(variant_fact)
        suffix = value if isinstance(value, str) and value else ("yes" if value else "no")
        name = f"{template}_{suffix}"
    return Reply(text=ctx.render(name, ctx.facts))
