"""Extensions: each feature's tables, migrations, words, kernel hooks and worker parts,
declared alike.

A worker's run compiles its extensions' (by default ``builtins()``) hooks into one
``kernel.points.Points`` (``points``), which its claimer and settlements run, and
asks ``components`` for their parts, which it drives with the kernel's own parts in
one lifecycle.
"""

from ._base import Component, Extension, Hooks, Part, TaskRows, WorkerView
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
