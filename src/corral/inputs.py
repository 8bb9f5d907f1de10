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


def require_words(value: str, what: str) -> str:
    """``value`` if it is text with something in it; ``InvalidInputError`` otherwise.

    A blank message or answer (an empty chat box, a client that sent ``""``) says nothing:
    as a message it would start a run that can only ask what was meant, and as an answer
    it would use up one of the run's questions (``limits.max_questions``) and hand the
    next real answer to a person. Refused before anything is recorded.
    """
    require_text(value, what)
    if not value.strip():
        raise InvalidInputError(
            f"{what} is empty" if not value else f"{what} is blank (only white space)",
            hint="send some text",
        )
    return value


def require_one_input(approve: bool | None, answer: str | None, step_id: str | None = None) -> None:
    """``InvalidInputError`` for an approval with an answer, or a step named without one.

    A run waits for a decision or for an answer, never both, and only a decision is about
    a step: either is the caller's mistake, the same code from the CLI, the HTTP API, the
    queue and ``Runtime.resume``.
    """
    if approve is not None and answer is not None:
        raise InvalidInputError(
            "give an approval or an answer, not both",
            hint="a run waits for one of them: see `corral show RUN`",
        )
    if step_id is not None and approve is None:
        raise InvalidInputError(
            "a step is named only with an approval or a rejection",
            hint="an answer is to the run's question: leave the step out",
        )
