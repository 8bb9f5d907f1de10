"""A decision names the call it was about: ``resume(call=pending.call)``.

On main a retried click named only the step. When a deploy changed the step's call while
the person read the prompt ("refund 599" became "voucher 599"), the first click asked about
the voucher, as it should; a retry of that same click (a browser resending the request, a
client's retry on a timeout) then approved the voucher, which nobody had been shown. Now
the summary's ``pending.call`` is the digest of the call asked about, and a decision that
gives it back is applied only while the run asks about that call, from the public API,
the CLI, the HTTP API and the chat.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from corral import EventType, MemoryStore, RunStatus, Runtime, SqlStore, tool
from corral.cli.conversation import _converse
from corral.decision.gates import shown_call
from corral.errors import (
    ErrorCode,
    InvalidInputError,
    RunNotResumableError,
    StoreUnavailableError,
)
from corral.testing import FixedEffects
from tests.conftest import AFTERSALES
from tests.helpers import build_agent
from tests.serving import AUTH, load, serving
from tests.test_cli import EXCHANGE, corral, exchanges, run_json
from tests.test_confirmation_scope import CONFIRMED_WRITE, deployed_while_asked, voucher_desk


class Shipped(BaseModel):
    item: str


async def test_a_retried_click_does_not_approve_the_call_a_deploy_put_in_its_place() -> None:
    asked, deployed, calls = await deployed_while_asked()
    assert asked.pending is not None
    shown = asked.pending.call
    assert shown == shown_call("refund", {"amount": "599"})
    click = {"approve": True, "step_id": "r", "call": shown}
    again = await deployed.resume(asked.run_id, **click)  # type: ignore[arg-type]
    assert again.status is RunStatus.AWAITING_CONFIRM  # the voucher is asked about
    assert again.pending is not None and again.pending.call == shown_call(
        "voucher", {"amount": "599"}
    )
    with pytest.raises(RunNotResumableError) as refused:  # the same click, retried
        await deployed.resume(asked.run_id, **click)  # type: ignore[arg-type]
    assert refused.value.code is ErrorCode.RUN_NOT_RESUMABLE
    assert "does not ask about the call that was shown" in refused.value.message
    assert calls == []  # nothing was entered
    state = await deployed.load_state(asked.run_id)
    assert state.status is RunStatus.AWAITING_CONFIRM and "r" not in state.confirmations
    done = await deployed.resume(asked.run_id, approve=True, step_id="r", call=again.pending.call)
    assert done.status is RunStatus.FINISHED
    assert calls == ["voucher 599"]


async def test_without_the_call_a_retried_click_decides_what_the_step_asks_now() -> None:
    """What main did, and still does for a caller that leaves ``call`` out (documented)."""
    asked, deployed, calls = await deployed_while_asked()
    await deployed.resume(asked.run_id, approve=True, step_id="r")
    done = await deployed.resume(asked.run_id, approve=True, step_id="r")
    assert done.status is RunStatus.FINISHED and calls == ["voucher 599"]


async def test_a_rejection_names_its_call_too_and_a_matching_one_is_applied() -> None:
    agent, calls = voucher_desk(rewrite=False)
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    asked = await runtime.start("go 599")
    assert asked.pending is not None and asked.pending.call is not None
    with pytest.raises(RunNotResumableError):
        await runtime.resume(asked.run_id, approve=False, step_id="r", call="0" * 16)
    shown = {"step_id": "r", "call": asked.pending.call}
    declined = await runtime.resume(asked.run_id, approve=False, **shown)
    assert declined.status is RunStatus.FINISHED and calls == []
    # a late double click of the same decision gets the summary, as without ``call``
    again = await runtime.resume(asked.run_id, approve=False, **shown)
    assert again.status is RunStatus.FINISHED and calls == []


@pytest.mark.parametrize(
    ("inputs", "says"),
    [
        ({"answer": "yes", "call": "ab12"}, "a call is named only with an approval"),
        ({"call": "ab12"}, "a call is named only with an approval"),
        ({"approve": True, "call": "ab12"}, "a call is named with its step"),
        ({"approve": True, "step_id": "r", "call": "not a digest"}, "named by its digest"),
        ({"approve": True, "step_id": "r", "call": "f" * 65}, "named by its digest"),
        ({"approve": True, "step_id": "r", "call": ""}, "named by its digest"),
        ({"approve": True, "step_id": "r", "call": 123}, "named by its digest"),
    ],
)
async def test_a_call_that_is_no_call_is_invalid_input_before_anything_is_read(
    inputs: dict[str, object], says: str
) -> None:
    agent, _ = voucher_desk(rewrite=False)
    runtime = Runtime(agent, MemoryStore(), effects=FixedEffects())
    with pytest.raises(InvalidInputError) as refused:
        await runtime.resume("run_missing", **inputs)  # type: ignore[arg-type]
    assert refused.value.code is ErrorCode.INVALID_INPUT and says in refused.value.message


async def test_a_question_has_no_call(tmp_path: Path) -> None:
    runtime = Runtime(load(AFTERSALES, tmp_path), MemoryStore(), effects=FixedEffects())
    asked = await runtime.start("我的打印机上周坏了，能换新吗？")  # no order id: asked for
    assert asked.status is RunStatus.AWAITING_USER
    assert asked.pending is not None and asked.pending.kind == "answer"
    assert asked.pending.call is None
    with pytest.raises(RunNotResumableError):  # nothing to confirm: no call to decide
        await runtime.resume(asked.run_id, approve=True, step_id="s1", call="ab12")


async def test_the_http_api_refuses_a_retried_click_on_a_replaced_call(tmp_path: Path) -> None:
    db = tmp_path / "corral.db"
    before, _ = voucher_desk(rewrite=False)
    asked = await Runtime(before, SqlStore.open(db), effects=FixedEffects()).start("go 599")
    assert asked.pending is not None
    after, calls = voucher_desk(rewrite=True)
    with serving(after, home=tmp_path, store=db) as base, httpx.Client(base_url=base) as http:
        shown = http.get(f"/runs/{asked.run_id}", headers=AUTH).json()["pending"]
        assert shown["call"] == asked.pending.call  # the page shows what it will send
        click = {"approve": True, "step_id": "r", "call": shown["call"]}
        first = http.post(f"/runs/{asked.run_id}/resume", json=click, headers=AUTH)
        assert first.status_code == 200, first.text
        assert first.json()["status"] == "awaiting_confirm"
        retried = http.post(f"/runs/{asked.run_id}/resume", json=click, headers=AUTH)
        assert retried.status_code == 409, retried.text
        assert retried.json()["error"]["code"] == "RUN_NOT_RESUMABLE"
        assert calls == []
        bad = http.post(
            f"/runs/{asked.run_id}/resume",
            json={"approve": True, "step_id": "r", "call": "x" * 65},
            headers=AUTH,
        )
        assert bad.status_code == 422
        now = first.json()["pending"]["call"]
        done = http.post(
            f"/runs/{asked.run_id}/resume",
            json={"approve": True, "step_id": "r", "call": now},
            headers=AUTH,
        )
        assert done.status_code == 200 and done.json()["status"] == "finished", done.text
    assert calls == ["voucher 599"]


def test_the_cli_resumes_only_the_call_it_names(tmp_path: Path) -> None:
    asked = run_json(tmp_path, EXCHANGE)
    assert asked["status"] == "awaiting_confirm"
    run_id, call, step = asked["run_id"], asked["pending"]["call"], asked["pending"]["step_id"]
    assert call
    shown = ("--step", step, "--call", call)
    wrong = corral(
        tmp_path, "resume", run_id, "--approve", "--step", step, "--call", "0" * 16, ok=False
    )
    assert wrong.returncode == 2 and "RUN_NOT_RESUMABLE" in wrong.stderr + wrong.stdout
    for alone in (("--call", call, "--step", step), ("--approve", "--call", call)):
        refused = corral(tmp_path, "resume", run_id, *alone, ok=False)
        assert refused.returncode == 2 and "INVALID_INPUT" in refused.stderr + refused.stdout
    assert exchanges(tmp_path) == 0
    done = json.loads(corral(tmp_path, "resume", run_id, "--approve", *shown, "--json").stdout)
    assert done["status"] == "finished"
    assert exchanges(tmp_path) == 1


def two_shipments(
    shipped: list[str],
    store: MemoryStore,
    entered: threading.Event | None = None,
    go_on: threading.Event | None = None,
) -> tuple[Runtime, Runtime]:
    """Two runtimes (the chat, another client) of a plan shipping A1, then B2, each asked.

    ``entered``/``go_on``: the shipment of A1 says it began, then waits to be let go on.
    """

    @tool(policy=CONFIRMED_WRITE)
    def ship(item: str) -> Shipped:
        """Ships ``item``."""
        shipped.append(item)
        if item == "A1" and entered is not None and go_on is not None:
            entered.set()
            go_on.wait(10)
        return Shipped(item=item)

    steps = [
        {"id": "a", "tool": "ship", "args": {"item": "A1"}},
        {"id": "b", "tool": "ship", "args": {"item": "B2"}, "depends_on": ["a"]},
    ]
    agent = build_agent([ship], steps, intent_tools=["ship"])
    return Runtime(agent, store, effects=FixedEffects()), Runtime(
        agent, store, effects=FixedEffects()
    )


def test_a_chat_yes_is_for_the_step_it_was_shown_when_another_client_decided_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On main the chat's yes named nothing: when another client approved the first write
    while the chat showed it, the yes approved the second, which the chat never showed."""
    shipped: list[str] = []
    store = MemoryStore()
    chat, other = two_shipments(shipped, store)
    lines = iter(["go", "yes", "yes", ""])

    def typed(_prompt: str) -> str:
        line = next(lines)
        if line == "yes" and not shipped:  # another client approves a first, meanwhile
            run_id = store.list_runs(1)[0].run_id
            asyncio.run(other.resume(run_id, approve=True))
        return line

    monkeypatch.setattr("builtins.input", typed)
    _converse(chat, "chat-1", lambda run_id: f"corral resume {run_id}")
    told = capsys.readouterr().out
    assert "ship (item: A1)" in told and "ship (item: B2)" in told
    # the first yes (for A1) approved nothing more; the second, typed after B2 was shown,
    # approved B2
    assert shipped == ["A1", "B2"]
    run_id = store.list_runs(1)[0].run_id
    given = [e.data for e in store.load_events(run_id) if e.type is EventType.CONFIRMATION_GIVEN]
    assert [g["step_id"] for g in given] == ["a", "b"]
    assert told.index("ship (item: B2)") < told.rindex("agent>")


