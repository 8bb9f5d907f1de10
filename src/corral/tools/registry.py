"""The set of tools an agent may use, looked up by name."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from corral.errors import ConfigInvalidError, UnknownToolError
from corral.tools.spec import ToolSpec


class ToolRegistry:
    """Tools by name, and groups of equivalent tools by ``policy.equivalent_group``."""

    def __init__(self, specs: Iterable[ToolSpec] = ()) -> None:
        self._specs: dict[str, ToolSpec] = {}
        for spec in specs:
            self.add(spec)

    def add(self, spec: ToolSpec) -> None:
        """Register one tool; a second tool with the same name is a config error."""
        if spec.name in self._specs:
            raise ConfigInvalidError(f"two tools are named {spec.name!r}")
        self._specs[spec.name] = spec

    def get(self, name: str) -> ToolSpec:
        """The tool called ``name``; raises ``UnknownToolError`` listing what exists."""
        try:
            return self._specs[name]
        except KeyError:
            known = ", ".join(sorted(self._specs)) or "none"
            raise UnknownToolError(
                f"no tool named {name!r}", hint=f"known tools: {known}"
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(self._specs.values())

    def write(self, name: str) -> ToolSpec | None:
        """The write tool called ``name``; ``None`` for a read or a name not registered."""
        spec = self._specs.get(name)
        return spec if spec is not None and spec.policy.kind == "write" else None

    def names(self) -> list[str]:
        """Registered tool names, sorted."""
        return sorted(self._specs)

    def equivalents(self, name: str) -> list[ToolSpec]:
        """The tool and every other tool of its equivalence group (itself first)."""
        spec = self.get(name)
        group = spec.policy.equivalent_group
        if group is None:
            return [spec]
        others = [s for s in self._specs.values() if s.policy.equivalent_group == group]
        return [spec] + [s for s in others if s.name != name]
