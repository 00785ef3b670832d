"""The client's durable steps: ``cq.steps``, async.

``cq.steps(task_id)``, the flat method before the namespace, is the namespace
called: the same as ``cq.steps.list(task_id)``, kept for one release (it warns once).

``scripts/generate_sync.py`` turns this file into ``_client_sync.py`` beside it.
"""

from __future__ import annotations

from ..._deprecated import renamed
from ...models import Task
from .._client_async import ClientView
from . import _ops
from ._ops import StepRecord
from ._replay import replay

StepList = list[StepRecord]


class AsyncSteps:
    """``cq.steps``: the durable steps (``ctx.step``) each task recorded.

    Called, it is ``list`` (deprecated: ``await cq.steps(task.id)``).
    """

    __slots__ = ("_client",)

    def __init__(self, client: ClientView) -> None:
        self._client = client

    async def list(self, task_id: str) -> StepList:
        """The durable steps a task recorded (``ctx.step``), in the order they ran.

        Args:
            task_id: The task.

        Returns:
            One ``StepRecord`` per step (name, seq, result, attempt, when).

        Raises:
            InvalidArgument: a bad task id.
            SchemaIncomplete: the database lacks the steps table (``cairnq migrate``).

        Example::

            done = {step.name for step in await cq.steps.list(task.id)}
        """
        records = await self._client._run(_ops.steps(task_id), write=False)
        return _ops.opened(self._client.codec, records)

    async def __call__(self, task_id: str) -> StepList:
        """Deprecated: ``cq.steps.list(task_id)``, which see."""
        renamed("cq.steps(task_id)", "cq.steps.list(task_id)")
        return await self.list(task_id)


class AsyncStepsClient:
    """The client's ``steps`` namespace, which, called, is the deprecated flat method before it."""

    @property
    def steps(self: ClientView) -> AsyncSteps:
        """The durable steps each task recorded: ``list``."""
        return AsyncSteps(self)

    async def _replay_from(
        self: ClientView, task_id: str, from_step: str, reset_attempt: bool
    ) -> Task | None:
        """``retry(task_id, from_step=...)``: the replay, in one transaction."""
        return await self._run(replay(task_id, from_step, reset_attempt), write=True)
