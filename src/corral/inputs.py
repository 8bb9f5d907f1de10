"""Checks on what a user sends before any layer (or the store) sees it."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Any

from corral.errors import InvalidInputError


def require_text(value: str, what: str = "the input") -> str:
    """``value`` if it is valid Unicode text; ``InvalidInputError`` otherwise.

    Python hands undecodable bytes (a terminal in the wrong encoding, a broken client) to
    corral as lone surrogates (``surrogateescape``); they cannot be stored or shown, so
    they are refused here with a stable code instead of failing deep inside a layer. So
    is a value that is no text at all (``bytes``, ``None``) from a caller's own code.
    """
    if not isinstance(value, str):
        raise InvalidInputError(
            f"{what} is {'None' if value is None else type(value).__name__}, not text",
            hint="pass a str (decode bytes as UTF-8 first)",
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"{what} is not valid UTF-8 text (byte or surrogate at position {exc.start})",
            hint="send UTF-8 text",
        ) from None
    return value


def unicode_safe(text: str) -> str:
    """``text`` with each lone surrogate as U+FFFD, and each surrogate pair as its character.

    For text from outside that no one typed (a model's answer, an exception's message): a
    lone surrogate cannot be encoded as UTF-8, so the save of the run that holds it, its
    log line and its HTTP answer would all fail, and the run would be lost.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def unicode_safe_value(value: Any) -> Any:
    """A JSON value (as ``json.loads`` makes one) with every string ``unicode_safe``."""
    return _each_string(value, unicode_safe)


def _each_string(value: Any, change: Callable[[str], str]) -> Any:
    """A JSON value with ``change`` made to each of its strings, keys too."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {
            change(k) if isinstance(k, str) else k: _each_string(v, change)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_each_string(item, change) for item in value]
    return value


def lone_surrogate_at(value: Any) -> str | None:
    """Where a JSON value (keys too) holds text UTF-8 cannot encode (``a.b[2]``), or ``None``."""
    path = lone_surrogate_path(value)
    if path is None:
        return None
    shown = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)
    return unicode_safe(shown.lstrip(".")) or "the value"


def lone_surrogate_path(value: Any) -> tuple[str | int, ...] | None:
    """``lone_surrogate_at``'s place as keys and indexes (a key as it is, unencodable too)."""
    if type(value) is str:
        if value.isascii():
            return None
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return ()
        return None
    if type(value) is dict:
        for key, item in value.items():
            if lone_surrogate_path(key) is not None:
                return (key,)
            found = lone_surrogate_path(item)
            if found is not None:
                return (key, *found)
    elif type(value) is list:
        for index, item in enumerate(value):
            found = lone_surrogate_path(item)
            if found is not None:
                return (index, *found)
    return None


def surrogate_pairs_joined(value: Any) -> Any:
    r"""A JSON value with each surrogate pair in its strings made its character (😀).

    JSON and YAML write a character beyond the first 65 536 as two escapes
    (``"\ud83d\ude00"``), which Python reads as two code points; a lone one stays.
    """
    return _each_string(value, _pairs_joined)


def _pairs_joined(text: str) -> str:
    if text.isascii():
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")


SEE_RUN = "see what it waits for: GET /runs/RUN (its pending) or `corral show RUN`"
"""How a hint sends someone to what a run waits for, over HTTP and from the shell."""

MAX_SESSION_ID_CHARS = 128
"""The longest session id: the stores' column holds this many (PostgreSQL refuses more)."""

MAX_MESSAGE_ID_CHARS = 128
"""The longest message id (``Runtime.start(message_id=...)``), as a session id's."""


MAX_STEP_ID_CHARS = 64
"""The longest step id a decision may name: a plan's are 32 at most, ``#plan`` is 5. A
10 000-character one came back whole in the refusal."""


def require_session_id(session_id: str) -> str:
    """``session_id`` if a store can keep it and a listing can find it by it, not blank.

    A longer one was taken by SQLite and refused by PostgreSQL only at the run's first
    save; ``GET /runs?session_id=`` refused it outright. A blank one (``""``, a space)
    is an id no client means to share: ``" "`` joined strangers' messages into one
    session, where one's "yes" approved the other's write.
    """
    return _require_key(session_id, "the session id", MAX_SESSION_ID_CHARS)


