"""A line nobody understands, typed at a confirmation, leaves the confirmation standing.

Found by a walkthrough (reproduced on main through ``corral run --session``): "取消订单
OD2611250001" was asked "确认取消订单 …吗？"; "嗯……我再想想" ("hmm, let me think") started a
run of its own, which asked to clarify ("您是想查订单、查物流…？") and became the
session's open question. The "确认" the customer sent next answered that clarification,
was not understood again, and the cancellation was never made: the confirmation was
buried under a question about nothing.

Now a line that no rule, classifier or follow-up understands, typed right after a
confirmation's prompt, is answered "didn't understand" and the prompt again
(``not_understood``, outcome ``unclear``, then the session's ``still_to_confirm``
reminder), and asks nothing of its own: the confirmation stays the session's open run,
and a "确认" then approves it. Once, as ``corral chat`` does (a review found a person who
kept asking for a colleague answered "didn't understand" for ever).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from corral import Agent, MemoryStore, RunStatus, Runtime, load_agent
from corral.runtime.replay import replay_run
from corral.testing import FixedEffects
from tests.conftest import ROOT
from tests.helpers import exchange_count, run_cli_json
from tests.serving import EXCHANGE

ORDERS = ROOT / "examples" / "orders"


def cancellations(agent: Agent) -> list[str]:
    """The orders cancelled, as the demo's database holds them (written by the tool)."""
    with sqlite3.connect(agent.deps["db"]) as conn:
        return [row[0] for row in conn.execute("SELECT order_id FROM cancellations")]


