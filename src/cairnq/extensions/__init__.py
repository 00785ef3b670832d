"""Extensions: each feature's tables, migrations, words and worker parts, declared alike.

A worker's run asks ``components`` for its extensions' parts (by default
``builtins()``), and drives them with the kernel's own parts in one lifecycle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._base import Component, Extension, Part, TaskRows, WorkerView

if TYPE_CHECKING:
    from ._registry import builtins, check, components

__all__ = [
    "Component",
    "Extension",
    "Part",
    "TaskRows",
    "WorkerView",
    "builtins",
    "check",
    "components",
]

_REGISTRY = ("builtins", "check", "components")


def __getattr__(name: str) -> Any:
    # The registry loads on first use, not with the package: the built-ins whose
    # parts are still in worker/ import the worker, which imports the client, which
    # imports the extensions' code (an extension's operations and model).
    if name in _REGISTRY:
        from . import _registry

        return getattr(_registry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