async def test_a_late_click_on_one_step_never_decides_another_with_the_same_call() -> None:
    """Two refunds of 599 ask about the same call: the step names which one was shown."""
    refunded: list[str] = []

    @tool(policy=CONFIRMED_WRITE)
    def refund(amount: int) -> Shipped:
        """Refunds ``amount``."""
        refunded.append(str(amount))
        return Shipped(item=str(amount))

    steps = [
        {"id": "r1", "tool": "refund", "args": {"amount": 599}},
        {"id": "r2", "tool": "refund", "args": {"amount": 599}, "depends_on": ["r1"]},
    ]
    runtime = Runtime(
        build_agent([refund], steps, intent_tools=["refund"]), MemoryStore(), effects=FixedEffects()
    )
    asked = await runtime.start("go")
    assert asked.pending is not None and asked.pending.step_id == "r1"
    first = {"step_id": "r1", "call": asked.pending.call}
    second = await runtime.resume(asked.run_id, approve=True, **first)  # another client
    assert second.pending is not None and second.pending.step_id == "r2"
    assert second.pending.call == asked.pending.call  # the same call, at another step
    late = await runtime.resume(asked.run_id, approve=True, **first)  # the page's late click
    assert late.status is RunStatus.AWAITING_CONFIRM and refunded == ["599"]


