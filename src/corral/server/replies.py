"""Error answers: one body shape, and one table from corral's codes to HTTP statuses."""

from __future__ import annotations

from starlette.responses import JSONResponse

from corral.errors import CorralError, ErrorCode
from corral.inputs import unicode_safe
from corral.observe.redact import keeping_ids, redact_builtin

STATUS_BY_CODE: dict[ErrorCode, int] = {
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.RUN_NOT_FOUND: 404,
    ErrorCode.AGENT_NOT_FOUND: 404,
    ErrorCode.RUN_BUSY: 409,
    ErrorCode.RUN_NOT_RESUMABLE: 409,
    ErrorCode.LEASE_LOST: 409,
    ErrorCode.EVENT_CONFLICT: 409,
    ErrorCode.INPUT_TOO_LARGE: 413,
    ErrorCode.INVALID_INPUT: 422,
    ErrorCode.INVALID_ARGUMENT: 422,
    ErrorCode.MISSING_ARGUMENT: 422,
    ErrorCode.PLAN_INVALID: 422,
    ErrorCode.STORE_UNAVAILABLE: 503,
    ErrorCode.STORE_FULL: 503,
    ErrorCode.STORE_READ_ONLY: 503,
    ErrorCode.STORE_CORRUPT: 500,
}
"""The HTTP status of each corral error a request can meet; any other code is a 500."""


def error_response(
    status: int, code: ErrorCode, message: str, hint: str | None, run_id: str | None = None
) -> JSONResponse:
    """``{"error": {"code", "message", "hint"}}`` with ``status``.

    The message is redacted like every other answer: it may quote the request (a field's
    name) or the run (what a store failure says had already happened), except ``run_id``
    when it is an id corral makes (``keeping_ids``). The hint is corral's own advice
    ("send Authorization: Bearer TOKEN"), kept as written.
    """
    # a message quoting what broke it (a lone surrogate) must not make the answer a 500
    shown = unicode_safe(keeping_ids(redact_builtin, message, [run_id]))
    said = unicode_safe(hint) if hint is not None else None
    return JSONResponse(
        {"error": {"code": code.value, "message": shown, "hint": said}}, status_code=status
    )


def corral_error_response(exc: CorralError, run_id: str | None = None) -> JSONResponse:
    """The answer to a corral error: its code's status, its code, message and hint.

    ``run_id``: the run the request named, shown as it is in the message when corral made it.
    """
    status = STATUS_BY_CODE.get(exc.code, 500)
    return error_response(status, exc.code, exc.message, exc.hint, run_id)
