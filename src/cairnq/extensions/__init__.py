"""Extensions: each feature's tables, migrations, words and worker parts, declared alike.

A worker's run asks ``components`` for its extensions' parts (by default
``builtins()``), and drives them with the kernel's own parts in one lifecycle.
"""

from ._base import Component, Extension, Part, TaskRows, WorkerView
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
