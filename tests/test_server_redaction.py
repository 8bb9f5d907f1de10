"""No secret from a message or a tool result appears in any answer of the HTTP API.

The agent's lookup returns a field marked ``Sensitive`` and an API key in free text; the
next step fails, so the run is handed off with a packet that holds the lookup's output.
Every read route is asked: the run, its events, its stream, the handoff queue.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel

from corral import Sensitive, tool
from corral.errors import ToolFailedError
from tests.helpers import build_agent
from tests.serving import client, serving

CUSTOMER = "Zhang Sanfeng"
API_KEY = "sk-proj-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
PHONE = "13912345678"
MAIL = "wang.wu@example.org"


class Contact(BaseModel):
    customer: Annotated[str, Sensitive()]
    note: str


def test_no_answer_shows_a_secret(tmp_path: Path) -> None:
    @tool
    def lookup(order: str) -> Contact:
        return Contact(customer=CUSTOMER, note=f"integration key {API_KEY}")

    @tool
    def refund(order: str) -> Contact:
        raise ToolFailedError(f"refund desk down; call {PHONE}")

    steps = [
        {"id": "s1", "tool": "lookup", "args": {"order": "$entities.order_id"}},
        {
            "id": "s2",
            "tool": "refund",
            "args": {"order": "$entities.order_id"},
            "depends_on": ["s1"],
        },
    ]
    agent = build_agent([lookup, refund], steps)
    with serving(agent, home=tmp_path / "home") as base, client(base) as http:
        message = f"go A123, mail me at {MAIL} or call {PHONE}"
        handed = http.post("/agents/test/runs", json={"message": message})
        run_id = handed.json()["run_id"]
        answers = {
            "start": handed.text,
            "run": http.get(f"/runs/{run_id}").text,
            "events": http.get(f"/runs/{run_id}/events").text,
            "stream": http.get(f"/runs/{run_id}/stream").text,
            "handoffs": http.get("/handoffs").text,
            "list": http.get("/runs").text,
        }
    assert handed.json()["status"] == "handed_off"
    assert run_id in answers["handoffs"]
    assert "lookup" in answers["events"] and "refund" in answers["handoffs"]
    assert '"customer"' in answers["handoffs"] and '"customer"' in answers["stream"]
    for route, text in answers.items():
        for secret in (CUSTOMER, API_KEY, PHONE, MAIL):
            assert secret not in text, (route, secret)


def test_a_session_id_that_is_a_phone_number_is_hidden_in_every_answer(tmp_path: Path) -> None:
    """Teams key sessions by the customer's channel id, often a phone number or a mail."""

    @tool
    def lookup(order: str) -> Contact:
        return Contact(customer="someone", note="ok")

    agent = build_agent([lookup], [{"id": "s1", "tool": "lookup", "args": {"order": "A1"}}])
    with serving(agent, home=tmp_path / "home") as base, client(base) as http:
        session = f"wx-{PHONE}-{MAIL}"
        done = http.post("/agents/test/runs", json={"message": "go", "session_id": session})
        run_id = done.json()["run_id"]
        answers = {
            "start": done.text,
            "run": http.get(f"/runs/{run_id}").text,
            "list": http.get("/runs").text,
            "events": http.get(f"/runs/{run_id}/events").text,
        }
    assert run_id in answers["list"] and '"session_id"' in answers["list"]
    for route, text in answers.items():
        for secret in (PHONE, MAIL):
            assert secret not in text, (route, secret)
