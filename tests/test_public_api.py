"""What ``corral`` exports: the names integrations import from the package itself."""

from __future__ import annotations

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
