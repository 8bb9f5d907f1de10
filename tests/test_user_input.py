"""What a user sends: a blank message or answer, or an approval sent with an answer, is
refused up front; the chat asks for yes or no in the conversation's language.

Through the CLI and the public API (the HTTP API: ``tests/test_server_api.py``). Before,
``corral run DIR ""`` started a run, and ``corral resume RUN --answer ""`` used up one of
the run's questions, so the next real answer was handed to a person.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from corral import MemoryStore, Runtime, load_agent
from corral.contracts import RunStatus
from corral.errors import ErrorCode, InvalidInputError, RunNotResumableError
from corral.events import Event
from tests.conftest import AFTERSALES
from tests.helpers import corral_cli
from tests.serving import EXCHANGE

ASK = "我想申请换新"
"""The aftersales agent asks for the order id."""


def refused(home: Path, *args: str) -> dict[str, str]:
    done = corral_cli(home, *args, "--json", ok=False)
    assert done.returncode == 2, done.stdout
    error: dict[str, str] = json.loads(done.stdout)["error"]
    return error


def test_the_cli_refuses_a_blank_message_and_a_blank_answer(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for blank in ("", "  "):
        assert refused(home, "run", str(AFTERSALES), blank)["code"] == "INVALID_INPUT"
    asked = json.loads(corral_cli(home, "run", str(AFTERSALES), ASK, "--json").stdout)
    assert asked["status"] == "awaiting_user"
    error = refused(home, "resume", asked["run_id"], "--answer", " ")
    assert error == {
        "code": "INVALID_INPUT",
        "message": "the answer is blank (nothing a person can see)",
        "hint": "send some text",
    }
    answered = corral_cli(home, "resume", asked["run_id"], "--answer", "HD20240501", "--json")
    assert json.loads(answered.stdout)["status"] != "handed_off"
    runs = json.loads(corral_cli(home, "runs", "--json").stdout)
    assert len(runs) == 1  # the blank messages started nothing


def test_the_cli_refuses_an_answer_given_with_an_approval(tmp_path: Path) -> None:
    home = tmp_path / "home"
    paused = json.loads(corral_cli(home, "run", str(AFTERSALES), EXCHANGE, "--json").stdout)
    error = refused(home, "resume", paused["run_id"], "--approve", "--answer", "x")
    assert error["code"] == "INVALID_INPUT"  # the code the HTTP API and Runtime.resume give
    assert error["message"] == "give an approval or an answer, not both"
    stepped = refused(home, "resume", paused["run_id"], "--answer", "x", "--step", "s4")
    assert stepped["code"] == "INVALID_INPUT"  # it was RUN_NOT_RESUMABLE, a run state's code
    shown = json.loads(corral_cli(home, "show", paused["run_id"], "--json").stdout)
    assert shown["status"] == "awaiting_confirm"


def test_the_public_api_refuses_them_before_anything_is_recorded(tmp_path: Path) -> None:
    store = MemoryStore()
    runtime = Runtime(load_agent(AFTERSALES, data_dir=tmp_path / "data"), store)

    async def scenario() -> None:
        with pytest.raises(InvalidInputError, match="the message is empty"):
            await runtime.start("")
        assert store.list_runs(10) == []
        asked = await runtime.start(ASK)
        seen = len(store.load_events(asked.run_id))
        with pytest.raises(InvalidInputError) as info:
            await runtime.resume(asked.run_id, answer="\u3000")  # an ideographic space
        assert info.value.code is ErrorCode.INVALID_INPUT
        with pytest.raises(InvalidInputError, match="not both"):
            await runtime.resume(asked.run_id, approve=True, answer="HD20240501")
        assert len(store.load_events(asked.run_id)) == seen
        done = await runtime.resume(asked.run_id, answer="HD20240501")
        assert done.status is not RunStatus.HANDED_OFF

    asyncio.run(scenario())


def test_chat_asks_for_yes_or_no_in_the_language_of_the_run(tmp_path: Path) -> None:
    """The defect: an English conversation, answered "maybe later" at a confirmation, was
    asked in Chinese (请回答 是 或 不)."""
    english = "Order HD20240501: my printer is broken, I want a replacement"
    done = corral_cli(
        tmp_path / "en", "chat", str(AFTERSALES), stdin=f"{english}\nmaybe later\nno\n"
    )
    assert "agent> Please answer yes or no" in done.stdout and "请回答" not in done.stdout
    assert "state: finished" in done.stdout  # the "no" that followed was taken
    done = corral_cli(tmp_path / "zh", "chat", str(AFTERSALES), stdin=f"{EXCHANGE}\n再说吧\n不\n")
    assert "agent> 请回答 是 或 不" in done.stdout and "Please answer" not in done.stdout


def test_a_run_stored_with_a_blank_answer_still_replays_the_same_path(tmp_path: Path) -> None:
    """Runs stored before blank answers were refused hold one: ``corral replay`` (and a
    recorded case built from it) gives the recorded inputs again as they were, so such a
    run takes the same path, never "diverged: the answer is blank"."""
    from corral.store.sql import SqlStore

    home = tmp_path / "home"
    home.mkdir()
    store = SqlStore.open(home / "corral.db")
    old = Runtime(load_agent(AFTERSALES, data_dir=home / "business"), store)
    old.replaying = True  # stands for the code before: it took a blank answer

    async def stored() -> str:
        asked = await old.start(ASK)
        await old.resume(asked.run_id, answer=" ")
        await old.resume(asked.run_id, answer="HD20240501")
        return asked.run_id

    run_id = asyncio.run(stored())
    store.engine.dispose()
    texts = [e.payload.text for e in store.load_events(run_id) if e.type.value == "user_answered"]
    assert texts == [" ", "HD20240501"]
    done = corral_cli(home, "replay", run_id, "--agent", str(AFTERSALES), "--json")
    assert json.loads(done.stdout)["same_path"] is True


@pytest.mark.parametrize(
    "invisible",
    [
        "\u200b",
        "\u200b\u200b\ufeff",
        "\u0000",
        " \u2060 ",
        "\u3164",  # a Hangul filler (a letter, by its category)
        "\u3164\u115f",
        "\u2800",  # the blank Braille pattern (a symbol)
        "\ufe0f\ufe0f",  # variation selectors, with nothing to vary
        "\u0301\u0301\u0301",  # accents on nothing
    ],
)
def test_a_message_or_answer_of_invisible_characters_is_blank(invisible: str) -> None:
    """Found by a walkthrough: a zero-width space answered a question (and used it up),
    and NUL or a BOM started a run, though a person sees nothing in them. Found by a
    hostile review: two Hangul fillers as answers handed the run to a person, and marks
    alone or the blank Braille pattern started runs."""
    from corral.inputs import require_words

    with pytest.raises(InvalidInputError, match="nothing a person can see"):
        require_words(invisible, "the answer")
    assert require_words("\u200bHD20240501", "the answer")  # with text, it is text
    for text in ("e\u0301", "\u3164好", "👍\ufe0f", "\u0e01\u0e31"):  # marks on letters
        assert require_words(text, "the answer") == text


@pytest.mark.parametrize("blank", ["", " ", "\u200b", "\u3164"])
def test_a_blank_session_id_is_refused_before_anything_is_recorded(
    blank: str, tmp_path: Path
) -> None:
    """Found by a hostile review: ``session_id: " "`` was a session like any other, so two
    clients that each sent it shared one: the second's "好的" approved the first's refund.
    ``""`` was stored as a session id that no follow-up reached and no listing found."""
    from tests.serving import client, load, serving

    store = MemoryStore()
    runtime = Runtime(load_agent(AFTERSALES, data_dir=tmp_path / "data"), store)
    with pytest.raises(InvalidInputError, match="the session id is blank"):
        asyncio.run(runtime.start(ASK, session_id=blank))
    assert store.list_runs(10) == []
    agent = load(AFTERSALES, tmp_path / "home")
    with serving(agent, home=tmp_path / "home") as base, client(base) as http:
        answer = http.post("/agents/aftersales/runs", json={"message": ASK, "session_id": blank})
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["code"] == "INVALID_INPUT"
        assert http.get("/runs").json()["runs"] == []


def test_a_session_id_a_store_cannot_keep_is_refused_before_anything_is_recorded(
    tmp_path: Path,
) -> None:
    """Found by a walkthrough: a 250-character session id was taken (SQLite keeps it; a
    PostgreSQL store's column holds 128, so the run's first save failed there), and
    ``GET /runs?session_id=`` refused it, so the conversation could not be listed."""
    store = MemoryStore()
    runtime = Runtime(load_agent(AFTERSALES, data_dir=tmp_path / "data"), store)
    with pytest.raises(InvalidInputError, match="the session id has 250 characters, over 128"):
        asyncio.run(runtime.start(ASK, session_id="u" * 250))
    assert store.list_runs(10) == []
    done = asyncio.run(runtime.start(ASK, session_id="u" * 128))
    assert done.run_id


def test_an_answer_to_a_run_that_waits_for_a_confirmation_says_so(tmp_path: Path) -> None:
    """Found by a walkthrough: after its question was answered, the run asked for a
    confirmation; an answer then got "the question of run ... was answered", as if
    someone else had answered, where the run waits for an approval."""
    from tests.conftest import ORDERS

    store = MemoryStore()
    runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path / "data"), store)

    async def scenario() -> None:
        asked = await runtime.start("退货")
        paused = await runtime.resume(asked.run_id, answer="OD2611200002")
        assert paused.status is RunStatus.AWAITING_CONFIRM
        with pytest.raises(RunNotResumableError) as info:
            await runtime.resume(asked.run_id, answer="确认")
        assert "waits for a confirmation" in info.value.message
        again = await runtime.resume(asked.run_id, answer="OD2611200002")  # a double click
        assert again.status is RunStatus.AWAITING_CONFIRM

    asyncio.run(scenario())


def test_chat_takes_confirm_words_and_asks_again_on_cancel_to_a_cancellation(
    tmp_path: Path,
) -> None:
    """Found by a walkthrough: "cancel" said to "Cancel order X?" rejected it (the order
    stayed), and "confirm", "确定" and "同意" were not taken as yes. An unclear answer is
    asked again with the question itself, so the person sees what they confirm."""
    from tests.conftest import ORDERS

    english = corral_cli(
        tmp_path / "en",
        "chat",
        str(ORDERS),
        stdin="cancel order OD2611280008\ncancel\nconfirm\n/quit\n",
    )
    assert "agent> Please answer yes or no (是 / 不): Cancel order OD2611280008" in english.stdout
    assert "state: finished" in english.stdout and "Nothing was changed" not in english.stdout
    chinese = corral_cli(
        tmp_path / "zh", "chat", str(ORDERS), stdin="取消订单 OD2611280008\n确定\n/quit\n"
    )
    assert "已经取消" in chinese.stdout


def test_an_answer_written_for_a_question_already_answered_is_not_applied_to_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review of 84e7661: a client that looked while another's answer was being driven
    (the run parsing it) and answered too had its answer, written for the first
    question, recorded as the answer to the question the run asked next."""
    from tests.conftest import ORDERS

    store = MemoryStore()
    runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path / "data"), store)

    async def scenario() -> None:
        asked = await runtime.start("退货")
        again = await runtime.resume(asked.run_id, answer="我不记得了")  # client A
        assert again.status is RunStatus.AWAITING_USER  # it asks for the order id again
        events = store.load_events(asked.run_id)
        parsing = next(e.seq for e in events if e.seq > 8 and e.type.value == "status_changed")
        real = store.load_events
        looks: list[int] = []

        def load_events(run_id: str) -> list[Event]:  # client B looked mid-drive
            looks.append(1)
            found = real(run_id)
            return [e for e in found if e.seq <= parsing] if len(looks) == 1 else found

        monkeypatch.setattr(store, "load_events", load_events)
        with pytest.raises(RunNotResumableError, match="was answered"):
            await runtime.resume(asked.run_id, answer="OD2611200002")  # client B
        assert len(real(asked.run_id)) == len(events)  # nothing recorded

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("line", "meant"),
    [
        ("yes please", True),
        ("Yes, go ahead!", True),
        ("好的，换吧", True),
        ("好吧", True),
        ("no problem", True),
        ("go ahead", True),
        ("no thanks", False),
        ("不用了", False),
        ("算了吧", False),
        ("不要了。", False),
        ("maybe later", None),
        ("not now", None),
        ("是不是要等很久", None),
        ("？？", None),
        # review of ed55743: a first word alone decided lines that decide nothing
        ("no problem, go ahead", True),
        ("no worries", None),
        ("对了，运费谁出？", None),
        ("嗯，我再想想", None),
        ("好，我再考虑一下", None),
        ("是的，确认", True),
        # a walkthrough: "不确认" at the prompt was answered "didn't understand"
        ("不确认", False),
        ("别确认。", False),
        ("don't confirm", False),
        ("先别确认", None),  # a deferral is asked again, not declined
        ("don't confirm yet", None),
    ],
)
def test_a_confirmation_is_answered_by_its_first_word_with_particles_left_out(
    line: str, meant: bool | None
) -> None:
    """Found by a walkthrough: only exact words were taken ("yes please", "不用了" and
    "好的，换吧" were asked again)."""
    from corral.cli.conversation import confirmation_answer as yes_or_no

    assert yes_or_no(line) is meant


