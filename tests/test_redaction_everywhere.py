"""Every kind of secret, in a message and in a tool's result, reaches no span, no API
answer and no dashboard page, end to end: ``corral serve`` (console spans on), its HTTP
API and the run page in Debian's Chromium. The event store keeps them all (resume and
replay need them), which the test checks too, so it cannot pass by storing nothing.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
import yaml

from corral.store.sql import SqlStore
from tests.browser import CHROMIUM, chromium, serving
from tests.extras import REQUIRE_ALL, import_extra
from tests.helpers import SECRETS, write_agent

import_extra("fastapi", REQUIRE_ALL)
import_extra("opentelemetry.sdk", REQUIRE_ALL)
if not CHROMIUM.exists() and not REQUIRE_ALL:
    pytest.skip("no /usr/bin/chromium (CI installs it)", allow_module_level=True)

AGENT = {
    "name": "desk",
    "default_language": "en",
    "entities": {"order_id": {"kind": "pattern", "patterns": [r"\b(A\d+)\b"]}},
    "intents": [
        {
            "name": "look",
            "rules": [{"keywords": ["look"], "confidence": 0.95}],
            "route": "plan",
            "plan": "look",
            "reply": "done",
        }
    ],
    "plans": {
        "look": {
            "steps": [
                {
                    "id": "s1",
                    "tool": "lookup",
                    "args": {"order_id": "$entities.order_id", "voucher": SECRETS["sensitive"]},
                }
            ]
        }
    },
    "templates": {"done": {"zh": "好了", "en": "Looked up {order_id}"}},
    "redaction": {"patterns": [r"VIP-\d{6}"]},
}

TOOLS = f"""
    from typing import Annotated

    from corral import Sensitive, tool

    SECRETS = {SECRETS!r}


    @tool
    def lookup(order_id: str, voucher: Annotated[str, Sensitive()]) -> dict[str, str]:
        \"\"\"The customer's record, secrets and all.\"\"\"
        return {{
            "order_id": order_id,
            "contact": f"call {{SECRETS['phone']}} or mail {{SECRETS['email']}}",
            "id": SECRETS["id_number"],
            "card": SECRETS["card"],
            "note": f"key {{SECRETS['api_key']}}, password: {{SECRETS['password']}}",
            "tier": SECRETS["pattern"],
            "voucher": voucher,
        }}
"""

MESSAGE = (
    "look A1 "
    + " ".join(f"{kind} {value}" for kind, value in SECRETS.items() if kind != "password")
    + f" password: {SECRETS['password']}"
)


def leaked(text: str) -> list[str]:
    return [kind for kind, value in SECRETS.items() if value in text]


def test_no_secret_reaches_a_span_an_api_answer_or_a_page(tmp_path: Path) -> None:
    folder = write_agent(tmp_path / "desk", yaml.safe_dump(AGENT), TOOLS)
    home = tmp_path / "home"
    home.mkdir()
    with serving(folder, home=home, env={"OTEL_TRACES_EXPORTER": "console"}) as served:
        started = served.call("POST", "/agents/desk/runs", {"message": MESSAGE})
        assert started["status"] == "finished", started
        run_id = started["run_id"]
        answers = [
            started,
            served.call("GET", "/runs"),
            served.call("GET", f"/runs/{run_id}"),
            served.call("GET", f"/runs/{run_id}/events"),
            served.call("GET", "/handoffs"),
            served.call("GET", "/stats"),
        ]
        request = urllib.request.Request(
            f"{served.base}/runs/{run_id}/stream",
            headers={"Authorization": f"Bearer {served.token}"},
        )
        with urllib.request.urlopen(request, timeout=60) as stream:
            streamed = stream.read().decode()
        assert "event: summary" in streamed
        with chromium() as browser:
            page = browser.new_page()
            page.goto(served.dashboard(f"/runs/{run_id}"))
            page.wait_for_selector(".step")
            for details in page.locator("details").all():  # open every fold: all is shown
                details.evaluate("el => el.open = true")
            shown = page.content() + page.inner_text("body")
    spans = (home / "serve.log").read_text(encoding="utf-8")

    stored = json.dumps(
        [e.data for e in SqlStore.open(home / "corral.db").load_events(run_id)],
        ensure_ascii=False,
    )
    assert leaked(stored) == list(SECRETS)  # the store keeps every one
    assert "execute_tool lookup" in spans and "gen_ai.operation.name" in spans
    assert leaked(spans) == []
    assert leaked(json.dumps(answers, ensure_ascii=False)) == []
    assert leaked(streamed) == []
    assert "[PHONE]" in shown and "lookup" in shown  # the page shows the run, redacted
    assert leaked(shown) == []
