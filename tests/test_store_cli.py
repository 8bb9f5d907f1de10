"""One store URL for every command (``--store``, ``CORRAL_STORE_URL``) and ``corral db``.

Each command runs in a fresh process. The store lies outside the home, so a command that
still opened ``HOME/corral.db`` would find no run; PostgreSQL runs with CORRAL_TEST_PG_URL.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral.store import schema
from tests.conftest import AFTERSALES, ROOT
from tests.extras import postgres_url
from tests.helpers import aftersales_as_the_fixtures_were_written, corral_cli

EXCHANGE = "我的打印机上周坏了，订单号 HD20240501，能换新吗？"
FIXTURE = ROOT / "tests" / "fixtures" / "home_v0" / "corral.sql"
PAUSED, FINISHED = "run_3a5a91cf0c6a4e8e", "run_f4a66025927b417d"


def cli(
    home: Path, *args: str, ok: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return corral_cli(home, *args, ok=ok, env=env)


def as_json(done: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(done.stdout)


def exchanges(home: Path) -> int:
    with sqlite3.connect(home / "data" / "aftersales" / "aftersales.db") as conn:
        return int(conn.execute("SELECT count(*) FROM exchanges").fetchone()[0])


def pause_approve_replay(home: Path, url: str, env: dict[str, str] | None = None) -> str:
    """A run paused, approved in another process, listed, shown, replayed: all on ``url``.

    ``url`` goes as ``--store`` to the first command and through ``CORRAL_STORE_URL`` to
    the others when ``env`` sets it (``url`` is then empty).
    """
    store = ["--store", url] if url else []
    paused = as_json(cli(home, "run", str(AFTERSALES), EXCHANGE, "--json", *store, env=env))
    assert paused["status"] == "awaiting_confirm"
    run_id = str(paused["run_id"])
    done = as_json(cli(home, "resume", run_id, "--approve", "--json", *store, env=env))
    assert done["status"] == "finished" and exchanges(home) == 1
    listed = as_json(cli(home, "runs", "--json", *store, env=env))
    assert run_id in [r["run_id"] for r in listed]
    assert as_json(cli(home, "show", run_id, "--json", *store, env=env))["status"] == "finished"
    lines = cli(home, "traces", run_id, "--json", *store, env=env).stdout.splitlines()
    assert any(json.loads(line)["event"] == "run_finished" for line in lines)
    assert as_json(cli(home, "stats", "--json", *store, env=env))["runs"] >= 1
    replayed = as_json(cli(home, "replay", run_id, "--json", *store, env=env))
    assert replayed["same_path"] is True
    assert as_json(cli(home, "db", "current", "--json", *store, env=env))["state"] == "current"
    return run_id


def test_every_command_uses_a_sqlite_url_outside_the_home(tmp_path: Path) -> None:
    home, db = tmp_path / "home", tmp_path / "elsewhere" / "runs.db"
    run_id = pause_approve_replay(home, f"sqlite:///{db}")
    assert db.is_file() and not (home / "corral.db").exists()
    assert (home / "logs" / f"{run_id}.jsonl").is_file()  # --home still holds the logs
    # the same store through the variable; the home alone (no URL) has no such run
    env_listed = as_json(cli(home, "runs", "--json", env={"CORRAL_STORE_URL": f"sqlite:///{db}"}))
    assert [r["run_id"] for r in env_listed] == [run_id]
    assert as_json(cli(home, "runs", "--json")) == []
    missing = cli(home, "show", run_id, ok=False)
    assert missing.returncode == 2 and "RUN_NOT_FOUND" in missing.stderr


def test_the_variable_alone_serves_every_command(tmp_path: Path) -> None:
    home, db = tmp_path / "home", tmp_path / "env.db"
    pause_approve_replay(home, "", {"CORRAL_STORE_URL": f"sqlite:///{db}"})
    assert db.is_file() and not (home / "corral.db").exists()


@pytest.mark.parametrize("url", ["memory:", "mysql://db/corral", "sqlite://", "corral.db"])
def test_a_url_that_is_no_sql_store_is_config_invalid(tmp_path: Path, url: str) -> None:
    for args in (["runs"], ["run", str(AFTERSALES), EXCHANGE], ["db", "upgrade"]):
        done = cli(tmp_path, *args, "--store", url, ok=False)
        assert done.returncode == 2, done.stdout
        assert "CONFIG_INVALID" in done.stderr and "sqlite:///" in done.stderr, done.stderr
    assert not (tmp_path / "corral.db").exists()


def test_every_store_command_takes_the_option() -> None:
    """A command that reads or writes runs and lacks ``--store`` would silently use the home."""
    from typer.main import get_command

    from corral.cli import app

    root = get_command(app)
    commands = getattr(root, "commands", {})
    wanted = {"run", "run-plan", "resume", "replay", "show", "runs", "traces", "handoff", "gc"}
    wanted |= {"stats", "chat", "demo", "eval", "record", "serve", "db"}
    assert wanted <= set(commands), sorted(set(commands))
    for name in sorted(wanted):
        command = commands[name]
        subcommands = getattr(command, "commands", {"": command})
        for each in subcommands.values():
            options = {opt for param in each.params for opt in getattr(param, "opts", [])}
            assert "--store" in options, name
            store = next(p for p in each.params if "--store" in getattr(p, "opts", []))
            assert store.envvar == "CORRAL_STORE_URL", name


def load_v0_home(home: Path) -> None:
    """A home as corral wrote it before migrations: runs, no ``alembic_version``."""
    home.mkdir(mode=0o700)
    with sqlite3.connect(home / "corral.db") as conn:
        conn.executescript(FIXTURE.read_text(encoding="utf-8"))
    with sqlite3.connect(home / "corral.db") as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert "corral_runs" in tables and schema.VERSION_TABLE not in tables


def test_db_upgrade_keeps_stored_runs_resumable_and_replayable(tmp_path: Path) -> None:
    home = tmp_path / "home"
    load_v0_home(home)
    assert as_json(cli(home, "db", "current", "--json")) == {
        "revision": None,
        "head": schema.HEAD,
        "state": "older",
    }
    upgraded = as_json(cli(home, "db", "upgrade", "--json"))
    assert upgraded == {
        "revision": schema.HEAD,
        "head": schema.HEAD,
        "state": "current",
        "was": "unversioned",
    }
    with sqlite3.connect(home / "corral.db") as conn:  # revision 0002 added the latency index
        indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert "ix_corral_step_facts_recent" in indexes
    again = as_json(cli(home, "db", "upgrade", "--json"))
    assert again["was"] == schema.HEAD and again["state"] == "current"
    # the dump records the folder it was made in; replays compare with the example as its
    # runs met it
    written = aftersales_as_the_fixtures_were_written(tmp_path / "aftersales")
    agent = ("--agent", str(written))
    # the finished run replays as it was recorded; the paused one resumes to the end
    assert as_json(cli(home, "replay", FINISHED, *agent, "--json"))["same_path"] is True
    done = as_json(cli(home, "resume", PAUSED, "--approve", *agent, "--json"))
    assert done["status"] == "finished" and done["outcome"] == "success"
    assert [s["status"] for s in done["steps"]] == ["succeeded"] * 5
    assert exchanges(home) == 1
    assert as_json(cli(home, "replay", PAUSED, *agent, "--json"))["same_path"] is True
    figures = as_json(cli(home, "stats", "--json"))
    assert figures["runs"] == 2 and figures["by_status"] == {"finished": 2}


def test_an_unversioned_home_is_upgraded_when_a_command_opens_it(tmp_path: Path) -> None:
    """SQLite: the home of one user is migrated on open, as homes always gained tables."""
    home = tmp_path / "home"
    load_v0_home(home)
    done = as_json(cli(home, "resume", PAUSED, "--approve", "--agent", str(AFTERSALES), "--json"))
    assert done["status"] == "finished"
    with sqlite3.connect(home / "corral.db") as conn:
        stamped = conn.execute(f"SELECT version_num FROM {schema.VERSION_TABLE}").fetchall()
    assert stamped == [(schema.HEAD,)]


def test_a_newer_schema_is_refused_by_every_command(tmp_path: Path) -> None:
    home = tmp_path / "home"
    run_id = as_json(cli(home, "run", str(AFTERSALES), EXCHANGE, "--json"))["run_id"]
    with sqlite3.connect(home / "corral.db") as conn:
        conn.execute(f"UPDATE {schema.VERSION_TABLE} SET version_num = '9999_future'")
    for args in (["runs"], ["show", run_id], ["resume", run_id, "--approve"], ["db", "upgrade"]):
        done = cli(home, *args, ok=False)
        assert done.returncode == 2 and "STORE_SCHEMA_NEWER" in done.stderr, (args, done.stderr)
        assert "9999_future" in done.stderr
    shown = as_json(cli(home, "db", "current", "--json"))
    assert shown == {"revision": "9999_future", "head": schema.HEAD, "state": "newer"}
    assert exchanges(home) == 0


@pytest.fixture
def pg_url_in_new_schema() -> Iterator[str]:
    """The test server's URL, on a PostgreSQL schema of its own (an empty database).

    Dropped afterwards: a schema left behind shows its tables and indexes to every later
    test that looks at the whole server (``pg_indexes``).
    """
    from sqlalchemy import create_engine, text

    from corral.store.registry import sql_target

    url = str(sql_target(postgres_url()))
    name = f"corral_cli_{uuid.uuid4().hex[:12]}"
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {name}"))
    joiner = "&" if "?" in url else "?"
    try:
        yield f"{url}{joiner}options=-csearch_path%3D{name}"
    finally:
        with engine.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {name} CASCADE"))
        engine.dispose()


def test_postgresql_serves_every_command(tmp_path: Path, pg_url_in_new_schema: str) -> None:
    url = pg_url_in_new_schema
    assert as_json(cli(tmp_path, "db", "current", "--json", "--store", url))["state"] == "empty"
    upgraded = as_json(cli(tmp_path, "db", "upgrade", "--json", "--store", url))
    assert upgraded["was"] == "empty" and upgraded["state"] == "current"
    pause_approve_replay(tmp_path / "home", url)
    assert not (tmp_path / "home" / "corral.db").exists()


def test_postgresql_is_not_migrated_implicitly(tmp_path: Path, pg_url_in_new_schema: str) -> None:
    """A shared database is upgraded by `corral db upgrade` only, then opens."""
    from sqlalchemy import create_engine, text

    url = pg_url_in_new_schema
    as_json(cli(tmp_path, "db", "upgrade", "--json", "--store", url))
    engine = create_engine(str(url))
    with engine.begin() as conn:  # as a store made before migrations
        conn.execute(text(f"DROP TABLE {schema.VERSION_TABLE}"))
    engine.dispose()
    refused = cli(tmp_path, "run", str(AFTERSALES), EXCHANGE, "--store", url, ok=False)
    assert refused.returncode == 2 and "STORE_SCHEMA_OLDER" in refused.stderr
    assert "corral db upgrade" in refused.stderr
    assert as_json(cli(tmp_path, "db", "upgrade", "--json", "--store", url))["was"] == (
        "unversioned"
    )
    paused = as_json(cli(tmp_path, "run", str(AFTERSALES), EXCHANGE, "--json", "--store", url))
    assert paused["status"] == "awaiting_confirm"


def test_db_upgrade_of_a_named_store_makes_no_home_folder(tmp_path: Path) -> None:
    """Found by a walkthrough: ``corral db upgrade --store URL`` (a deploy step) left an
    empty ``.corral`` folder in the working directory; ``db current`` did not."""
    home, db = tmp_path / "home", tmp_path / "elsewhere" / "runs.db"
    done = as_json(cli(home, "db", "upgrade", "--json", "--store", f"sqlite:///{db}"))
    assert done["state"] == "current" and db.is_file()
    env = {"CORRAL_STORE_URL": f"sqlite:///{db}"}
    assert as_json(cli(home, "db", "upgrade", "--json", env=env))["was"] == schema.HEAD
    assert not home.exists()
    as_json(cli(home, "db", "upgrade", "--json"))  # the home's own store: the home is made
    assert (home / "corral.db").is_file()


@pytest.mark.parametrize("folder", ["team#2", "100%41", "a b&c=d"])
def test_a_home_whose_name_looks_like_url_syntax_is_used_as_named(
    tmp_path: Path, folder: str
) -> None:
    """Found by a walkthrough: with ``#`` in the home, read-only commands opened another,
    new file (the ``#`` ended the path of SQLite's URI, and ``mode=ro`` with it) and said
    STORE_CORRUPT; with ``%41`` the home could not be used at all."""
    parent = tmp_path / "q"
    home = parent / folder
    run_id = as_json(cli(home, "run", str(AFTERSALES), EXCHANGE, "--json"))["run_id"]
    assert [r["run_id"] for r in as_json(cli(home, "runs", "--json"))] == [run_id]
    assert as_json(cli(home, "show", run_id, "--json"))["status"] == "awaiting_confirm"
    assert sorted(p.name for p in parent.iterdir()) == [folder]  # nothing made beside it


def test_a_sqlite_store_url_with_a_query_is_config_invalid(tmp_path: Path) -> None:
    """It crashed read-only commands with a traceback, and ``run`` wrote a file named
    ``runs.db`` (0644) beside an empty ``runs.db?timeout=30``."""
    url = f"sqlite:///{tmp_path / 'runs.db'}?timeout=30"
    for args in (["runs"], ["run", str(AFTERSALES), EXCHANGE]):
        done = cli(tmp_path / "home", *args, "--json", "--store", url, ok=False)
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        error = json.loads(done.stdout)["error"]
        assert error["code"] == "CONFIG_INVALID" and "has a query" in error["message"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("runs.db")]
