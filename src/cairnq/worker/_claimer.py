"""The claimer: claims tasks when there is room, and starts a handler call for each group.

It owns the calls in flight: their slots, their contexts (the leases the
heartbeater renews), their payload bytes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import kernel
from .._aio import cancel_requested, wait_set
from .._crashpoints import crashpoint
from .._sealing import DecryptionError, is_sealed
from .._wakeups import Subscription
from ..backends import FileBound, OneStatementClaims
from ..client import CairnQ
from ..errors import (
    DatabaseError,
    DatabaseUnavailable,
    LostLease,
    SchemaIncomplete,
    SerializationError,
    StoreClosed,
    error_envelope,
)
from ..kernel.periodic import ErrorHook
from ..kernel.points import NO_POINTS, Points, ThenWrite
from ..models import Lease, Task
from ..protocol.steps import Op
from ..store import ClaimDraw
from ..store._leases import WORKER_CLAIM, WorkerClaim
from ._claiming import group_calls, plan_claim
from ._context import Runtime, TaskContext
from ._executor import Executor
from ._recoverer import RECOVER_LIMIT, Recoverer
from ._registry import Registration, Registry
from ._settling import Settler

log = logging.getLogger("cairnq.worker")

CLAIM_ERROR_BACKOFF_S = (0.25, 5.0)
# How many times in a row a run ``until_idle`` claims and asks its components again
# after a ``before_idle`` failure that may pass, before it stops all the same.
BEFORE_IDLE_RETRIES = 3
# A claim that recovers nothing itself (one with news of work) has a recovery run
# after it when none ran for this long (under ``until_idle``, also when it claimed
# nothing with no call running).
CLAIM_RECOVERY_EVERY_S = 1.0
# The longest wait for held-back work's next admission (a rate limit's next token):
# the limits are reloaded about this often.
RATE_WAIT_MAX_S = 1.0


@dataclass(frozen=True)
class ClaimLimits:
    """How much a worker takes on: its settings that bound a claim."""

    queues: list[str]
    concurrency: int
    lease_ms: int
    poll_interval_ms: int
    claim_batch: int | None
    max_in_flight_bytes: int | None


class Claimer:
    """The claim loop of one worker run (``run``), until ``stopping`` is set."""

    def __init__(
        self,
        client: CairnQ,
        registry: Registry,
        runtime: Runtime,
        executor: Executor,
        settler: Settler,
        recoverer: Recoverer,
        limits: ClaimLimits,
        *,
        wake: Subscription,
        stopping: asyncio.Event,
        until_idle: bool,
        report: ErrorHook,
        stop: Callable[[], None],
        fail: Callable[[DatabaseError, bool], None],
        points: Points = NO_POINTS,
    ) -> None:
        self.client = client
        self.registry = registry
        self.runtime = runtime
        self.executor = executor
        self.settler = settler
        self.recoverer = recoverer
        self.limits = limits
        self.worker_id = runtime.worker_id
        self.wake = wake
        self.stopping = stopping
        self.until_idle = until_idle
        self._report = report
        self._stop = stop
        self._fail = fail
        # The extensions' claim filters and draw claimers (those in use at each claim).
        self.points = points
        self.calls: set[asyncio.Task[None]] = set()
        self.contexts: dict[str, TaskContext] = {}
        # A claim found the backend closed: no run of a component can reach the database.
        self.backend_closed = False
        self._settling: set[asyncio.Task[Any]] = set()
        self._calls_by_name: Counter[str] = Counter()
        self._bytes_in_flight = 0
        self._typical_payload = 1024.0
        self._turn = 0
        self._backlog = False
        self._rate_wait_s: float | None = None
        self._held_back = False
        # A claim with news of work left the recovery due meanwhile to run after it.
        self._recover_after = False
        self._one_statement_claims = isinstance(client.backend, OneStatementClaims)
        # The components' ``before_idle`` (``BeforeIdle``), asked before ``until_idle`` stops.
        self.before_idle: Sequence[Callable[[], Awaitable[bool]]] = ()
        self._idle_failures = 0
        # A ``complete`` replaced on the client's store settles the handlers that return.
        settler.overriding = client._overriding

    async def run(self) -> None:
        """Claim and dispatch until ``stopping`` is set (or the store is gone for good)."""
        wake, stopping = self.wake, self.stopping
        poll_s = self.limits.poll_interval_ms / 1000
        failures = 0
        backend = self.client.backend
        check_file = backend.check_file if isinstance(backend, FileBound) else None
        next_check = 0.0
        while not stopping.is_set():
            if cancel_requested():  # a cancel a database call swallowed still ends the loop
                raise asyncio.CancelledError
            if check_file is not None and time.monotonic() >= next_check:
                next_check = time.monotonic() + poll_s
                if not self._store_still_there(check_file):
                    return
            queued = wake.matched()
            # Clear first: a slot freed or a task queued from here on sets the latch again.
            wake.clear()
            free = self._free_slots()
            room = self._byte_headroom()
            draws = self._plan(free, room) if free > 0 and room > 0 else []
            if not draws:
                await wake.wait_async(poll_s)
                continue
            # A call that ends while the claim is out may release work the claim could not
            # see (a dependent freed by its settlement): only a claim begun idle proves idleness.
            idle_before = not self.calls
            try:
                rows = await self._claim(draws, probe=not queued)
            except StoreClosed:
                # The backend was closed under the loop (its event loop ending closes
                # its pool): no claim can succeed again, so stop rather than retry.
                log.warning(
                    "the worker's backend was closed; stopping", extra={"worker_id": self.worker_id}
                )
                self.backend_closed = True
                self._stop()
                break
            except Exception as exc:
                if check_file is not None and not self._store_still_there(check_file):
                    return
                failures += 1
                # The failed claim took nothing: the next one is no news of work.
                self._backlog = False
                self._report(exc, {"phase": "claim", "worker_id": self.worker_id})
                if isinstance(exc, SchemaIncomplete):
                    self._fail(exc, False)
                    break
                low, high = CLAIM_ERROR_BACKOFF_S
                await self._pause_after_error(min(high, low * 2 ** min(failures - 1, 5)))
                continue
            failures = 0
            if rows:
                self._dispatch(rows)
                if self._free_slots() > 0 or self._recover_after:
                    # The next turn claims at once, and preparing it holds the event loop:
                    # let the new calls start first. With every slot taken the loop waits
                    # anyway, and their settlements (which free the keys a limited claim
                    # looks for) go ahead of its next claim.
                    await asyncio.sleep(0)
            if self._recover_after and not stopping.is_set():
                self._recover_after = False
                if await self.recoverer.recover_in_turn() != 0:
                    # Tasks back in the queue, or the recovery failed (the timer, a
                    # polling claim or a later turn recovers again): claim again before
                    # judging idleness.
                    continue
            if rows:
                continue
            if self.until_idle and idle_before and not self.calls and not self._held_back:
                if await self._made_due_before_idle():
                    continue
                log.info(
                    "nothing is due; stopping (until_idle)", extra={"worker_id": self.worker_id}
                )
                self._stop()
            else:
                wait_s, self._rate_wait_s = self._rate_wait_s, None
                await wake.wait_async(poll_s if wait_s is None else min(RATE_WAIT_MAX_S, wait_s))

    async def _made_due_before_idle(self) -> bool:
        """Whether a component made work due that no claim would have seen (see
        ``BeforeIdle``). A failure that may pass (a ``retryable`` ``DatabaseError``: a
        deadlock with another process's sweep, a busy file) is reported and counts as
        yes, so the loop claims and asks again, ``BEFORE_IDLE_RETRIES`` times in a row at
        most; any other is reported and counts as no."""
        made = may_pass = False
        for check in self.before_idle:
            try:
                made = await check() or made
            except StoreClosed:
                pass  # closed under the run: it stops either way
            except Exception as exc:
                self._report(exc, {"phase": "before_idle", "worker_id": self.worker_id})
                may_pass = may_pass or (isinstance(exc, DatabaseError) and exc.retryable)
        if not may_pass:
            self._idle_failures = 0
            return made
        self._idle_failures += 1
        if self._idle_failures > BEFORE_IDLE_RETRIES:
            return made
        await self._pause_after_error(CLAIM_ERROR_BACKOFF_S[0])
        return True

    def _free_slots(self) -> int:
        # A call whose handler returned holds its slot only until its settlement
        # is written; claiming for it now lets claim and settlement share a commit.
        busy = len(self.calls) - len(self._settling) + self.executor.stuck_threads
        return self.limits.concurrency - busy

    async def _pause_after_error(self, seconds: float) -> None:
        """Wait out an error backoff: only ``stop()`` ends it early.

        Wake-ups (a commit the file watcher saw, a NOTIFY, a freed slot) keep
        arriving while the database fails, and a failed SQLite write is itself
        a change the watcher reports: the backoff is a floor, so none of them
        may cut it short. They stay latched for the claim that follows.
        """
        await wait_set(self.stopping, seconds)

    def _store_still_there(self, check_file: Callable[[], None]) -> bool:
        """False, after logging once and stopping, when the backend's file is gone for good."""
        try:
            check_file()
        except Exception as exc:
            if not isinstance(exc, DatabaseUnavailable) or exc.retryable:
                return True  # not a lost file; a claim reports it if it persists
            # Nothing in flight can be settled any more: abandon it rather than drain.
            self._fail(exc, True)
            return False
        return True

    def _byte_headroom(self) -> int:
        """How many more tasks fit under ``max_in_flight_bytes``, judged by recent payloads.

        At least one task may always run, so a single oversized payload cannot stall the worker.
        """
        budget = self.limits.max_in_flight_bytes
        if budget is None:
            return self.limits.concurrency
        if not self.calls:
            room = budget
        else:
            room = budget - self._bytes_in_flight
            if room <= 0:
                return 0
        return max(1 if not self.calls else 0, room // max(1, int(self._typical_payload)))

    def _plan(self, free: int, rows: int | None = None) -> list[kernel.Draw]:
        self._turn += 1
        return plan_claim(
            self.registry,
            free_calls=free,
            row_budget=rows if self.limits.max_in_flight_bytes is not None else None,
            calls_by_name=self._calls_by_name,
            claim_batch=self.limits.claim_batch,
            turn=self._turn,
        )

    async def _claim(self, draws: list[kernel.Draw], *, probe: bool) -> list[Mapping[str, Any]]:
        """Claim for ``draws``; a cheap read first, unless there is reason to expect work.

        The read keeps an idle worker from opening write transactions. A worker
        that just took all it asked for has work waiting, and one woken because a
        task was queued in its queues (``probe=False``) has news of some: both go
        straight on.
        """
        backend = self.client.backend
        points = self.points
        queues = self.limits.queues
        if points.claim_filters:
            queues, draws = points.filter_claim(queues, draws)
            if not queues or not draws:
                return []
        self._held_back = False
        # A ``claim_session`` replaced on the client's store makes the claim (it probes).
        store = self.client._overriding("claim_session")
        if store is None and probe and not self._backlog:
            names: list[str] = self.registry.names()
            if points.claim_filters:
                _, kept = points.filter_claim(queues, [kernel.Draw(names, 1)])
                names = [name for draw in kept for name in draw.names or ()]
            if not await backend.arun(kernel.probe(queues, names), write=False):
                return []
        claimers = points.claimers()
        for claimer in claimers:
            claimer.begin()
        recovered: list[Mapping[str, Any]] = []
        # A claim with news of work (a task queued, or the last claim took all it asked
        # for) is one statement, no transaction, so the news is served first: a recovery
        # due meanwhile runs just after it, once the tasks it claimed have started
        # (``_recover_after``). A polling claim recovers itself. A news claim that finds
        # nothing skipped the probe that would have seen an expired lease, so under
        # ``until_idle``, with no call running, a recovery runs after it whenever the
        # last ran: idleness is never judged without one.
        news = not probe or self._backlog
        recover_limit = 0 if news else RECOVER_LIMIT
        recover_due = time.monotonic() - self.recoverer.recovered_at >= CLAIM_RECOVERY_EVERY_S
        self._recover_after = False
        if store is not None:
            rows = await self._claim_through(store, queues, draws, recover_limit, recovered)
        else:
            claim = kernel.claim(
                queues,
                self.worker_id,
                self.limits.lease_ms,
                draws,
                recover_limit,
                recovered,
                points=points,
                alone=self._one_statement_claims,
            )
            rows = await backend.arun(claim, write=True)
        if recover_limit:
            self.recoverer.recovered_at = time.monotonic()
        self._recover_after = news and (
            recover_due or (not rows and self.until_idle and not self.calls)
        )
        if recovered:
            self.recoverer.announce(recovered)
        self._backlog = len(rows) >= sum(draw.limit for draw in draws)
        waits: list[float] = []
        for claimer in claimers:
            held, retry_after_ms = claimer.held_back()
            # Due tasks held back are work still to come, not idleness.
            self._held_back = self._held_back or held
            if retry_after_ms is not None and not rows:
                waits.append(retry_after_ms / 1000)
        if waits:
            # Held back until then (a rate limit's next token): waiting longer gains
            # nothing, and waiting less finds nothing.
            self._rate_wait_s = min(waits)
        if rows and points.claimed:
            # Before any of them runs: an extension may settle some unrun (an expired task).
            for hook in points.claimed_hooks():
                try:
                    answer = await backend.arun(hook(rows), write=False)
                    if isinstance(answer, ThenWrite):
                        answer = await backend.arun(answer.op, write=True)
                except Exception as exc:
                    await self._hand_back_unrun(rows, exc)
                    return []
                rows = answer
        return rows

    async def _hand_back_unrun(self, rows: list[Mapping[str, Any]], error: Exception) -> None:
        """A claim hook failed: hand every claimed row back unrun, its attempt not counted,
        rather than leave it to wait out its lease. Should that fail too, the leases
        expire and the recovery requeues the tasks."""
        log.warning(
            "claim hook failed (%s: %s); handing %d claimed task(s) back unrun",
            type(error).__name__,
            error,
            len(rows),
            extra={"worker_id": self.worker_id},
        )

        def hand_back() -> Op[None]:
            for row in rows:
                try:
                    yield from kernel.release(
                        Lease.of(row),
                        self.worker_id,
                        points=self.points,
                        started=int(row["updated_at_ms"]),
                    )
                except LostLease:
                    continue

        try:
            await self.client.backend.arun(hand_back(), write=True)
        except Exception as exc:
            self._report(exc, {"phase": "claim", "worker_id": self.worker_id})

    async def _claim_through(
        self,
        store: Any,
        queues: list[str],
        draws: list[kernel.Draw],
        recover_limit: int,
        recovered: list[Mapping[str, Any]],
    ) -> list[Mapping[str, Any]]:
        """Claim ``draws`` with the store's replaced ``claim_session``: its plan draws
        each of them. The store's own draw claims with this worker's extension points
        (its limits, its draw claimers) and recovers as this claim would, and hands
        back the rows it claimed, which the worker runs (a ``WorkerClaim``)."""
        handoff = WorkerClaim(
            worker_id=self.worker_id,
            points=self.points,
            recover_limit=recover_limit,
            alone=self._one_statement_claims,
        )

        async def plan(draw: ClaimDraw) -> None:
            for each in draws:
                await draw(each.names, each.limit)

        names: list[str] | None = []
        for each in draws:
            if each.names is None or names is None:
                names = None
            else:
                names += [name for name in each.names if name not in names]
        token = WORKER_CLAIM.set(handoff)
        try:
            await store.claim_session(
                queues=queues,
                worker_id=self.worker_id,
                lease_ms=self.limits.lease_ms,
                names=names,
                plan=plan,
            )
        except Exception as exc:
            if not handoff.rows:
                raise
            # The draws committed these claims before the replacement raised: they are
            # this worker's to run (left alone, they would wait out their lease).
            self._report(exc, {"phase": "claim", "worker_id": self.worker_id})
        finally:
            WORKER_CLAIM.reset(token)
        recovered[:] = handoff.recovered
        return list(handoff.rows)

    def _dispatch(self, rows: list[Mapping[str, Any]]) -> None:
        for registration, group in group_calls(rows, self.registry):
            contexts: list[TaskContext] = []
            for row in group:
                ctx = self._context_for(row, registration)
                if ctx is not None:
                    contexts.append(ctx)
            if registration is None or not contexts:
                continue
            crashpoint("after_claim")
            call = asyncio.ensure_future(self._run_call(registration, contexts))
            self.calls.add(call)
            self._calls_by_name[registration.name] += 1

    def _context_for(
        self, row: Mapping[str, Any], registration: Registration | None
    ) -> TaskContext | None:
        """A context for a claimed row, or None after failing a row no handler can take."""
        lease = Lease.of(row)
        refusal = row.get("refusal") if isinstance(row, dict) else None
        if refusal is not None:  # a draw claimer's: fail the task with it
            self._reject(lease, refusal, row)
            return None
        if registration is None:
            envelope = error_envelope(
                "NoHandler", "no_handler", f"no handler registered for {row['name']!r}"
            )
            self._reject(lease, envelope, row)
            return None
        try:
            task = Task.from_row(row)
            if is_sealed(task.payload):
                payload = self.client.codec.opened(task.payload, what="payload", task_id=task.id)
                task = dataclasses.replace(task, payload=payload)
        except DecryptionError as exc:
            self._reject(
                lease, error_envelope("DecryptionError", "encrypted_payload", str(exc)), row
            )
            return None
        except SerializationError as exc:
            self._reject(
                lease, error_envelope("SerializationError", "invalid_payload", str(exc)), row
            )
            return None
        size = self._payload_bytes(row["payload"])
        previous = self.contexts.get(task.id)
        if previous is not None:
            previous.mark_lost()
        ctx = TaskContext(
            self.runtime,
            task,
            lease,
            size,
            options=registration.options,
            retry=registration.retry,
            handler_attempts=registration.max_attempts,
            batched=registration.listed,
        )
        policies = row.get("policies") if isinstance(row, dict) else None
        if policies is not None:  # what its submit asked (the policies extension's)
            ctx.apply_policies(policies)
        self.contexts[task.id] = ctx
        self._bytes_in_flight += size
        self._typical_payload = 0.8 * self._typical_payload + 0.2 * size
        return ctx

    def _payload_bytes(self, payload: Any) -> int:
        """Encoded size of a payload, measured only when a byte budget needs it."""
        if self.limits.max_in_flight_bytes is None:
            return 0
        if isinstance(payload, str):
            return len(payload.encode("utf-8"))
        return len(payload) if isinstance(payload, bytes) else 0

    def _reject(self, lease: Lease, envelope: dict[str, Any], row: Mapping[str, Any]) -> None:
        self.settler.reject(
            lease,
            self.client.codec.encode_error(envelope, retryable=False),
            int(row["updated_at_ms"]),
        )

    async def _run_call(self, registration: Registration, contexts: list[TaskContext]) -> None:
        try:
            await self.executor.run(registration, contexts)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._report(exc, {"phase": "execute", "task_id": contexts[0].task_id})
        finally:
            self._release(registration, contexts)

    def handler_done(self) -> None:
        """The current call's handler returned: its slot frees once its settlement is written."""
        current = asyncio.current_task()
        if current is not None and current in self.calls:
            self._settling.add(current)
            self.wake.set()

    def _release(self, registration: Registration, contexts: list[TaskContext]) -> None:
        # Bookkeeping happens inside the call's own task, before the claim loop is woken,
        # so the loop never wakes to find the slot still taken.
        current = asyncio.current_task()
        if current is not None:
            self.calls.discard(current)
            self._settling.discard(current)
        self._calls_by_name[registration.name] -= 1
        for ctx in contexts:
            self._bytes_in_flight -= ctx.payload_bytes
            if self.contexts.get(ctx.task_id) is ctx:
                del self.contexts[ctx.task_id]
        self.wake.set()
