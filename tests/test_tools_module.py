"""``load_agent`` imports ``tools.py`` as the module the developer's own code imports."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral import MemoryStore, RunStatus, Runtime, load_agent

AGENT = """
name: shop
intents: []
plans:
  lookup:
    steps:
      - {id: s1, tool: get_order, args: {order_id: "A1"}, facts: {total: result.total}}
templates: {}
"""

TOOLS = """
from pydantic import BaseModel
from corral import tool


class Order(BaseModel):
    order_id: str
    total: float


@tool
def get_order(order_id: str) -> Order:
    \"\"\"Look an order up through the shop's own service code.\"\"\"
    import service

    return service.find(order_id)
"""

SERVICE = """
import tools  # the developer's own import of the agent's tools module


def find(order_id: str) -> "tools.Order":
    return tools.Order(order_id=order_id, total=12.5)
"""


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "shop"
    folder.mkdir()
    (folder / "agent.yaml").write_text(AGENT)
    (folder / "tools.py").write_text(textwrap.dedent(TOOLS))
    (folder / "service.py").write_text(textwrap.dedent(SERVICE))
    monkeypatch.syspath_prepend(str(folder))
    earlier = sys.modules.pop("tools", None)  # another agent's tools module, if any
    before = set(sys.modules)
    yield folder
    for name in set(sys.modules) - before:  # this test's modules are not the next one's
        del sys.modules[name]
    if earlier is not None:
        sys.modules["tools"] = earlier


async def test_a_tool_may_return_the_class_the_developers_own_import_sees(shop: Path) -> None:
    agent = load_agent(shop, data_dir=shop / ".data")
    import tools  # type: ignore[import-not-found]

    assert agent.tools.get("get_order").output_model is tools.Order
    summary = await Runtime(agent, MemoryStore()).run_plan("lookup")
    assert summary.status is RunStatus.FINISHED, summary.steps
    assert summary.steps[0].error_code is None


def test_a_module_the_developer_imported_first_is_used_as_it_is(shop: Path) -> None:
    import tools

    agent = load_agent(shop, data_dir=shop / ".data")
    assert agent.tools.get("get_order") is tools.get_order
    assert load_agent(shop).tools.get("get_order") is tools.get_order  # once per process


def test_an_application_tools_package_is_never_shadowed(
    shop: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = tmp_path / "app"
    (app / "tools").mkdir(parents=True)
    (app / "tools" / "__init__.py").write_text("WHO = 'the application'\n")
    monkeypatch.syspath_prepend(str(app))  # found before the agent folder
    agent = load_agent(shop, data_dir=shop / ".data")
    import tools

    assert tools.WHO == "the application"
    assert agent.tools.get("get_order").output_model.__module__ != "tools"
