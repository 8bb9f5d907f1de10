"""Arranging an eval case's world: HTTP requests made before its first message.

An agent whose tools are services (``http_tools:``, ``openapi:``, ``mcp_servers:``) meets
faults where they happen: in the service. A case that needs one (a 503 twice, a 429 with
``Retry-After``, a server killed mid-call) asks the service for it first, through the
service's own fault controls:

.. code-block:: yaml

    - name: the fast search fails twice, the cheap one answers
      arrange:
        - post: "${OPS_API_URL}/faults"
          json: {path: /flights/fast, status: 503, times: 2}
      messages: ["明天去上海的航班，急！"]

``${NAME}`` is resolved as in the agent's config: from what ``setup`` returned (the port
of the service it started for this case), then the environment. A request that does not
answer 2xx stops the case with ``CONFIG_INVALID``: a case run in a world other than the
one it describes would measure nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from corral.errors import ConfigInvalidError
from corral.tools.transport import resolve_placeholders

METHODS = ("get", "post", "put", "patch", "delete")
ARRANGE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Arrangement:
    """One request: a method, a URL (``${NAME}`` allowed) and an optional JSON body."""

    method: str
    url: str
    json: Any = field(default=None)


def parse_arrange(raw: Any, case: str) -> tuple[Arrangement, ...]:
    """The case's ``arrange:`` list, checked when the suite loads."""
    if raw is None:
        return ()
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise ConfigInvalidError(f"eval case {case!r}: `arrange` is a list of requests")
    steps = []
    for item in raw:
        methods = [m for m in METHODS if isinstance(item, Mapping) and m in item]
        extra = set(item) - {*METHODS, "json"} if isinstance(item, Mapping) else set()
        if len(methods) != 1 or extra or not isinstance(item[methods[0]], str):
            raise ConfigInvalidError(
                f"eval case {case!r}: each `arrange` item is one of {', '.join(METHODS)}: URL,"
                " and an optional `json` body",
                hint=f"got {item!r}",
            )
        steps.append(Arrangement(methods[0].upper(), item[methods[0]], item.get("json")))
    return tuple(steps)


async def arrange(steps: Sequence[Arrangement], deps: Mapping[str, Any], case: str) -> None:
    """Make the case's requests, in order, against the services its agent started."""
    if not steps:
        return
    import httpx  # the http extra: only a suite that arranges needs it

    async with httpx.AsyncClient(timeout=ARRANGE_TIMEOUT_S) as client:
        for step in steps:
            url = resolve_placeholders(step.url, deps)
            try:
                answer = await client.request(step.method, url, json=step.json)
            except httpx.HTTPError as exc:
                raise ConfigInvalidError(
                    f"eval case {case!r}: arrange {step.method} {url} failed: {exc!r}"
                ) from None
            if not answer.is_success:
                raise ConfigInvalidError(
                    f"eval case {case!r}: arrange {step.method} {url} answered "
                    f"{answer.status_code}: {answer.text[:200]}"
                )
