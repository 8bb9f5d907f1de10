"""Named factories that installed packages can add to: model providers, stores.

A registry is a value, built when it is asked for from corral's built-ins and the
``importlib.metadata`` entry points of one group (``corral.models``, ``corral.stores``);
nothing is registered into module state at import. A package adds a provider with

.. code-block:: toml

    [project.entry-points."corral.models"]
    mycloud = "mycloud_corral:make_model"

Built-ins keep their names (an entry point cannot replace ``openai``), and an entry point
is imported only when its name is used, so a broken plugin breaks only what names it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from types import MappingProxyType
from typing import Generic, TypeVar

from corral.errors import ConfigInvalidError

F = TypeVar("F")


@dataclass(frozen=True)
class Registry(Generic[F]):
    """Factories by name: the built-ins, then what installed packages declare."""

    kind: str
    """What the names name, for messages: "model provider", "store"."""
    group: str
    """The entry point group packages declare theirs in."""
    builtins: Mapping[str, F]
    installed: Mapping[str, EntryPoint]

    @classmethod
    def discover(cls, kind: str, group: str, builtins: Mapping[str, F]) -> Registry[F]:
        """The built-ins plus the entry points installed now in ``group``."""
        found = {ep.name: ep for ep in entry_points(group=group) if ep.name not in builtins}
        return cls(kind, group, MappingProxyType(dict(builtins)), MappingProxyType(found))

    def names(self) -> list[str]:
        """Every name this registry knows, built-ins first."""
        return [*self.builtins, *sorted(self.installed)]

    def get(self, name: str, *, hint: str | None = None) -> F:
        """The factory called ``name``; ``ConfigInvalidError`` for an unknown or broken one."""
        if name in self.builtins:
            return self.builtins[name]
        entry = self.installed.get(name)
        if entry is None:
            raise ConfigInvalidError(
                f"unknown {self.kind} {name!r} (known: {', '.join(self.names())})",
                hint=hint or f"install a package that declares it in the {self.group!r} group",
            )
        try:
            loaded: F = entry.load()
        except Exception as exc:  # a plugin's import may raise anything
            raise ConfigInvalidError(
                f"{self.kind} {name!r} ({entry.value}) failed to load: {type(exc).__name__}: {exc}",
                hint=f"fix or reinstall the package that provides {entry.value}",
            ) from None
        return loaded
