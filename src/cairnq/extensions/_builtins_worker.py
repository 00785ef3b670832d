"""The worker API cairnq's own extensions contribute, in one class the worker inherits.

Part of the registry of built-ins (``_registry.builtins``): each built-in with
methods of its own on the worker adds its mixin here (today the schedules'
``periodic``, ``schedule`` and ``schedules``). Each mixin states what it needs of
the worker as a ``Protocol``, since the extensions sit below the worker.
"""

from __future__ import annotations

from .schedules._worker import ScheduleWorkerAPI

__all__ = ["BuiltinsWorkerAPI"]


class BuiltinsWorkerAPI(ScheduleWorkerAPI):
    """The built-in extensions' methods of ``Worker``."""
