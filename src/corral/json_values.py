"""JSON as corral takes it from outside: finite numbers only.

Python's JSON reader accepts ``NaN``, ``Infinity`` and ``1e999`` (as infinity). Such a
value compares false with everything, so it passes any "too large" rule, and it is
stored as ``null``: the run that used it and the run its log replays would differ. A
model's output and an HTTP tool's response are read with these instead.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any


def finite(text: str) -> float:
    """A JSON number as a float, refused when it is not finite (``1e999``)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"a non-finite number ({text}) is not a value a tool can take")
    return value


def no_constant(name: str) -> Any:
    """Refuse ``NaN``, ``Infinity`` and ``-Infinity`` (``json.loads``'s ``parse_constant``)."""
    raise ValueError(f"{name} is not a value a tool can take")


def check_finite(value: Any) -> Any:
    """``value`` unless it holds NaN or an infinity anywhere (they would pass as floats)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"a non-finite number ({item}) is not a value a tool can take")
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return value


_STRICT = json.JSONEncoder(allow_nan=False, check_circular=False, default=str)
"""Refuses NaN and the infinities (``ValueError``): a check at the C encoder's speed."""


def all_finite(value: Any) -> bool:
    """Whether ``value`` (JSON values) holds no NaN and no infinity anywhere.

    Encoding it once is about twice as fast as walking it in Python (``check_finite``):
    a large result is checked in the time the store will spend writing it.
    """
    try:
        _STRICT.encode(value)
    except ValueError:
        return False
    return True


def finite_or_none(value: Any) -> Any:
    """``value`` with ``None`` for each NaN or infinity in it (as JSON would store it)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_or_none(item) for key, item in value.items()}
    if isinstance(value, list):
        return [finite_or_none(item) for item in value]
    return value


def loads_finite(text: str | bytes | bytearray) -> Any:
    """``json.loads`` that refuses non-finite numbers (``ValueError``)."""
    return json.loads(text, parse_float=finite, parse_constant=no_constant)


def one_shot_encoder(item_separator: str, key_separator: str) -> Callable[[Any], str]:
    """``json.dumps(value, ensure_ascii=False, separators=(...), default=str)``, built once.

    ``json.dumps`` builds an encoder for every call, and ``JSONEncoder.encode`` a C encoder
    (and a dict of the containers it is in, against cycles: no value corral writes has
    one); a stored row or a log line is encoded thousands of times a second. The text is
    the same.
    """
    if c_make_encoder is None:  # an interpreter without the C speedups
        separators = (item_separator, key_separator)
        return json.JSONEncoder(ensure_ascii=False, separators=separators, default=str).encode
    chunks = c_make_encoder(
        None, str, encode_basestring, None, key_separator, item_separator, False, False, True
    )

    def encode(value: Any) -> str:
        return "".join(chunks(value, 0))

    return encode


dumps = one_shot_encoder(",", ":")
"""Compact JSON text, as stores write it (non-JSON values as their ``str``).

Also the measure of a tool's result against its ``max_output_chars``: what the store
would keep of it.
"""
