# generated from src/cairnq/extensions/schedules/_client_async.py by scripts/generate_sync.py; do not edit
# ruff: noqa: E501
"""The client's schedules, blocking: ``SyncCairnQ`` inherits its mixin."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..._deprecated import renamed
from ...models import TaskDef
from .._client_sync import ClientView

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._model import Schedule, ScheduleKeywords, ScheduleOptions, ScheduleSlot

    ScheduleList = list[Schedule]
    SlotList = list[ScheduleSlot]


class SyncSchedules:
    """``cq.schedules``: periodic tasks stored in the database, which every cairnq
    worker on it evaluates (see ``cairnq.schedules``)."""

    __slots__ = ("_client",)

    def __init__(self, client: ClientView) -> None:
        self._client = client

    def add(
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

            cq.schedules.add("nightly-report", "report.build", cron="0 2 * * *",
                                   tz="Europe/Paris", catch_up="6h")
            nightly = ScheduleOptions(cron="0 2 * * *", tz="Europe/Paris")
            cq.schedules.add("nightly-export", "export.run", nightly, queue="exports")
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
        stored, _ = self._client._run(op, write=True)
        return stored

    def get(self, name: str) -> Schedule | None:
        """One stored schedule with its next slot and last task, or ``None``."""
        from . import _ops

        return self._client._run(_ops.get(name), write=False)

    def list(self) -> ScheduleList:
        """Every stored schedule, by name."""
        from . import _ops

        return self._client._run(_ops.list_all(), write=False)

    def pause(self, name: str) -> Schedule | None:
        """Pause a schedule: no slot submits a task until resumed. ``None``: no such schedule."""
        from . import _ops

        return self._client._run(_ops.set_paused(name, True), write=True)

    def resume(self, name: str) -> Schedule | None:
        """Resume a paused schedule from now: the slots passed while paused are recorded
        as ``paused``, not submitted. ``None``: no such schedule."""
        from . import _ops

        return self._client._run(_ops.set_paused(name, False), write=True)

    def remove(self, name: str) -> bool:
        """Delete a schedule and its slot record; the tasks it submitted stay.
        ``False``: no such schedule."""
        from . import _ops

        return self._client._run(_ops.remove(name), write=True)

    def history(self, name: str, *, limit: int = 50) -> SlotList:
        """A schedule's latest slot decisions, newest first (at most ``limit``, <= 500)."""
        from . import _ops

        return self._client._run(_ops.history(name, limit), write=False)

    def run_due(self) -> int:
        """Evaluate every due schedule now, as a worker does each second.

        Safe beside running workers: a slot submits one task whoever evaluates it.

        Returns:
            How many tasks were submitted.

        Raises:
            SchemaIncomplete: the database lacks the schedules tables (``cairnq migrate``).
        """
        from . import _ops

        # A worker's scheduler reads the ledger once, at start; a call reads it each time.
        self._client._run(_ops.require(), write=False)
        done = self._client._follow(_ops.run_due(self._client.codec))
        return sum(len(d.enqueued) for d in done)


class SyncSchedulesClient:
    """The client's ``schedules`` namespace, and the flat methods that came before it,
    kept for one release: each warns once and does what the namespace's method does."""

    @property
    def schedules(self: ClientView) -> SyncSchedules:
        """Periodic tasks stored in the database: ``add``, ``get``, ``list``, ``pause``,
        ``resume``, ``remove``, ``history``, ``run_due``."""
        return SyncSchedules(self)

    def add_schedule(
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
        return SyncSchedules(self).add(
            name, task, options, paused=paused, replace=replace, **keywords
        )

    def get_schedule(self: ClientView, name: str) -> Schedule | None:
        """Deprecated: ``cq.schedules.get``."""
        renamed("cq.get_schedule(...)", "cq.schedules.get(...)")
        return SyncSchedules(self).get(name)

    def list_schedules(self: ClientView) -> ScheduleList:
        """Deprecated: ``cq.schedules.list``."""
        renamed("cq.list_schedules()", "cq.schedules.list()")
        return SyncSchedules(self).list()

    def pause_schedule(self: ClientView, name: str) -> Schedule | None:
        """Deprecated: ``cq.schedules.pause``."""
        renamed("cq.pause_schedule(...)", "cq.schedules.pause(...)")
        return SyncSchedules(self).pause(name)

    def resume_schedule(self: ClientView, name: str) -> Schedule | None:
        """Deprecated: ``cq.schedules.resume``."""
        renamed("cq.resume_schedule(...)", "cq.schedules.resume(...)")
        return SyncSchedules(self).resume(name)

    def remove_schedule(self: ClientView, name: str) -> bool:
        """Deprecated: ``cq.schedules.remove``."""
        renamed("cq.remove_schedule(...)", "cq.schedules.remove(...)")
        return SyncSchedules(self).remove(name)

    def schedule_history(self: ClientView, name: str, *, limit: int = 50) -> SlotList:
        """Deprecated: ``cq.schedules.history``."""
        renamed("cq.schedule_history(...)", "cq.schedules.history(...)")
        return SyncSchedules(self).history(name, limit=limit)

    def run_schedules(self: ClientView) -> int:
        """Deprecated: ``cq.schedules.run_due``."""
        renamed("cq.run_schedules()", "cq.schedules.run_due()")
        return SyncSchedules(self).run_due()
