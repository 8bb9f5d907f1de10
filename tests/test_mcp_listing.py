"""Reusing MCP tool listings across agent builds (``McpListingCache``), and checking them.

Real servers (tests/mcp_servers/notes_server.py over stdio), real processes: the server
appends its pid to ``NOTES_PIDS`` at every start, so a test counts the starts.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from corral import Agent, McpListingCache, load_agent, parse_config
from corral.contracts import ToolStatus
from corral.errors import ConfigInvalidError, ToolSchemaChangedError
from corral.tools.mcp.connection import McpLaunch
from corral.tools.mcp.listing import check_listing, listing_key, schemas
from tests.conftest import ROOT
from tests.extras import REQUIRE_ALL, import_extra
from tests.one_intent import one_intent
from tests.test_mcp_tools import AGENT, alive, calls, posts, started, variant

import_extra("mcp", REQUIRE_ALL)

SERVER = ROOT / "tests" / "mcp_servers" / "notes_server.py"
RAW_SERVER = ROOT / "tests" / "mcp_servers" / "raw_server.py"
IGNORING = '      NOTES_CRASH_AFTER_WRITE: "${NOTES_CRASH_FLAG}"\n'
IGNORED = IGNORING + "    listing_ignores_env: [NOTES_DB, NOTES_PIDS, NOTES_CRASH_AFTER_WRITE]\n"


def test_builds_sharing_a_cache_list_the_server_once_and_still_call_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    listings = McpListingCache()
    load_agent(AGENT, data_dir=data, mcp_listings=listings)
    second = load_agent(AGENT, data_dir=data, mcp_listings=listings)
    assert (listings.misses, listings.hits) == (1, 1)
    assert len(started(data)) == 1  # one start, for the first build's listing

    [note] = calls(second, ("get_note", {"topic": "cats"}))
    assert note.status is ToolStatus.SUCCESS
    assert note.data == {"topic": "cats", "text": "notes about cats", "words": 3}
    assert len(started(data)) == 2  # the call's own start: the listing was not repeated
    load_agent(AGENT, data_dir=data)  # without a cache, every build lists
    assert len(started(data)) == 3
    assert not any(alive(pid) for pid in started(data))


def test_env_values_key_the_listing_unless_the_server_says_they_do_not_change_it(
    tmp_path: Path,
) -> None:
    plain = McpListingCache()
    for case in ("a", "b"):  # another database, so another ${NOTES_DB}: listed again
        load_agent(AGENT, data_dir=tmp_path / "plain" / case, mcp_listings=plain)
    assert (plain.misses, plain.hits) == (2, 0)

    folder = variant(tmp_path, IGNORING, IGNORED)
    shared = McpListingCache()
    load_agent(folder, data_dir=tmp_path / "a", mcp_listings=shared)
    second = load_agent(folder, data_dir=tmp_path / "b", mcp_listings=shared)
    assert (shared.misses, shared.hits) == (1, 1)
    assert started(tmp_path / "b") == []  # b's build started nothing

    post = ("post_note", {"channel": "general", "text": "hi"}, "key-b")
    [posted] = calls(second, post)
    assert posted.status is ToolStatus.SUCCESS
    assert posts(tmp_path / "b") == [("key-b", "hi")]  # b's server ran on b's database
    assert posts(tmp_path / "a") == []


def test_the_key_changes_with_the_script_the_env_the_folder_and_the_endpoint(
    tmp_path: Path,
) -> None:
    script = tmp_path / "server.py"
    script.write_text("print('v1')\n", encoding="utf-8")
    launch = McpLaunch("s", command=("python", "server.py"), env={"DB": "a"}, cwd=tmp_path)
    key = listing_key(launch)
    assert listing_key(replace(launch, name="other")) == key  # the name lists nothing
    assert listing_key(replace(launch, startup_timeout_s=99)) == key
    assert listing_key(replace(launch, env={"DB": "b"})) != key
    assert listing_key(replace(launch, env={"DB": "b"}), ["DB"]) == listing_key(launch, ["DB"])
    assert listing_key(replace(launch, env={"DB": "a", "MODE": "x"}), ["DB"]) != key
    assert listing_key(replace(launch, cwd=tmp_path / "x")) != key
    assert listing_key(replace(launch, command=("python", "server.py", "--v2"))) != key
    stat = script.stat()
    os.utime(script, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert listing_key(launch) != key  # the script changed (its mtime)
    key = listing_key(launch)
    script.write_text("print('v22')\n", encoding="utf-8")
    os.utime(script, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert listing_key(launch) != key  # the script changed (its size)

    remote = McpLaunch("s", url="http://127.0.0.1:1/mcp", headers={"X-Token": "one"})
    assert listing_key(replace(remote, url="http://127.0.0.1:2/mcp")) != listing_key(remote)
    assert listing_key(replace(remote, headers={"X-Token": "two"})) != listing_key(remote)


def test_a_stale_cached_listing_fails_the_first_call_before_anything_is_sent(
    tmp_path: Path,
) -> None:
    """A change no key sees (same size, same mtime) is found when the server starts."""
    script = tmp_path / "notes_server.py"
    shutil.copy(SERVER, script)
    folder = tmp_path / "agent"
    shutil.copytree(AGENT, folder)
    yaml = (folder / "agent.yaml").read_text()
    (folder / "agent.yaml").write_text(
        yaml.replace("../../mcp_servers/notes_server.py", str(script))
    )
    data = tmp_path / "data"
    listings = McpListingCache()
    load_agent(folder, data_dir=data, mcp_listings=listings)

    stat = script.stat()
    source = script.read_text()
    changed = source.replace("def get_note(topic: str)", "def get_note(topic: int)")
    assert changed != source and len(changed) == len(source)
    script.write_text(changed)
    os.utime(script, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the key cannot tell
    stale = load_agent(folder, data_dir=data, mcp_listings=listings)
    assert listings.hits == 1
    schema = stale.tools.get("get_note").input_model.model_json_schema()
    assert schema["properties"]["topic"]["type"] == "string"  # as listed before the change

    post = ("post_note", {"channel": "general", "text": "hi"}, "key-1")
    note, posted = calls(stale, ("get_note", {"topic": "cats"}), post)
    assert note.error_code == "TOOL_SCHEMA_CHANGED"
    assert not note.retryable and note.attempts == 1
    assert "get_note" in (note.error_message or "")
    assert posted.error_code == "TOOL_SCHEMA_CHANGED"  # not OUTCOME_UNKNOWN: nothing sent
    assert posts(data) == []
    assert not any(alive(pid) for pid in started(data))

    with pytest.raises(ConfigInvalidError) as caught:  # loaded again: the plan is checked
        load_agent(folder, data_dir=data)  # against the schema the server lists now
    assert "get_note.topic expects int" in caught.value.message


def test_listing_ignores_env_must_name_the_servers_env(tmp_path: Path) -> None:
    folder = variant(tmp_path, IGNORING, IGNORING + "    listing_ignores_env: [NOTES_DBX]\n")
    with pytest.raises(ConfigInvalidError) as caught:
        load_agent(folder, data_dir=tmp_path / "data")
    assert "listing_ignores_env names no env ['NOTES_DBX']" in caught.value.message
    assert started(tmp_path / "data") == []  # refused before anything started


@pytest.mark.parametrize("mode", ["doubled", "repeated"])
def test_a_listing_that_names_a_tool_twice_fails_the_load_fresh_or_cached(
    tmp_path: Path, mode: str
) -> None:
    """Found by a hostile review: the last of two ``balance`` entries was kept silently.

    ``doubled`` gives the second entry another input schema, so a server could swap the
    schema a plan was checked against; ``repeated`` lists one entry twice, and is refused
    too (no choice between entries is made, even when they agree). A listing reused from
    an ``McpListingCache`` is checked as a fresh one is.
    """
    server = {
        "name": "bank",
        "command": ["python", str(RAW_SERVER), mode],
        "tools": {"balance": None},
    }
    steps = [{"id": "s1", "tool": "balance", "args": {}}]
    config = parse_config(one_intent("go", steps=steps, mcp_servers=[server]))
    listings = McpListingCache()
    for build in range(3):
        cache = None if build == 0 else listings
        with pytest.raises(ConfigInvalidError) as caught:
            Agent.build(config, [], root=tmp_path, mcp_listings=cache)
        assert caught.value.code == "CONFIG_INVALID"
        assert caught.value.message == "mcp server 'bank' lists a tool twice: 'balance'"
    assert (listings.misses, listings.hits) == (1, 1)  # the third build read the cache


def test_a_live_listing_that_names_an_imported_tool_twice_is_a_changed_schema() -> None:
    """At a server's start the live listing must be the one built from: no repeats."""
    from mcp.types import Tool

    built = Tool(name="balance", inputSchema={"type": "object", "properties": {}})
    swapped = Tool(name="balance", inputSchema={"type": "object", "required": ["account"]})
    expected = {"balance": schemas(built)}
    check_listing("bank", expected, [built])  # the listing built from: no error
    for live in ([swapped, built], [built, built]):
        with pytest.raises(ToolSchemaChangedError) as caught:
            check_listing("bank", expected, live)
        assert "balance (listed twice)" in caught.value.message
