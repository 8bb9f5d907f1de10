"""The one stable hash: a short SHA-256 of a value's canonical JSON (or of a text).

Idempotency keys, model-request fingerprints (replay looks answers up by them), the
classifier's cache keys and the loop guard's state keys all hash a JSON-able value. They
share this function so that "the same value" means one thing everywhere: keys in any
order, dates and other non-JSON values by their ``str``, text as UTF-8.

Stored digests must not change: an idempotency key that hashed differently after an
upgrade would let a resumed write run twice. ``tests/test_hashing.py`` pins them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str)
_CANONICAL_ASCII = json.JSONEncoder(sort_keys=True, ensure_ascii=True, default=str)
"""What ``json.dumps(value, sort_keys=True, ensure_ascii=..., default=str)`` builds on
every call, built once: the same text, without a new encoder per hash (hot: loop guard)."""


def _c_encoder(encoder: json.JSONEncoder) -> Callable[[Any, int], list[str]] | None:
    """``encoder``'s C encoder, built once, or ``None`` where ``json`` has none.

    ``JSONEncoder.encode`` builds it again on every call, with a dict to detect cycles;
    the values hashed here are JSON data (arguments, results, facts), which hold none.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    codec = json.encoder
    strings = codec.encode_basestring_ascii if encoder.ensure_ascii else codec.encode_basestring
    built: Callable[[Any, int], list[str]] = make(
        None,
        encoder.default,
        strings,
        None,
        encoder.key_separator,
        encoder.item_separator,
        encoder.sort_keys,
        encoder.skipkeys,
        encoder.allow_nan,
    )
    return built


_ENCODE = _c_encoder(_CANONICAL)


def canonical_json(value: Any) -> str:
    """The canonical JSON text that ``stable_hash`` hashes.

    For keys kept only in memory, where equal values must give equal keys and a digest
    would only add work (the loop guard).
    """
    if _ENCODE is None:
        return _CANONICAL.encode(value)
    return "".join(_ENCODE(value, 0))


def stable_hash(value: Any, size: int = 16, *, escape_non_ascii: bool = False) -> str:
    """The first ``size`` hex digits of the SHA-256 of ``value`` as canonical JSON.

    ``escape_non_ascii`` writes non-ASCII text as JSON escapes; only the classifier's
    cache key uses it, so that its files keep the names they were first written under.
    """
    text = _CANONICAL_ASCII.encode(value) if escape_non_ascii else canonical_json(value)
    return text_digest(text, size)


def text_digest(text: str, size: int = 64) -> str:
    """The first ``size`` hex digits of the SHA-256 of ``text`` as UTF-8.

    For text that is already the thing to name: a stored plan body, a trace id, a run id
    (``stable_hash`` hashes a value by its canonical JSON, through this).
    """
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:size]
