"""Extensions: each feature's tables, migrations, words, kernel hooks and worker parts,
declared alike.

A worker's run compiles its extensions' (by default ``builtins()``) hooks into one
``kernel.points.Points`` (``points``), which its claimer and settlements run, and
asks ``components`` for their parts, which it drives with the kernel's own parts in
one lifecycle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._base import Component, Extension, Hooks, Part, TaskRows, WorkerView

if TYPE_CHECKING:
    from ._registry import LedgerWatch, Ready, builtins, check, components, points

__all__ = [
    "Component",
    "Extension",
    "Hooks",
    "LedgerWatch",
    "Part",
    "Ready",
    "TaskRows",
    "WorkerView",
    "builtins",
    "check",
    "components",
    "points",
]

_REGISTRY = ("LedgerWatch", "Ready", "builtins", "check", "components", "points")


def __getattr__(name: str) -> Any:
    # The registry loads on first use, not with the package: the built-ins whose
    # parts are still in worker/ import the worker, which imports the client, which
    # imports the extensions' code (an extension's operations and model).
    if name in _REGISTRY:
        from . import _registry

        return getattr(_registry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
