"""Model strings: ``openai:deepseek-chat``, ``scripted``, ``replay:RUN_ID``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from corral.errors import ConfigInvalidError
from corral.models.base import Model
from corral.models.negotiation import DEFAULT_TTL_S
from corral.models.openai_compat import OpenAICompatibleModel


def resolve_model(
    spec: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout_s: float = 30.0,
    replay_loader: Callable[[str], Model] | None = None,
    negotiation_cache: Path | None = None,
    negotiation_ttl_s: float = DEFAULT_TTL_S,
) -> Model:
    """Build the model a string names.

    ``openai:NAME`` talks to any OpenAI-compatible endpoint (``base_url`` or
    ``OPENAI_BASE_URL``); ``local:smollm2`` or ``local:/path/model.gguf`` runs a GGUF model
    in-process; ``replay:RUN_ID`` answers from a stored run (``replay_loader`` reads it).
    ``negotiation_cache``: the home's file where an endpoint's structured-output mode is
    remembered between processes (``None``: each process finds it again).
    """
    provider, _, name = spec.partition(":")
    if provider == "openai" and name:
        return OpenAICompatibleModel(
            name,
            base_url=base_url,
            api_key=api_key,
            timeout_s=timeout_s,
            negotiation_cache=negotiation_cache,
            negotiation_ttl_s=negotiation_ttl_s,
        )
    if provider == "local" and name:
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
