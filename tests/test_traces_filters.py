"""``corral traces`` with filters: each one keeps the runs it names and leaves the others out.

Three runs of the aftersales agent are stored in a home: a greeting in session ``s-hi``
and an exchange (paused for confirmation) in session ``s-ex``, both now, and an older
exchange from 2026-11-29 (the effects clock). The command runs as a user runs it, in a
subprocess, and its ``--json`` lines say which runs it showed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from corral import Runtime, load_agent
from corral.observe.trace_ids import otel_trace_id
from corral.store.sql import SqlStore
from corral.testing import FixedEffects
from tests.conftest import AFTERSALES
from tests.helpers import corral_cli

EXCHANGE = "我的打印机坏了，订单号 HD20240501，能换新吗"


@dataclass(frozen=True)
class Home:
    path: Path
    greeting: str
    exchange: str
    old: str
    trace: str


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Home:
    import asyncio

    folder = tmp_path_factory.mktemp("traces-home")
    store = SqlStore.open(folder / "corral.db")
    agent = load_agent(AFTERSALES, data_dir=folder / "business")
    old = asyncio.run(Runtime(agent, store, effects=FixedEffects()).start(EXCHANGE))
    live = Runtime(agent, store)
    exchange = asyncio.run(live.start(EXCHANGE, session_id="s-ex"))
    greeting = asyncio.run(live.start("你好", session_id="s-hi"))
    store.engine.dispose()
    return Home(folder, greeting.run_id, exchange.run_id, old.run_id, exchange.trace_id)


def shown(home: Home, *args: str) -> list[dict[str, object]]:
    done = corral_cli(home.path, "traces", *args, "--json")
    return [json.loads(line) for line in done.stdout.splitlines()]


def runs_in(home: Home, *args: str) -> set[object]:
    return {line["run_id"] for line in shown(home, *args)}


def test_without_filters_every_recent_run_shows(home: Home) -> None:
    assert runs_in(home) == {home.greeting, home.exchange, home.old}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--session", "s-hi"), {"greeting"}),
        (("--session", "nope"), set()),
        (("--intent", "无关闲聊"), {"greeting"}),
        (("--intent", "申请换新"), {"exchange", "old"}),
        (("--status", "awaiting_confirm"), {"exchange", "old"}),
        (("--status", "finished"), {"greeting"}),
        (("--since", "1h"), {"greeting", "exchange"}),
        (("--until", "1h"), {"old"}),
        (("--since", "2026-11-29T09:00Z", "--until", "2026-11-29T11:00Z"), {"old"}),
        (("--agent", "aftersales", "--status", "finished"), {"greeting"}),
        (("--agent", "nope"), set()),
        (("--limit", "1"), {"greeting"}),
    ],
)
def test_each_filter_excludes_what_it_should(
    home: Home, args: tuple[str, ...], expected: set[str]
) -> None:
    names = {"greeting": home.greeting, "exchange": home.exchange, "old": home.old}
    assert runs_in(home, *args) == {names[n] for n in expected}


def test_trace_and_run_name_one_run(home: Home) -> None:
    assert runs_in(home, "--trace", home.trace) == {home.exchange}
    # the OTel form, as a trace viewer or the JSONL log shows it, finds the same run
    assert runs_in(home, "--trace", otel_trace_id(home.trace)) == {home.exchange}
    assert runs_in(home, "--run", home.greeting, "--since", "1h") == {home.greeting}
    assert runs_in(home, home.exchange, "--status", "finished") == set()


def test_line_filters_apply_to_the_runs_found(home: Home) -> None:
    lines = shown(home, "--since", "1h", "--stage", "execute", "--level", "info")
    assert lines and {line["stage"] for line in lines} == {"execute"}
    assert {line["run_id"] for line in lines} == {home.exchange}  # the greeting ran no step
    assert all(line["level"] != "debug" for line in lines)


def test_one_run_alone_reads_as_before(home: Home) -> None:
    """``traces RUN_ID`` is unchanged: the run's lines, the same as ``--run RUN_ID``."""
    alone = shown(home, home.exchange)
    assert [line["seq"] for line in alone] == list(range(1, len(alone) + 1))
    assert alone == shown(home, "--run", home.exchange)


