# generated from src/cairnq/extensions/workflows/_context_async.py by scripts/generate_sync.py; do not edit
# ruff: noqa: E501
"""What workflows add to a plain ``def`` handler's context, blocking."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...models import Task
from .._context import SyncHost
from ._context_async import WorkflowsContext

if TYPE_CHECKING:
    from ._model import Dependency


class SyncWorkflowsContext:
    """``ctx.spawn``, ``ctx.gather``, ``ctx.dependencies`` and what ``ctx.submit`` does
    with ``depends_on``, mixed into ``SyncTaskContext``."""

    def spawn(
        self: SyncHost, task: Any = None, payload: Any = None, *, name: Any = None, **options: Any
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
            **options: As for ``SyncCairnQ.submit``, but not ``key`` (spawn sets it).

        Returns:
            The child task.

        Raises:
            InvalidArgument: a bad argument, or a ``key``.
            LostLease: this worker no longer owns the task.
            SchemaIncomplete: the database lacks the workflow tables.

        Example::

            parts = [ctx.spawn("resize", {"part": i}) for i in range(10)]
            sizes = ctx.gather(parts)
        """
        return self._call(WorkflowsContext.spawn(self._inner, task, payload, name=name, **options))

    def gather(self: SyncHost, children: Sequence[Any], *, return_tasks: bool = False) -> list[Any]:
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
        return self._call(WorkflowsContext.gather(self._inner, children, return_tasks=return_tasks))

    def dependencies(self: SyncHost) -> list[Dependency]:
        """The tasks this one ran after, with their status, result and error.

        For ``on_dependency_failure="run"``: how each dependency ended.

        Raises:
            SchemaIncomplete: the database lacks the workflow tables.
        """
        return self._call(WorkflowsContext.dependencies(self._inner))
