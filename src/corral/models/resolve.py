"""Model strings: ``openai:deepseek-chat``, ``scripted``, ``replay:RUN_ID``."""

from __future__ import annotations

from collections.abc import Callable

from corral.errors import ConfigInvalidError
from corral.models.base import Model
from corral.models.openai_compat import OpenAICompatibleModel


def resolve_model(
    spec: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout_s: float = 30.0,
    replay_loader: Callable[[str], Model] | None = None,
) -> Model:
    """Build the model a string names.

    ``openai:NAME`` talks to any OpenAI-compatible endpoint (``base_url`` or
    ``OPENAI_BASE_URL``); ``local:smollm2`` or ``local:/path/model.gguf`` runs a GGUF model
    in-process; ``replay:RUN_ID`` answers from a stored run (``replay_loader`` reads it).
    """
    provider, _, name = spec.partition(":")
    if provider == "openai" and name:
        return OpenAICompatibleModel(name, base_url=base_url, api_key=api_key, timeout_s=timeout_s)
    if provider == "local" and name:
        from pathlib import Path

        from corral.models.local import LocalModel, smollm2_path

        return LocalModel(smollm2_path() if name == "smollm2" else Path(name))
    if provider == "replay" and name:
        if replay_loader is None:
            raise ConfigInvalidError("replay models need a store to read the run from")
        return replay_loader(name)
    raise ConfigInvalidError(
        f"unknown model {spec!r}",
        hint="use openai:MODEL, local:smollm2, local:/path/model.gguf or replay:RUN_ID",
    )
