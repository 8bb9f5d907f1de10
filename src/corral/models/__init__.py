"""Models inside the fence: one interface, providers, and the structured-output pipeline."""

from corral.models.base import Message, Model, ModelRequest, ModelResponse, Usage
from corral.models.replay import ReplayModel
from corral.models.scripted import ScriptedModel

__all__ = [
    "Message",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ReplayModel",
    "ScriptedModel",
    "Usage",
]
