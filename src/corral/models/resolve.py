"""Model strings: ``openai:deepseek-chat``, ``local:smollm2``, ``replay:RUN_ID``, plugins.

The part before the colon names a provider in a ``Registry``: the built-ins below plus the
entry points of the ``corral.models`` group. A provider is called with the part after
the colon and the ``ModelOptions`` of the agent's ``model:`` section, and returns a
``Model``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from corral.errors import ConfigInvalidError
from corral.models.base import Model
from corral.models.negotiation import DEFAULT_TTL_S
from corral.plugins import Registry

MODELS_GROUP = "corral.models"
"""The entry point group a package declares its model providers in."""


@dataclass(frozen=True)
class ModelOptions:
    """What a provider may use besides the name: the agent's ``model:`` settings."""

    base_url: str | None = None
    api_key: str | None = None
    timeout_s: float = 30.0
    replay_loader: Callable[[str], Model] | None = None
    """Reads a stored run, for ``replay:RUN_ID``."""
    negotiation_cache: Path | None = None
    """The home's file where an endpoint's structured-output mode is remembered."""
    negotiation_ttl_s: float = DEFAULT_TTL_S


Provider = Callable[[str, ModelOptions], Model]
"""Builds the model ``NAME`` names in ``PROVIDER:NAME``."""


def _openai(name: str, options: ModelOptions) -> Model:
    from corral.models.openai_compat import OpenAICompatibleModel

    return OpenAICompatibleModel(
        name,
        base_url=options.base_url,
        api_key=options.api_key,
        timeout_s=options.timeout_s,
        negotiation_cache=options.negotiation_cache,
        negotiation_ttl_s=options.negotiation_ttl_s,
    )


def _local(name: str, options: ModelOptions) -> Model:
    from corral.models.local import LocalModel, smollm2_path

    return LocalModel(smollm2_path() if name == "smollm2" else Path(name))


def _replay(name: str, options: ModelOptions) -> Model:
    if options.replay_loader is None:
        raise ConfigInvalidError("replay models need a store to read the run from")
    return options.replay_loader(name)


def model_providers() -> Registry[Provider]:
    """The built-in providers and those installed packages declare in ``corral.models``."""
    builtins: dict[str, Provider] = {"openai": _openai, "local": _local, "replay": _replay}
    return Registry.discover("model provider", MODELS_GROUP, builtins)


def resolve_model(
    spec: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout_s: float = 30.0,
    replay_loader: Callable[[str], Model] | None = None,
    negotiation_cache: Path | None = None,
    negotiation_ttl_s: float = DEFAULT_TTL_S,
    providers: Registry[Provider] | None = None,
) -> Model:
    """Build the model a string names.

    ``openai:NAME`` talks to any OpenAI-compatible endpoint (``base_url`` or
    ``OPENAI_BASE_URL``); ``local:smollm2`` or ``local:/path/model.gguf`` runs a GGUF model
    in-process; ``replay:RUN_ID`` answers from a stored run (``replay_loader`` reads it);
    ``PROVIDER:NAME`` another provider of ``providers`` (default: ``model_providers()``).
    """
    provider, _, name = spec.partition(":")
    registry = providers if providers is not None else model_providers()
    if not name:
        raise ConfigInvalidError(
            f"unknown model {spec!r}: a model is named PROVIDER:NAME "
            f"(providers: {', '.join(registry.names())})",
            hint="use openai:MODEL, local:smollm2, local:/path/model.gguf or replay:RUN_ID",
        )
    options = ModelOptions(
        base_url=base_url,
        api_key=api_key,
        timeout_s=timeout_s,
        replay_loader=replay_loader,
        negotiation_cache=negotiation_cache,
        negotiation_ttl_s=negotiation_ttl_s,
    )
    build = registry.get(
        provider, hint="use openai:MODEL, local:smollm2, local:/path/model.gguf or replay:RUN_ID"
    )
    return build(name, options)
