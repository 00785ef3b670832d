"""The client's schedules: ``cq.schedules``, and the flat methods before it (deprecated), async.

``scripts/generate_sync.py`` turns this file into ``_client_sync.py`` beside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..._deprecated import renamed
from ...models import TaskDef
from .._client_async import ClientView

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._model import Schedule, ScheduleKeywords, ScheduleOptions, ScheduleSlot

    ScheduleList = list[Schedule]
    SlotList = list[ScheduleSlot]


class AsyncSchedules:
    """``cq.schedules``: periodic tasks stored in the database, which every cairnq
    worker on it evaluates (see ``cairnq.schedules``)."""

    __slots__ = ("_client",)

    def __init__(self, client: ClientView) -> None:
        self._client = client

    async def add(
        self,
        name: str,
        task: str | TaskDef[Any, Any],
        options: ScheduleOptions | None = None,
        *,
        paused: bool = False,
        replace: bool = False,
        **keywords: Unpack[ScheduleKeywords],
    ) -> Schedule:
        """Store a schedule in the database: every cairnq worker on it evaluates it.

        Args:
            name: The schedule's name, unique in the database.
            task: The task name each slot submits, or a ``TaskDef``.
            options: When its slots fall and what each slot's task gets
                (``ScheduleOptions``; queue ``"default"`` when not given).
            paused: Store it paused (``resume`` starts it).
            replace: Replace the definition of a stored schedule of that name,
                keeping its cursor, history and paused state.
            **keywords: The options as keywords (``cron=``, ``every=``, ...: the
                fields of ``ScheduleOptions``); they replace those of ``options``.

        Returns:
            The stored schedule. Its first slot is the first after now: a new
            schedule catches nothing up.

        Raises:
            InvalidArgument: a bad cron expression, time zone, interval or option,
                or the name is taken and ``replace`` is false; nothing is stored.
            SerializationError: payload or metadata is not portable JSON.
            SchemaIncomplete: the database lacks the schedules tables (``cairnq migrate``).

        Example::

            await cq.schedules.add("nightly-report", "report.build", cron="0 2 * * *",
                                   tz="Europe/Paris", catch_up="6h")
            nightly = ScheduleOptions(cron="0 2 * * *", tz="Europe/Paris")
            await cq.schedules.add("nightly-export", "export.run", nightly, queue="exports")
        """
        from . import _ops
        from ._model import ScheduleSpec

        spec = ScheduleSpec.build(
            self._client.codec,
            name,
            task.name if isinstance(task, TaskDef) else task,
            options,
            paused=paused,
            **keywords,
        )
        op = _ops.put(spec, source="api", replace=bool(replace))
        stored, _ = await self._client._run(op, write=True)
        return stored

    async def get(self, name: str) -> Schedule | None:
        """One stored schedule with its next slot and last task, or ``None``."""
        from . import _ops

        return await self._client._run(_ops.get(name), write=False)

    async def list(self) -> ScheduleList:
        """Every stored schedule, by name."""
        from . import _ops

        return await self._client._run(_ops.list_all(), write=False)

    async def pause(self, name: str) -> Schedule | None:
        """Pause a schedule: no slot submits a task until resumed. ``None``: no such schedule."""
        from . import _ops

        return await self._client._run(_ops.set_paused(name, True), write=True)

    async def resume(self, name: str) -> Schedule | None:
        """Resume a paused schedule from now: the slots passed while paused are recorded
        as ``paused``, not submitted. ``None``: no such schedule."""
        from . import _ops

        return await self._client._run(_ops.set_paused(name, False), write=True)

    async def remove(self, name: str) -> bool:
        """Delete a schedule and its slot record; the tasks it submitted stay.
        ``False``: no such schedule."""
        from . import _ops

        return await self._client._run(_ops.remove(name), write=True)

    async def history(self, name: str, *, limit: int = 50) -> SlotList:
        """A schedule's latest slot decisions, newest first (at most ``limit``, <= 500)."""
        from . import _ops

        return await self._client._run(_ops.history(name, limit), write=False)

    async def run_due(self) -> int:
        """Evaluate every due schedule now, as a worker does each second.

        Safe beside running workers: a slot submits one task whoever evaluates it.

        Returns:
            How many tasks were submitted.

        Raises:
            SchemaIncomplete: the database lacks the schedules tables (``cairnq migrate``).
        """
        from . import _ops

        # A worker's scheduler reads the ledger once, at start; a call reads it each time.
        await self._client._run(_ops.require(), write=False)
        done = await self._client._follow(_ops.run_due(self._client.codec))
        return sum(len(d.enqueued) for d in done)


class AsyncSchedulesClient:
    """The client's ``schedules`` namespace, and the flat methods that came before it,
    kept for one release: each warns once and does what the namespace's method does."""

    @property
    def schedules(self: ClientView) -> AsyncSchedules:
        """Periodic tasks stored in the database: ``add``, ``get``, ``list``, ``pause``,
        ``resume``, ``remove``, ``history``, ``run_due``."""
        return AsyncSchedules(self)

    async def add_schedule(
        self: ClientView,
        name: str,
        task: str | TaskDef[Any, Any],
        options: ScheduleOptions | None = None,
        *,
        paused: bool = False,
        replace: bool = False,
        **keywords: Unpack[ScheduleKeywords],
    ) -> Schedule:
        """Deprecated: ``cq.schedules.add``, which see."""
        renamed("cq.add_schedule(...)", "cq.schedules.add(...)")
        return await AsyncSchedules(self).add(
            name, task, options, paused=paused, replace=replace, **keywords
        )

    async def get_schedule(self: ClientView, name: str) -> Schedule | None:
        """Deprecated: ``cq.schedules.get``."""
        renamed("cq.get_schedule(...)", "cq.schedules.get(...)")
        return await AsyncSchedules(self).get(name)

    async def list_schedules(self: ClientView) -> ScheduleList:
        """Deprecated: ``cq.schedules.list``."""
        renamed("cq.list_schedules()", "cq.schedules.list()")
        return await AsyncSchedules(self).list()

    async def pause_schedule(self: ClientView, name: str) -> Schedule | None:
        """Deprecated: ``cq.schedules.pause``."""
        renamed("cq.pause_schedule(...)", "cq.schedules.pause(...)")
        return await AsyncSchedules(self).pause(name)

    async def resume_schedule(self: ClientView, name: str) -> Schedule | None:
        """Deprecated: ``cq.schedules.resume``."""
        renamed("cq.resume_schedule(...)", "cq.schedules.resume(...)")
        return await AsyncSchedules(self).resume(name)

    async def remove_schedule(self: ClientView, name: str) -> bool:
        """Deprecated: ``cq.schedules.remove``."""
        renamed("cq.remove_schedule(...)", "cq.schedules.remove(...)")
        return await AsyncSchedules(self).remove(name)

    async def schedule_history(self: ClientView, name: str, *, limit: int = 50) -> SlotList:
        """Deprecated: ``cq.schedules.history``."""
        renamed("cq.schedule_history(...)", "cq.schedules.history(...)")
        return await AsyncSchedules(self).history(name, limit=limit)

    async def run_schedules(self: ClientView) -> int:
        """Deprecated: ``cq.schedules.run_due``."""
        renamed("cq.run_schedules()", "cq.schedules.run_due()")
        return await AsyncSchedules(self).run_due()
