"""Stores by URL: ``sqlite:///path/corral.db``, ``memory:``, ``postgresql://...``, plugins.

The URL's scheme (without a ``+driver`` part) names a factory in a ``Registry``: the
built-ins below plus the entry points of the ``corral.stores`` group. A factory is called
with the whole URL and ``read_only`` and returns a ``Store``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from corral.errors import ConfigInvalidError
from corral.plugins import Registry
from corral.store.base import Store

STORES_GROUP = "corral.stores"
"""The entry point group a package declares its stores in."""

StoreFactory = Callable[[str, bool], Store]
"""Opens the store a URL names (``read_only``: for commands that only read)."""

_HINT = "use sqlite:///path/corral.db, memory: or postgresql+psycopg://user@host/db"
_SQL_HINT = "use sqlite:///path/corral.db or postgresql://user@host/db (corral[postgres])"


SQL_SCHEMES = ("sqlite", "postgresql")
"""The schemes ``SqlStore`` opens: the only stores a command line keeps runs in."""


def sql_target(url: str) -> str | Path:
    """What ``SqlStore.open`` takes for a SQL store's URL: a SQLite file, or the URL.

    ``sqlite:///relative/corral.db`` and ``sqlite:////absolute/corral.db`` name a file;
    ``postgresql://...`` without a driver means psycopg 3 (``corral[postgres]``), the
    driver corral supports; ``CONFIG_INVALID`` for anything else.
    """
    scheme, colon, _ = url.partition(":")
    base, plus, _driver = scheme.lower().partition("+")
    if not colon or base not in SQL_SCHEMES:  # named by its scheme: the rest may hold a password
        named = f"a {scheme!r} URL" if colon and "://" in url else repr(url)
        raise ConfigInvalidError(f"store {named} is not a SQLite or PostgreSQL URL", hint=_SQL_HINT)
    if base == "sqlite":
        path = url.partition(":///")[2]
        if not path:
            raise ConfigInvalidError(f"store {url!r} names no file", hint=_SQL_HINT)
        if "?" in path:  # the file's name is taken as written: a query would become part of it
            raise ConfigInvalidError(
                f"store {url!r} has a query; corral sets a SQLite file's options itself",
                hint="name the file only: sqlite:///path/corral.db",
            )
        return Path(path)
    from sqlalchemy.engine import make_url  # the parser that will read it: SqlStore's
    from sqlalchemy.exc import ArgumentError

    try:  # no //, a port that is no number, an unclosed [: a clean error, not a traceback
        port = make_url(url).port
    except (ValueError, ArgumentError):  # their text may quote the password the URL holds
        port = -1
    if port is not None and not 0 < port < 65536:
        raise ConfigInvalidError(
            "the PostgreSQL store URL cannot be read: its form, host or port is not valid",
            hint="postgresql://user:password@host:5432/db (percent-encode a password's # ? / [ ])",
        )
    return url if plus else "postgresql+psycopg" + url[len(scheme) :]


def _sqlite(url: str, read_only: bool) -> Store:
    from corral.store.sql import SqlStore

    return SqlStore.open(sql_target(url), read_only=read_only)


def _memory(url: str, read_only: bool) -> Store:
    from corral.store.memory import MemoryStore

    return MemoryStore()


def _sqlalchemy(url: str, read_only: bool) -> Store:
    from corral.store.sql import SqlStore

    return SqlStore.open(sql_target(url), read_only=read_only)


def stores() -> Registry[StoreFactory]:
    """The built-in stores and those installed packages declare in ``corral.stores``."""
    builtins: dict[str, StoreFactory] = {
        "sqlite": _sqlite,
        "memory": _memory,
        "postgresql": _sqlalchemy,
    }
    return Registry.discover("store", STORES_GROUP, builtins)


def open_store(
    url: str, *, read_only: bool = False, registry: Registry[StoreFactory] | None = None
) -> Store:
    """The store ``url`` names; ``ConfigInvalidError`` for an unknown scheme.

    >>> open_store("sqlite:///.corral/corral.db")
    """
    scheme, colon, _ = url.partition(":")
    if not colon:
        raise ConfigInvalidError(f"store {url!r} is not a URL", hint=_HINT)
    factory = (registry or stores()).get(scheme.split("+")[0].lower(), hint=_HINT)
    return factory(url, read_only)