@pytest.mark.parametrize(
    ("asked", "unclear", "yes", "reminded"),
    [
        ("取消订单 OD2611250001", "嗯……我再想想", "确认", "还在等您确认"),
        ("cancel order OD2611250001", "hmm, let me think", "confirm", "waiting for your go-ahead"),
    ],
)
async def test_an_unclear_line_reasks_the_confirmation_and_a_yes_then_approves(
    tmp_path: Path, asked: str, unclear: str, yes: str, reminded: str
) -> None:
    orders = load_agent(ORDERS, data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(asked, session_id="think")
    assert paused.status is RunStatus.AWAITING_CONFIRM and paused.pending is not None
    aside = await runtime.start(unclear, session_id="think")
    assert aside.run_id != paused.run_id
    assert aside.status is RunStatus.FINISHED, aside  # it asks nothing of its own
    assert aside.pending is None
    assert reminded in (aside.reply or "") and paused.pending.prompt in (aside.reply or "")
    session = runtime.store.get_session("think", FixedEffects().now())
    assert session is not None and session.open_run_id == paused.run_id
    assert cancellations(orders) == []
    done = await runtime.start(yes, session_id="think")
    assert done.run_id == paused.run_id and done.status is RunStatus.FINISHED, done
    assert cancellations(orders) == ["OD2611250001"]  # counted by the tool's own table


async def test_a_new_request_at_the_confirmation_still_runs_on_its_own(tmp_path: Path) -> None:
    """What the change must not take: a line that is understood is a request of its own."""
    orders = load_agent(ORDERS, data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start("取消订单 OD2611250001", session_id="other")
    other = await runtime.start("OD2611200002 到哪了", session_id="other")
    assert other.run_id != paused.run_id and other.status is RunStatus.FINISHED
    assert other.intent is not None and other.intent.label == "logistics", other
    assert (await runtime.summary(paused.run_id)).status is RunStatus.AWAITING_CONFIRM


async def test_without_a_waiting_confirmation_an_unclear_line_is_asked_about(
    aftersales: Agent,
) -> None:
    """A session with nothing waiting clarifies as it always did."""
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    asked = await runtime.start("嗯……我再想想", session_id="nothing-waits")
    assert asked.status is RunStatus.AWAITING_USER


async def test_a_no_after_the_unclear_line_declines_and_nothing_is_written(
    aftersales: Agent,
) -> None:
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(EXCHANGE, session_id="then-no")
    await runtime.start("嗯……我再想想", session_id="then-no")
    declined = await runtime.start("不用了", session_id="then-no")
    assert declined.run_id == paused.run_id and declined.outcome == "cancelled"
    assert exchange_count(aftersales) == 0


def test_corral_run_keeps_the_confirmation_through_an_unclear_line(tmp_path: Path) -> None:
    """End to end, as the walkthrough met it: three ``corral run --session`` calls."""
    home, session = tmp_path / "home", ("--session", "s1")
    paused = run_cli_json(home, ORDERS, "取消订单 OD2611250001", *session)
    assert paused["status"] == "awaiting_confirm"
    aside = run_cli_json(home, ORDERS, "嗯……我再想想", *session)
    assert aside["status"] == "finished" and paused["pending"]["prompt"] in aside["reply"]
    done = run_cli_json(home, ORDERS, "确认", *session)
    assert done["run_id"] == paused["run_id"] and done["status"] == "finished", done


async def orders_waiting(tmp_path: Path, session: str) -> tuple[Agent, Runtime, str]:
    """The orders demo with a cancellation of OD2611250001 waiting in ``session``."""
    orders = load_agent(ORDERS, data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start("取消订单 OD2611250001", session_id=session)
    assert paused.status is RunStatus.AWAITING_CONFIRM
    return orders, runtime, paused.run_id


async def test_a_second_unclear_line_is_asked_about_and_then_handed_to_a_person(
    tmp_path: Path,
) -> None:
    """Review: "转人工" four times at a confirmation never reached a person, each line
    a new run answered "didn't understand" (the question limit counts a run's questions)."""
    orders, runtime, waiting = await orders_waiting(tmp_path, "colleague")
    first = await runtime.start("嗯……我再想想", session_id="colleague")
    assert first.outcome == "unclear"
    second = await runtime.start("嗯……我再想想", session_id="colleague")
    assert second.status is RunStatus.AWAITING_USER  # asked about, as any unclear line
    statuses = [second.status]
    for _ in range(3):
        statuses.append((await runtime.start("嗯……我再想想", session_id="colleague")).status)
    assert RunStatus.HANDED_OFF in statuses, statuses
    assert (await runtime.summary(waiting)).status is RunStatus.AWAITING_CONFIRM
    assert cancellations(orders) == []


@pytest.mark.parametrize("yes", ["确认取消", "好的"])
async def test_after_the_prompt_asked_again_a_yes_is_read_as_right_after_it(
    tmp_path: Path, yes: str
) -> None:
    """Review: "确认取消" after the "didn't understand" reply was read as after another
    run's reply (only "确认" in so many words), and looped; nothing else was suggested
    there, so the line is read with the prompt, as right after it."""
    orders, runtime, waiting = await orders_waiting(tmp_path, "again")
    await runtime.start("hmm", session_id="again")
    done = await runtime.start(yes, session_id="again")
    assert done.run_id == waiting and done.status is RunStatus.FINISHED, done
    assert cancellations(orders) == ["OD2611250001"]


async def test_the_unclear_run_replays_on_its_recorded_path(tmp_path: Path) -> None:
    """Review: the replay met no waiting confirmation and asked to clarify: diverged."""
    orders, runtime, waiting = await orders_waiting(tmp_path, "replayed")
    unclear = await runtime.start("嗯……我再想想", session_id="replayed")
    report = await replay_run(orders, runtime.store.load_events(unclear.run_id))
    assert report.same_path, report
    assert (await runtime.summary(waiting)).status is RunStatus.AWAITING_CONFIRM
    assert cancellations(orders) == []


@pytest.mark.parametrize("no", ["不确认", "don't confirm"])
async def test_a_no_in_the_prompt_s_own_word_declines(tmp_path: Path, no: str) -> None:
    """A walkthrough: "不确认" at the prompt was not a no: "didn't understand" came back."""
    orders, runtime, waiting = await orders_waiting(tmp_path, "not-confirmed")
    declined = await runtime.start(no, session_id="not-confirmed")
    assert declined.run_id == waiting and declined.outcome == "cancelled", declined
    assert cancellations(orders) == []


async def test_an_unclear_line_after_the_reminder_keeps_the_confirmation_too(
    aftersales: Agent,
) -> None:
    """A walkthrough: after another reply reminded of the exchange, "yes thanks" (no yes in
    so many words there) asked to clarify and became the open question; the "confirm"
    after it answered that question, and the exchange was lost."""
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    asked = "I want a replacement for my printer HD20240501"
    paused = await runtime.start(asked, session_id="reminded")
    await runtime.start("how long is the warranty on a monitor?", session_id="reminded")
    unclear = await runtime.start("yes thanks", session_id="reminded")
    assert unclear.outcome == "unclear" and "waiting for your go-ahead" in (unclear.reply or "")
    assert exchange_count(aftersales) == 0
    done = await runtime.start("confirm", session_id="reminded")
    assert done.run_id == paused.run_id and done.status is RunStatus.FINISHED, done
    assert exchange_count(aftersales) == 1  # counted by the tool's own table
