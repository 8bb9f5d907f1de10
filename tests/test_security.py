"""Security and privacy: redaction everywhere a person reads, private files, signed models,
hostile text and paths refused cleanly."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import pickle
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from typer.testing import CliRunner

from corral import (
    Agent,
    MemoryStore,
    RunStatus,
    Runtime,
    Sensitive,
    SqlStore,
    load_agent,
    parse_config,
    tool,
)
from corral.cli import app
from corral.errors import InvalidInputError
from corral.intent.classifier import content_hash, train_cached
from corral.intent.datasets import LabelledTexts
from corral.observe.redact import id_number_valid, luhn_valid
from tests.conftest import AFTERSALES, ORDERS, ROOT
from tests.helpers import corral_cli

COMPLAINT = "你们这个打印机真是气死我了！"
EXCHANGE = "我的打印机上周坏了，订单号 HD20240501，能换新吗？"
DIGITS = "0123456789"
ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


# ---------------------------------------------------------------- generated secrets


@st.composite
def cn_mobile(draw: st.DrawFn) -> tuple[str, str]:
    number = "1" + draw(st.sampled_from("3456789")) + draw(st.text(DIGITS, min_size=9, max_size=9))
    prefix = draw(st.sampled_from(["", "+86 ", "+86", "0086 "]))
    return prefix + number, number


@st.composite
def intl_phone(draw: st.DrawFn) -> tuple[str, str]:
    country = draw(st.sampled_from(["1", "44", "49", "33", "81", "852", "971"]))
    rest = draw(st.sampled_from("23456789")) + draw(st.text(DIGITS, min_size=7, max_size=10))
    return f"+{country} {rest}", rest


@st.composite
def email(draw: st.DrawFn) -> tuple[str, str]:
    local = draw(st.sampled_from("abcxyz")) + draw(
        st.text("abcdefghijklmnopqrstuvwxyz0123456789._", max_size=12)
    )
    host = draw(st.text("abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=10))
    address = f"{local}@{host}.{draw(st.sampled_from(['com', 'cn', 'org', 'io']))}"
    return address, address


@st.composite
def id_number(draw: st.DrawFn) -> tuple[str, str]:
    body = draw(st.sampled_from("123456")) + draw(st.text(DIGITS, min_size=16, max_size=16))
    number = next(body + c for c in "0123456789X" if id_number_valid(body + c))
    return number, number


@st.composite
def card_number(draw: st.DrawFn) -> tuple[str, str]:
    body = draw(st.sampled_from("3456")) + draw(st.text(DIGITS, min_size=11, max_size=17))
    number = next(body + c for c in DIGITS if luhn_valid(body + c))
    return number, number


@st.composite
def api_key(draw: st.DrawFn) -> tuple[str, str]:
    key = "sk-" + draw(st.text(ALNUM, min_size=16, max_size=40))
    return key, key


@st.composite
def bearer(draw: st.DrawFn) -> tuple[str, str]:
    token = draw(st.text(ALNUM + "._-", min_size=12, max_size=40))
    token = "t" + token
    return f"Authorization: Bearer {token}", token


@st.composite
def vendor_token(draw: st.DrawFn) -> tuple[str, str]:
    """GitHub, AWS, Slack tokens and JWTs: the needle is the part after the fixed prefix."""
    kind = draw(st.sampled_from(["github", "github_pat", "aws", "slack", "jwt"]))
    if kind == "github":
        body = draw(st.text(ALNUM, min_size=36, max_size=36))
        return draw(st.sampled_from(["ghp_", "gho_", "ghs_"])) + body, body
    if kind == "github_pat":
        body = draw(st.text(ALNUM + "_", min_size=30, max_size=60))
        return "github_pat_" + body, body
    if kind == "aws":
        body = draw(st.text(ALNUM[26:], min_size=16, max_size=16))
        return draw(st.sampled_from(["AKIA", "ASIA"])) + body, body
    if kind == "slack":
        body = draw(st.text(ALNUM + "-", min_size=12, max_size=40))
        return "xox" + draw(st.sampled_from("abprs")) + "-" + body, body
    part = st.text(ALNUM + "_-", min_size=8, max_size=30)
    claims, signature = draw(part), draw(part)
    if not any(c.isdigit() for c in claims):
        # letters alone (with _ or -) can be a part of what the output says itself
        # ("xchange_" of the tool create_exchange_order): see keyed_value
        claims += "7"
    return f"eyJhbGciOi{draw(part)}.eyJ{claims}.{signature}", claims


@st.composite
def basic_auth(draw: st.DrawFn) -> tuple[str, str]:
    raw = draw(st.binary(min_size=6, max_size=30))
    token = base64.b64encode(raw).decode("ascii")
    prefix = draw(st.sampled_from(["Authorization: Basic ", "authorization=basic ", "Basic "]))
    if prefix == "Basic " and token.isalpha() and token.lower() == token:
        token += "0"  # a bare "basic word" is ordinary text, not a credential
    return prefix + token, token


@st.composite
def keyed_value(draw: st.DrawFn) -> tuple[str, str]:
    """A key word (English or Chinese) and a value of one to three words after it."""
    key = draw(
        st.sampled_from(
            [
                "password: ",
                "password=",
                "my password is ",
                "密码：",
                "密码是 ",
                "密码是",
                "支付密码为",
                "口令：",
                "验证码 ",
                "验证码：",
                "token：",
                "api key: ",
                "API_KEY=",
            ]
        )
    )
    words = draw(st.lists(st.text(ALNUM, min_size=8, max_size=12), min_size=1, max_size=3))
    if words[-1].isalpha():
        # a value of letters alone can be a word the output says itself ("succeeded" holds
        # "succeede"): the substring check below could not tell the two apart
        words[-1] += "7"
    return key + " ".join(words), words[-1]


@st.composite
def separated_number(draw: st.DrawFn) -> tuple[str, str]:
    """A Chinese mobile (3-4-4) or ID number (6-8-4) written with separators."""
    if draw(st.booleans()):
        number, _ = draw(cn_mobile())
        number = number[-11:]
        groups = [number[:3], number[3:7], number[7:]]
    else:
        number, _ = draw(id_number())
        groups = [number[:6], number[6:14], number[14:]]
    shown = draw(st.sampled_from([" ", "-", "."])).join(groups)
    return shown, shown


@st.composite
def full_width(draw: st.DrawFn) -> tuple[str, str]:
    """A phone, ID number or e-mail address in full-width forms (what CJK keyboards type)."""
    text, _ = draw(st.one_of(cn_mobile(), id_number(), email()))
    wide = "".join(
        chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else "\u3000" if c == " " else c for c in text
    )
    return wide, wide


SECRET = st.one_of(
    cn_mobile(),
    intl_phone(),
    email(),
    id_number(),
    card_number(),
    api_key(),
    bearer(),
    vendor_token(),
    basic_auth(),
    keyed_value(),
    separated_number(),
    full_width(),
)
FILLER = st.text("我的打印机订单请联系 abc,.!？", max_size=8)


@pytest.fixture(scope="module")
def aftersales_agent(tmp_path_factory: pytest.TempPathFactory) -> Agent:
    return load_agent(AFTERSALES, data_dir=tmp_path_factory.mktemp("business"))


def cli(*args: str) -> str:
    done = CliRunner().invoke(app, list(args))
    assert done.exit_code == 0, done.output
    return done.output


def everything_shown(home: Path, run_id: str, handed_off: bool) -> dict[str, str]:
    """Every place a person reads a run, as text."""
    h = ("--home", str(home))
    shown = {
        "jsonl": (home / "logs" / f"{run_id}.jsonl").read_text("utf-8"),
        "traces --json": cli("traces", run_id, "--json", *h),
        "traces": cli("traces", run_id, *h),
        "show": cli("show", run_id, *h),
        "show --json": cli("show", run_id, "--json", *h),
    }
    if handed_off:
        shown["handoff --json"] = cli("handoff", run_id, "--json", *h)
        shown["handoff"] = cli("handoff", run_id, *h)
    return shown


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    secrets=st.lists(SECRET, min_size=1, max_size=4),
    fillers=st.lists(FILLER, min_size=5, max_size=5),
    opening=st.sampled_from([COMPLAINT, EXCHANGE]),
)
def test_no_generated_secret_survives_into_any_output(
    aftersales_agent: Agent,
    tmp_path: Path,
    secrets: list[tuple[str, str]],
    fillers: list[str],
    opening: str,
) -> None:
    # secrets glued to the words before them, then punctuation, as people type
    message = opening + "".join(
        f"{filler}{text}，"
        for (text, _), filler in zip(secrets, fillers[: len(secrets)], strict=True)
    )
    home = Path(tempfile.mkdtemp(dir=tmp_path))
    runtime = Runtime(aftersales_agent, SqlStore.open(home / "corral.db"), log_dir=home / "logs")
    summary = asyncio.run(runtime.start(message))
    shown = everything_shown(home, summary.run_id, summary.handoff is not None)
    for where, text in shown.items():
        for _, needle in secrets:
            assert needle not in text, f"{needle!r} shown by {where}"
    markers = ("[PHONE]", "[EMAIL]", "[ID_NUMBER]", "[CARD]", "[API_KEY]", "[SECRET]")
    assert any(marker in shown["traces --json"] for marker in markers)
    stored = [e.data for e in asyncio.run(runtime.events(summary.run_id))]
    assert secrets[0][1] in json.dumps(stored, ensure_ascii=False)  # the store keeps values


# ---------------------------------------------------------------- Sensitive() fields


class Holder(BaseModel):
    holder: Annotated[str, Sensitive()]
    checked: bool


def sensitive_agent() -> Agent:
    @tool
    def verify_holder(holder: Annotated[str, Sensitive()]) -> Holder:
        """Check the card holder's name."""
        return Holder(holder=holder, checked=True)

    @tool
    def charge(note: str) -> Holder:
        """Charge the card (fails: the bank is down)."""
        raise ValueError("bank unavailable")

    config = parse_config(
        {
            "name": "test",
            "entities": {"holder": {"kind": "pattern", "patterns": [r"holder (\w+)"]}},
            "intents": [
                {"name": "do", "rules": [{"keywords": ["go"]}], "plan": "p", "reply": "done"}
            ],
            "plans": {
                "p": {
                    "steps": [
                        {
                            "id": "s1",
                            "tool": "verify_holder",
                            "args": {"holder": "$entities.holder"},
                        },
                        {"id": "s2", "tool": "charge", "args": {"note": "x"}, "depends_on": ["s1"]},
                    ]
                }
            },
            "templates": {"done": {"zh": "完成", "en": "done"}},
            "redaction": {"patterns": [r"VIP-\d{4}"]},
        }
    )
    return Agent.build(config, [verify_holder, charge])


