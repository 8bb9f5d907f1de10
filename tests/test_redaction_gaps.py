"""Redaction gaps a reviewer found: vendor tokens, basic credentials, key words in Chinese,
whole values after a key word, numbers written with separators or in full-width forms.

Each case sends a message holding the secret through ``corral run`` in a fresh process,
then reads the run back every way a person can: the JSONL file, ``traces``, ``show`` and
``handoff`` (the complaint is handed off, so a packet exists).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corral.observe.redact import redact_builtin
from tests.conftest import AFTERSALES
from tests.helpers import corral_cli
from tests.test_security import COMPLAINT, everything_shown


def full_width(text: str) -> str:
    """``text`` with ASCII letters, digits and signs in their full-width forms."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


GAPS = {
    "github tokens": (
        "我的令牌 ghp_{a} 还有 gho_{b} 和 github_pat_{c}".format(
            a="A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
            b="Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2",
            c="11ABCDEFG0abcdefghijkl_" + "x1Y2z3" * 10,
        ),
        [
            "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
            "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2",
            "11ABCDEFG0abcdefghijkl",
        ],
    ),
    "aws access key": ("key id AKIAIOSFODNN7EXAMPLE 在这里", ["IOSFODNN7EXAMPLE"]),
    "slack token": ("slack xoxb-123456789012-abcdefABCDEF 发给你", ["123456789012-abcdef"]),
    "jwt": (
        "登录后拿到 eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ3YW5nIn0.SflKxwRJSMeKKF2QT4fwpM 了",
        ["eyJzdWIiOiJ3YW5nIn0", "SflKxwRJSMeKKF2QT4fwpM"],
    ),
    "basic credentials": (
        "请求头 Authorization: Basic dXNlcjpodW50ZXIy 还有 Basic QWxhZGRpbjpvcGVu 都不行",
        ["dXNlcjpodW50ZXIy", "QWxhZGRpbjpvcGVu"],
    ),
    "chinese key words": (
        "密码：Hunter2pass，支付密码是 Qq778899，口令为Swordfish9，验证码 845512，"
        "token：tk9Zx81Lm0，api key: akQ71mmZp3，password: correct horse",
        ["Hunter2pass", "Qq778899", "Swordfish9", "845512", "tk9Zx81Lm0", "akQ71mmZp3", "horse"],
    ),
    "phones with separators": (
        "电话 139.2234.5678 或 137-3234-5678 或 136 4234 5678 或 １３５５２３４５６７８",
        ["2234.5678", "3234-5678", "4234 5678", "５５２３４５６７８"],
    ),
    "id number with spaces": ("身份证 110105 19491231 002X 核对一下", ["19491231"]),
    "full-width forms": (
        "邮箱 ｗａｎｇ＠ｅｘａｍｐｌｅ．ｃｏｍ，身份证 " + full_width("11010519491231002X"),
        ["ｗａｎｇ", full_width("19491231")],
    ),
}


@pytest.mark.parametrize("case", list(GAPS), ids=list(GAPS))
def test_the_secret_is_hidden_everywhere_a_person_reads(tmp_path: Path, case: str) -> None:
    message, needles = GAPS[case]
    done = corral_cli(tmp_path, "run", str(AFTERSALES), COMPLAINT + message, "--json")
    data = json.loads(done.stdout)
    assert data["status"] == "handed_off"
    shown = everything_shown(tmp_path, data["run_id"], handed_off=True)
    for where, text in shown.items():
        for needle in needles:
            assert needle not in text, f"{needle!r} shown by {where}"
    assert "[" in shown["traces --json"]  # a marker took its place


@pytest.mark.parametrize(
    "text",
    [
        "订单号 HD20240501 和 A12 都是我的",
        "basic information about Basic Income",
        "验证码发给你了",
    ],
)
def test_ordinary_text_keeps_its_order_ids_and_words(text: str) -> None:
    shown = redact_builtin(text)
    for word in ("HD20240501", "A12", "information", "Income", "发给你了"):
        if word in text:
            assert word in shown


def test_a_value_after_a_key_word_is_hidden_to_a_delimiter_and_bounded() -> None:
    assert redact_builtin("password: correct horse battery。好的") == "password: [SECRET]。好的"
    assert redact_builtin("密码是 abc.def! 还有") == "密码是 [SECRET]! 还有"
    long = "password: " + "w" * 100
    assert redact_builtin(long) == "password: [SECRET]" + "w" * 36


def test_corral_ids_whose_hex_reads_as_a_phone_number_are_shown_as_they_are() -> None:
    """``run_4e8ea16133994260`` holds ``16133994260``, a mobile number's shape: it was
    shown as ``run_4e8ea[PHONE]`` in handoff packets and API answers (seen in CI)."""
    from corral.observe.redact import Redactor

    shown = Redactor().value(
        {
            "run_id": "run_4e8ea16133994260",
            "trace_id": "trace_4e8ea16133994260",
            "note": "call 16133994260",
            "session_id": "wx-16133994260",
        }
    )
    assert shown["run_id"] == "run_4e8ea16133994260"
    assert shown["trace_id"] == "trace_4e8ea16133994260"
    assert shown["note"] == "call [PHONE]"
    assert shown["session_id"] == "wx-[PHONE]"  # a session id is the caller's: redacted
    forged = Redactor().value({"run_id": "run_ 16133994260"})  # not an id corral makes
    assert forged["run_id"] != "run_ 16133994260"
