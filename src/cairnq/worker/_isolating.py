"""Plain ``def`` handlers run in child processes the worker can kill
(``@worker.task(isolate=True)``), on ``pebble``'s process pool (the ``process`` extra).

A thread cannot be stopped, so a plain ``def`` handler past its task's cancel (or past
``max_run_ms``) runs on in its thread. An isolated handler runs in a process of the
worker's pool instead: the call is awaited like an ``async def`` handler's, and
cancelling it (a stop after ``cancel_grace``, ``max_run_ms``, a drain that ran out)
kills the process running it; the pool starts a fresh one in its place.

The handler gets a ``ChildContext``: its task's fields, read-only (no progress, no
steps, no settlement: the child holds no connection). Its function, payload, result
and errors cross the process boundary pickled; the processes are started with the
``spawn`` method, so the function must be importable by name (a module-level ``def``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._extras import missing_extra
from ..errors import InvalidArgument
from ..models import Task


@dataclass(frozen=True)
class ChildContext:
    """What an isolated handler sees of its task, in its child process (read-only).

    Attributes:
        task: The task as claimed (its ``payload``, ``metadata``, ``attempt``...).
        worker_id: The worker that claimed it.
    """

    task: Task
    worker_id: str

    @property
    def task_id(self) -> str:
        return self.task.id

    @property
    def name(self) -> str:
        return self.task.name

    @property
    def queue(self) -> str:
        return self.task.queue

    @property
    def attempt(self) -> int:
        return self.task.attempt

    @property
    def max_attempts(self) -> int:
        return self.task.max_attempts

    @property
    def payload(self) -> Any:
        return self.task.payload

    @property
    def metadata(self) -> Any:
        return self.task.metadata


def check_isolate(
    value: object, fn: Callable[..., Any], task: str, *, is_async: bool, listed: bool
) -> bool:
    """``isolate=`` of a registration, checked.

    Raises:
        InvalidArgument: not a bool; or ``True`` for an ``async def`` handler (a cancel
            stops it already), a batch handler, or a function that cannot be pickled
            by name (a lambda, a function defined inside another).
        ImportError: ``True`` without the ``process`` extra (``pebble``).
    """
    if not isinstance(value, bool):
        raise InvalidArgument(f"isolate must be True or False, got {value!r}")
    if not value:
        return False
    if is_async:
        raise InvalidArgument(
            f"isolate=True is for a plain def handler; task {task!r} has an async def one, "
            "which a cancel stops on the event loop (cancel_grace)"
        )
    if listed:
        raise InvalidArgument(f"isolate=True does not take a batch handler (task {task!r})")
    import pickle

    try:
        pickle.dumps(fn)
    except Exception as exc:
        raise InvalidArgument(
            f"isolate=True runs the handler of task {task!r} in a child process, which "
            f"imports it by name; {fn!r} cannot be (define it at a module's top level): {exc}"
        ) from None
    _pebble()
    return True


def _pebble() -> Any:
    try:
        import pebble
    except ImportError:
        raise missing_extra("isolate=True", "process", "pebble") from None
    return pebble


def call_in_child(fn: Callable[..., Any], takes_payload: bool, task: Task, worker_id: str) -> Any:
    """What the child process runs: the handler, with its ``ChildContext``."""
    ctx = ChildContext(task, worker_id)
    return fn(ctx, task.payload) if takes_payload else fn(ctx)


class Processes:
    """The worker's pool of child processes, started on first use, for one run."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._pool: Any = None

    async def call(
        self, fn: Callable[..., Any], takes_payload: bool, task: Task, worker_id: str
    ) -> Any:
        """Run ``fn`` in a child process; cancelling the call kills the process.

        Raises:
            Exception: the handler's, as pickled back from the child.
        """
        if self._pool is None:
            import multiprocessing

            pebble = _pebble()
            self._pool = pebble.ProcessPool(
                max_workers=self._size, context=multiprocessing.get_context("spawn")
            )
        future = self._pool.schedule(call_in_child, args=(fn, takes_payload, task, worker_id))
        # Cancelling the wrapper cancels pebble's future, which kills a running child.
        return await asyncio.wrap_future(future)

    def close(self) -> None:
        """Stop every child process (none runs a call any more: the run has drained)."""
        if self._pool is not None:
            self._pool.stop()
            self._pool.join(timeout=5)
            self._pool = None
