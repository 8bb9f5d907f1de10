"""The documentation tables stay in step with the code."""

from __future__ import annotations

from corral.errors import ErrorCode
from tests.conftest import ROOT


def test_every_error_code_is_documented() -> None:
    table = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    missing = [code.value for code in ErrorCode if f"`{code.value}`" not in table]
    assert missing == []