def test_a_chat_yes_refused_while_another_client_drives_the_run_keeps_its_step(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The chat's yes for A1 meets another client's drive (RUN_BUSY); the next yes is still
    for A1, already approved, and approves nothing the chat did not show (B2)."""
    shipped: list[str] = []
    entered, go_on = threading.Event(), threading.Event()
    store = MemoryStore()
    chat, other = two_shipments(shipped, store, entered, go_on)
    lines = iter(["go", "yes", "yes", ""])
    drives: list[threading.Thread] = []

    def typed(_prompt: str) -> str:
        line = next(lines)
        if line == "yes" and not drives:  # another client approves A1; its drive runs now
            run_id = store.list_runs(1)[0].run_id
            drive = threading.Thread(target=asyncio.run, args=(other.resume(run_id, approve=True),))
            drive.start()
            drives.append(drive)
            assert entered.wait(10)
        elif line == "yes":  # that drive ended: the run asks about B2
            go_on.set()
            drives[0].join(10)
        return line

    monkeypatch.setattr("builtins.input", typed)
    _converse(chat, "chat-1", lambda run_id: f"corral resume {run_id}")
    told = capsys.readouterr().out
    assert "RUN_BUSY" in told
    assert shipped == ["A1"]
    assert told.rstrip().splitlines()[-2].startswith("agent> Next I will run ship (item: B2)")


def test_a_store_fault_on_a_chat_yes_keeps_the_chat_and_its_question(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    agent, calls = voucher_desk(rewrite=False)
    chat = Runtime(agent, MemoryStore(), effects=FixedEffects())
    lines = iter(["go 599", "yes", "yes", ""])
    down: set[str] = set()  # the first yes: its resume fails, then the chat's look at the run
    real_resume, real_load = chat.resume, chat.load_state

    async def resume(*args: Any, **kwargs: Any) -> Any:
        if "resume" in down:
            down.discard("resume")
            raise StoreUnavailableError("store down", hint="retry")
        return await real_resume(*args, **kwargs)

    async def load_state(*args: Any, **kwargs: Any) -> Any:
        if "load" in down and "resume" not in down:
            down.discard("load")
            raise StoreUnavailableError("store down", hint="retry")
        return await real_load(*args, **kwargs)

    said: list[str] = []

    def typed(_prompt: str) -> str:
        said.append(next(lines))
        if said.count("yes") == 1 and said[-1] == "yes":
            down.update(("resume", "load"))
        return said[-1]

    monkeypatch.setattr(chat, "resume", resume)
    monkeypatch.setattr(chat, "load_state", load_state)
    monkeypatch.setattr("builtins.input", typed)
    _converse(chat, "chat-1", lambda run_id: f"corral resume {run_id}")
    assert "STORE_UNAVAILABLE" in capsys.readouterr().out
    assert calls == ["refund 599"]  # the second yes, for the question still shown


async def test_a_worker_decides_only_the_call_its_drive_names() -> None:
    """The call travels to the worker: one the run no longer asks about decides nothing."""
    workflow = pytest.importorskip("corral.workers.workflow")
    from corral.workers.drive import DriveArgs

    asked, deployed, calls = await deployed_while_asked()
    again = await deployed.resume(asked.run_id, approve=True)  # the voucher is asked
    assert again.pending is not None
    assert asked.pending is not None
    stale = DriveArgs(
        kind="resume",
        agent=deployed.agent.name,
        run_id=asked.run_id,
        approve=True,
        step_id="r",
        call=asked.pending.call,
    )
    with pytest.raises(RunNotResumableError):
        await workflow._drive(deployed, stale)
    assert calls == []
    done = await workflow._drive(deployed, stale.model_copy(update={"call": again.pending.call}))
    assert done.status is RunStatus.FINISHED and calls == ["voucher 599"]
