"""What a handler's context runs for a durable step (``ctx.step``, ``ctx.transaction_step``):
the step's checked options, its retries and the transactional step's one transaction.

The context (``worker/_context.py``) keeps the run's step names and the recorded
results it read; these functions run one step's function and record its value.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..._checks import check_int
from ..._json import JsonCodec
from ...backends import AroundRunner
from ...durations import delay_ms_of
from ...errors import InvalidArgument, LostLease, UnsupportedBackend, is_permanent
from ...models import Lease
from ...protocol.steps import Op
from ._ops import check_step_name, record_step

log = logging.getLogger("cairnq.worker")

UNRECORDED: Any = object()
"""What a run's lookup of a step name gives when no attempt recorded the step."""


@dataclass(frozen=True)
class StepOptions:
    """A step's validated name and retry options."""

    name: str
    retries: int
    backoff_ms: int

    def delay_s(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (1, 2, ...): the backoff, doubling."""
        return float(self.backoff_ms * 2 ** (retry - 1)) / 1000


def step_options(name: Any, fn: Any, retries: Any, backoff: Any) -> StepOptions:
    """Validate a step's name, function and retry options.

    Raises:
        InvalidArgument: a bad name, a ``fn`` that is not callable, ``retries`` not a
            whole number from 0, or a bad ``backoff``.
    """
    checked = check_step_name(name)
    if not callable(fn):
        raise InvalidArgument(f"step {checked!r} needs a function to run, not {type(fn).__name__}")
    return StepOptions(
        checked,
        check_int(retries, "step retries", low=0, high=1000),
        delay_ms_of(backoff, "step backoff"),
    )


async def run_step(
    options: StepOptions,
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    guard: Callable[[], None],
    task_id: str,
) -> Any:
    """``fn(*args, **kwargs)``'s value (awaited when it is awaitable), retried after an
    exception ``options.retries`` times; ``guard()`` runs before each try.

    Raises:
        Exception: ``fn``'s, once no retry is left or at once when it is permanent
            (``errors.is_permanent``).
    """
    tried = 0
    while True:
        guard()
        try:
            value = fn(*args, **kwargs)
            if inspect.isawaitable(value):
                value = await value
            return value
        except Exception as exc:
            if tried >= options.retries or is_permanent(exc):
                raise
            tried += 1
            log.info(
                "task %s step %r raised; retry %d of %d",
                task_id,
                options.name,
                tried,
                options.retries,
                exc_info=True,
            )
            await asyncio.sleep(options.delay_s(tried))


def run_step_sync(
    options: StepOptions,
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    guard: Callable[[], None],
) -> Any:
    """``run_step`` for a plain ``def`` handler: ``fn`` runs in the calling thread, and a
    retry waits with ``time.sleep``."""
    tried = 0
    while True:
        guard()
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if tried >= options.retries or is_permanent(exc):
                raise
            tried += 1
            time.sleep(options.delay_s(tried))


async def run_transactional(
    backend: object,
    codec: JsonCodec,
    lease: Lease,
    worker_id: str,
    options: StepOptions,
    seq: int,
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    guard: Callable[[], None],
) -> Any:
    """Run ``fn(conn, *args, **kwargs)`` and record its value as step ``seq`` in one
    transaction of ``backend``'s (retried as ``run_step``); returns the value as read
    back from JSON.

    Raises:
        UnsupportedBackend: ``backend`` runs no application write in its transactions.
        LostLease: the attempt is no longer owned; nothing of ``fn``'s is kept.
    """
    if not isinstance(backend, AroundRunner):
        raise UnsupportedBackend(
            f"transactional steps need the SQLite or the PostgreSQL backend, not "
            f"{type(backend).__name__}"
        )
    name = options.name

    def record(value: Any) -> Op[str]:
        encoded = codec.encode(value, what=f"result of step {name!r}")
        yield from record_step(lease, worker_id, name, seq, encoded)
        return encoded

    tried = 0
    while True:
        guard()
        try:
            encoded = await backend.arun_around(lambda conn: fn(conn, *args, **kwargs), record)
            break
        except LostLease:
            raise
        except Exception as exc:
            if tried >= options.retries or is_permanent(exc):
                raise
            tried += 1
            await asyncio.sleep(options.delay_s(tried))
    return codec.decode(encoded, what="step result")
