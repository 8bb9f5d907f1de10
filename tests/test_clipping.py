"""Short texts kept in events are cut without cutting a token redaction must see whole.

Found by a walkthrough: a message's summary (200 characters) ended in 10 of a phone
number's 11 digits, and a model's error text (300) in part of an e-mail: cut in two, they
were no longer recognised, and their first parts were shown in the log, ``corral traces``
and every HTTP answer.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from corral import MemoryStore, Runtime, load_agent
from corral.clipping import _in_token, clip
from corral.observe.redact import redact_builtin
from tests.conftest import AFTERSALES


def test_a_cut_never_falls_inside_a_phone_number_an_email_or_a_card() -> None:
    pad = "啊" * 195
    secrets = ("13812345678", "zhang@example.com", "4111 1111 1111 1111", "+1 (415) 555-0100")
    # review: full-width ones were cut inside
    full_width = ("１３８１２３４５６７８", "ｚｈａｎｇ＠ｅｘａｍｐｌｅ．ｃｏｍ")
    for secret in (*secrets, *full_width):
        cut = clip(pad + secret + " and more", 200)
        assert cut.endswith(secret)
        assert "[" in redact_builtin(cut)  # whole: redaction sees it
    long_key = "啊" * 150 + "sk-" + "a" * 200
    assert clip(long_key, 200) == "啊" * 150  # too long to end: left out whole
    blob = "x" * 300  # one long word from the start: cut at the limit, not to nothing
    assert clip(blob, 200) == "x" * 200


@given(st.text(max_size=400), st.integers(min_value=1, max_value=300))
def test_a_cut_is_a_prefix_near_the_limit(text: str, limit: int) -> None:
    cut = clip(text, limit)
    assert text.startswith(cut)
    assert len(cut) <= limit + 80
    if len(text) <= limit:
        assert cut == text
    elif len(cut) != limit:  # never between two characters of one token (or a blob's cut)
        end = len(cut)
        assert not 0 < end < len(text) or not (_in_token(text, end) and _in_token(text, end - 1))


def test_a_value_summary_says_it_was_cut_only_when_it_was() -> None:
    from corral.tools.spec import _short

    url = "https://track.example.com/p/ABCDEFGH12345678ZZ"
    assert _short(url) == url  # one token, kept whole: nothing was cut
    assert _short("啊" * 50).endswith("...")


def test_the_stored_intent_summary_keeps_a_phone_number_whole(tmp_path: Path) -> None:
    store = MemoryStore()
    runtime = Runtime(load_agent(AFTERSALES, data_dir=tmp_path / "data"), store)
    message = "订单 HD20240501 能换新吗" + "啊" * 172 + "13812345678 zhang@example.com"
    summary = asyncio.run(runtime.start(message))
    classified = [
        e for e in store.load_events(summary.run_id) if e.type.value == "intent_classified"
    ]
    text = classified[0].data["text"]
    assert "13812345678" in text
    assert "13812345678" not in redact_builtin(text)
