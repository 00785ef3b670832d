"""What workflows add to a handler's context: ``ctx.spawn``, ``ctx.gather``,
``ctx.dependencies`` and ``ctx.submit(depends_on=...)`` (``WorkflowsContext``; its
blocking twin for a plain ``def`` handler is generated from it, ``_context_sync``), and
the ``Gathering`` signal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

from ... import kernel
from ...errors import InvalidArgument, TaskCanceled, TaskFailed
from ...models import Task
from .._context import ContextHost, Settle

if TYPE_CHECKING:
    from ._awaited import Awaited
    from ._model import Dependency


class WorkflowsClient(Protocol):
    """What the workflows' context methods use of the worker's client (a ``CairnQ``)."""

    _awaited: Awaited | None

    async def _submit_after(
        self, spec: kernel.NewTask, depends_on: Iterable[Any], policy: Any, conn: Any
    ) -> Task: ...


@dataclass
class Spawned:
    """One run's spawns so far: the next spawn's index (its key), and how many children
    the run's ``gather`` parked it for."""

    count: int = 0
    waiting_on: int | None = None


def _client(ctx: ContextHost) -> WorkflowsClient:
    return cast(WorkflowsClient, ctx._runtime.client)


class WorkflowsContext:
    """``ctx.spawn``, ``ctx.gather``, ``ctx.dependencies`` and what ``ctx.submit`` does
    with ``depends_on``, mixed into ``TaskContext``."""

    @property
    def waiting_on(self: ContextHost) -> int | None:
        """How many children this attempt's ``gather`` parked it for, if it did."""
        return self._state(Spawned).waiting_on

    async def _submit_extra(
        self: ContextHost, spec: kernel.NewTask, options: dict[str, Any]
    ) -> Task | None:
        """``ctx.submit``'s ``depends_on`` and ``on_dependency_failure``: the child stored
        parked until its dependencies end; ``None`` when it depends on nothing.

        Raises:
            InvalidArgument: an option ``submit`` does not take.
        """
        depends_on = options.pop("depends_on", None)
        policy = options.pop("on_dependency_failure", "cancel")
        if options:
            raise InvalidArgument(f"unknown submit fields: {sorted(options)}")
        if depends_on is None:
            return None
        return await _client(self)._submit_after(spec, depends_on, policy, None)

    async def spawn(
        self: ContextHost,
        task: Any = None,
        payload: Any = None,
        *,
        name: Any = None,
        **options: Any,
    ) -> Task:
        """Submit a child for ``gather``: the same child on every run of this task.

        The n-th spawn of a run gets the key ``cairnq.spawn:<this id>:<n>``, so a
        re-run (after ``gather`` parked this task, or a retry) returns the child
        the first run spawned, whatever its status, instead of a duplicate. Spawn
        in the same order on every run. Lineage as for ``submit``.

        Args:
            task: The task name or a ``TaskDef``.
            payload: Any JSON value.
            name: Another spelling of ``task``.
            **options: As for ``CairnQ.submit``, but not ``key`` (spawn sets it).

        Returns:
            The child task.

        Raises:
            InvalidArgument: a bad argument, or a ``key``.
            LostLease: this worker no longer owns the task.
            SchemaIncomplete: the database lacks the workflow tables.

        Example::

            parts = [await ctx.spawn("resize", {"part": i}) for i in range(10)]
            sizes = await ctx.gather(parts)
        """
        from . import _ops

        if "key" in options or "depends_on" in options:
            raise InvalidArgument("spawn takes no key or depends_on: it keys the child itself")
        spawned = self._state(Spawned)
        options["key"] = _ops.spawn_key(self.task.id, spawned.count)
        spec = self._child(task, payload, name, options, "spawn")
        child = await self._runtime.client.backend.arun(_ops.spawn(spec), write=True)
        spawned.count += 1
        return child

    async def gather(
        self: ContextHost, children: Sequence[Any], *, return_tasks: bool = False
    ) -> list[Any]:
        """The children's results once all ended; until then, park this task.

        When a child is still queued or running, this attempt ends here: the task
        is parked (queued, not due, its attempt not spent, no worker slot held)
        and ``Gathering`` is raised (let it propagate). The last child to end
        releases it; the re-run's ``spawn`` calls return the same children and
        ``gather`` returns.

        Args:
            children: ``Task`` objects (from ``spawn`` or ``submit``) or ids.
            return_tasks: Return the children's ``Task`` rows instead of results.

        Returns:
            The results, in the order given (or the tasks with ``return_tasks``).

        Raises:
            TaskFailed: a child ended failed (unless ``return_tasks``).
            TaskCanceled: a child ended canceled (unless ``return_tasks``).
            Gathering: children are still running; the attempt is parked.
            InvalidGraph: a child does not exist.
            LostLease: this worker no longer owns the task.
            SchemaIncomplete: the database lacks the workflow tables.
        """
        from . import _ops
        from ._awaited import note
        from ._model import Gathering

        ids = [_ops.dependency_id(c, "gather entry") for c in children]
        # The children's settlements this worker prepares from now on decide this task
        # once it is parked (one prepared before now leaves it to the sweep).
        note(_client(self), ids)
        gathered = await self._owned(_ops.gather(self.lease, self.worker_id, ids))
        if gathered.children is not None:
            codec = self._runtime.client.codec
            children = [codec.opened_task(child) for child in gathered.children]
            if return_tasks:
                return children
            return [_outcome(child) for child in children]
        assert gathered.parked is not None
        self._state(Spawned).waiting_on = len(ids)
        words = f"parked until its {len(ids)} child task(s) end"
        self._settled_as(gathered.parked, event="snoozed", ending=("waiting", words))
        raise Gathering(self.task.id, len(ids))

    async def dependencies(self: ContextHost) -> list[Dependency]:
        """The tasks this one ran after, with their status, result and error.

        For ``on_dependency_failure="run"``: how each dependency ended.

        Raises:
            SchemaIncomplete: the database lacks the workflow tables.
        """
        from . import _ops

        client = self._runtime.client
        found = await client.backend.arun(_ops.dependencies(self.task.id), write=False)
        return [
            d if d.task is None else dataclasses.replace(d, task=client.codec.opened_task(d.task))
            for d in found
        ]


async def settle_gathering(
    raised: BaseException, contexts: Sequence[ContextHost], settle: Settle
) -> None:
    """The ``Gathering`` signal: ``ctx.gather`` parked the task, its attempt settled already."""
    return


def _outcome(task: Task) -> Any:
    """A gathered child's result, or the error it ended with."""
    if task.is_succeeded:
        return task.result
    if task.is_canceled:
        raise TaskCanceled(task.id)
    raise TaskFailed(task.error, task_id=task.id)