def test_the_table_names_the_runs_and_says_when_none_match(home: Home) -> None:
    table = corral_cli(home.path, "traces", "--session", "s-hi").stdout
    assert "run" in table and "user_message" in table
    assert "no runs match" in corral_cli(home.path, "traces", "--agent", "nope").stdout


def test_bad_filters_are_refused(home: Home) -> None:
    done = corral_cli(home.path, "traces", "--status", "nonsense", ok=False)
    assert done.returncode == 2 and "status must be one of" in done.stderr
    done = corral_cli(home.path, "traces", "--since", "soon", "--json", ok=False)
    assert json.loads(done.stdout)["error"]["code"] == "INVALID_INPUT"


def test_a_stage_no_event_names_is_refused_listing_the_stages(home: Home) -> None:
    """The defect: ``--stage exectue`` (a typo) showed nothing, as if no line matched."""
    done = corral_cli(home.path, "traces", home.exchange, "--stage", "exectue", ok=False)
    assert done.returncode == 2 and "stage must be one of run, intent, route" in done.stderr
    done = corral_cli(home.path, "traces", "--since", "1h", "--stage", "nope", ok=False)
    assert done.returncode == 2 and "judge" in done.stderr
    assert shown(home, home.exchange, "--stage", "judge") == []  # a known stage, no line


def test_every_stage_corral_emits_or_asks_a_model_for_is_declared() -> None:
    """``STAGES`` is the list the filter checks: each ``emit("stage", ...)`` and each model
    purpose (``ModelRequest("purpose", ...)``, which its ``model_call`` event carries as its
    stage) in corral's source must be in it, or that stage could not be filtered on."""
    import ast

    from corral.contracts import STAGES

    named: set[str] = set()
    for path in (Path(__file__).parents[1] / "src" / "corral").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            first = node.args[0]
            if called in ("emit", "ModelRequest") and isinstance(first, ast.Constant):
                named.add(first.value)
    assert {"execute", "judge", "extract"} <= named  # the scan finds them
    assert named <= set(STAGES)
    # the store's fixed columns (a schema revision's, so a list of their own) name stages
    from corral.store.projection import STAGE_COLUMNS

    assert set(STAGE_COLUMNS) <= set(STAGES)


def test_a_stage_an_agents_own_gate_names_can_be_filtered_on(tmp_path: Path) -> None:
    """A gate may record events under a stage of its own (docs/extending.md): a name no
    corral stage has is refused only when no line of the runs shown carries it."""
    from dataclasses import dataclass

    from corral import Agent
    from corral.decision import DEFAULT_GATES, GateRun, Proposal
    from corral.events import FactWritten

    @dataclass(frozen=True)
    class Audit:
        def check(self, proposal: Proposal, run: GateRun) -> Proposal:
            run.emit("audit", FactWritten("audited", True, "tool", proposal.step_id))
            return proposal

    loaded = load_agent(AFTERSALES, data_dir=tmp_path / "business")
    audited = Agent.build(
        loaded.config, list(loaded.tools), deps=loaded.deps, gates=(*DEFAULT_GATES, Audit())
    )
    store = SqlStore.open(tmp_path / "corral.db")
    import asyncio

    run = asyncio.run(Runtime(audited, store).start(EXCHANGE))
    store.engine.dispose()
    lines = shown(Home(tmp_path, "", run.run_id, "", ""), run.run_id, "--stage", "audit")
    assert lines and {line["stage"] for line in lines} == {"audit"}
    many = shown(Home(tmp_path, "", run.run_id, "", ""), "--since", "1h", "--stage", "audit")
    assert many == lines
    done = corral_cli(tmp_path, "traces", run.run_id, "--stage", "audti", ok=False)
    assert done.returncode == 2 and "or one an event of these runs names" in done.stderr
