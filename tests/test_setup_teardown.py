"""A generator ``setup`` in tools.py: its yield is the deps, the rest runs at close.

An agent that starts a service in ``setup`` must stop it when the process is done with
the agent: ``Agent.aclose``, ``async with Runtime(...)``, and every CLI command that
builds a runtime.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from corral import MemoryStore, Runtime, load_agent
from corral.errors import ConfigInvalidError
from tests.helpers import corral_cli
from tests.one_intent import one_intent

TOOLS = '''
from pathlib import Path

from corral import ToolContext, tool

MARKS = Path(__file__).parent / "marks.txt"


def setup(data_dir: Path):
    MARKS.write_text(MARKS.read_text() + "open\\n" if MARKS.exists() else "open\\n")
    yield {"greeting": "hello"}
    MARKS.write_text(MARKS.read_text() + "closed\\n")


@tool
def greet(ctx: ToolContext) -> str:
    """Say the greeting from deps."""
    return ctx.deps["greeting"]
'''


def agent_dir(tmp_path: Path, tools: str = TOOLS) -> Path:
    folder = tmp_path / "agent"
    folder.mkdir()
    config = one_intent("hi", steps=[{"id": "s1", "tool": "greet", "args": {}}])
    (folder / "agent.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    (folder / "tools.py").write_text(tools, encoding="utf-8")
    return folder


def marks(folder: Path) -> list[str]:
    return (folder / "marks.txt").read_text().split()


async def test_the_teardown_runs_once_when_the_runtime_closes(tmp_path: Path) -> None:
    folder = agent_dir(tmp_path)
    agent = load_agent(folder)
    assert agent.deps["greeting"] == "hello"
    assert marks(folder) == ["open"]
    async with Runtime(agent, MemoryStore()) as runtime:
        summary = await runtime.start("hi")
        assert summary.status.value == "finished"
        assert marks(folder) == ["open"]  # nothing is closed while the runtime is in use
    assert marks(folder) == ["open", "closed"]
    await agent.aclose()  # twice is harmless, and the teardown does not run again
    assert marks(folder) == ["open", "closed"]


def test_corral_run_closes_the_agent_when_it_ends(tmp_path: Path) -> None:
    folder = agent_dir(tmp_path)
    done = corral_cli(tmp_path / "home", "run", str(folder), "hi", "--json")
    assert json.loads(done.stdout)["status"] == "finished"
    assert marks(folder) == ["open", "closed"]


async def test_a_setup_that_yields_twice_is_a_config_error_at_close(tmp_path: Path) -> None:
    folder = agent_dir(tmp_path, TOOLS.replace('"closed\\n")', '"closed\\n")\n    yield {}'))
    agent = load_agent(folder)
    with pytest.raises(ConfigInvalidError, match="yield only once"):
        await agent.aclose()


async def test_a_failing_teardown_names_the_line_of_tools_py(tmp_path: Path) -> None:
    failing = TOOLS.replace(
        '    MARKS.write_text(MARKS.read_text() + "closed\\n")', '    raise RuntimeError("stuck")'
    )
    folder = agent_dir(tmp_path, failing)
    agent = load_agent(folder)
    with pytest.raises(ConfigInvalidError, match=r"tools\.py:\d+.*teardown.*stuck"):
        await agent.aclose()


def test_a_broken_agent_still_runs_the_teardown_of_its_setup(tmp_path: Path) -> None:
    folder = agent_dir(tmp_path)
    config = one_intent("hi", steps=[{"id": "s1", "tool": "no_such_tool", "args": {}}])
    (folder / "agent.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    with pytest.raises(ConfigInvalidError, match="no_such_tool"):
        load_agent(folder)
    assert marks(folder) == ["open", "closed"]


def test_corral_serve_closes_its_agents_when_it_shuts_down(tmp_path: Path) -> None:
    from tests.serving import client, load, serving

    folder = agent_dir(tmp_path)
    home = tmp_path / "home"
    with serving(load(folder, home), home=home) as base, client(base) as http:
        assert http.post("/agents/one-intent/runs", json={"message": "hi"}).status_code < 300
        assert marks(folder) == ["open"]
    assert marks(folder) == ["open", "closed"]


def test_corral_chat_closes_the_agent_after_the_last_turn(tmp_path: Path) -> None:
    folder = agent_dir(tmp_path)
    done = corral_cli(tmp_path / "home", "chat", str(folder), stdin="hi\nhi\n/quit\n")
    assert done.stdout.count("agent> done") == 2
    assert marks(folder) == ["open", "closed"]
