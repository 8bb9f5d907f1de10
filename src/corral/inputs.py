"""Checks on what a user sends before any layer (or the store) sees it."""

from __future__ import annotations

from corral.errors import InvalidInputError


def require_text(value: str, what: str = "the input") -> str:
    """``value`` if it is valid Unicode text; ``InvalidInputError`` otherwise.

    Python hands undecodable bytes (a terminal in the wrong encoding, a broken client) to
    corral as lone surrogates (``surrogateescape``); they cannot be stored or shown, so
    they are refused here with a stable code instead of failing deep inside a layer.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"{what} is not valid UTF-8 text (byte or surrogate at position {exc.start})",
            hint="send UTF-8 text",
        ) from None
    return value