def test_chat_takes_a_second_unclear_line_as_a_new_message_and_chats_are_apart(
    tmp_path: Path,
) -> None:
    """Found by a walkthrough: a new request typed at a confirmation was asked about again
    and again (only /quit left); and two chats started in the same second shared one
    session, the second user's run carrying the first one's order id."""
    english = "Order HD20240501: my printer is broken, I want a replacement"
    done = corral_cli(
        tmp_path / "en",
        "chat",
        str(AFTERSALES),
        stdin=f"{english}\nwhat?\nHow long is the warranty of a printer?\n",
    )
    assert done.stdout.count("Please answer yes or no") == 1
    assert "the confirmation is left waiting: corral resume run_" in done.stdout
    assert f"--home {tmp_path / 'en'} --approve" in done.stdout  # the run's own home
    assert done.stdout.count("state: ") == 2  # the question asked once, then a new run
    home = tmp_path / "two"
    first = corral_cli(home, "chat", str(AFTERSALES), stdin="HD20240501 的打印机坏了要报修\n")
    second = corral_cli(home, "chat", str(AFTERSALES), stdin="能换新吗\n")
    sessions = [out.stdout.split()[1] for out in (first, second)]
    assert sessions[0] != sessions[1]
    assert "entities -" in second.stdout and "order_id=HD20240501" not in second.stdout
    approved = corral_cli(
        tmp_path / "yes", "chat", str(AFTERSALES), stdin=f"{english}\nyes please\n"
    )
    assert "state: finished" in approved.stdout and "Please answer" not in approved.stdout


