"""What ``corral`` exports: the names integrations import from the package itself."""

from __future__ import annotations

import dataclasses

import pytest

import corral
from corral.errors import ToolFailedError, TransientToolError
from corral.models.base import Model
from corral.models.scripted import ScriptedModel
from corral.store.base import Store
from corral.testing import FixedEffects


def test_the_building_blocks_of_a_test_or_an_integration_are_exported() -> None:
    exported = {
        "TransientToolError": TransientToolError,
        "ToolFailedError": ToolFailedError,
        "Model": Model,
        "ScriptedModel": ScriptedModel,
        "FixedEffects": FixedEffects,
        "Store": Store,
    }
    for name, value in exported.items():
        assert name in corral.__all__ and getattr(corral, name) is value


def test_every_listed_name_exists_and_earlier_names_stay() -> None:
    assert all(hasattr(corral, name) for name in corral.__all__)
    earlier = {"Agent", "Runtime", "MemoryStore", "SqlStore", "ToolPolicy", "ToolContext"}
    assert earlier | {"parse_config", "load_agent", "tool", "EventType", "Effects"} <= set(
        corral.__all__
    )


def test_an_agent_is_frozen_and_a_variant_is_a_replace(aftersales: corral.Agent) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        aftersales.model = corral.ScriptedModel([])  # type: ignore[misc]
    with pytest.raises(TypeError):
        aftersales.template_graphs[("x", "y")] = aftersales.template_graphs[
            ("申请换新", "exchange")
        ]  # type: ignore[index]
    with pytest.raises(TypeError):
        aftersales.deps["db"] = "elsewhere"  # type: ignore[index]
    scripted = corral.ScriptedModel([])
    variant = dataclasses.replace(aftersales, model=scripted)
    assert variant.model is scripted and aftersales.model is None
    assert variant.template_graphs == aftersales.template_graphs
