"""``PostgresBackend``'s timeouts: ``listen_health`` and ``op_timeout``, durations, and
their old spellings in seconds (``listen_health_s``, ``op_timeout_s``), kept one release;
and ``LoopDeadlines``, which holds awaited operations to ``op_timeout``."""

from __future__ import annotations

import asyncio
import datetime
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .._deprecated import renamed
from ..durations import Duration, duration_ms
from ..errors import DatabaseUnavailable, InvalidArgument

__all__ = [
    "CONNECT_TIMEOUT",
    "LISTEN_HEALTH",
    "LISTEN_HEALTH_S",
    "OP_TIMEOUT",
    "LoopDeadlines",
    "connect_timeout_s",
    "timeouts",
]

LISTEN_HEALTH_S = 10.0
LISTEN_HEALTH = datetime.timedelta(seconds=LISTEN_HEALTH_S)
OP_TIMEOUT = datetime.timedelta(seconds=60)
CONNECT_TIMEOUT = datetime.timedelta(seconds=30)


def connect_timeout_s(value: Duration) -> float:
    """``connect_timeout`` in seconds, checked: a duration from 1 s to an hour.

    Raises:
        InvalidArgument: a bad value, named as given.
    """
    return duration_ms(value, "connect_timeout", low_ms=1_000, high_ms=3_600_000) / 1000


T = TypeVar("T")


def timeouts(
    listen_health: Duration, op_timeout: Duration | None, old: dict[str, float | None]
) -> tuple[float, float | None]:
    """``listen_health`` and ``op_timeout`` in seconds, checked.

    Their old spellings in ``old`` (``listen_health_s``, ``op_timeout_s``: seconds)
    warn once each and may not come with the new one.

    Raises:
        InvalidArgument: a bad value (named as given), or both spellings of one.
        TypeError: another keyword in ``old``.
    """
    unknown = set(old) - {"listen_health_s", "op_timeout_s"}
    if unknown:
        raise TypeError(f"PostgresBackend() got an unexpected keyword argument {min(unknown)!r}")
    health = _renamed(old, "listen_health", listen_health, LISTEN_HEALTH)
    timeout = _renamed(old, "op_timeout", op_timeout, OP_TIMEOUT)
    health_ms = duration_ms(health, "listen_health", low_ms=1, high_ms=3_600_000)
    if timeout is None:
        return health_ms / 1000, None
    timeout_ms = duration_ms(timeout, "op_timeout", low_ms=1, high_ms=86_400_000)
    return health_ms / 1000, timeout_ms / 1000


def _renamed(
    old: dict[str, float | None], name: str, value: Duration | None, default: Duration
) -> Duration | None:
    """``value``, or the old ``<name>_s`` in ``old`` (warning once); not both."""
    if f"{name}_s" not in old:
        return value
    renamed(f"PostgresBackend({name}_s=...)", f"PostgresBackend({name}=...)")
    if value is not default:
        raise InvalidArgument(f"give {name} or {name}_s, not both")
    return old[f"{name}_s"]


class _Due:
    """One awaited operation's deadline: its task, and whether the time ran out."""

    __slots__ = ("cancelling", "due", "fired", "task")

    def __init__(self, due: float, task: asyncio.Task[Any], cancelling: int) -> None:
        self.due = due
        self.task = task
        self.cancelling = cancelling
        self.fired = False


class LoopDeadlines:
    """The op timeouts of one backend's awaited operations on one event loop: one timer for all.

    Every operation gets the same ``seconds``, so the operations in flight, kept in
    the order they began, are also in the order they expire: arming is a dict
    entry, and one loop timer at the earliest deadline cancels the tasks whose
    time ran out (as ``asyncio.timeout`` would) and sets itself for the next.
    """

    def __init__(self, seconds: float) -> None:
        self.loop = asyncio.get_running_loop()
        self.seconds = seconds
        self._live: dict[_Due, None] = {}
        self._timer: asyncio.TimerHandle | None = None

    def serves(self, seconds: float) -> bool:
        """Whether this holds operations of ``seconds`` on the running loop."""
        return self.seconds == seconds and asyncio.get_running_loop() is self.loop

    async def run(self, work: Callable[[], Awaitable[T]]) -> T:
        """``work()`` in the caller's task within ``seconds``.

        Raises:
            DatabaseUnavailable: the time ran out (a silent server).
        """
        if sys.version_info < (3, 11):
            try:
                return await asyncio.wait_for(work(), self.seconds)
            except asyncio.TimeoutError:
                raise DatabaseUnavailable(self._silent()) from None
        entry = self.arm()
        try:
            value = await work()
        except BaseException as exc:
            if self.disarm(entry, exc):
                raise DatabaseUnavailable(self._silent()) from None
            raise
        self.disarm(entry, None)
        return value

    def _silent(self) -> str:
        return f"PostgreSQL did not answer within {self.seconds:g} s"

    def arm(self) -> _Due:
        """Start the clock for the current task's operation."""
        task = asyncio.current_task(self.loop)
        assert task is not None
        cancelling = 0
        if sys.version_info >= (3, 11):
            cancelling = task.cancelling()
        entry = _Due(self.loop.time() + self.seconds, task, cancelling)
        self._live[entry] = None
        if self._timer is None:
            self._timer = self.loop.call_at(entry.due, self._sweep)
        return entry

    def disarm(self, entry: _Due, exc: BaseException | None) -> bool:
        """Stop the clock; whether ``exc`` is the cancellation of a deadline that passed."""
        self._live.pop(entry, None)
        if not entry.fired or sys.version_info < (3, 11):
            return False
        return entry.task.uncancel() <= entry.cancelling and isinstance(exc, asyncio.CancelledError)

    def _sweep(self) -> None:
        self._timer = None
        now = self.loop.time()
        for entry in list(self._live):
            if entry.due > now:
                self._timer = self.loop.call_at(entry.due, self._sweep)
                return
            del self._live[entry]
            entry.fired = True
            entry.task.cancel()
