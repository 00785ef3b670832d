"""Names a module exports but imports only when first asked for (PEP 562).

A package whose names live in modules most processes never need (a feature's
models, the blocking client) lists them with where they live; ``exports`` gives the
package's ``__getattr__`` and ``__dir__``::

    if TYPE_CHECKING:
        from ._model import Schedule
    else:
        __getattr__, __dir__ = exports(__name__, {"Schedule": "._model"})

The ``TYPE_CHECKING`` import is what type checkers (and the import-graph tests) read;
the table is what runs. A name is imported once: its value is then set on the package,
so later lookups find it there. A table entry naming a submodule by its own name
(``"limits": ".limits"``) gives the submodule.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def exports(
    package: str, table: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of the module named ``package``, which
    exports each name of ``table`` from the module (relative to ``package``) beside it."""

    def __getattr__(name: str) -> object:
        where = table.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        found = importlib.import_module(where, package)
        value = found if found.__name__ == f"{package}.{name}" else getattr(found, name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *table})

    return __getattr__, __dir__