def test_an_answer_to_an_ended_run_says_it_ended(tmp_path: Path) -> None:
    """Review of b7956b3: an answer to a run that had ended (or was interrupted) was told
    "the question ... was answered", without check_input's words and hint."""
    from tests.conftest import ORDERS

    runtime = Runtime(load_agent(ORDERS, data_dir=tmp_path / "data"), MemoryStore())

    async def scenario() -> None:
        asked = await runtime.start("退货")
        paused = await runtime.resume(asked.run_id, answer="OD2611200002")
        ended = await runtime.resume(paused.run_id, approve=False)
        assert ended.status is RunStatus.FINISHED
        with pytest.raises(RunNotResumableError, match="has already ended"):
            await runtime.resume(asked.run_id, answer="OD2611100003")

    asyncio.run(scenario())


def test_a_decision_naming_a_step_of_an_ended_run_says_it_ended(tmp_path: Path) -> None:
    """Found by a new user's walkthrough: ``resume --approve --step s4`` of a run that had
    ended was told it "does not wait for a confirmation of step s4", hinting "approve what
    it asks now"; without ``--step`` it said the run had ended."""
    done = corral_cli(tmp_path, "run", str(AFTERSALES), "订单 HD20241111 坏了，想换新", "--json")
    ended = json.loads(done.stdout)
    assert ended["status"] == "finished"  # out of warranty: refused, nothing to approve
    for step in (["--step", "s4"], []):
        error = refused(tmp_path, "resume", ended["run_id"], "--approve", *step)
        assert error["code"] == "RUN_NOT_RESUMABLE"
        assert "has already ended (finished)" in error["message"], error


