"""A line that asks again for the request a confirmation waits for is answered with it.

Found by a walkthrough (reproduced on main through the API): "HD20240501 打印机坏了，想换新"
was asked "…我这就为订单 HD20240501 创建换新单，可以吗？"; "换新要多久能到？" ("how long
until the replacement comes?") started a second exchange run that asked the same
confirmation again, and so did "how long does an exchange take?" and every other line a
rule of the exchange read. The "确认" after them approved the newest; the first still
waited, reminded under the reply, and a second "确认" ran the exchange again (the order's
business rule handed it to a person).

Now such a line (a rule reads the waiting run's own intent, and every value it names is
the waiting run's) is answered "already waiting" and the prompt (outcome ``repeated``,
``RunStarted.repeats_request``), runs nothing, and the "确认" after it approves the one
waiting request.
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

ORDERS = ROOT / "examples" / "orders"
AFTERSALES = ROOT / "examples" / "aftersales"
ASKED = "HD20240501 打印机坏了，想换新"


def waiting_runs(runtime: Runtime) -> list[str]:
    """The runs of the (memory) store that wait for a confirmation."""
    return [
        run_id
        for run_id, run in runtime.store.runs.items()  # type: ignore[attr-defined]
        if run.status == RunStatus.AWAITING_CONFIRM.value
    ]


def cancellations(agent: Agent) -> list[str]:
    with sqlite3.connect(agent.deps["db"]) as conn:
        return [row[0] for row in conn.execute("SELECT order_id FROM cancellations")]


@pytest.mark.parametrize(
    "again", ["换新要多久能到？", "how long does an exchange take?", "我想换一台新的"]
)
async def test_asking_again_shows_the_waiting_confirmation_and_one_yes_exchanges_once(
    aftersales: Agent, again: str
) -> None:
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(ASKED, session_id="again")
    assert paused.status is RunStatus.AWAITING_CONFIRM and paused.pending is not None
    repeated = await runtime.start(again, session_id="again")
    assert repeated.status is RunStatus.FINISHED and repeated.outcome == "repeated", repeated
    assert repeated.pending is None and not repeated.steps  # it runs nothing
    assert paused.pending.prompt in (repeated.reply or "")
    assert waiting_runs(runtime) == [paused.run_id]  # one confirmation waits, not two
    done = await runtime.start("好的", session_id="again")  # read as right after the prompt
    assert done.run_id == paused.run_id and done.status is RunStatus.FINISHED, done
    assert exchange_count(aftersales) == 1
    assert waiting_runs(runtime) == []


async def test_asking_again_twice_still_runs_nothing(aftersales: Agent) -> None:
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(ASKED, session_id="twice")
    for line in ("换新要多久能到？", "换新需要几天？"):
        repeated = await runtime.start(line, session_id="twice")
        assert repeated.outcome == "repeated", repeated
    assert waiting_runs(runtime) == [paused.run_id]
    done = await runtime.start("确认", session_id="twice")
    assert done.run_id == paused.run_id and done.status is RunStatus.FINISHED
    assert exchange_count(aftersales) == 1


async def test_another_order_named_is_a_request_of_its_own(aftersales: Agent) -> None:
    """What the change must not take: the same intent for another value runs as before."""
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(ASKED, session_id="other")
    other = await runtime.start("HD20250920 显示器也想换新", session_id="other")
    assert other.run_id != paused.run_id and other.status is RunStatus.AWAITING_CONFIRM
    assert sorted(waiting_runs(runtime)) == sorted([paused.run_id, other.run_id])


async def test_the_same_cancellation_asked_again_is_not_a_second_one(tmp_path: Path) -> None:
    orders = load_agent(ORDERS, data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start("取消订单 OD2611250001", session_id="cancel")
    repeated = await runtime.start("帮我取消 OD2611250001", session_id="cancel")
    assert repeated.outcome == "repeated" and waiting_runs(runtime) == [paused.run_id]
    other = await runtime.start("取消 OD2611280008", session_id="cancel")
    assert other.status is RunStatus.AWAITING_CONFIRM and other.run_id != paused.run_id
    assert cancellations(orders) == []


async def test_the_repeated_run_replays_on_its_recorded_path(aftersales: Agent) -> None:
    """The replay's store holds no waiting run: it reads ``repeats_request`` from the log."""
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    await runtime.start(ASKED, session_id="replayed")
    repeated = await runtime.start("换新要多久能到？", session_id="replayed")
    report = await replay_run(aftersales, runtime.store.load_events(repeated.run_id))
    assert report.same_path, report
    assert exchange_count(aftersales) == 0


