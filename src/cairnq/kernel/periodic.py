"""A periodic job: an async callable run every interval, optionally under a named lease.

Runs never overlap: the next wait starts when a run ends. An error is reported
(``on_error(exc, context)``, the worker's error path) and the job waits longer
before its next turn, doubling up to a cap, until a run succeeds again.

Under a ``NamedLease`` the job is one per deployment: before each run it takes
or renews its row in ``cairnq_locks`` (the ``x0001_locks.sql`` extension, the
named leases the retention sweep takes too) for ``ttl_ms``. Only the holder
runs; the others skip their turn and take the row over once its holder stopped
renewing it (crashed, or stopped and gave it up). A database without that
migration (opened with ``migrate=False``) still gets its runs: the job runs in
this process without the lease, and logs that once. A job given ``when`` takes a
turn only when ``when()`` says it has work: until then it neither takes its lease
nor looks the lease's table up.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import _ids, kernel
from .._checks import check_int, check_text
from ..backends import Backend
from ..errors import InvalidArgument, StoreClosed

log = logging.getLogger("cairnq.periodic")

ErrorHook = Callable[[BaseException, dict[str, Any]], None]

GIVE_UP_TIMEOUT_S = 1.0


def _holder() -> str:
    return "job_" + _ids.ulid()


@dataclass(frozen=True)
class NamedLease:
    """Where and as whom a ``PeriodicJob`` takes its lease.

    Args:
        backend: The database holding the named leases (``cairnq_locks``).
        holder: This process's name in the row (a fresh id by default).
        ttl_ms: How long a run's lease holds without the next renewal (three
            intervals by default). It must be longer than the interval, and
            should be longer than the interval plus the longest run: a lease
            that runs out during a run lets another process start one.
    """

    backend: Backend
    holder: str = field(default_factory=_holder)
    ttl_ms: int | None = None

    def __post_init__(self) -> None:
        check_text(self.holder, "holder")


def _default_on_error(exc: BaseException, context: dict[str, Any]) -> None:
    log.error("periodic job %s failed", context.get("job", "?"), exc_info=exc, extra=context)


class PeriodicJob:
    """Runs ``fn()`` every ``interval_ms`` until stopped, one run at a time.

    Args:
        name: The job's name (and its named lease's row).
        fn: The async callable to run.
        interval_ms: Wait between the end of one run and the start of the next.
        first_delay_ms: Wait before the first run (one interval by default).
        jitter: Spread each wait uniformly by up to this fraction of it (0 to 1).
        on_error: ``on_error(exc, context)`` for an error a run raised;
            ``context`` holds ``phase`` and ``job`` and everything in ``context``.
        max_error_backoff_ms: Longest wait after errors (eight intervals by
            default); the first error doubles the wait, every further one
            doubles it again.
        lease: Run only while holding this named lease (see the module docstring).
        phase: The ``phase`` reported with errors (the job's name by default).
        context: More fields for error reports (a ``worker_id``, say).
        stop_on: Error types after which the job reports and stops for good.
            ``StoreClosed`` (the backend was closed, or its pool with its event
            loop) always ends the job, unreported: no later run could reach
            the database.
        when: ``await when()`` before each turn; the turn is skipped (no lease taken
            or looked up, ``fn`` not run) unless it returns True.

    Example::

        job = PeriodicJob("nightly", cleanup, interval_ms=60_000,
                          lease=NamedLease(cq.backend))
        job.start()
        ...
        await job.stop()
    """

    def __init__(
        self,
        name: str,
        fn: Callable[[], Awaitable[object]],
        *,
        interval_ms: int,
        first_delay_ms: int | None = None,
        jitter: float = 0.0,
        on_error: ErrorHook | None = None,
        max_error_backoff_ms: int | None = None,
        lease: NamedLease | None = None,
        phase: str | None = None,
        context: Mapping[str, Any] | None = None,
        stop_on: tuple[type[BaseException], ...] = (),
        when: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self.name = check_text(name, "name") or ""
        self.fn = fn
        self.interval_ms = check_int(interval_ms, "interval_ms", low=1, high=2**40)
        self.first_delay_ms = (
            self.interval_ms
            if first_delay_ms is None
            else check_int(first_delay_ms, "first_delay_ms", low=0, high=2**40)
        )
        if isinstance(jitter, bool) or not isinstance(jitter, (int, float)) or not 0 <= jitter < 1:
            raise InvalidArgument(f"jitter must be a fraction in [0, 1), got {jitter!r}")
        self.jitter = float(jitter)
        self.max_error_backoff_ms = (
            8 * self.interval_ms
            if max_error_backoff_ms is None
            else check_int(
                max_error_backoff_ms, "max_error_backoff_ms", low=self.interval_ms, high=2**40
            )
        )
        self.lease = lease
        self.lease_ttl_ms = 0
        if lease is not None:
            ttl = 3 * self.interval_ms if lease.ttl_ms is None else lease.ttl_ms
            self.lease_ttl_ms = check_int(ttl, "ttl_ms", low=self.interval_ms + 1, high=2**40)
        self._on_error = on_error or _default_on_error
        self._context = {"phase": phase or self.name, "job": self.name, **(context or {})}
        self._stop_on = stop_on
        self.when = when
        self.runs = 0
        # The wait before the next run, before jitter: the interval, or a backoff after errors.
        self.next_delay_ms = self.first_delay_ms
        self._leased: bool | None = None
        self._holding = False
        self._in_run = False
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"<PeriodicJob {self.name} every {self.interval_ms} ms>"

    @property
    def running(self) -> bool:
        """Whether the job's loop is running (started and not stopped or ended)."""
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Run the job in the background on the running event loop (no-op if running)."""
        if self.running:
            return
        self._stopping = False
        self._task = asyncio.ensure_future(self.run())

    async def stop(self, *, wait: bool = True) -> None:
        """Stop the job and give up its named lease.

        Args:
            wait: Let a run in progress finish (the default); False cancels it.
        """
        self._stopping = True
        task, self._task = self._task, None
        if task is not None:
            if not self._in_run or not wait:
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await self._give_up_lease()

    async def run(self) -> None:
        """The job's loop, until stopped or cancelled (``start`` runs it as a task)."""
        self.next_delay_ms = self.first_delay_ms
        failures = 0
        while not self._stopping:
            await asyncio.sleep(self._spread(self.next_delay_ms) / 1000)
            self._in_run = True
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except StoreClosed:
                # The backend was closed under the job (its event loop ending closes its
                # pool): no later run can reach the database, and nothing failed here.
                log.debug("periodic job %s ends: its backend is closed", self.name)
                return
            except Exception as exc:
                failures += 1
                backoff = self.interval_ms * 2 ** min(failures, 40)
                self.next_delay_ms = min(self.max_error_backoff_ms, backoff)
                self._report(exc)
                if isinstance(exc, self._stop_on):
                    return
                continue
            finally:
                self._in_run = False
            failures = 0
            self.next_delay_ms = self.interval_ms

    async def run_once(self) -> bool:
        """Take the job's turn now: renew or take the lease, then run ``fn``.

        Returns:
            Whether ``fn`` ran here (False: another process holds the lease, or
            ``when`` said there is nothing to do).
        """
        if self.when is not None and not await self.when():
            return False
        if self.lease is not None and await self._leased_here():
            taken = await self.lease.backend.arun(
                kernel.lock_acquire(self.name, self.lease.holder, self.lease_ttl_ms), write=True
            )
            self._holding = taken
            if not taken:
                return False
        await self.fn()
        self.runs += 1
        return True

    async def _leased_here(self) -> bool:
        """Whether the database has the named leases (looked up once; logged once if not)."""
        if self._leased is None:
            assert self.lease is not None
            self._leased = await self.lease.backend.arun(kernel.named_leases_ready(), write=False)
            if not self._leased:
                log.warning(
                    "periodic job %s runs in this process without its named lease: the "
                    "database lacks %s (run `cairnq migrate`)",
                    self.name,
                    kernel.NAMED_LEASES_MIGRATION,
                    extra={"job": self.name},
                )
        return self._leased

    async def _give_up_lease(self) -> None:
        """Let another process take the job over at its next turn instead of after expiry."""
        if self.lease is None or not self._holding:
            return
        self._holding = False
        op = kernel.lock_release(self.name, self.lease.holder)
        try:
            await asyncio.wait_for(self.lease.backend.arun(op, write=True), GIVE_UP_TIMEOUT_S)
        except Exception as exc:
            # The lease then runs out by itself; another process takes over after ttl_ms.
            log.debug("could not give up the lease of %s: %r", self.name, exc)

    def _spread(self, delay_ms: int) -> float:
        if not self.jitter:
            return float(delay_ms)
        return delay_ms * random.uniform(1 - self.jitter, 1 + self.jitter)

    def _report(self, exc: BaseException) -> None:
        try:
            self._on_error(exc, dict(self._context))
        except Exception:
            log.exception("on_error raised for periodic job %s; the job carries on", self.name)
