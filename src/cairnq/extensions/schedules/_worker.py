"""The schedules' worker API: ``@worker.periodic``, ``worker.schedule`` and ``worker.schedules``.

``ScheduleWorkerAPI`` is mixed into the worker (through ``extensions/_builtins_worker``);
what it needs of the worker is ``ScheduleHost``. A declared schedule is validated at
once (nothing is registered or stored for a bad one) and kept by the worker's
``Schedules`` extension, whose component stores it when the worker starts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ...errors import InvalidArgument
from ...models import TaskDef
from . import Schedules

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..._json import JsonCodec
    from .._base import Extension
    from ._model import ScheduleKeywords, ScheduleOptions, ScheduleSpec

F = TypeVar("F", bound=Callable[..., Any])
E = TypeVar("E", bound="Extension")


class _Codec(Protocol):
    @property
    def codec(self) -> JsonCodec: ...


class ScheduleHost(Protocol):
    """What the schedules' worker API needs from the worker it is mixed into."""

    @property
    def queues(self) -> Sequence[str]: ...

    @property
    def client(self) -> _Codec: ...

    def register(
        self, name: str | TaskDef[Any, Any] | None, fn: Any, *, concurrency: int | None = None
    ) -> object: ...

    def _extension(self, kind: type[E]) -> E: ...


def declared(host: ScheduleHost) -> dict[str, ScheduleSpec]:
    """The schedules ``host`` declares, by name (kept by its ``Schedules`` extension)."""
    return host._extension(Schedules).declared


class ScheduleWorkerAPI:
    """``periodic``, ``schedule`` and ``schedules``: a worker's declared schedules."""

    def periodic(
        self: ScheduleHost,
        when: str | ScheduleOptions | None = None,
        /,
        *,
        name: str | TaskDef[Any, Any] | None = None,
        schedule: str | None = None,
        concurrency: int | None = None,
        **options: Unpack[ScheduleKeywords],
    ) -> Callable[[F], F]:
        """Register a handler and a schedule that submits one task to it per slot.

        Args:
            when: A cron expression (the ``cron`` option, given first), or the
                options as a ``ScheduleOptions``.
            name: The task name (the function's name by default), or a ``TaskDef``.
            schedule: The schedule's name (the task name by default); unique in the
                database.
            concurrency: As for ``task``.
            **options: The schedule's options as keywords (``every=``, ``tz=``,
                ``catch_up=``, ...: the fields of ``ScheduleOptions``, which
                documents each); they replace those of ``when``. The queue is the
                worker's first unless given.

        Returns:
            A decorator that registers the handler and returns it unchanged.

        Raises:
            InvalidArgument: a bad cron expression, time zone, interval or option, a
                payload that is not JSON, or a schedule name declared twice; nothing
                is registered or stored.

        Example::

            @worker.periodic("0 9 * * 1-5", tz="Europe/Paris", catch_up="2h")
            async def morning_report(ctx):
                ...
        """
        given = _given(when, options)

        def decorate(fn: F) -> F:
            task_name = name.name if isinstance(name, TaskDef) else name
            if task_name is None:
                task_name = getattr(fn, "__name__", None)
            spec = _spec(self, schedule or task_name, task_name, given)
            self.register(name, fn, concurrency=concurrency)
            declared(self)[spec.name] = spec
            return fn

        return decorate

    def schedule(
        self: ScheduleHost,
        schedule: str,
        task: str | TaskDef[Any, Any],
        options: ScheduleOptions | None = None,
        **keywords: Unpack[ScheduleKeywords],
    ) -> ScheduleSpec:
        """Declare a schedule for ``task`` (the imperative ``periodic``, no handler).

        The worker stores it when it starts, replacing the definition of a stored
        schedule of that name and keeping its cursor, history and paused state. A
        schedule removed from the code stays in the database until
        ``cairnq schedules rm NAME`` (or ``cq.schedules.remove``).

        Args:
            schedule: The schedule's name.
            task: The task name each slot submits (any name: a handler elsewhere
                may run it), or a ``TaskDef``.
            options: The options (``ScheduleOptions``).
            **keywords: The options as keywords, replacing those of ``options``
                (as for ``periodic``).

        Returns:
            The validated definition.

        Raises:
            InvalidArgument: as for ``periodic``.

        Example::

            worker.schedule("hourly-sync", "crm.sync", every="1h", payload={"full": False})
        """
        from ._model import schedule_options

        spec = _spec(
            self,
            schedule,
            task.name if isinstance(task, TaskDef) else task,
            schedule_options(options, keywords),
        )
        declared(self)[spec.name] = spec
        return spec

    @property
    def schedules(self: ScheduleHost) -> list[ScheduleSpec]:
        """The schedules this worker declares, stored when it starts."""
        return list(declared(self).values())


def _given(when: str | ScheduleOptions | None, keywords: ScheduleKeywords) -> ScheduleOptions:
    """``periodic``'s options: ``when``, a cron expression or options, and its keywords."""
    from ._model import ScheduleOptions, schedule_options

    if when is None or isinstance(when, ScheduleOptions):
        return schedule_options(when, keywords)
    if "cron" in keywords:
        raise InvalidArgument(f"cron given twice: {when!r} first and cron={keywords['cron']!r}")
    return schedule_options(None, {**keywords, "cron": when})


def _spec(host: ScheduleHost, schedule: Any, task: Any, options: ScheduleOptions) -> ScheduleSpec:
    """Validate a declaration; its queue defaults to the worker's first."""
    from ._model import ScheduleSpec

    if options.queue is None:
        options = dataclasses.replace(options, queue=host.queues[0])
    spec = ScheduleSpec.build(host.client.codec, schedule, task, options)
    if spec.name in declared(host):
        raise InvalidArgument(f"schedule {spec.name!r} is declared twice on this worker")
    return spec
