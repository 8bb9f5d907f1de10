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


def _sqlite(url: str, read_only: bool) -> Store:
    from corral.store.sql import SqlStore

    path = url.partition(":///")[2]
    if not path:
        raise ConfigInvalidError(f"store {url!r} names no file", hint=_HINT)
    return SqlStore.open(Path(path), read_only=read_only)


def _memory(url: str, read_only: bool) -> Store:
    from corral.store.memory import MemoryStore

    return MemoryStore()


def _sqlalchemy(url: str, read_only: bool) -> Store:
    from corral.store.sql import SqlStore

    return SqlStore.open(url, read_only=read_only)


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
