"""Model providers and stores are found by name: built-ins plus installed entry points."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral import MemoryStore, ScriptedModel, SqlStore, load_agent, open_store
from corral.errors import ConfigInvalidError, ErrorCode
from corral.models.openai_compat import OpenAICompatibleModel
from corral.models.resolve import ModelOptions, model_providers, resolve_model
from corral.store.registry import stores
from tests.conftest import AFTERSALES

PLUGIN = """
from corral import MemoryStore, ScriptedModel


def make_model(name, options):
    return ScriptedModel([f"{name} at {options.base_url}"])


def make_store(url, read_only):
    store = MemoryStore()
    store.opened_from = url
    return store


def broken(name, options):
    raise AssertionError("never called: the import fails first")

"""


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A package installed the way pip leaves one: a module and its dist-info."""
    (tmp_path / "acme_corral.py").write_text(PLUGIN)
    (tmp_path / "acme_broken.py").write_text("raise ImportError('no acme sdk')\n")
    info = tmp_path / "acme_corral-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-corral\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[corral.models]\nacme = acme_corral:make_model\nopenai = acme_corral:broken\n"
        "broken = acme_broken:make_model\n\n"
        "[corral.stores]\nacme = acme_corral:make_store\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in ("acme_corral", "acme_broken"):
        sys.modules.pop(name, None)


def test_built_in_providers_and_an_unknown_one() -> None:
    model = resolve_model("openai:deepseek-chat", base_url="http://127.0.0.1:9/v1")
    assert isinstance(model, OpenAICompatibleModel)
    assert model_providers().names()[:3] == ["openai", "local", "replay"]
    with pytest.raises(ConfigInvalidError, match="unknown model provider 'gemini'") as caught:
        resolve_model("gemini:pro")
    assert caught.value.code is ErrorCode.CONFIG_INVALID and "openai" in caught.value.message


def test_an_installed_provider_is_used_by_name_and_cannot_replace_a_built_in(
    installed: None,
) -> None:
    model = resolve_model("acme:big", base_url="http://acme")
    assert isinstance(model, ScriptedModel)
    assert isinstance(resolve_model("openai:x"), OpenAICompatibleModel)
    assert model_providers().get("openai").__name__ == "_openai"
    with pytest.raises(ConfigInvalidError, match="failed to load: ImportError: no acme sdk"):
        resolve_model("broken:x")


def test_load_agent_takes_an_installed_provider_by_name(installed: None, tmp_path: Path) -> None:
    agent = load_agent(AFTERSALES, data_dir=tmp_path / "data", model_name="acme:small")
    assert isinstance(agent.model, ScriptedModel) and agent.model.replies == ["small at None"]


def test_stores_by_url(installed: None, tmp_path: Path) -> None:
    assert isinstance(open_store("memory:"), MemoryStore)
    sql = open_store(f"sqlite:///{tmp_path}/home/corral.db")
    assert isinstance(sql, SqlStore) and (tmp_path / "home" / "corral.db").is_file()
    plugged = open_store("acme://bucket")
    assert getattr(plugged, "opened_from", None) == "acme://bucket"
    assert stores().names()[:3] == ["sqlite", "memory", "postgresql"]
    for bad in ("redis://localhost", "corral.db"):
        with pytest.raises(ConfigInvalidError) as caught:
            open_store(bad)
        assert caught.value.code is ErrorCode.CONFIG_INVALID


def test_options_reach_the_provider(installed: None) -> None:
    provider = model_providers().get("acme")
    model = provider("m", ModelOptions(base_url="http://x"))
    assert isinstance(model, ScriptedModel)