def test_sensitive_fields_and_configured_patterns_are_redacted(tmp_path: Path) -> None:
    runtime = Runtime(
        sensitive_agent(), SqlStore.open(tmp_path / "corral.db"), log_dir=tmp_path / "logs"
    )
    summary = asyncio.run(runtime.start("go holder Wangxiaoming, member VIP-1234"))
    assert summary.handoff is not None
    shown = everything_shown(tmp_path, summary.run_id, handed_off=True)
    for where, text in shown.items():
        assert "Wangxiaoming" not in text, where
        assert "VIP-1234" not in text, where
    assert "[REDACTED]" in shown["jsonl"] and "[REDACTED]" in shown["handoff --json"]
    packet = SqlStore.open(tmp_path / "corral.db").get_handoff(summary.run_id)
    assert packet is not None and "Wangxiaoming" not in packet.model_dump_json()
    stored = json.dumps([e.data for e in asyncio.run(runtime.events(summary.run_id))])
    assert "Wangxiaoming" in stored  # the tool needs it on resume


# ---------------------------------------------------------------- pickles


class Planted:
    """Unpickling this runs code: it creates the marker folder."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.mkdir, (str(self.marker),))


def small_corpus() -> LabelledTexts:
    texts = [f"track parcel {i}" for i in range(6)] + [f"refund money {i}" for i in range(6)]
    return LabelledTexts(texts, ["track"] * 6 + ["refund"] * 6)


def test_a_planted_cache_pickle_is_not_executed_and_is_refitted(tmp_path: Path) -> None:
    from corral.intent.classifier import ClassifierSettings

    data = small_corpus()
    marker = tmp_path / "pwned"
    cached = tmp_path / "cache" / f"intent-{content_hash(data, ClassifierSettings())}.pkl"
    cached.parent.mkdir()
    cached.write_bytes(pickle.dumps(Planted(marker)))
    model = train_cached(data, tmp_path / "cache")
    assert not marker.exists()
    assert set(model.labels) == {"track", "refund"}
    assert not cached.read_bytes().startswith(b"\x80")  # replaced by a signed entry
    assert train_cached(data, tmp_path / "cache").labels == model.labels  # and reused


def test_a_planted_model_file_is_refused_by_intent_eval(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    planted = tmp_path / "m.pkl"
    planted.write_bytes(pickle.dumps(Planted(marker)))
    (tmp_path / "test.csv").write_text("text,label\nhello,greet\nbye,leave\n", "utf-8")
    done = corral_cli(
        tmp_path / "home",
        "intent",
        "eval",
        str(tmp_path / "test.csv"),
        "--model",
        str(planted),
        ok=False,
    )
    assert done.returncode == 2 and "CONFIG_INVALID" in done.stderr
    assert not marker.exists()


# ---------------------------------------------------------------- permissions


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_home_logs_and_caches_are_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    data = json.loads(corral_cli(home, "run", str(ORDERS), "where is my parcel", "--json").stdout)
    assert mode(home) == 0o700
    assert mode(home / "logs") == 0o700 and mode(home / "cache") == 0o700
    assert mode(home / "logs" / f"{data['run_id']}.jsonl") == 0o600
    assert mode(home / "cache" / "signing.key") == 0o600
    # the agent's business data (a customer's address) too: they were 0755 by the umask
    assert mode(home / "data") == 0o700 and mode(home / "data" / "orders") == 0o700
    cached = list((home / "cache").glob("*.pkl"))
    assert cached and all(mode(p) == 0o600 for p in cached)
    home.chmod(0o755)  # a home made by an older corral
    corral_cli(home, "runs")
    assert mode(home) == 0o700


# ---------------------------------------------------------------- hostile text


def bad_bytes(text: str) -> str:
    """Invalid UTF-8, as Python hands it over from argv: lone surrogates."""
    return b"\xff\xfe".decode("utf-8", "surrogateescape") + text


def test_invalid_utf8_in_a_message_or_an_answer_is_invalid_input(tmp_path: Path) -> None:
    done = corral_cli(tmp_path, "run", str(AFTERSALES), bad_bytes("换新"), "--json", ok=False)
    assert done.returncode == 2 and json.loads(done.stdout)["error"]["code"] == "INVALID_INPUT"
    assert json.loads(corral_cli(tmp_path, "runs", "--json").stdout) == []
    asked = json.loads(
        corral_cli(tmp_path, "run", str(AFTERSALES), "我想申请换新", "--json").stdout
    )
    done = corral_cli(
        tmp_path, "run", str(AFTERSALES), "你好", "--session", bad_bytes("s"), ok=False
    )
    assert done.returncode == 2 and "INVALID_INPUT" in done.stderr
    done = corral_cli(tmp_path, "resume", asked["run_id"], "--answer", bad_bytes("HD"), ok=False)
    assert done.returncode == 2 and "INVALID_INPUT" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_library_refuses_surrogates_before_storing_anything(aftersales_agent: Agent) -> None:
    store = MemoryStore()
    runtime = Runtime(aftersales_agent, store)
    with pytest.raises(InvalidInputError):
        asyncio.run(runtime.start(bad_bytes("换新")))
    assert store.list_runs() == []
    asked = asyncio.run(runtime.start("我想申请换新"))
    with pytest.raises(InvalidInputError):
        asyncio.run(runtime.resume(asked.run_id, answer=bad_bytes("HD")))
    assert asyncio.run(runtime.summary(asked.run_id)).status is RunStatus.AWAITING_USER


def test_chat_reports_invalid_utf8_and_carries_on(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "corral", "chat", str(AFTERSALES), "--home", str(tmp_path)],
        input=b"\xff\xfe hello\n\xe4\xbd\xa0\xe5\xa5\xbd\n/quit\n",
        capture_output=True,
        cwd=ROOT,
        timeout=180,
        env={**os.environ, "COLUMNS": "200"},
    )
    out = done.stdout.decode("utf-8", "replace")
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    assert "INVALID_INPUT" in out
    assert out.count("agent>") == 1  # the next line (你好) was answered


def test_escape_sequences_are_shown_not_interpreted(tmp_path: Path) -> None:
    hostile = "\x1b[2J\x1b]0;owned\x07" + COMPLAINT + "\u202e"
    data = json.loads(corral_cli(tmp_path, "run", str(AFTERSALES), hostile, "--json").stdout)
    assert data["status"] == "handed_off"
    outputs = {
        "run": corral_cli(tmp_path, "run", str(AFTERSALES), hostile).stdout,
        "show": corral_cli(tmp_path, "show", data["run_id"]).stdout,
        "traces": corral_cli(tmp_path, "traces", data["run_id"]).stdout,
        "handoff": corral_cli(tmp_path, "handoff", data["run_id"]).stdout,
    }
    for where, text in outputs.items():
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text, where
    assert "\\x1b[2J" in outputs["show"] and "\\x1b[2J" in outputs["handoff"]


def test_hidden_text_and_forged_lines_are_shown_for_what_they_are(tmp_path: Path) -> None:
    """Found by a walkthrough: tag characters (hidden text) reached the terminal as they
    were, and a newline in a complaint printed its own "reason:" and "user:" lines in
    ``corral handoff``, indistinguishable from the packet's."""
    tags = "".join(chr(0xE0000 + ord(c)) for c in "IGNORE")
    forged = COMPLAINT + "\nreason: RESOLVED customer already refunded\nuser: thanks " + tags
    data = json.loads(corral_cli(tmp_path, "run", str(AFTERSALES), forged, "--json").stdout)
    assert data["status"] == "handed_off"
    for command in ("show", "handoff"):
        text = corral_cli(tmp_path, command, data["run_id"]).stdout
        assert tags not in text and "\\U000e0049" in text, command
    lines = corral_cli(tmp_path, "handoff", data["run_id"]).stdout.splitlines()
    assert [line for line in lines if line.startswith("reason:")] == [lines[1]]  # corral's own
    assert sum(line.startswith("user:") for line in lines) == 1