def test_a_resume_of_an_ended_run_is_not_busy_while_another_holds_it(tmp_path: Path) -> None:
    """Found by a hostile review: eight resumes at once of a finished run answered four
    ``RUN_NOT_RESUMABLE`` and four ``RUN_BUSY`` (retryable, for a run that had ended): a
    resume took the run's lease before it saw the run had ended, and held it while the
    others came. A double click of the approval that ended it still gets its summary."""
    from corral.store.base import Lease

    store = MemoryStore()
    runtime = Runtime(load_agent(AFTERSALES, data_dir=tmp_path / "data"), store)

    async def scenario() -> None:
        paused = await runtime.start(EXCHANGE)
        done = await runtime.resume(paused.run_id, approve=True)
        assert done.status is RunStatus.FINISHED
        store.acquire_lease(Lease(done.run_id, "a-resume-beside-this-one", ttl_s=30))
        for given in ({}, {"answer": "HD20240501"}, {"approve": False}):
            with pytest.raises(RunNotResumableError, match=r"has already ended|decided"):
                await runtime.resume(done.run_id, **given)
        again = await runtime.resume(done.run_id, approve=True)
        assert again.status is RunStatus.FINISHED and again.reply == done.reply

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("line", "meant"),
    [("ＯＫ", True), ("ｏｋ", True), ("ＹＥＳ", True), ("Ｙｅｓ．", True), ("ｎｏ", False)],
)
def test_a_full_width_yes_or_no_is_read_as_typed_in_ascii(line: str, meant: bool) -> None:
    """Found by a walkthrough: a phone's full-width ``ＯＫ`` started a new run and left the
    confirmation waiting, where intent rules read full-width letters as ASCII."""
    from corral.cli.conversation import confirmation_answer as yes_or_no
    from corral.intent.confirmation import withdraws

    assert yes_or_no(line) is meant
    assert withdraws("ｎｅｖｅｒ ｍｉｎｄ") and withdraws("don’t bother")


