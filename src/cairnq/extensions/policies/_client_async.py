"""The client's task policies: ``cq.policies``, async, and what ``submit`` does with its
``retry``, ``timeout``, ``expires_in`` and ``deadline``.

``scripts/generate_sync.py`` turns this file into ``_client_sync.py`` beside it.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Protocol

from ... import kernel
from ...models import Task
from .._client_async import ClientView

if TYPE_CHECKING:
    from ._ops import SubmitPolicy, TaskPolicy


class _Submitting(ClientView, Protocol):
    async def _ends(self) -> kernel.Points: ...


class AsyncPolicies:
    """``cq.policies``: what a submit's policies left on a task."""

    __slots__ = ("_client",)

    def __init__(self, client: ClientView) -> None:
        self._client = client

    async def of(self, task_id: str) -> TaskPolicy | None:
        """The policies a task's submit gave it (``expires_in``/``deadline``,
        ``timeout``, ``retry``) and why a policy ended it (``reason``: ``"expired"``);
        ``None`` when its submit gave none.

        Example::

            policy = await cq.policies.of(task.id)
            if policy and policy.reason == "expired":
                print("never started: its deadline passed first")
        """
        from . import _ops

        return await self._client._run(_ops.of(task_id), write=False)

    async def enable(self) -> int:
        """Mark the task policies in use in this database ahead of the first submit that
        stores one, so that submit's tasks need not wait (``docs/policies.md``): from
        the returned time on (epoch ms, about 12 s from the first call; earlier if a
        submit did it before), tasks with policies are due as submitted. Once per
        database, at deploy time, is enough.

        Raises:
            SchemaIncomplete: the database lacks the policies' table.

        Example::

            await cq.policies.enable()
        """
        from . import _ops

        return await self._client._run(_ops.enable(), write=True)


class AsyncPoliciesClient:
    """The client's ``policies`` namespace, and the submit of a task with policies."""

    @property
    def policies(self: ClientView) -> AsyncPolicies:
        """What submits' policies left on tasks: ``of``."""
        return AsyncPolicies(self)

    async def _submit_with_policies(
        self: _Submitting, spec: kernel.NewTask, policy: SubmitPolicy, conn: Any
    ) -> Task:
        """Store ``spec`` with its policies, in one transaction (``_ops.submit``)."""
        from . import _ops

        if policy.max_attempts is not None and spec.max_attempts != policy.max_attempts:
            spec = dataclasses.replace(spec, max_attempts=policy.max_attempts)
        points = kernel.NO_POINTS
        if spec.key is not None and spec.conflict == "replace":
            points = await self._ends()
        since_ms = None
        if conn is not None:
            # The application's transaction may commit long after this submit: the
            # marker is read (and written when missing) in a transaction of its own, and
            # the task's wait is taken from that commit, not from the application's.
            since_ms = await self._run(_ops.since(), write=False)
            if since_ms is None:
                since_ms = await self._run(_ops.enable(), write=True)
        stored = await self._submit_specs(
            [spec],
            lambda specs: _one(_ops.submit(specs[0], policy, since_ms=since_ms, points=points)),
            conn,
        )
        return stored[0]


def _one(op: Any) -> Any:
    """``op``'s task as the one-item list ``_submit_specs`` hands back."""
    task = yield from op
    return [task]
