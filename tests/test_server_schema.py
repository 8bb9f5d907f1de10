"""Property-based tests of the HTTP API against its own OpenAPI schema (schemathesis).

Generated requests go over real HTTP to a served aftersales agent: whatever they hold,
no answer is a 5xx, and every answer (status, headers, body) is one the schema documents.
Each operation gets its own hypothesis run, positive and negative data both.
(schemathesis's pytest loader for fixtures does not run under this pytest, so the
operations are walked here.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tests.extras import REQUIRE_ALL, import_extra

schemathesis = import_extra("schemathesis", REQUIRE_ALL)

from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.generation import GenerationMode  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.conftest import AFTERSALES  # noqa: E402
from tests.serving import AUTH, load, serving  # noqa: E402

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
"""No 5xx, and answers as documented. Not "negative data is rejected": unknown query
parameters are ignored, as HTTP servers do (bodies do refuse unknown fields)."""
EXAMPLES = 25
"""Per operation and mode: small, so the whole file runs in well under a minute."""


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    home: Path = tmp_path_factory.mktemp("served") / "home"
    with serving(load(AFTERSALES, home), home=home) as base:
        yield schemathesis.openapi.from_url(f"{base}/openapi.json", headers=AUTH)


def operations(api: Any) -> list[Any]:
    return [result.ok() for result in api.get_all_operations()]


def test_the_schema_has_every_route(api: Any) -> None:
    routes = {f"{o.method.upper()} {o.path}" for o in operations(api)}
    assert routes >= {
        "GET /healthz",
        "GET /agents",
        "POST /agents/{agent}/runs",
        "POST /runs/{run_id}/resume",
        "GET /runs",
        "GET /runs/{run_id}",
        "GET /runs/{run_id}/events",
        "GET /runs/{run_id}/stream",
        "GET /handoffs",
    }


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_answer_is_a_5xx_or_off_the_schema(api: Any, mode: GenerationMode) -> None:
    for operation in operations(api):
        raw = operation.definition.raw
        if mode is GenerationMode.NEGATIVE and not (raw.get("parameters") or "requestBody" in raw):
            continue  # nothing to get wrong

        @given(operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def check(case: Any) -> None:
            case.call_and_validate(headers=AUTH, checks=CHECKS, timeout=60)

        check()
