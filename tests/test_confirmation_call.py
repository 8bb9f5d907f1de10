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
from pathlib import Path

import httpx
import pytest
from pydantic import BaseModel

from corral import EventType, MemoryStore, RunStatus, Runtime, SqlStore, tool
from corral.cli.conversation import _converse
from corral.decision.gates import shown_call
from corral.errors import ErrorCode, InvalidInputError, RunNotResumableError
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
    done = await deployed.resume(asked.run_id, approve=True, call=again.pending.call)
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
        await runtime.resume(asked.run_id, approve=False, call="0" * 16)
    declined = await runtime.resume(asked.run_id, approve=False, call=asked.pending.call)
    assert declined.status is RunStatus.FINISHED and calls == []
    # a late double click of the same decision gets the summary, as without ``call``
    again = await runtime.resume(asked.run_id, approve=False, call=asked.pending.call)
    assert again.status is RunStatus.FINISHED and calls == []


@pytest.mark.parametrize(
    ("inputs", "says"),
    [
        ({"answer": "yes", "call": "ab12"}, "a call is named only with an approval"),
        ({"call": "ab12"}, "a call is named only with an approval"),
        ({"approve": True, "call": "not a digest"}, "named by its digest"),
        ({"approve": True, "call": "f" * 65}, "named by its digest"),
        ({"approve": True, "call": ""}, "named by its digest"),
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
        await runtime.resume(asked.run_id, approve=True, call="ab12")


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
            f"/runs/{asked.run_id}/resume", json={"approve": True, "call": "x" * 65}, headers=AUTH
        )
        assert bad.status_code == 422
        now = first.json()["pending"]["call"]
        done = http.post(
            f"/runs/{asked.run_id}/resume", json={"approve": True, "call": now}, headers=AUTH
        )
        assert done.status_code == 200 and done.json()["status"] == "finished", done.text
    assert calls == ["voucher 599"]


def test_the_cli_resumes_only_the_call_it_names(tmp_path: Path) -> None:
    asked = run_json(tmp_path, EXCHANGE)
    assert asked["status"] == "awaiting_confirm"
    run_id, call = asked["run_id"], asked["pending"]["call"]
    assert call
    wrong = corral(tmp_path, "resume", run_id, "--approve", "--call", "0" * 16, ok=False)
    assert wrong.returncode == 2 and "RUN_NOT_RESUMABLE" in wrong.stderr + wrong.stdout
    alone = corral(tmp_path, "resume", run_id, "--call", call, ok=False)
    assert alone.returncode == 2 and "INVALID_INPUT" in alone.stderr + alone.stdout
    assert exchanges(tmp_path) == 0
    done = json.loads(
        corral(tmp_path, "resume", run_id, "--approve", "--call", call, "--json").stdout
    )
    assert done["status"] == "finished"
    assert exchanges(tmp_path) == 1


def test_a_chat_yes_is_for_the_step_it_was_shown_when_another_client_decided_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On main the chat's yes named nothing: when another client approved the first write
    while the chat showed it, the yes approved the second, which the chat never showed."""
    shipped: list[str] = []

    @tool(policy=CONFIRMED_WRITE)
    def ship(item: str) -> Shipped:
        """Ships ``item``."""
        shipped.append(item)
        return Shipped(item=item)

    steps = [
        {"id": "a", "tool": "ship", "args": {"item": "A1"}},
        {"id": "b", "tool": "ship", "args": {"item": "B2"}, "depends_on": ["a"]},
    ]
    agent = build_agent([ship], steps, intent_tools=["ship"])
    store = MemoryStore()
    chat = Runtime(agent, store, effects=FixedEffects())
    other = Runtime(agent, store, effects=FixedEffects())
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
