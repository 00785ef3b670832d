# generated from src/cairnq/worker/_context_async.py by scripts/generate_sync.py; do not edit
"""What a plain ``def`` handler sees of its task: ``SyncTaskContext``."""

from __future__ import annotations

from typing import Any

from ..durations import Duration
from ..extensions._builtins_context_sync import SyncBuiltinContext
from ..models import Task
from ._blocking import BlockingContext
from ._context_async import TaskContext


class SyncTaskContext(BlockingContext, SyncBuiltinContext):
    """The context a plain ``def`` handler gets: the same API, with blocking methods.

    The handler runs in a thread; each method runs on the worker's event loop and blocks
    the handler's thread until it is done.
    """

    def progress(self, value: float | None, message: str | None = None) -> Task:
        """Record progress (a fraction) and/or a message; ``None`` keeps the current one.

        Args:
            value: The fraction done (not range-checked), or ``None``.
            message: A line for people watching, or ``None``.

        Returns:
            The task as updated (its ``progress``, ``message`` and ``cancel_requested``).

        Raises:
            InvalidArgument: a value that is not a finite number, or a bad message.
            LostLease: this worker no longer owns the task.

        Example::

            task = ctx.progress(0.5, "halfway")
            if task.cancel_requested:
                return None
        """
        return self._call(TaskContext.progress(self._inner, value, message))

    def heartbeat(self) -> Task:
        """Renew this task's lease now (the worker also does it on its own)."""
        return self._call(TaskContext.heartbeat(self._inner))

    def canceled(self) -> bool:
        """Whether a cancel was requested (a vanished task counts as canceled)."""
        return self._call(TaskContext.canceled(self._inner))

    def succeed(self, result: Any = None) -> Task | None:
        """Settle now with ``result`` (canceled instead if a cancel is pending).

        Settling twice is a no-op returning ``None``.

        Raises:
            SerializationError: the result is not portable JSON (nothing is written).
            LostLease: this worker no longer owns the task.
        """
        return self._call(TaskContext.succeed(self._inner, result))

    complete = succeed

    def fail(self, error: Any = "task failed", *, retryable: bool = True) -> Task | None:
        """Fail this attempt now; requeued with backoff while attempts remain and retryable.

        ``error`` may be a message, an exception, a ``TaskError`` (its own
        ``retryable`` wins) or a ready envelope dict. Settling twice is a no-op.
        """
        return self._call(TaskContext.fail(self._inner, error, retryable=retryable))

    def submit(
        self, task: Any = None, payload: Any = None, *, name: Any = None, **options: Any
    ) -> Task:
        """Submit a child task: parent is this task, root and correlation id are inherited.

        Args:
            task: The task name or a ``TaskDef``.
            payload: Any JSON value.
            name: Another spelling of ``task`` (the reference SDK's); give one of the two.
            **options: As for ``SyncCairnQ.submit``.

        Returns:
            The stored child task.

        Raises:
            InvalidArgument: a bad argument, or both ``task`` and ``name``.
            LostLease: this worker no longer owns the task.

        Example::

            child = ctx.submit("thumbnail.make", {"image": payload["image"]})
        """
        return self._call(TaskContext.submit(self._inner, task, payload, name=name, **options))

    def wait(
        self,
        task_id: str,
        *,
        timeout_ms: int | None = None,
        poll_ms: int = 100,
        timeout: Duration | None = None,
    ) -> Task:
        """Wait for another task to finish (see ``SyncCairnQ.wait``): ``timeout_ms`` (the
        reference SDK's) or ``timeout`` (a duration such as ``"5s"``), 30 s by default."""
        return self._call(
            TaskContext.wait(
                self._inner, task_id, timeout_ms=timeout_ms, poll_ms=poll_ms, timeout=timeout
            )
        )
