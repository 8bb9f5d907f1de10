"""A thanks or a goodbye is answered as one, in every example, and a question waits for it.

Found by a walkthrough: in orders and aftersales "谢谢" got what the desk can do, and
"thx", "再见" or "bye" were asked what the customer wanted: a question that then caught
the customer's next message. Triage read thanks but not a goodbye.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import AFTERSALES, ORDERS, ROOT
from tests.helpers import run_cli_json

TRIAGE = ROOT / "examples" / "triage"


def _say(home: Path, agent: Path, message: str) -> dict[str, Any]:
    return run_cli_json(home, agent, message, "--session", "c1")


@pytest.mark.parametrize("agent", [ORDERS, AFTERSALES, TRIAGE], ids=lambda p: p.name)
@pytest.mark.parametrize(
    ("line", "intent", "said"),
    [
        ("谢谢", "致谢", "不客气"),
        ("thx", "致谢", "welcome"),
        ("再见", "告别", "再见"),
        ("ok thanks, bye!", "告别", "Goodbye"),
        # a walkthrough: with an emoji, a tilde or as "88" they were not understood
        ("谢谢🙏", "致谢", "不客气"),
        ("Thanks 😊", "致谢", "welcome"),
        ("再见👋", "告别", "再见"),
        ("bye~", "告别", "Goodbye"),
        ("88", "告别", "再见"),
    ],
)
def test_a_thanks_or_goodbye_is_answered_and_nothing_is_asked(
    agent: Path, line: str, intent: str, said: str, tmp_path: Path
) -> None:
    reply = _say(tmp_path, agent, line)
    assert reply["status"] == "finished" and reply["intent"]["label"] == intent
    assert said in reply["reply"] and reply["pending"] is None


@pytest.mark.parametrize("line", ["谢谢", "bye"])
def test_at_an_order_id_question_it_is_answered_and_the_question_waits(
    line: str, tmp_path: Path
) -> None:
    asked = _say(tmp_path, ORDERS, "我要退款")
    assert asked["status"] == "awaiting_user"
    aside = _say(tmp_path, ORDERS, line)
    assert aside["run_id"] != asked["run_id"] and aside["status"] == "finished"
    assert "还在等您回复" in aside["reply"]
    answered = _say(tmp_path, ORDERS, "OD2611100003")
    assert answered["run_id"] == asked["run_id"]
    assert answered["status"] == "awaiting_confirm" and "699" in answered["reply"]


@pytest.mark.parametrize("line", ["谢谢", "再见", "bye"])
def test_at_the_new_address_question_it_is_no_address(line: str, tmp_path: Path) -> None:
    """A walkthrough: the address question takes free text, and "再见" became the new
    address of OD2611250001 ("确认把…收货地址改成「再见」吗？"); "谢谢" was asked again."""
    asked = _say(tmp_path, ORDERS, "OD2611250001 改地址")
    assert asked["status"] == "awaiting_user"
    aside = _say(tmp_path, ORDERS, line)
    assert aside["run_id"] != asked["run_id"] and aside["status"] == "finished"
    assert "还在等您回复" in aside["reply"] and "地址改成" not in aside["reply"]
    answered = _say(tmp_path, ORDERS, "北京市海淀区中关村大街1号")
    assert answered["run_id"] == asked["run_id"] and answered["status"] == "awaiting_confirm"
    assert "「北京市海淀区中关村大街1号」" in answered["reply"]