def test_corral_run_answers_a_repeated_request_with_the_waiting_one(tmp_path: Path) -> None:
    """End to end, as the walkthrough met it: three ``corral run --session`` calls."""
    home, session = tmp_path / "home", ("--session", "s1")
    paused = run_cli_json(home, AFTERSALES, ASKED, *session)
    assert paused["status"] == "awaiting_confirm"
    repeated = run_cli_json(home, AFTERSALES, "换新要多久能到？", *session)
    assert repeated["outcome"] == "repeated" and paused["pending"]["prompt"] in repeated["reply"]
    done = run_cli_json(home, AFTERSALES, "确认", *session)
    assert done["run_id"] == paused["run_id"] and done["status"] == "finished", done


# ---------------------------------------------------------------- found by a hostile review


async def test_another_order_carried_from_the_session_is_not_a_repeat(tmp_path: Path) -> None:
    """ "帮我取消这个订单" after "OD2611280008 发货了吗" is that order's: "好的" cancelled
    the waiting OD2611250001 instead, by a first version that read only what the line
    named."""
    orders = load_agent(ORDERS, data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start("取消订单 OD2611250001", session_id="this-one")
    await runtime.start("OD2611280008 发货了吗", session_id="this-one")
    other = await runtime.start("帮我取消这个订单", session_id="this-one")
    assert other.outcome != "repeated" and other.status is RunStatus.AWAITING_CONFIRM, other
    await runtime.start("好的", session_id="this-one")
    assert cancellations(orders) == ["OD2611280008"]
    assert (await runtime.summary(paused.run_id)).status is RunStatus.AWAITING_CONFIRM


@pytest.mark.parametrize(
    ("example", "asked", "line"),
    [
        (AFTERSALES, ASKED, "另一个订单的打印机也想换新"),
        (AFTERSALES, ASKED, "I want a replacement for my other order too"),
        (ORDERS, "取消订单 OD2611250001", "取消 OD2611250001 和 OD2611280008"),
        (AFTERSALES, ASKED, "取消换新"),
        (AFTERSALES, ASKED, "换新我再考虑一下"),
        (AFTERSALES, ASKED, "cancel the exchange"),
    ],
)
async def test_a_line_that_asks_for_more_or_holds_back_is_no_repeat(
    tmp_path: Path, example: Path, asked: str, line: str
) -> None:
    agent = load_agent(example, data_dir=tmp_path / "d")
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    await runtime.start(asked, session_id="more")
    said = await runtime.start(line, session_id="more")
    assert said.outcome != "repeated", said


async def test_a_correction_after_the_repeated_reply_corrects_the_waiting_request(
    aftersales: Agent,
) -> None:
    """The repeated turn stands for the waiting request: "不对，是 HD20250920" declined it
    and asked the monitor's exchange; a first version answered "didn't understand" and the
    "确认" after it exchanged the printer the person had just said was wrong."""
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(ASKED, session_id="corrected")
    await runtime.start("换新要多久能到？", session_id="corrected")
    corrected = await runtime.start("不对，是 HD20250920", session_id="corrected")
    assert corrected.status is RunStatus.AWAITING_CONFIRM and corrected.pending is not None
    assert "HD20250920" in corrected.pending.prompt
    assert (await runtime.summary(paused.run_id)).outcome == "cancelled"
    await runtime.start("确认", session_id="corrected")
    with sqlite3.connect(aftersales.deps["db"]) as conn:
        assert [r[0] for r in conn.execute("SELECT order_id FROM exchanges")] == ["HD20250920"]


async def test_repeats_beyond_the_session_s_kept_turns_still_make_no_second_run(
    aftersales: Agent,
) -> None:
    """A first version found the waiting intent among the session's last turns: after ten
    repeats the waiting run's turn was gone, and the eleventh made a second exchange run."""
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(ASKED, session_id="many")
    for _ in range(12):
        assert (await runtime.start("换新要多久能到？", session_id="many")).outcome == "repeated"
    assert waiting_runs(runtime) == [paused.run_id]


async def test_the_reply_to_a_repeat_is_in_the_language_of_the_waiting_prompt(
    aftersales: Agent,
) -> None:
    runtime = Runtime(aftersales, MemoryStore(), effects=FixedEffects())
    await runtime.start(ASKED, session_id="language")
    repeated = await runtime.start("how long does an exchange take?", session_id="language")
    assert repeated.outcome == "repeated"
    assert (repeated.reply or "").startswith("这个请求还在等您确认"), repeated.reply


async def test_a_correction_of_the_waiting_value_is_no_repeat(tmp_path: Path) -> None:
    """A second review: "不对，地址改成公司" at the address change's prompt was answered
    "already waiting" with the old address ("公司" is too short for the address pattern)."""
    orders = load_agent(ORDERS, data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    await runtime.start("OD2611250001 地址改成北京朝阳区建国路", session_id="corrected")
    said = await runtime.start("不对，地址改成公司", session_id="corrected")
    assert said.outcome != "repeated", said


@pytest.mark.parametrize(
    ("asked", "line"),
    [
        ("OD2611200002 退一半", "我要全额退款"),  # the half is not carried: another amount
        ("refund half of OD2611200002", "I want a full refund please"),
        ("查一下 OD2611250001，把状态改成已取消", "OD2611250001 现在什么情况"),  # a plan rule's
        ("取消订单 OD2611250001", "I want to cancel a different order"),
    ],
)
async def test_what_the_waiting_run_holds_and_the_new_one_would_not_is_no_repeat(
    tmp_path: Path, asked: str, line: str
) -> None:
    """A third review: "我要全额退款" at "退款 229.5 元吗？" was answered "already waiting",
    and "好的" refunded the half; a status question at a cancellation a plan rule chose was
    never answered; "a different order" was the waiting one."""
    orders = load_agent(ORDERS, data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    await runtime.start(asked, session_id="held")
    said = await runtime.start(line, session_id="held")
    assert said.outcome != "repeated", said


@pytest.mark.parametrize(
    ("asked", "line"),
    [
        ("帮我取消 OD2611250001", "这个不想要了，帮我取消吧"),
        ("Cancel my order OD2611250001", "I don't want it anymore, please cancel OD2611250001"),
    ],
)
async def test_a_cancellation_asked_again_with_its_reason_is_a_repeat(
    tmp_path: Path, asked: str, line: str
) -> None:
    """A fourth review: a cancellation's reason ("不想要了", "don't want it") read as
    holding it back, and two cancellation runs waited; a yes to each cancelled twice."""
    orders = load_agent(ORDERS, data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start(asked, session_id="reason")
    repeated = await runtime.start(line, session_id="reason")
    assert repeated.outcome == "repeated" and waiting_runs(runtime) == [paused.run_id]
    await runtime.start("确认", session_id="reason")
    assert cancellations(orders) == ["OD2611250001"]


async def test_a_free_text_value_given_again_is_no_repeat(tmp_path: Path) -> None:
    """A fourth review: "改地址，寄到北京市朝阳区建国路1号吧" (no address the patterns find)
    at the Shanghai address's prompt was answered "this request is still waiting" with the
    old address, and "确认" wrote Shanghai."""
    orders = load_agent(ORDERS, data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    await runtime.start("OD2611250001 我要改收货地址", session_id="address")
    await runtime.start("上海市浦东新区世纪大道100号", session_id="address")
    said = await runtime.start("改地址，寄到北京市朝阳区建国路1号吧", session_id="address")
    assert said.outcome != "repeated", said


async def test_two_cancellations_of_one_order_confirmed_cancel_it_once(tmp_path: Path) -> None:
    """A fourth review: "还是取消吧，OD…" (a change word: a run of its own) waited beside the
    first; "确认" to each wrote two cancellations, the business rule reading the status the
    second run had planned with. The demo's tool now reads the status where it writes."""
    orders = load_agent(ORDERS, data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    await runtime.start("帮我取消 OD2611250001", session_id="twice")
    await runtime.start("还是取消吧，OD2611250001", session_id="twice")
    await runtime.start("确认", session_id="twice")
    second = await runtime.start("确认", session_id="twice")
    assert second.outcome != "success", second
    assert cancellations(orders) == ["OD2611250001"]  # counted by the tool's own ledger


@pytest.mark.parametrize(
    "no",
    [
        "还是别取消了",
        "我不想取消了",
        "别取消 OD2611250001 了",
        "don't cancel it",
        "please do not cancel order OD2611250001",
        "I no longer want to cancel the order",
    ],
)
async def test_a_line_that_says_it_is_not_the_waiting_request_declines_it(
    tmp_path: Path, no: str
) -> None:
    """A fifth review (as on 9785f49): these were answered "didn't understand" and the
    prompt, and the "好的" after them cancelled the order. A line its intent's ``unless``
    reads (the line says it is not that request) is a no to it."""
    orders = load_agent(ORDERS, data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start("取消订单 OD2611250001", session_id="no")
    declined = await runtime.start(no, session_id="no")
    assert declined.run_id == paused.run_id and declined.outcome == "cancelled", declined
    await runtime.start("好的", session_id="no")
    assert cancellations(orders) == []


async def test_a_no_that_asks_another_thing_declines_then_runs_it(tmp_path: Path) -> None:
    """ "不要取消了，帮我改一下收货地址": the cancellation is declined, then the address
    change is asked for (a first version of the no above declined and dropped the rest)."""
    orders = load_agent(ORDERS, data_dir=tmp_path / "orders")
    runtime = Runtime(orders, MemoryStore(), effects=FixedEffects())
    paused = await runtime.start("取消订单 OD2611250001", session_id="instead")
    instead = await runtime.start("不要取消了，帮我改一下收货地址", session_id="instead")
    assert instead.run_id != paused.run_id and instead.status is RunStatus.AWAITING_USER
    assert instead.intent is not None and instead.intent.label == "change_address", instead
    assert (await runtime.summary(paused.run_id)).outcome == "cancelled"
    assert cancellations(orders) == []
