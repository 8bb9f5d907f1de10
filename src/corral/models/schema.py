"""Output schemas a grammar can enforce, and validation that keeps the model's own values.

A grammar-constrained server (llama.cpp's ``json_object`` with a schema, a local GGUF
model, OpenAI's ``json_schema``) can only steer a small model towards what the schema
spells out: fixed property names, ``additionalProperties: false``, enums and patterns, and
a ``maxItems`` on every array so the grammar is finite. ``GrammarModel`` is the base of
such output models: its JSON Schema has unions as plain ``anyOf`` (no ``oneOf`` or
``discriminator``, which not every converter takes), a bound on every array, and no
additional properties on its own objects. Validation stays lenient about extra keys (a
server in prompt-only mode gets no grammar), while ``raw_checked`` fields are validated
strictly and then handed on exactly as the model wrote them.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    PlainSerializer,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from pydantic.json_schema import (
    DEFAULT_REF_TEMPLATE,
    GenerateJsonSchema,
    JsonSchemaMode,
    JsonSchemaValue,
)
from pydantic_core import core_schema

MAX_ITEMS = 20
"""The bound put on an array whose model declares none (a tool's ``list`` parameter)."""


class GrammarJsonSchema(GenerateJsonSchema):
    """Pydantic's JSON Schema, kept to keywords both llama.cpp and OpenAI enforce."""

    def tagged_union_schema(self, schema: core_schema.TaggedUnionSchema) -> JsonSchemaValue:
        """A discriminated union as plain ``anyOf``: the tag's ``const`` already decides."""
        generated = super().tagged_union_schema(schema)
        generated.pop("discriminator", None)
        if "oneOf" in generated:
            generated["anyOf"] = generated.pop("oneOf")
        return generated

    def list_schema(self, schema: core_schema.ListSchema) -> JsonSchemaValue:
        """Every array bounded, so the grammar built from it is finite."""
        generated = super().list_schema(schema)
        generated.setdefault("maxItems", MAX_ITEMS)
        return generated


class GrammarModel(BaseModel):
    """Base of model-output schemas: ``additionalProperties: false`` in the schema only.

    Extra keys are ignored when validating (prompt-only servers add them), but the schema
    a grammar is built from never offers them.
    """

    model_config = ConfigDict(extra="ignore", json_schema_extra={"additionalProperties": False})

    @classmethod
    def model_json_schema(
        cls,
        by_alias: bool | None = None,
        ref_template: str = DEFAULT_REF_TEMPLATE,
        schema_generator: type[GenerateJsonSchema] = GrammarJsonSchema,
        mode: JsonSchemaMode = "validation",
        **kwargs: Any,
    ) -> dict[str, Any]:
        """The schema, through ``GrammarJsonSchema`` unless another generator is given."""
        return super().model_json_schema(
            by_alias=True if by_alias is None else by_alias,
            ref_template=ref_template,
            schema_generator=schema_generator,
            mode=mode,
            **kwargs,
        )


def _keep_input(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    handler(value)
    return value


def _as_is(value: Any) -> Any:
    return value


def raw_checked(model: type[BaseModel]) -> Any:
    """A field type validated as ``model`` whose value stays the mapping the model wrote.

    Downstream code (plan validation, grounding, binding) keeps reading plain dicts of the
    model's literals: the schema only decides what is accepted, never rewrites a value.
    """
    return Annotated[model, WrapValidator(_keep_input), PlainSerializer(_as_is)]
