"""The feature keywords ``Worker(...)`` and ``@worker.task(...)`` take by name, for typing.

Each is an option of one built-in extension (``Extension.options``,
``Extension.task_options``), which checks it when the worker is built (or the
handler registered) and builds its own state from it; the worker hands them on as
``**options`` without reading them, typed here (``WorkerOptions``, ``TaskOptions``)
so that a type checker still knows each keyword. The worker's old attributes for
them are read here too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, TypedDict, cast

from ..extensions.limits._model import Limit


class WorkerOptions(TypedDict, total=False):
    """The built-in extensions' keywords of ``Worker(...)`` (see ``Worker``'s arguments)."""

    schedules: bool
    max_snoozes: int
    limits: Sequence[Limit] | None
    record_attempts: bool


class TaskOptions(TypedDict, total=False):
    """The built-in extensions' keywords of ``@worker.task(...)`` and ``register(...)``."""

    max_snoozes: int | None


class _Optioned(Protocol):
    @property
    def _options(self) -> Mapping[str, object]: ...


class WorkerAttributes:
    """The worker's attributes for its feature options, as before they were options."""

    @property
    def evaluates_schedules(self: _Optioned) -> bool:
        """Whether this worker evaluates the database's schedules (``schedules=``)."""
        return bool(self._options["schedules"])

    @property
    def limits(self: _Optioned) -> list[Limit]:
        """The limits this worker declares (``limits=``), checked."""
        return cast("list[Limit]", self._options["limits"])