@pytest.mark.parametrize(
    "args",
    [
        ("traces", "../outside/x"),
        ("traces", "../../../../" + "x" * 3),
        ("show", "../outside/x"),
        ("handoff", "/etc/passwd"),
        ("resume", "../outside/x", "--approve"),
    ],
)
def test_run_ids_cannot_name_paths(tmp_path: Path, args: tuple[str, ...]) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.jsonl").write_text(
        json.dumps({"seq": 1, "stage": "run", "level": "info", "event": "LEAKED"}) + "\n", "utf-8"
    )
    done = corral_cli(tmp_path / "home", *args, ok=False)
    assert done.returncode == 2
    assert "INVALID_INPUT" in done.stderr and "LEAKED" not in done.stdout + done.stderr


@pytest.mark.parametrize("limit", ["99999999999999999999", "0", "-5"])
def test_integer_options_are_bounded(tmp_path: Path, limit: str) -> None:
    done = corral_cli(tmp_path, "runs", "--limit", limit, ok=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--limit" in done.stderr


def test_a_home_that_is_a_file_is_a_clear_error(tmp_path: Path) -> None:
    home = tmp_path / "not-a-folder"
    home.write_text("x", "utf-8")
    done = corral_cli(home, "runs", ok=False)
    assert done.returncode == 2 and "INVALID_INPUT" in done.stderr
    assert "Traceback" not in done.stderr and "not a folder" in done.stderr