def require_message_id(message_id: str) -> str:
    """``message_id`` if a store can keep it: as a session id."""
    return _require_key(message_id, "the message id", MAX_MESSAGE_ID_CHARS)


def _require_key(value: str, what: str, limit: int) -> str:
    """``value`` if it is text, not blank, of at most ``limit`` characters and no NUL.

    PostgreSQL's text keeps no NUL: refused here, before any save.
    """
    require_text(value, what)
    if is_blank(value):
        raise InvalidInputError(
            f"{what} is blank", hint=f"send the client's own {what.removeprefix('the ')}, or none"
        )
    if "\x00" in value:
        raise InvalidInputError(
            f"{what} holds a NUL character, which no store keeps",
            hint="send an id of visible characters",
        )
    if len(value) > limit:
        raise InvalidInputError(
            f"{what} has {len(value)} characters, over {limit}",
            hint="use a shorter id (a hash of a longer key, say)",
        )
    return value


def is_blank(value: str) -> bool:
    """Whether ``value`` shows a person nothing.

    Space, format or control characters (a zero-width space, a byte-order mark, NUL),
    marks with nothing to sit on (a combining accent, a variation selector) and the
    characters fonts draw empty (``BLANK_LOOKING``: the Hangul fillers, the blank
    Braille pattern) are as blank to a person as spaces are.
    """
    return not value.strip() or all(
        ch.isspace() or ch in BLANK_LOOKING or unicodedata.category(ch) in _INVISIBLE
        for ch in value
    )


_INVISIBLE = frozenset({"Cc", "Cf", "Mn", "Me"})
BLANK_LOOKING = frozenset("\u115f\u1160\u3164\uffa0\u2800\u17b4\u17b5\u180e")
"""Characters Unicode files as letters or symbols that a font draws as nothing: the
Hangul choseong, jungseong and (halfwidth) fillers, the blank Braille pattern, the Khmer
inherent vowels and the Mongolian vowel separator (default-ignorable or blank)."""


def require_words(value: str, what: str) -> str:
    """``value`` if it is text with something in it; ``InvalidInputError`` otherwise.

    A blank message or answer (an empty chat box, a client that sent ``""``) says nothing:
    as a message it would start a run that can only ask what was meant, and as an answer
    it would use up one of the run's questions (``limits.max_questions``) and hand the
    next real answer to a person. Refused before anything is recorded.
    """
    require_text(value, what)
    if is_blank(value):
        raise InvalidInputError(
            f"{what} is empty" if not value else f"{what} is blank (nothing a person can see)",
            hint="send some text",
        )
    return value


def require_one_input(
    approve: bool | None,
    answer: str | None,
    step_id: str | None = None,
    call: str | None = None,
) -> None:
    """``InvalidInputError`` for an approval with an answer, or a step or call named without one.

    A run waits for a decision or for an answer, never both, and only a decision is about
    a step: either is the caller's mistake, the same code from the CLI, the HTTP API, the
    queue and ``Runtime.resume``. A call is named with its step: two steps of a plan may
    ask about the same call, and a late click on the first must not decide the second.
    """
    if approve is not None and answer is not None:
        raise InvalidInputError(
            "give an approval or an answer, not both",
            hint=f"a run waits for one of them; {SEE_RUN}",
        )
    if step_id is not None:  # quoted by the refusals that follow: bounded, not blank
        _require_key(step_id, "the step id", MAX_STEP_ID_CHARS)
    if step_id is not None and approve is None:
        raise InvalidInputError(
            "a step is named only with an approval or a rejection",
            hint="an answer is to the run's question: leave the step out",
        )
    if call is not None and approve is None:
        raise InvalidInputError(
            "a call is named only with an approval or a rejection",
            hint="an answer is to the run's question: leave the call out",
        )
    if call is not None and step_id is None:  # two steps may ask about the same call
        raise InvalidInputError(
            "a call is named with its step",
            hint="send pending.step_id with pending.call",
        )
    if call is not None and (not isinstance(call, str) or not re.fullmatch(CALL_DIGEST, call)):
        raise InvalidInputError(
            "a call is named by its digest: the hex digits of the summary's pending.call",
            hint=f"{SEE_RUN}; send pending.call as it is",
        )


CALL_DIGEST = "[0-9a-f]{1,64}"
"""The form of ``PendingAction.call`` (16 hex digits today; a longer digest stays valid):
checked here, and by the HTTP API's body schema."""
