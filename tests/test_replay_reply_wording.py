"""A replay renders corral's own reply step again: a changed wording is a divergence.

Found by a walkthrough: ``corral eval --suite`` of a recorded success passed after the
success template was reworded, since ``generate_reply``'s text was answered from the log;
a reworded refusal template (rendered by the run, not by a step) was caught.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from corral import MemoryStore, Runtime, load_agent
from corral.runtime.replay import replay_run
from corral.testing import FixedEffects
from tests.conftest import AFTERSALES

EXCHANGE = "我的打印机上周坏了，订单号 HD20240501，能换新吗？"


async def recorded(agent_dir: Path, data: Path) -> tuple[MemoryStore, str]:
    store = MemoryStore()
    runtime = Runtime(load_agent(agent_dir, data_dir=data), store, effects=FixedEffects())
    paused = await runtime.start(EXCHANGE)
    done = await runtime.resume(paused.run_id, approve=True)
    assert done.status.value == "finished"
    return store, done.run_id


async def test_a_reworded_success_reply_is_a_divergence(tmp_path: Path) -> None:
    store, run_id = await recorded(AFTERSALES, tmp_path / "data")
    events = store.load_events(run_id)
    same = await replay_run(load_agent(AFTERSALES, data_dir=tmp_path / "again"), events)
    assert same.same_path, same  # the agent as it was: the same path, the same words

    changed = tmp_path / "changed"
    shutil.copytree(AFTERSALES, changed)
    config = changed / "agent.yaml"
    text = config.read_text("utf-8")
    assert "换新单 {exchange_id} 已经建好了" in text
    config.write_text(text.replace("已经建好了", "已创建"), "utf-8")
    report = await replay_run(load_agent(changed, data_dir=tmp_path / "other"), events)
    assert not report.same_path
    assert report.original is not None and report.replayed is not None
    assert "已经建好了" in str(report.original) and "已创建" in str(report.replayed)
