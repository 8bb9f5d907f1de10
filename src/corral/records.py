"""A faster ``__init__`` for the frozen records a run makes by the dozen.

``@dataclass(frozen=True)`` makes ``__init__`` set each field with
``object.__setattr__(self, name, value)``: a global lookup, an attribute lookup and a
generic ``setattr`` that looks the name up again, per field. A run makes about forty
such records (its events' payloads, the gates' proposals, its memory): 3 % of a 5-step
run's instructions, which no profile showed, because every generated ``__init__`` has
the same file, line and name, and ``pstats`` keeps one entry of those.

``fast_init`` gives a frozen slots dataclass an ``__init__`` that sets each slot through
its own descriptor, bound once when the class is made. The signature, the defaults (a
``default_factory`` too) and the frozen instances are those ``dataclass`` makes; a class
that needs what this does not do (``__post_init__``, ``InitVar``, a field left out of
``__init__``) is refused when it is decorated, not at its first use.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from typing import Any, TypeVar

T = TypeVar("T", bound=type)


def fast_init(cls: T) -> T:
    """Replace the ``__init__`` of ``cls``, a ``@dataclass(frozen=True, slots=True)``."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"fast_init needs a frozen slots dataclass, not {cls.__qualname__}")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"fast_init does not run __post_init__ ({cls.__qualname__})")
    generated: Any = cls.__dict__["__init__"]  # the one ``dataclass`` made
    fields = dataclasses.fields(cls)
    parameters = inspect.signature(generated).parameters
    made = [name for name in parameters if name != "self"]
    # ``dataclass`` takes the keyword-only fields after the others, each group in order
    expected = [f.name for f in fields if not f.kw_only] + [f.name for f in fields if f.kw_only]
    if made != expected or not all(f.init for f in fields):
        # an InitVar is a parameter but no field; a field with init=False is not a parameter
        raise TypeError(f"fast_init needs __init__ to take exactly the fields ({cls.__qualname__})")
    if any(f.name == "self" or f.name.startswith(_OWN) for f in fields):
        raise TypeError(
            f"fast_init needs other field names than self and {_OWN}* ({cls.__qualname__})"
        )
    closure: dict[str, Any] = {}  # what the body reads, bound once: setters, defaults, factories
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for index, item in enumerate(fields):
        name = item.name
        setter, default, factory = (
            f"{_OWN}{what}_{index}" for what in ("set", "default", "factory")
        )
        closure[setter] = _slot(cls, name).__set__
        if item.default is not dataclasses.MISSING:
            closure[default] = item.default
            param = f"{name}={default}"
            body.append(f"{setter}(self, {name})")
        elif item.default_factory is not dataclasses.MISSING:
            # the default that stands for the factory is ``dataclass``'s own (``<factory>``)
            closure[default] = parameters[name].default
            closure[factory] = item.default_factory
            param = f"{name}={default}"
            body.append(f"{setter}(self, {factory}() if {name} is {default} else {name})")
        else:
            param = name
            body.append(f"{setter}(self, {name})")
        (keyword if item.kw_only else positional).append(param)
    signature = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    lines = "\n".join(f"        {line}" for line in body) or "        pass"
    # Made inside a function of the bound values (``dataclass``'s way): the ``__init__``
    # reads them as its closure, and its globals are the class's module, so its string
    # annotations resolve (``typing.get_type_hints``) as the generated one's did.
    source = (
        f"def {_OWN}make({', '.join(closure)}):\n"
        f"    def __init__({signature}):\n{lines}\n"
        "    return __init__\n"
    )
    local: dict[str, Any] = {}
    module_globals = sys.modules[cls.__module__].__dict__
    # a file name of its own: a profile tells each record's ``__init__`` from the others
    exec(
        compile(source, f"<fast_init {cls.__module__}.{cls.__qualname__}>", "exec"),
        module_globals,
        local,
    )
    init = local[f"{_OWN}make"](**closure)
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = generated.__doc__
    init.__annotations__ = dict(generated.__annotations__)
    type.__setattr__(cls, "__init__", init)
    return cls


_OWN = "__fast_init_"
"""The prefix of the names the generated code binds: no field may start with it."""


def _slot(cls: type, name: str) -> Any:
    """The member descriptor of slot ``name``, from the class that declares it."""
    for klass in cls.__mro__:
        if name in klass.__dict__ and name in getattr(klass, "__slots__", ()):
            return klass.__dict__[name]
    raise TypeError(f"{cls.__qualname__}.{name} is not a slot")
