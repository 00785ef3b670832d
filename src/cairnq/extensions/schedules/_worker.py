"""The schedules' worker API: ``@worker.periodic``, ``worker.schedule`` and ``worker.schedules``.

``ScheduleWorkerAPI`` is mixed into the worker (through ``extensions/_builtins_worker``);
what it needs of the worker is ``ScheduleHost``. A declared schedule is validated at
once (nothing is registered or stored for a bad one) and kept by the worker's
``Schedules`` extension, whose component stores it when the worker starts.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ...errors import InvalidArgument
from ...models import TaskDef
from . import Schedules
from ._model import DEFAULT_CATCH_UP, ScheduleSpec

if TYPE_CHECKING:
    from ..._json import JsonCodec
    from .._base import Extension

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
        cron: str | None = None,
        /,
        *,
        every: str | int | datetime.timedelta | None = None,
        name: str | TaskDef[Any, Any] | None = None,
        schedule: str | None = None,
        tz: str | None = None,
        payload: Any = None,
        queue: str | None = None,
        priority: int = 0,
        max_attempts: int = 3,
        metadata: Any = None,
        catch_up: str | int | datetime.timedelta = DEFAULT_CATCH_UP,
        catch_up_policy: str = "all",
        overlap: str = "allow",
        jitter: str | int | datetime.timedelta | None = None,
        concurrency: int | None = None,
    ) -> Callable[[F], F]:
        """Register a handler and a schedule that submits one task to it per slot.

        Args:
            cron: A cron expression: 5 fields, or 6 with seconds first, or an alias
                (``@hourly``, ``@daily``, ``@weekly``, ``@monthly``, ``@yearly``);
                needs the ``cron`` extra. Give ``cron`` or ``every``.
            every: An interval (``"90s"``, ``"1h"``, seconds as a number or a ``timedelta``),
                its slots counted from the Unix epoch.
            name: The task name (the function's name by default), or a ``TaskDef``.
            schedule: The schedule's name (the task name by default); unique in the
                database.
            tz: The time zone cron slots are read in (``"UTC"``). A local time that
                does not exist (spring forward) runs once at the first instant after
                the gap; one that occurs twice (fall back) runs once, the first time.
            payload, queue, priority, max_attempts, metadata: Each task's (queue:
                the worker's first queue by default).
            catch_up: How late a slot may still be submitted, after downtime (1 h).
                Older slots are recorded as missed, never submitted.
            catch_up_policy: ``"all"`` submits every slot inside ``catch_up``, oldest
                first; ``"latest"`` only the newest, recording the others as superseded.
            overlap: ``"allow"``; ``"skip"`` a slot while the previous slot's task is
                queued or running; ``"queue"``: the slot waits until it ends.
            jitter: Each task runs up to this long after its slot (a delay derived
                from the slot, the same in every process).
            concurrency: As for ``task``.

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

        options = {
            "cron": cron,
            "every": every,
            "tz": tz,
            "payload": payload,
            "queue": queue,
            "priority": priority,
            "max_attempts": max_attempts,
            "metadata": metadata,
            "catch_up": catch_up,
            "catch_up_policy": catch_up_policy,
            "overlap": overlap,
            "jitter": jitter,
        }

        def decorate(fn: F) -> F:
            task_name = name.name if isinstance(name, TaskDef) else name
            if task_name is None:
                task_name = getattr(fn, "__name__", None)
            spec = _spec(self, schedule or task_name, task_name, **options)
            self.register(name, fn, concurrency=concurrency)
            declared(self)[spec.name] = spec
            return fn

        return decorate

    def schedule(
        self: ScheduleHost,
        schedule: str,
        task: str | TaskDef[Any, Any],
        *,
        cron: str | None = None,
        every: str | int | datetime.timedelta | None = None,
        tz: str | None = None,
        payload: Any = None,
        queue: str | None = None,
        priority: int = 0,
        max_attempts: int = 3,
        metadata: Any = None,
        catch_up: str | int | datetime.timedelta = DEFAULT_CATCH_UP,
        catch_up_policy: str = "all",
        overlap: str = "allow",
        jitter: str | int | datetime.timedelta | None = None,
    ) -> ScheduleSpec:
        """Declare a schedule for ``task`` (the imperative ``periodic``, no handler).

        The worker stores it when it starts, replacing the definition of a stored
        schedule of that name and keeping its cursor, history and paused state. A
        schedule removed from the code stays in the database until
        ``cairnq schedules rm NAME`` (or ``remove_schedule``).

        Args:
            schedule: The schedule's name.
            task: The task name each slot submits (any name: a handler elsewhere
                may run it), or a ``TaskDef``.
            Others: As for ``periodic``.

        Returns:
            The validated definition.

        Raises:
            InvalidArgument: as for ``periodic``.

        Example::

            worker.schedule("hourly-sync", "crm.sync", every="1h", payload={"full": False})
        """
        spec = _spec(
            self,
            schedule,
            task.name if isinstance(task, TaskDef) else task,
            cron=cron,
            every=every,
            tz=tz,
            payload=payload,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            metadata=metadata,
            catch_up=catch_up,
            catch_up_policy=catch_up_policy,
            overlap=overlap,
            jitter=jitter,
        )
        declared(self)[spec.name] = spec
        return spec

    @property
    def schedules(self: ScheduleHost) -> list[ScheduleSpec]:
        """The schedules this worker declares, stored when it starts."""
        return list(declared(self).values())


def _spec(
    host: ScheduleHost, schedule: Any, task: Any, *, queue: Any, **options: Any
) -> ScheduleSpec:
    """Validate a declaration; its queue defaults to the worker's first."""
    spec = ScheduleSpec.build(
        host.client.codec,
        schedule,
        task,
        queue=host.queues[0] if queue is None else queue,
        **options,
    )
    if spec.name in declared(host):
        raise InvalidArgument(f"schedule {spec.name!r} is declared twice on this worker")
    return spec
