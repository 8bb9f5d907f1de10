"""The dashboard's files as shipped: served under /ui, in both languages, with no HTML sink.

These need no browser: they read the files the package ships and serve them with
``mount_ui`` on a bare FastAPI app (``corral[server]``).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from corral.contracts import RunStatus
from tests.extras import REQUIRE_ALL, import_extra

import_extra("fastapi", REQUIRE_ALL)

from fastapi import FastAPI  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from corral.server.ui import UI_DIR, mount_ui  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HTML_SINKS = (
    "innerHTML",
    "outerHTML",
    "insertAdjacentHTML",
    "document.write",
    "eval(",
    "Function(",
)
"""What would turn run text into markup or code (comments aside): the pages use none."""
SCRIPTS = sorted((UI_DIR / "js").glob("*.js"))
LABEL = re.compile(r'^\s+"([a-z0-9_.]+)": \[\s*"([^"]+)",\s*"([^"]+)",?\s*\],?$', re.M)


def labels() -> dict[str, tuple[str, str]]:
    """The labels of i18n.js: key -> (English, Chinese)."""
    text = (UI_DIR / "js" / "i18n.js").read_text(encoding="utf-8")
    table = text[text.index("const LABELS") : text.index("};")]
    # a label may span lines: join each entry's lines before matching
    joined = re.sub(r"\[\n\s+", "[", re.sub(r",\n\s+\]", "]", table))
    joined = re.sub(r'",\n\s+"', '", "', joined)
    return {key: (en, zh) for key, en, zh in LABEL.findall(joined)}


def test_every_label_is_in_english_and_chinese() -> None:
    found = labels()
    assert len(found) > 80
    for key, (english, chinese) in found.items():
        assert english.strip() and chinese.strip(), key
        assert re.search(r"[\u4e00-\u9fff]", chinese), f"{key}: {chinese!r} is not Chinese"
        assert not re.search(r"[\u4e00-\u9fff]", english), f"{key}: {english!r} is not English"


def test_every_label_the_pages_use_is_defined() -> None:
    found = labels()
    used = set()
    for script in SCRIPTS:
        used |= set(re.findall(r'\bt\("([a-z0-9_.]+)"', script.read_text(encoding="utf-8")))
    used |= set(re.findall(r'data-i18n="([a-z0-9_.]+)"', (UI_DIR / "index.html").read_text()))
    assert used, "no label found: the pattern no longer matches the pages"
    assert sorted(used - set(found)) == []
    # keys built at run time: every run status, layer and time window has its label
    # and the two a run is listed in before its worker stored it (``--enqueue``), which
    # are also a 202's status
    listed = [*RunStatus, "queued", "running"]
    assert {k for k in found if k.startswith("status.")} == {f"status.{s}" for s in listed}
    layers = ["intent", "route", "plan", "decide", "execute", "verify", "reply"]
    assert {k for k in found if k.startswith("layer.")} == {f"layer.{n}" for n in layers}
    assert {k for k in found if k.startswith("since.")} == {
        f"since.{w}" for w in ("15m", "1h", "24h", "7d")
    }


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_no_script_writes_html_or_evaluates_text(script: Path) -> None:
    text = script.read_text(encoding="utf-8")
    code = re.sub(r"^\s*//.*$", "", re.sub(r"/\*.*?\*/", "", text, flags=re.S), flags=re.M)
    for sink in HTML_SINKS:
        assert sink not in code, f"{script.name} uses {sink}"


def test_nothing_is_loaded_from_the_network() -> None:
    for path in [UI_DIR / "index.html", UI_DIR / "app.css", *SCRIPTS]:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"https?://|//cdn|@import", text), path.name


def test_the_vendored_echarts_is_the_recorded_one() -> None:
    record = (ROOT / "THIRD_PARTY.md").read_text(encoding="utf-8")
    digest = hashlib.sha256((UI_DIR / "vendor" / "echarts.min.js").read_bytes()).hexdigest()
    assert digest in record
    for licence in re.findall(r"`((?:LICENSE|NOTICE)-[a-z0-9]+\.txt)`", record):
        assert (UI_DIR / "vendor" / licence).is_file(), licence


def test_mount_ui_serves_the_pages_with_a_strict_policy() -> None:
    app = FastAPI()
    mount_ui(app)
    with TestClient(app) as client:
        moved = client.get("/ui", follow_redirects=False)
        assert moved.status_code == 307 and moved.headers["location"] == "ui/"
        index = client.get("/ui/")
        assert index.status_code == 200
        assert index.text == (UI_DIR / "index.html").read_text(encoding="utf-8")
        policy = index.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "default-src 'none'" in policy
        script = client.get("/ui/js/main.js")
        assert script.status_code == 200
        assert "javascript" in script.headers["content-type"]  # a module needs a JS type
        assert script.headers["x-content-type-options"] == "nosniff"
        assert client.get("/ui/vendor/echarts.min.js").status_code == 200
        assert client.get("/ui/nothing-here.js").status_code == 404
        assert client.get("/ui/../pyproject.toml").status_code == 404