async def test_a_full_width_ok_approves_the_sessions_confirmation(tmp_path: Path) -> None:
    runtime = Runtime(load_agent(AFTERSALES, data_dir=tmp_path / "data"), MemoryStore())
    paused = await runtime.start(EXCHANGE, session_id="phone")
    assert paused.status is RunStatus.AWAITING_CONFIRM
    done = await runtime.start("ＯＫ", session_id="phone")
    assert done.run_id == paused.run_id and done.status is RunStatus.FINISHED


@pytest.mark.parametrize("given", [b"hi", None, 5])
async def test_a_message_that_is_no_text_has_a_stable_code(given: object, tmp_path: Path) -> None:
    """Found by a walkthrough: ``Runtime.start(b"hi")`` or ``start(None)`` raised a bare
    ``AttributeError: 'bytes' object has no attribute 'encode'``."""
    store = MemoryStore()
    runtime = Runtime(load_agent(AFTERSALES, data_dir=tmp_path / "data"), store)
    with pytest.raises(InvalidInputError, match=r"the message is (bytes|None|int), not text"):
        await runtime.start(given)  # type: ignore[arg-type]
    if given is not None:  # None: no session id, no answer
        with pytest.raises(InvalidInputError, match="the session id is"):
            await runtime.start("hi", session_id=given)  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError, match="the answer is"):
            await runtime.resume("run_x", answer=given)  # type: ignore[arg-type]
    assert store.list_runs(10) == []


async def test_the_reply_names_the_order_the_write_went_to_after_a_correction(
    tmp_path: Path,
) -> None:
    """Found by a conversation walkthrough: asked for the new address, the customer named
    another order; the run took it (a correction, as the prompt then showed), and the
    write went to it, but the reply named the first order: the answer that first gave the
    order id had written it as a fact too, and replies read facts first."""
    import sqlite3

    from tests.conftest import ORDERS

    agent = load_agent(ORDERS, data_dir=tmp_path / "data")
    runtime = Runtime(agent, MemoryStore())
    for line in ["我想改一下收货地址", "OD2611250001", "不对，是 OD2611280008"]:
        asked = await runtime.start(line, session_id="c1")
    assert asked.status is RunStatus.AWAITING_USER
    prompt = await runtime.start("上海市静安区南京西路1号", session_id="c1")
    assert "OD2611280008" in (prompt.reply or "")  # what the person approves
    done = await runtime.start("好的", session_id="c1")
    assert done.status is RunStatus.FINISHED
    assert "OD2611280008" in (done.reply or "") and "OD2611250001" not in (done.reply or "")
    with sqlite3.connect(tmp_path / "data" / "orders.db") as conn:
        written = conn.execute("SELECT order_id FROM address_changes").fetchall()
    assert written == [("OD2611280008",)]
    # "查一下另一个订单 OD… 到哪了" there asks where that order is (orders' questions
    # interrupt): it is answered, and the address change stays with its order
    for line in ["我想改一下收货地址", "OD2611250001"]:
        asked = await runtime.start(line, session_id="c2")
    tracked = await runtime.start("查一下另一个订单 OD2611280008 到哪了", session_id="c2")
    assert tracked.run_id != asked.run_id and "还在等您回复" in (tracked.reply or "")
    prompt = await runtime.start("上海市静安区南京西路1号", session_id="c2")
    assert prompt.run_id == asked.run_id and "OD2611250001" in (prompt.reply or "")
