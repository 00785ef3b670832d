"""One lifecycle for a worker's background parts: its components.

A component is prepared before the worker's first claim (``prepare``: store what
it declares, read what it needs; raising refuses the start), then its ``job``
runs in the background while the worker claims, then it is closed (``close``:
give back what it holds). ``Lifecycle`` drives them all the same way:

- prepares them in order; a prepare that raises (or a cancel) closes the ones
  already prepared, in reverse order, and refuses the start;
- once every one is prepared, starts their jobs in order;
- stops them in reverse order, each one's job before its ``close``: first those
  that stop before the drain, then the drain, then those with
  ``stops_after_drain`` (presence: the worker's row stays until it has drained;
  the heartbeater: in-flight calls keep their leases while they finish).

A stop happens also when the run is cancelled, and each component is stopped
even when another one's stop failed. A job's own errors are its business:
``PeriodicJob`` reports them and backs off.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from ..extensions._base import Component, Job
from ..kernel.periodic import ErrorHook

log = logging.getLogger("cairnq.worker")

Step = Callable[[], Awaitable[object]]
Attempt = Callable[[Step, str], Awaitable[bool]]
"""``attempt(step, name)``: run one prepare; ``False`` when a stop came first."""


async def once(step: Step, name: str) -> bool:
    """The plainest ``Attempt``: run the step, once."""
    await step()
    return True


def _log_error(exc: BaseException, context: dict[str, Any]) -> None:
    log.error("stopping %s failed", context.get("phase", "?"), exc_info=exc, extra=context)


class Lifecycle:
    """Prepares components in order, starts their jobs, and stops them in reverse order.

    Args:
        components: In start order.
        attempt: Runs each prepare (the worker's retries a busy database and
            gives up once the worker is stopping).
        report: ``report(exc, context)`` for an error a stop or close raised.
        context: More fields for those reports (a ``worker_id``).

    Example::

        lifecycle = Lifecycle([presence, heartbeat, schedules])
        try:
            if await lifecycle.prepare():
                lifecycle.start()
                await claim_until_stopped()
        finally:
            await lifecycle.stop(drain=drain_in_flight_calls)
    """

    def __init__(
        self,
        components: Sequence[Component],
        *,
        attempt: Attempt = once,
        report: ErrorHook | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> None:
        self.components = list(components)
        self._attempt = attempt
        self._report = report or _log_error
        self._context = dict(context or {})
        # Prepared and not yet closed, in start order, each with the job started for it.
        self._open: list[tuple[Component, Job | None]] = []
        self.started = False

    async def prepare(self) -> bool:
        """Prepare every component, in order.

        Returns:
            ``True`` once all are prepared; ``False`` when ``attempt`` gave up on
            one (a stop came first): those prepared stay open for ``stop``.

        Raises:
            What a prepare raised (the start is refused), after closing the
            components already prepared, in reverse order.
        """
        for component in self.components:
            try:
                ready = await self._attempt(component.prepare, component.name)
            except BaseException:
                await self.stop()
                raise
            if not ready:
                return False
            self._open.append((component, None))
        return True

    def start(self) -> None:
        """Start the prepared components' jobs, in order.

        Raises:
            RuntimeError: not every component was prepared.
        """
        if self.started or len(self._open) != len(self.components):
            raise RuntimeError("start() needs every component prepared, once")
        self._open = [(component, component.job) for component, _ in self._open]
        for _, job in self._open:
            if job is not None:
                job.start()
        self.started = True

    async def stop(
        self, *, drain: Callable[[], Awaitable[None]] | None = None, wait: bool = True
    ) -> None:
        """Stop every job and close every prepared component, in reverse order.

        Those without ``stops_after_drain`` go first, then ``drain()`` runs, then
        the others. An error a stop or close raises is reported and the others
        are stopped all the same; a cancel is raised once every one is stopped.
        Nothing is stopped twice. ``wait=False`` cancels the jobs' runs in
        progress instead of letting them finish (the database is gone: a run
        waiting on it would only wait).
        """
        opened, self._open = self._open, []
        early = [entry for entry in reversed(opened) if not entry[0].stops_after_drain]
        late = [entry for entry in reversed(opened) if entry[0].stops_after_drain]
        try:
            await self._stop_all(early, wait)
            if drain is not None:
                await drain()
        finally:
            await self._stop_all(late, wait)

    async def _stop_all(self, entries: list[tuple[Component, Job | None]], wait: bool) -> None:
        cancelled: BaseException | None = None
        for component, job in entries:
            try:
                await self._stop_one(component, job, wait)
            except BaseException as exc:  # a cancel: the rest still stop, then it is raised
                cancelled = cancelled or exc
        if cancelled is not None:
            raise cancelled

    async def _stop_one(self, component: Component, job: Job | None, wait: bool) -> None:
        try:
            if job is not None:
                await job.stop(wait=wait)
            await component.close()
        except Exception as exc:
            try:
                self._report(exc, {**self._context, "phase": component.name})
            except Exception:
                log.exception("on_error hook raised; the worker carries on")
