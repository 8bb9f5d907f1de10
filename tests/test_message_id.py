"""A message sent again under its id is answered, not handled again (``message_id``).

On main a retried request was simply a second message. After a deploy changed the call a
session's "yes" was given for (the first "yes" was answered with a question about the
voucher put in the refund's place), the client's retry of that same "yes" approved the
voucher, which nobody had been shown. A retried first message started a second run.
Now ``Runtime.start(message_id=...)``, ``POST /agents/{agent}/runs`` with ``message_id``
and ``corral run --message-id`` answer a message whose id a turn of the session took with
that run's summary. The store keeps each id once per session, in the save that records
it, so two tries racing each other are stored once, before either enters a write.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from corral import MemoryStore, RunStatus, Runtime, SqlStore, ToolPolicy, tool
from corral.errors import ErrorCode, InvalidInputError, RunBusyError
from corral.testing import FixedEffects
from tests.conftest import AFTERSALES
from tests.helpers import build_agent
from tests.serving import AUTH, load, serving
from tests.test_cli import EXCHANGE, exchanges, run_json
from tests.test_confirmation_scope import Paid, payment_tools, voucher_desk

ORDER_MISSING = "我的打印机上周坏了，能换新吗？"


async def test_a_retried_session_yes_does_not_approve_the_call_a_deploy_put_in_its_place() -> None:
    store = MemoryStore()
    before, _ = voucher_desk(rewrite=False)
    first = Runtime(before, store, effects=FixedEffects())
    asked = await first.start("go 599", session_id="s1", message_id="m1")
    assert asked.pending is not None and "refund" in asked.pending.prompt
    after, calls = voucher_desk(rewrite=True)
    deployed = Runtime(after, store, effects=FixedEffects())
    again = await deployed.start("yes", session_id="s1", message_id="m2")
    assert again.status is RunStatus.AWAITING_CONFIRM  # the voucher was never shown
    assert again.pending is not None and "voucher" in again.pending.prompt
    retried = await deployed.start("yes", session_id="s1", message_id="m2")
    assert retried.run_id == asked.run_id
    assert retried.status is RunStatus.AWAITING_CONFIRM and calls == []
    assert retried.pending == again.pending
    done = await deployed.start("yes", session_id="s1", message_id="m3")  # the voucher's yes
    assert done.status is RunStatus.FINISHED and calls == ["voucher 599"]
    again_done = await deployed.start("yes", session_id="s1", message_id="m3")
    assert again_done.status is RunStatus.FINISHED and calls == ["voucher 599"]


def paying_desk() -> tuple[Runtime, list[str], MemoryStore]:
    """A write without a question, on a store whose look-up of ids always misses."""

    class Racing(MemoryStore):
        """Both tries of a request looked before either was stored (they raced)."""

        def run_of_message(self, agent: str, session_id: str | None, message_id: str) -> None:
            return None

    calls: list[str] = []
    refund, voucher = payment_tools(calls, ToolPolicy(kind="write"))
    agent = build_agent(
        [refund, voucher],
        [{"id": "r", "tool": "refund", "args": {"amount": "$entities.amount"}}],
        entities={"amount": {"kind": "pattern", "patterns": [r"(\d+)"]}},
        intent_tools=["refund"],
    )
    store = Racing()
    return Runtime(agent, store, effects=FixedEffects()), calls, store


async def test_two_tries_that_raced_are_stored_once_and_the_write_is_entered_once() -> None:
    runtime, calls, store = paying_desk()
    first = await runtime.start("go 599", session_id="s1", message_id="m1")
    assert first.status is RunStatus.FINISHED and calls == ["refund 599"]
    second = await runtime.start("go 599", session_id="s1", message_id="m1")
    assert second.run_id == first.run_id and second.status is RunStatus.FINISHED
    assert calls == ["refund 599"]  # counted inside the tool: entered once
    assert list(store.runs) == [first.run_id]  # the racer stored nothing
    other = await runtime.start("go 599", session_id="s1", message_id="m2")  # a new message
    assert other.run_id != first.run_id and calls == ["refund 599", "refund 599"]


async def test_a_sessionless_message_is_kept_per_agent_and_an_id_per_session() -> None:
    agent, _ = voucher_desk(rewrite=False)
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    one = await runtime.start("go 5", message_id="m1")
    assert (await runtime.start("go 5", message_id="m1")).run_id == one.run_id
    elsewhere = await runtime.start("go 5", session_id="s9", message_id="m1")
    assert elsewhere.run_id != one.run_id


async def test_an_answer_sent_again_is_applied_once(tmp_path: Path) -> None:
    runtime = Runtime(load(AFTERSALES, tmp_path), SqlStore.open(tmp_path / "c.db"))
    asked = await runtime.start(ORDER_MISSING, session_id="s1", message_id="m1")
    assert asked.status is RunStatus.AWAITING_USER
    answered = await runtime.start("HD20240501", session_id="s1", message_id="m2")
    assert answered.run_id == asked.run_id
    assert answered.status is RunStatus.AWAITING_CONFIRM
    retried = await runtime.start("HD20240501", session_id="s1", message_id="m2")
    assert retried.run_id == asked.run_id and retried.status is RunStatus.AWAITING_CONFIRM
    state = await runtime.load_state(asked.run_id)
    assert state.messages == [ORDER_MISSING, "HD20240501"]
    assert [run.run_id for run in runtime.store.list_runs()] == [asked.run_id]


async def test_an_id_sent_with_another_message_is_invalid_input_and_nothing_is_handled() -> None:
    agent, calls = voucher_desk(rewrite=False)
    store = MemoryStore()
    runtime = Runtime(agent, store, effects=FixedEffects())
    asked = await runtime.start("go 5", session_id="s1", message_id="m1")
    with pytest.raises(InvalidInputError) as refused:
        await runtime.start("go 7", session_id="s1", message_id="m1")
    assert refused.value.code is ErrorCode.INVALID_INPUT
    assert "was sent with another message" in refused.value.message
    assert list(store.runs) == [asked.run_id] and calls == []


@pytest.mark.parametrize(
    ("message_id", "says"),
    [("", "blank"), ("   ", "blank"), ("a\x00b", "NUL"), ("m" * 129, "over 128")],
)
async def test_a_message_id_no_store_can_keep_is_invalid_input(message_id: str, says: str) -> None:
    agent, _ = voucher_desk(rewrite=False)
    store = MemoryStore()
    with pytest.raises(InvalidInputError) as refused:
        await Runtime(agent, store).start("go 5", session_id="s1", message_id=message_id)
    assert says in refused.value.message and store.runs == {}


async def test_a_store_that_keeps_no_ids_refuses_one_rather_than_ignore_it() -> None:
    class Forgetful(MemoryStore):
        run_of_message = None  # type: ignore[assignment]

    agent, _ = voucher_desk(rewrite=False)
    store = Forgetful()
    with pytest.raises(InvalidInputError) as refused:
        await Runtime(agent, store).start("go 5", message_id="m1")
    assert "keeps no message ids" in refused.value.message and store.runs == {}
    assert (await Runtime(agent, store).start("go 5")).status is RunStatus.AWAITING_CONFIRM


def test_the_http_api_answers_a_retried_request_with_its_run(tmp_path: Path) -> None:
    db = tmp_path / "corral.db"
    agent, calls = voucher_desk(rewrite=False)
    body = {"message": "go 599", "session_id": "s1", "message_id": "m1"}
    with serving(agent, home=tmp_path, store=db) as base, httpx.Client(base_url=base) as http:
        first = http.post("/agents/test/runs", json=body, headers=AUTH)
        assert first.status_code == 200, first.text
        assert first.json()["status"] == "awaiting_confirm"
        yes = {"message": "yes", "session_id": "s1", "message_id": "m2"}
        done = http.post("/agents/test/runs", json=yes, headers=AUTH)
        assert done.status_code == 200 and done.json()["status"] == "finished", done.text
        for request in (body, yes):  # each sent again: the run as it is now
            again = http.post("/agents/test/runs", json=request, headers=AUTH)
            assert again.status_code == 200, again.text
            assert again.json()["run_id"] == first.json()["run_id"]
            assert again.json()["status"] == "finished"
        listed = http.get("/runs", params={"session_id": "s1"}, headers=AUTH).json()
        assert [row["run_id"] for row in listed["runs"]] == [first.json()["run_id"]]
        other = {**body, "message": "go 7"}
        refused = http.post("/agents/test/runs", json=other, headers=AUTH)
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "INVALID_INPUT"
        too_long = {**body, "message_id": "m" * 129}
        refused = http.post("/agents/test/runs", json=too_long, headers=AUTH)
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "INVALID_INPUT"
        # a lone surrogate is INVALID_INPUT, as in every other text (found by a review:
        # the length constraint made it INVALID_ARGUMENT, "unable to parse raw data")
        raw = '{"message": "go 8", "message_id": "\\ud800"}'
        headers = {**AUTH, "content-type": "application/json"}
        refused = http.post("/agents/test/runs", content=raw, headers=headers)
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "INVALID_INPUT"
    assert calls == ["refund 599"]


def test_the_cli_shows_the_run_a_message_id_took(tmp_path: Path) -> None:
    session = ("--session", "s1")
    asked = run_json(tmp_path, EXCHANGE, *session, "--message-id", "m1")
    assert asked["status"] == "awaiting_confirm"
    done = run_json(tmp_path, "是的", *session, "--message-id", "m2")
    assert done["run_id"] == asked["run_id"] and done["status"] == "finished"
    assert exchanges(tmp_path) == 1
    for message, message_id in ((EXCHANGE, "m1"), ("是的", "m2")):  # each sent again
        again = run_json(tmp_path, message, *session, "--message-id", message_id)
        assert again["run_id"] == asked["run_id"] and again["status"] == "finished"
    assert exchanges(tmp_path) == 1


def waiting_desk(store: MemoryStore) -> tuple[Runtime, asyncio.Event, asyncio.Event, list[str]]:
    """A lookup that waits for ``go_on`` (``entered`` is set when it starts), then a write."""
    entered, go_on = asyncio.Event(), asyncio.Event()
    calls: list[str] = []

    @tool
    async def look(amount: str) -> Paid:
        """Looks the amount up, as slowly as the test says."""
        entered.set()
        await go_on.wait()
        return Paid(amount=amount)

    refund, _ = payment_tools(calls, ToolPolicy(kind="write"))
    agent = build_agent(
        [look, refund],
        [
            {"id": "l", "tool": "look", "args": {"amount": "$entities.amount"}},
            {
                "id": "r",
                "tool": "refund",
                "args": {"amount": "$entities.amount"},
                "depends_on": ["l"],
            },
        ],
        entities={"amount": {"kind": "pattern", "patterns": [r"(\d+)"]}},
        intent_tools=["look", "refund"],
    )
    return Runtime(agent, store, effects=FixedEffects()), entered, go_on, calls


async def test_a_retry_sent_while_its_first_try_runs_is_busy_and_shows_no_run_of_its_own() -> None:
    store = MemoryStore()
    runtime, entered, go_on, calls = waiting_desk(store)
    first = asyncio.create_task(runtime.start("go 599", session_id="s1", message_id="m1"))
    await entered.wait()  # the first try runs; nothing of it is stored yet
    seen: list[object] = []
    with pytest.raises(RunBusyError) as busy:
        async for item in runtime.stream("go 599", session_id="s1", message_id="m1"):
            seen.append(item)
    assert busy.value.code is ErrorCode.RUN_BUSY and seen == []  # no run shown
    go_on.set()
    done = await first
    assert done.status is RunStatus.FINISHED and calls == ["refund 599"]
    again = await runtime.start("go 599", session_id="s1", message_id="m1")
    assert again.run_id == done.run_id and calls == ["refund 599"]
    assert list(store.runs) == [done.run_id]


async def test_a_losing_try_that_is_stopped_before_its_save_ends_as_stopped() -> None:
    class Racing(MemoryStore):
        def run_of_message(self, agent: str, session_id: str | None, message_id: str) -> None:
            return None

    store = Racing()
    runtime, entered, go_on, calls = waiting_desk(store)
    go_on.set()
    first = await runtime.start("go 599", session_id="s1", message_id="m1")
    go_on.clear()
    entered.clear()
    loser = asyncio.create_task(runtime.start("go 599", session_id="s1", message_id="m1"))
    await entered.wait()
    loser.cancel()  # a server stopping: the stop's save finds the id taken
    with pytest.raises(asyncio.CancelledError):
        await loser
    assert list(store.runs) == [first.run_id] and calls == ["refund 599"]
