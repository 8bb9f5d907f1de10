"""``corral db``: the store's schema revision (``current``) and its migrations (``upgrade``).

A SQLite home is upgraded on open anyway; a PostgreSQL store is upgraded only here, from
the deploy step, before the new version's servers and workers start (``docs/store.md``).
"""

from __future__ import annotations

import json

import typer
from rich.text import Text

from corral.cli.common import (
    HomeOption,
    JsonOption,
    StoreOption,
    _fails_cleanly,
    _home,
    _store_target,
    app,
    console,
)
from corral.observe.terminal import visible

db_app = typer.Typer(
    no_args_is_help=True, help="The store's schema: its revision, and migrations to this version."
)
app.add_typer(db_app, name="db")


@db_app.command()
@_fails_cleanly
def current(
    as_json: JsonOption = False, home: HomeOption = None, store: StoreOption = None
) -> None:
    """Show the store's schema revision and this corral's (head): current, older or newer."""
    from corral.store import schema
    from corral.store.sql import schema_state

    target = _store_target(_home(home, create=False), store)
    found = schema_state(target)
    _print(
        {"revision": found.revision, "head": schema.HEAD, "state": found.label},
        as_json,
    )


@db_app.command()
@_fails_cleanly
def upgrade(
    as_json: JsonOption = False, home: HomeOption = None, store: StoreOption = None
) -> None:
    """Create the schema of a new store, or migrate an older one to this corral's revision.

    Safe to run from several processes at once (one migrates, the others find it done).
    A store migrated by a newer corral is refused (STORE_SCHEMA_NEWER), and left as it is.
    """
    from corral.store import schema
    from corral.store.sql import SqlStore, schema_state

    named = store is not None and bool(store.strip())  # a store URL needs no home folder
    target = _store_target(_home(home, create=not named), store)
    before = schema_state(target)
    schema.refuse_newer(before, "named")
    SqlStore.open(target, upgrade=True).engine.dispose()
    after = schema_state(target)
    _print(
        {
            "revision": after.revision,
            "head": schema.HEAD,
            "state": after.label,
            "was": "empty" if before.empty else before.revision or "unversioned",
        },
        as_json,
    )


def _print(figures: dict[str, str | None], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(figures, ensure_ascii=False))
        return
    line = f"schema revision {figures['revision'] or '-'} (this corral: {figures['head']}): "
    line += figures["state"] or ""
    if "was" in figures:
        line += f", was {figures['was']}"
    console.print(Text(visible(line)))
