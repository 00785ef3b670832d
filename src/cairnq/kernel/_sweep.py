"""Retention's policy (``Retention``, ``RetentionRule``) and its sweep, written once.

``Sweeping`` is the sweep as a procedure, shared by both sweepers; each sweeper
(``_sweeper_async.py``, and ``_sweeper_sync.py`` generated from it) drives it
on its clock: ``AsyncSweepTimer`` on the event loop, ``SyncSweepTimer`` from a
daemon thread. ``cairnq.kernel.retention`` says what a sweep does.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .. import _ids, kernel
from .._checks import MAX_LIST_LIMIT, check_int, check_status, check_text
from ..backends import Backend
from ..backends.base import event_loop_mismatch
from ..durations import Duration, duration_ms
from ..errors import InvalidArgument
from ..protocol.steps import Op
from .periodic import PeriodicJob
from .procedures import Nap, Procedure, Run
from .store_calls import StoreCall

log = logging.getLogger("cairnq.retention")

LOCK_NAME = "cairnq.retention"
DEFAULT_INTERVAL_MS = 3_600_000
DEFAULT_LIMIT = 1000


@dataclass(frozen=True)
class RetentionRule:
    """Delete finished tasks completed more than ``older_than_ms`` ago, optionally
    only those of one ``queue``, ``status`` (succeeded, failed, canceled) or ``name``."""

    older_than_ms: int
    queue: str | None = None
    status: str | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        check_int(self.older_than_ms, "older_than_ms", low=0, high=2**62)
        check_text(self.queue, "queue", optional=True)
        check_status(self.status, terminal=True)
        check_text(self.name, "name", optional=True)


class RetentionRules(tuple[RetentionRule, ...]):
    """A policy's rules: a tuple that can also be called, ``policy.rules()``.

    cairnq reads ``rules`` as an attribute; the reference SDK calls it as a
    method. Both give the same rules, in order.
    """

    __slots__ = ()

    def __call__(self) -> tuple[RetentionRule, ...]:
        """The rules as a plain tuple (the reference SDK's ``rules()``)."""
        return tuple(self)


class Retention:
    """How long finished tasks are kept.

    Args:
        older_than_ms: One cutoff for every finished task, in milliseconds, a
            ``{status: ms}`` mapping (only the statuses named are swept), or a
            list of ``RetentionRule`` (the reference SDK's).
        interval_ms: Time between sweeps (one hour).
        limit: Rows deleted per batch (1000); each batch is one short transaction.
        on_error: Called with an exception a sweep survived (default: logged).
        older_than: The cutoff as a duration (``"7d"``, a ``timedelta``, seconds
            as a number), or a ``{status: duration}`` mapping; give it or
            ``older_than_ms``.

    Attributes:
        older_than_ms: The cutoff argument as given (int, mapping or rules;
            ``older_than`` in milliseconds).
        rules: The ``RetentionRule`` tuple it stands for; also callable,
            ``rules()``, as in the reference SDK.

    Raises:
        InvalidArgument: no rule, a bad cutoff, status, interval or limit.

    Example::

        CairnQ.sqlite("tasks.db", retention=Retention(older_than={"succeeded": "1d",
                                                                  "failed": "7d"}))
    """

    def __init__(
        self,
        older_than_ms: int | Mapping[str, int] | Sequence[RetentionRule] | None = None,
        *,
        interval_ms: int = DEFAULT_INTERVAL_MS,
        limit: int = DEFAULT_LIMIT,
        on_error: Callable[[BaseException], None] | None = None,
        older_than: Duration | Mapping[str, Duration] | None = None,
    ) -> None:
        older_than_ms = _cutoff_ms(older_than, older_than_ms)
        if isinstance(older_than_ms, Mapping):
            rules = [RetentionRule(ms, status=status) for status, ms in older_than_ms.items()]
        elif isinstance(older_than_ms, Sequence):
            rules = list(older_than_ms)
            if not all(isinstance(r, RetentionRule) for r in rules):
                raise InvalidArgument("retention rules must be RetentionRule objects")
        else:
            rules = [RetentionRule(older_than_ms)]
        if not rules:
            raise InvalidArgument("retention needs at least one rule")
        self.older_than_ms = older_than_ms
        self.rules: RetentionRules = RetentionRules(rules)
        self.interval_ms = check_int(interval_ms, "interval_ms", low=1, high=2**40)
        self.limit = check_int(limit, "limit", low=1, high=MAX_LIST_LIMIT)
        self.on_error = on_error

    def __repr__(self) -> str:
        return f"Retention({list(self.rules)!r}, interval_ms={self.interval_ms})"

    @classmethod
    def of(cls, value: Retention | int | None) -> Retention | None:
        """``CairnQ(retention=N)`` is shorthand for ``Retention(older_than_ms=N)``."""
        if value is None or isinstance(value, Retention):
            return value
        return cls(value)


def _cutoff_ms(
    older_than: Duration | Mapping[str, Duration] | None,
    older_than_ms: int | Mapping[str, int] | Sequence[RetentionRule] | None,
) -> int | Mapping[str, int] | Sequence[RetentionRule]:
    """``Retention``'s cutoff: ``older_than`` in milliseconds, or ``older_than_ms``; one of them."""
    if older_than is None:
        if older_than_ms is None:
            raise InvalidArgument(
                "retention needs a cutoff: older_than (a duration such as '7d') or older_than_ms"
            )
        return older_than_ms
    if older_than_ms is not None:
        raise InvalidArgument("give older_than or older_than_ms, not both")
    if isinstance(older_than, Mapping):
        return {
            status: duration_ms(value, f"older_than[{status!r}]", high_ms=2**62)
            for status, value in older_than.items()
        }
    return duration_ms(older_than, "older_than", high_ms=2**62)


class PurgingStore(Protocol):
    """What a sweeper needs of a store (``cairnq.store.TaskStore``): its backend, its
    ``purge``, and whether that ``purge`` is replaced."""

    backend: Backend

    def _replaces(self, name: str) -> bool: ...

    def purge(
        self,
        *,
        older_than_ms: int = 0,
        queue: str | None = None,
        status: str | None = None,
        name: str | None = None,
        limit: int = 1000,
    ) -> Awaitable[list[str]]: ...


@dataclass
class Tally:
    """Rows a sweep deleted so far; kept outside the procedure so a failed sweep reports it."""

    deleted: int = 0


class Sweeping:
    """The sweep, written once as a procedure; each sweeper half runs it its own way."""

    def __init__(self, source: Backend | PurgingStore, retention: Retention) -> None:
        if isinstance(source, Backend):
            self.store: PurgingStore | None = None
            self.backend = source
        else:
            self.store = source
            self.backend = source.backend
        self.retention = retention
        self.holder = "sweeper_" + _ids.ulid()
        # Whether the database has cairnq_locks (x0001); looked up at the first sweep.
        self.leased: bool | None = None

    def _stopped(self) -> bool:
        raise NotImplementedError

    def _batches(self, tally: Tally) -> Procedure[None]:
        """Purge everything past the cutoffs, batch by batch, counting into ``tally``."""
        if self.leased is None:
            self.leased = yield Run(kernel.named_leases_ready(), write=False)
            if not self.leased:
                log.warning(
                    "retention sweeps without its named lease: the database lacks %s "
                    "(run `cairnq migrate`); a lock held for each batch keeps two batches "
                    "from running at once instead",
                    kernel.NAMED_LEASES_MIGRATION,
                )
        if not self.leased:
            yield from self._batches_unleased(tally)
            return
        ttl_ms = max(60_000, self.retention.interval_ms)
        if not (yield Run(kernel.lock_acquire(LOCK_NAME, self.holder, ttl_ms), write=True)):
            log.debug("another process is sweeping; skipping this turn")
            return
        for rule in self.retention.rules:
            while not self._stopped():
                ids = yield Run(self._purge(rule), write=True)
                tally.deleted += len(ids)
                if len(ids) < self.retention.limit:
                    break
                yield Nap(0)
                if self._stopped() or not (
                    yield Run(kernel.lock_acquire(LOCK_NAME, self.holder, ttl_ms), write=True)
                ):
                    break
        yield Run(kernel.lock_release(LOCK_NAME, self.holder), write=True)

    def _batches_unleased(self, tally: Tally) -> Procedure[None]:
        """``_batches`` without ``cairnq_locks``: each batch takes the one-sweeper lock
        in its own transaction (see ``purge_exclusive``); a batch that finds it taken
        ends this turn, as a lease held elsewhere does."""
        for rule in self.retention.rules:
            while not self._stopped():
                ids = yield Run(self._purge_exclusive(rule), write=True)
                if ids is None:
                    log.debug("another process is sweeping; skipping this turn")
                    return
                tally.deleted += len(ids)
                if len(ids) < self.retention.limit:
                    break
                yield Nap(0)

    def _purge_exclusive(self, rule: RetentionRule) -> Op[list[str] | None]:
        return kernel.purge_exclusive(
            LOCK_NAME,
            older_than_ms=rule.older_than_ms,
            queue=rule.queue,
            status=rule.status,
            name=rule.name,
            limit=self.retention.limit,
        )

    @staticmethod
    def _swept(tally: Tally) -> int:
        deleted = tally.deleted
        if deleted:
            log.info("retention deleted %d finished tasks", deleted, extra={"deleted": deleted})
        return deleted

    def _purge(self, rule: RetentionRule) -> Op[list[str]]:
        arguments: dict[str, Any] = {
            "older_than_ms": rule.older_than_ms,
            "queue": rule.queue,
            "status": rule.status,
            "name": rule.name,
            "limit": self.retention.limit,
        }
        return StoreCall(kernel.purge(**arguments), "purge", (), arguments)

    def _replaced(self, op: Op[Any]) -> Callable[[], Any] | None:
        """The call of the store's replaced method ``op`` stands for, if it is replaced."""
        store = self.store
        if store is None or not isinstance(op, StoreCall) or not store._replaces(op.method):
            return None
        method = getattr(store, op.method)
        return lambda: method(*op.args, **op.kwargs)

    def _report(self, exc: BaseException) -> None:
        if self.retention.on_error is not None:
            self.retention.on_error(exc)
        else:
            log.error("retention sweep failed", exc_info=exc)


class AsyncSweepTimer:
    """The async sweeper's clock: a local ``PeriodicJob`` on the loop that started it.

    Every process with a ``Retention`` takes its turn; the sweep itself takes the
    named lease in ``cairnq_locks``, so one process sweeps at a time.
    """

    def __init__(self, sweep: Callable[[], Awaitable[object]], interval_ms: int) -> None:
        self._sweep = sweep
        self._interval_ms = interval_ms
        self._stopping = asyncio.Event()
        self._job = self._new_job()
        self._loop: asyncio.AbstractEventLoop | None = None

    def _new_job(self) -> PeriodicJob:
        return PeriodicJob(LOCK_NAME, self._sweep, interval_ms=self._interval_ms)

    def stopping(self) -> bool:
        """Whether ``stop()`` was called since the last ``start()``."""
        return self._stopping.is_set()

    @property
    def running(self) -> bool:
        return self._job.running

    def start(self) -> None:
        """Start sweeping every interval (the first sweep after one interval)."""
        if self.running:
            return
        self._stopping = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._job.start()

    async def stop(self, *, wait: bool = True) -> None:
        """Stop; see ``RetentionSweeper.stop``."""
        loop = self._loop
        if loop is not None and loop is not asyncio.get_running_loop():
            if not loop.is_closed():
                raise event_loop_mismatch()
            self._job, self._loop = self._new_job(), None
            return
        self._stopping.set()
        self._loop = None
        await self._job.stop(wait=wait)

    @staticmethod
    async def outcome(value: Any) -> Any:
        """What a replaced store method gave: awaited when it is awaitable."""
        return (await value) if inspect.isawaitable(value) else value


class SyncSweepTimer:
    """The blocking sweeper's clock: a daemon thread, one at most per sweeper."""

    def __init__(self, sweep: Callable[[], object], interval_ms: int) -> None:
        self._sweep = sweep
        self._interval_ms = interval_ms
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        # The loop a replaced store method's coroutines run on, one for the life of the
        # sweeper: the store's own methods it awaits bind the backend to the first loop
        # that used them, so every batch and every sweep must run on that same loop.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_lock = threading.Lock()

    def stopping(self) -> bool:
        """Whether ``stop()`` was called since the last ``start()``."""
        return self._stopping.is_set()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start sweeping every interval (the first sweep after one interval).

        Safe from several threads at once: one sweeper thread runs at most.
        """
        with self._lock:
            if self.running:
                return
            self._stopping = stopping = threading.Event()
            self._thread = threading.Thread(
                target=self._run, args=(stopping,), name="cairnq-retention", daemon=True
            )
            self._thread.start()

    def stop(self, *, wait: bool = True) -> None:
        """Stop; waits for the batch in flight unless ``wait`` is false."""
        with self._lock:
            self._stopping.set()
            thread, self._thread = self._thread, None
        if wait and thread is not None and thread is not threading.current_thread():
            thread.join()
        if wait or thread is None:
            with self._loop_lock:
                loop, self._loop = self._loop, None
            if loop is not None:
                loop.close()

    def _run(self, stopping: threading.Event) -> None:
        while not stopping.wait(self._interval_ms / 1000):
            self._sweep()

    def outcome(self, value: Any) -> Any:
        """What a replaced store method gave: a coroutine is run to its end, in this
        thread, on the sweeper's loop (made on first use, closed by ``stop()``)."""
        if not inspect.isawaitable(value):
            return value
        with self._loop_lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
            return self._loop.run_until_complete(_awaited(value))


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value
