"""The task state machine and key table, driven at random against a model.

A hypothesis ``RuleBasedStateMachine`` runs the protocol's operations on the
driver's database and on a small pure-Python model (``test_state_model``)
of the protocol's state machine (``src/cairnq/protocol/PROTOCOL.md``: statuses,
attempts, ownership, cancel) and its keys. Time is a ``FakeClock`` handed to the
backend, so leases expire only when a rule advances it. After every step every
task's status, attempt, worker, lease, cancel flag, error, progress, result,
run_at and completed_at, and every key's target, must equal the model's.

Invariants checked on the database itself after every step:

- ``lease_until_ms`` is set iff the task is running;
- ``attempt <= max_attempts + retries without reset`` (since the last reset);
- an owned write with a stale attempt or claim nonce, another worker's id or an
  expired lease raises ``LostLease`` and changes nothing (each settle rule checks
  this), including the write of a claim made before a ``retry(reset_attempt=True)``
  when the same worker claims the task again at the same attempt number;
- cancel wins: a running task with a cancel pending never ends anything but
  canceled (the model encodes it, the comparison enforces it).

Runs are derandomized (fixed seed, no example database) so CI is reproducible.
A tally of the transitions that occurred is checked at the end, so a generator
that stopped reaching the interesting corners fails rather than passing idly.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection
from typing import Any

import pytest
from hypothesis import HealthCheck, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from .. import kernel
from .._json import DEFAULT_CODEC
from ..backends import Backend
from ..errors import AlreadyExists, LostLease
from ..models import CONFLICTS, TERMINAL_STATUSES, Lease
from ..testing import FakeClock
from .driver import Driver
from .test_state_model import Held, Model, expected_decision, observed

__all__ = ["test_random_operation_sequences_keep_database_and_model_in_step"]

START_MS = 1_700_000_000_000
QUEUES = ["default"]
KEYS = ("k1", "k2")
WORKERS = ("w1", "w2")
LEASES_MS = (1_000, 5_000)
RECOVER_LIMIT = 100
TOP_PRIORITY = 1_000_000  # above every other task, so the next claim takes it
FAIL_ERROR = '{"type":"Boom","code":"boom","message":"boom","retryable":true,"details":{}}'

# Examples per dialect: a server's round trips cost more, so it runs fewer.
EXAMPLES = {"sqlite": 150}
SERVER_EXAMPLES = 80
# A fixed seed: every run (and CI) explores the same sequences, whatever the source digest.
SEED = 20_260_101
STEPS = 80

# Transitions every run must reach at least once.
MUST_SEE = {
    "claimed",
    "stale_write_refused",
    "stale_token_refused",
    "impostor_write_refused",
    "expired_write_refused",
    "cancel_won_on_complete",
    "cancel_won_on_fail",
    "cancel_won_on_recovery",
    "requeued_by_fail",
    "failed_for_good",
    "requeued_by_recovery",
    "failed_by_recovery",
    "retried_without_reset",
    "retried_with_reset",
    "ran_past_max_attempts",
    "key_reused",
    "key_reused_succeeded",
    "key_rejected_live",
    "key_rejected_finished",
    "key_replaced_live",
    "key_repointed",
    "purged",
    "heartbeat_renewed",
    "heartbeat_refused",
}


# --- the machine ----------------------------------------------------------------------------


def machine_for(
    backend: Backend, clock: FakeClock, wipe: Callable[[], None], seen: Counter[str]
) -> type[RuleBasedStateMachine]:
    """A state machine class bound to one database; each example starts from empty."""

    class TaskStateMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            wipe()
            clock.set(START_MS)
            self.model: dict[str, Model] = {}
            self.keys: dict[str, str] = {}
            self.serial = 0
            self.submitted: list[str] = []  # every id ever returned, purged ones included
            self.issued: list[Held] = []  # every lease ever handed out, stale ones included

        # --- looking at the model ---------------------------------------------------

        def run(self, op: Any, *, write: bool = True) -> Any:
            return backend.run(op, write=write)

        @property
        def now(self) -> int:
            return clock.now_ms()

        def has(self, *statuses: str) -> bool:
            return any(t.status in statuses for t in self.model.values())

        def holds(self, held: Held) -> bool:
            """Whether ``held`` is the task's current attempt (its lease may have run out)."""
            task = self.model.get(held.task_id)
            return (
                task is not None
                and task.status == "running"
                and (task.attempt, task.worker_id, task.token)
                == (held.attempt, held.worker_id, held.token)
            )

        def held_now(self, among: Collection[str] | None = None) -> list[Held]:
            """Leases still held with time left (of tasks in ``among``, if given)."""
            return [
                h
                for h in self.issued
                if (among is None or h.task_id in among)
                and self.holds(h)
                and self.model[h.task_id].owned_by(h, h.worker_id, self.now)
            ]

        def fenced_only(self, held: Held) -> bool:
            """An older attempt whose worker holds the task again, its lease live."""
            task = self.model.get(held.task_id)
            if task is None or task.token is None or task.token == held.token:
                return False
            current = Held(held.task_id, task.attempt, held.worker_id, task.token)
            return task.owned_by(current, held.worker_id, self.now)

        def exhausted(self) -> list[str]:
            """Failed tasks that used up their attempts."""
            return [
                t.id
                for t in self.model.values()
                if t.status == "failed" and t.attempt >= t.max_attempts
            ]

        def pick_lease(self, data: st.DataObject) -> Held:
            """A lease to write with: mostly one still held; else one the clock ran out on
            (its task not yet recovered); else an older attempt of a task the same worker
            holds again (only the attempt fence stops it); else any ever issued."""
            live = self.held_now()
            lapsed = [h for h in self.issued if self.holds(h) and h not in live]
            fenced = [h for h in self.issued if self.fenced_only(h)]
            choice = data.draw(st.integers(0, 6), label="which kind of lease")
            if live and choice > 2:
                return data.draw(st.sampled_from(live), label="held lease")
            if lapsed and choice == 2:
                return data.draw(st.sampled_from(lapsed), label="lapsed lease")
            if fenced and choice == 1:
                return data.draw(st.sampled_from(fenced), label="older attempt")
            return data.draw(st.sampled_from(self.issued), label="any lease")

        def pick_task(self, data: st.DataObject, prefer: Callable[[Model], bool]) -> str:
            """A task id: mostly one the rule is interested in, sometimes any (purged too)."""
            fitting = [t.id for t in self.model.values() if prefer(t)]
            if fitting and data.draw(st.integers(0, 3), label="prefer a fitting task") != 0:
                return data.draw(st.sampled_from(fitting), label="fitting task")
            return data.draw(st.sampled_from(self.submitted), label="any task")

        # --- each operation, on the database and on the model -----------------------

        def do_submit(
            self,
            key: str | None,
            conflict: str,
            max_attempts: int,
            delay_ms: int,
            band: int,
            priority: int | None = None,
        ) -> None:
            self.serial += 1
            # Unique priorities make claim order total (no ties broken by random ids).
            if priority is None:
                priority = band * 1_000 - self.serial
            spec = kernel.new_task(
                DEFAULT_CODEC,
                "job",
                {"n": self.serial},
                key=key,
                conflict=conflict,
                max_attempts=max_attempts,
                priority=priority,
                delay_ms=delay_ms,
            )
            existing = self.model.get(self.keys[key]) if key in self.keys else None
            decision = expected_decision(conflict, existing.status) if existing else "insert"
            if decision == "reject":
                with pytest.raises(AlreadyExists):
                    self.run(kernel.submit(spec))
                assert existing is not None
                finished = existing.status in TERMINAL_STATUSES
                seen["key_rejected_finished" if finished else "key_rejected_live"] += 1
                return
            task = self.run(kernel.submit(spec))
            if decision == "return":
                assert existing is not None
                assert task.id == existing.id
                seen[
                    "key_reused_succeeded" if existing.status == "succeeded" else "key_reused"
                ] += 1
                return
            if decision == "replace":
                assert existing is not None
                self.cancel_model(existing)
                seen["key_replaced_live"] += 1
            elif existing is not None:
                seen["key_repointed"] += 1
            assert task.id not in self.model
            self.model[task.id] = Model(
                id=task.id, priority=priority, max_attempts=max_attempts, run_at=self.now + delay_ms
            )
            if key is not None:
                self.keys[key] = task.id
            self.submitted.append(task.id)

        def do_claim(self, worker_id: str, limit: int, lease_ms: int) -> None:
            now = self.now
            due = any(t.status == "queued" and t.run_at <= now for t in self.model.values())
            expired = any(
                t.status == "running" and t.lease_until is not None and t.lease_until <= now
                for t in self.model.values()
            )
            assert self.run(kernel.probe(QUEUES, None), write=False) == (due or expired)
            draws = [kernel.Draw(None, limit)]
            rows = self.run(kernel.claim(QUEUES, worker_id, lease_ms, draws, RECOVER_LIMIT))
            self.recover_model()
            ready = sorted(
                (t for t in self.model.values() if t.status == "queued" and t.run_at <= now),
                key=lambda t: (-t.priority, t.run_at, t.id),
            )[:limit]
            assert [r["id"] for r in rows] == [t.id for t in ready]
            for task, row in zip(ready, rows, strict=True):
                nonce = Lease.of(row).token
                assert nonce != task.token
                task.token = nonce
                task.status = "running"
                task.attempt += 1
                task.worker_id = worker_id
                task.lease_until = now + lease_ms
                if task.attempt > task.max_attempts:
                    seen["ran_past_max_attempts"] += 1
                self.issued.append(Held(task.id, task.attempt, worker_id, nonce))
                seen["claimed"] += 1

        def recover_model(self) -> set[str]:
            now = self.now
            moved = set()
            for task in self.model.values():
                if task.status != "running" or task.lease_until is None or task.lease_until > now:
                    continue
                moved.add(task.id)
                task.lease_until = None
                if task.cancel_at is not None:
                    task.status = "canceled"
                    task.completed_at = now
                    seen["cancel_won_on_recovery"] += 1
                elif task.attempt < task.max_attempts:
                    task.status = "queued"
                    task.worker_id = None
                    task.progress = None
                    task.run_at = now
                    seen["requeued_by_recovery"] += 1
                else:
                    task.status = "failed"
                    task.error = "lease_expired"
                    task.completed_at = now
                    seen["failed_by_recovery"] += 1
            return moved

        def owned_write(
            self, held: Held, impostor: bool, op: Callable[[str], Any]
        ) -> tuple[Model, Any] | None:
            """Run an owned write; check it raises ``LostLease`` exactly when the model says."""
            worker_id = held.worker_id if not impostor else other_worker(held.worker_id)
            task = self.model.get(held.task_id)
            owns = task is not None and task.owned_by(held, worker_id, self.now)
            if not owns:
                with pytest.raises(LostLease):
                    op(worker_id)
                if task is not None and task.status == "running":
                    if task.worker_id != worker_id:
                        seen["impostor_write_refused"] += 1
                    elif task.token != held.token:
                        if task.lease_until is not None and task.lease_until > self.now:
                            # Only the fence said no: by the attempt, or by the nonce alone.
                            seen[
                                "stale_write_refused"
                                if task.attempt != held.attempt
                                else "stale_token_refused"
                            ] += 1
                    else:
                        seen["expired_write_refused"] += 1
                return None
            assert task is not None
            return task, op(worker_id)

        def do_heartbeat(self, held: Held, impostor: bool, lease_ms: int) -> None:
            done = self.owned_write(
                held, impostor, lambda w: self.run(kernel.heartbeat(held.lease(), w, lease_ms))
            )
            if done is not None:
                task, row = done
                task.lease_until = self.now + lease_ms
                assert (row["cancel_requested_at_ms"] is not None) == (task.cancel_at is not None)

        def do_progress(self, held: Held, impostor: bool, value: float | None) -> None:
            done = self.owned_write(
                held, impostor, lambda w: self.run(kernel.progress(held.lease(), w, value, None))
            )
            if done is not None and value is not None:
                done[0].progress = value

        def do_complete(self, held: Held, impostor: bool, result: str | None) -> None:
            done = self.owned_write(
                held, impostor, lambda w: self.run(kernel.complete(held.lease(), w, result))
            )
            if done is None:
                return
            task, row = done
            task.lease_until = None
            task.completed_at = self.now
            if task.cancel_at is not None:
                task.status = "canceled"
                seen["cancel_won_on_complete"] += 1
            else:
                task.status = "succeeded"
                task.result = None if result is None else "r"
                task.progress = 1.0
            assert row["status"] == task.status

        def do_succeed(self, held: Held, impostor: bool) -> None:
            done = self.owned_write(
                held, impostor, lambda w: self.run(kernel.succeed(held.lease(), w, '"s"'))
            )
            if done is None:
                return
            task, row = done
            # The low-level primitive: succeeds whatever cancel is pending.
            task.status = "succeeded"
            task.result = "s"
            task.progress = 1.0
            task.lease_until = None
            task.completed_at = self.now
            assert row["status"] == "succeeded"

        def do_fail(self, held: Held, impostor: bool, retryable: bool, delay_ms: int) -> None:
            done = self.owned_write(
                held,
                impostor,
                lambda w: self.run(
                    kernel.fail(held.lease(), w, FAIL_ERROR, retryable=retryable, delay_ms=delay_ms)
                ),
            )
            if done is None:
                return
            task, row = done
            now = self.now
            task.error = "boom"
            task.lease_until = None
            if task.cancel_at is not None:
                task.status = "canceled"
                task.completed_at = now
                seen["cancel_won_on_fail"] += 1
            elif retryable and task.attempt < task.max_attempts:
                task.status = "queued"
                task.worker_id = None
                task.progress = None
                task.run_at = now + delay_ms
                task.completed_at = None
                seen["requeued_by_fail"] += 1
            else:
                task.status = "failed"
                task.completed_at = now
                seen["failed_for_good"] += 1
            assert row["status"] == task.status

        def cancel_model(self, task: Model) -> bool:
            if task.status == "queued":
                task.status = "canceled"
                task.completed_at = self.now
                return True
            if task.status == "running":
                task.cancel_at = self.now
                return True
            return False

        def do_retry(self, task_id: str, reset_attempt: bool) -> None:
            got = self.run(kernel.retry(task_id, reset_attempt))
            task = self.model.get(task_id)
            if task is None or task.status not in ("failed", "canceled"):
                assert got is None
                return
            assert got is not None
            task.status = "queued"
            task.error = None
            task.worker_id = None
            task.lease_until = None
            task.cancel_at = None
            task.completed_at = None
            task.progress = None
            task.run_at = self.now
            if reset_attempt:
                task.attempt = 0
                task.bonus = 0
                seen["retried_with_reset"] += 1
            else:
                task.bonus += 1
                seen["retried_without_reset"] += 1

        # --- rules ------------------------------------------------------------------

        @initialize(count=st.integers(1, 3), max_attempts=st.integers(1, 2))
        def some_tasks(self, count: int, max_attempts: int) -> None:
            for _ in range(count):
                self.do_submit(None, "reuse", max_attempts, 0, 1)

        @rule(
            keyed=st.booleans(),
            key=st.sampled_from(KEYS),
            conflict=st.sampled_from(CONFLICTS),
            max_attempts=st.integers(1, 3),
            delay_ms=st.sampled_from([0, 0, 2_000]),
            band=st.integers(0, 2),
        )
        def submit(
            self,
            keyed: bool,
            key: str,
            conflict: str,
            max_attempts: int,
            delay_ms: int,
            band: int,
        ) -> None:
            if keyed:
                self.do_submit(key, conflict, max_attempts, delay_ms, band)
            else:
                self.do_submit(None, "reuse", max_attempts, 0, band)

        @precondition(lambda self: self.has("queued", "running"))
        @rule(
            worker_id=st.sampled_from(WORKERS),
            limit=st.integers(1, 3),
            lease_ms=st.sampled_from(LEASES_MS),
        )
        def claim(self, worker_id: str, limit: int, lease_ms: int) -> None:
            self.do_claim(worker_id, limit, lease_ms)

        @precondition(lambda self: self.has("queued", "running"))
        @rule(worker_id=st.sampled_from(WORKERS))
        def claim_one(self, worker_id: str) -> None:
            """Claiming weighs double: most interesting transitions start from running."""
            self.do_claim(worker_id, 1, LEASES_MS[1])

        # Owned writes by a worker, with a lease that may no longer be held. One rule
        # each: every rule gets its own share of the steps.

        @precondition(lambda self: self.issued)
        @rule(impostor=st.booleans(), result=st.sampled_from(['"r"', None]), data=st.data())
        def complete(self, impostor: bool, result: str | None, data: st.DataObject) -> None:
            self.do_complete(self.pick_lease(data), impostor, result)

        @precondition(lambda self: self.issued)
        @rule(impostor=st.booleans(), data=st.data())
        def succeed(self, impostor: bool, data: st.DataObject) -> None:
            self.do_succeed(self.pick_lease(data), impostor)

        @precondition(lambda self: self.issued)
        @rule(
            impostor=st.booleans(),
            retryable=st.booleans(),
            delay_ms=st.sampled_from([0, 1_500]),
            progress_first=st.booleans(),
            data=st.data(),
        )
        def fail(
            self,
            impostor: bool,
            retryable: bool,
            delay_ms: int,
            progress_first: bool,
            data: st.DataObject,
        ) -> None:
            held = self.pick_lease(data)
            if progress_first and not impostor and held in self.held_now():
                self.do_progress(held, False, 0.75)  # progress reported, then it raised
            self.do_fail(held, impostor, retryable, delay_ms)

        @precondition(lambda self: self.issued)
        @rule(impostor=st.booleans(), value=st.sampled_from([0.25, 0.5, None]), data=st.data())
        def progress(self, impostor: bool, value: float | None, data: st.DataObject) -> None:
            self.do_progress(self.pick_lease(data), impostor, value)

        @precondition(lambda self: self.issued)
        @rule(impostor=st.booleans(), lease_ms=st.sampled_from(LEASES_MS), data=st.data())
        def heartbeat(self, impostor: bool, lease_ms: int, data: st.DataObject) -> None:
            self.do_heartbeat(self.pick_lease(data), impostor, lease_ms)

        @precondition(lambda self: self.issued)
        @rule(
            worker_id=st.sampled_from(WORKERS),
            count=st.integers(1, 3),
            lease_ms=st.sampled_from(LEASES_MS),
            data=st.data(),
        )
        def heartbeat_batch(
            self, worker_id: str, count: int, lease_ms: int, data: st.DataObject
        ) -> None:
            chosen = [self.pick_lease(data) for _ in range(count)]
            unique = list({h.task_id: h for h in chosen}.values())  # one lease per task
            got = self.run(kernel.heartbeat_batch([h.lease() for h in unique], worker_id, lease_ms))
            now = self.now
            expected = {}
            for held in unique:
                task = self.model.get(held.task_id)
                if task is not None and task.owned_by(held, worker_id, now):
                    expected[held.task_id] = task.cancel_at is not None
                    task.lease_until = now + lease_ms
                    seen["heartbeat_renewed"] += 1
                else:
                    seen["heartbeat_refused"] += 1
            assert got == expected

        @precondition(lambda self: self.held_now())
        @rule(how=st.sampled_from(["complete", "fail"]), data=st.data())
        def cancel_then_settle(self, how: str, data: st.DataObject) -> None:
            """A cancel lands while the handler runs; however the handler ends, cancel wins."""
            held = data.draw(st.sampled_from(self.held_now()), label="held lease")
            assert self.run(kernel.cancel(held.task_id)) is not None
            assert self.cancel_model(self.model[held.task_id])
            if how == "complete":
                self.do_complete(held, False, '"r"')
            else:
                self.do_fail(held, False, True, 0)

        @rule(route=st.sampled_from(["fail", "expiry"]), worker_id=st.sampled_from(WORKERS))
        def zombie_writes_after_the_same_worker_reclaims(self, route: str, worker_id: str) -> None:
            """The worker that ran attempt 1 claims attempt 2 (after a retryable failure,
            or after its lease ran out and recovery requeued the task). Every owned write
            still carrying attempt 1 must be refused: only the attempt fence stops it."""
            self.do_submit(None, "reuse", 3, 0, 0, priority=TOP_PRIORITY + self.serial)
            task_id = self.submitted[-1]
            self.do_claim(worker_id, 1, LEASES_MS[0])
            [first] = self.held_now([task_id])
            self.do_progress(first, False, 0.5)
            if route == "fail":
                self.do_fail(first, False, True, 0)
            else:
                clock.advance(LEASES_MS[0])
                self.do_heartbeat(first, False, LEASES_MS[0])  # expired, not yet recovered
            self.do_claim(worker_id, 1, LEASES_MS[1])  # recovers first when the lease ran out
            [second] = self.held_now([task_id])
            assert (second.attempt, second.worker_id) == (2, worker_id)
            self.assert_every_write_refused(first, worker_id)

        def assert_every_write_refused(self, stale: Held, worker_id: str) -> None:
            """Each owned write with ``stale`` is refused; the task stays in its new attempt."""
            self.do_heartbeat(stale, False, LEASES_MS[1])
            self.do_progress(stale, False, 0.25)
            self.do_complete(stale, False, '"r"')
            self.do_succeed(stale, False)
            self.do_fail(stale, False, False, 0)
            got = self.run(kernel.heartbeat_batch([stale.lease()], worker_id, LEASES_MS[1]))
            assert got == {}
            assert self.model[stale.task_id].status == "running"

        @rule(route=st.sampled_from(["fail", "expiry"]), worker_id=st.sampled_from(WORKERS))
        def zombie_writes_after_a_reset_retry_and_the_same_attempt_again(
            self, route: str, worker_id: str
        ) -> None:
            """Attempt 1 ends for good (a failure, or its lease running out), the task is
            retried with ``reset_attempt=True`` and the same worker claims it again: attempt
            1 once more, by the same worker id. The first claim's writes must be refused:
            only the claim's nonce tells the two claims apart."""
            self.do_submit(None, "reuse", 1, 0, 0, priority=TOP_PRIORITY + self.serial)
            task_id = self.submitted[-1]
            self.do_claim(worker_id, 1, LEASES_MS[0])
            [first] = self.held_now([task_id])
            if route == "fail":
                self.do_fail(first, False, True, 0)
            else:
                clock.advance(LEASES_MS[0])
                assert self.run(kernel.recover(RECOVER_LIMIT))
                self.recover_model()
            assert self.model[task_id].status == "failed"
            self.do_retry(task_id, True)
            self.do_claim(worker_id, 1, LEASES_MS[1])
            [second] = self.held_now([task_id])
            assert (second.attempt, second.worker_id) == (first.attempt, first.worker_id)
            assert second.token != first.token
            self.assert_every_write_refused(first, worker_id)

        @rule(
            key=st.sampled_from(KEYS),
            status=st.sampled_from(["queued", "running", "succeeded", "failed", "canceled"]),
            conflict=st.sampled_from(CONFLICTS),
            worker_id=st.sampled_from(WORKERS),
        )
        def submit_again_under_a_key(
            self, key: str, status: str, conflict: str, worker_id: str
        ) -> None:
            """A keyed task is brought to ``status``, then submitted again under its key:
            every cell of the key table, amid whatever else the run is doing."""
            self.do_submit(key, "replace", 1, 0, 0, priority=TOP_PRIORITY + self.serial)
            task_id = self.keys[key]
            if status == "canceled":
                assert self.run(kernel.cancel(task_id)) is not None
                assert self.cancel_model(self.model[task_id])
            elif status != "queued":
                self.do_claim(worker_id, 1, LEASES_MS[1])  # the top priority goes first
                [held] = self.held_now([task_id])
                if status == "succeeded":
                    self.do_complete(held, False, '"r"')
                elif status == "failed":
                    self.do_fail(held, False, False, 0)
            assert self.model[task_id].status == status
            self.do_submit(key, conflict, 2, 0, 1)

        @precondition(lambda self: self.submitted)
        @rule(by_key=st.booleans(), key=st.sampled_from(KEYS), data=st.data())
        def cancel(self, by_key: bool, key: str, data: st.DataObject) -> None:
            if by_key:
                got = self.run(kernel.cancel_by_key(key))
                task = self.model.get(self.keys.get(key, ""))
            else:
                # Above all a running task: its attempt then has to end canceled.
                task_id = self.pick_task(data, lambda t: t.status == "running")
                got = self.run(kernel.cancel(task_id))
                task = self.model.get(task_id)
            changed = task is not None and self.cancel_model(task)
            assert (got is not None) == changed
            if got is not None:
                assert task is not None
                assert got.status == task.status

        @precondition(lambda self: self.submitted)
        @rule(reset_attempt=st.booleans(), data=st.data())
        def retry(self, reset_attempt: bool, data: st.DataObject) -> None:
            task_id = self.pick_task(data, lambda t: t.status in ("failed", "canceled"))
            self.do_retry(task_id, reset_attempt)

        @precondition(lambda self: self.exhausted())
        @rule(worker_id=st.sampled_from(WORKERS), data=st.data())
        def retry_exhausted_and_claim(self, worker_id: str, data: st.DataObject) -> None:
            """One more run for a task that used up its attempts (retry keeps the count)."""
            self.do_retry(data.draw(st.sampled_from(self.exhausted()), label="task"), False)
            self.do_claim(worker_id, 3, LEASES_MS[1])

        @rule(ms=st.sampled_from([1, 999, 1_000, 2_500, 5_000, 6_000]))
        def advance_clock(self, ms: int) -> None:
            clock.advance(ms)

        @precondition(lambda self: self.has("running"))
        @rule()
        def recover(self) -> None:
            rows = self.run(kernel.recover(RECOVER_LIMIT))
            assert {r["id"] for r in rows} == self.recover_model()

        @precondition(lambda self: self.has(*TERMINAL_STATUSES))
        @rule(older_than_ms=st.sampled_from([0, 1_000, 10_000]))
        def purge(self, older_than_ms: int) -> None:
            got = self.run(kernel.purge(older_than_ms=older_than_ms, limit=1_000))
            cutoff = self.now - older_than_ms
            doomed = {
                t.id
                for t in self.model.values()
                if t.status in TERMINAL_STATUSES
                and t.completed_at is not None
                and t.completed_at < cutoff
            }
            assert set(got) == doomed
            for task_id in doomed:
                del self.model[task_id]
                seen["purged"] += 1
            # Keys cascade with their task.
            self.keys = {k: v for k, v in self.keys.items() if v not in doomed}

        # --- after every step -------------------------------------------------------

        @invariant()
        def database_matches_the_model(self) -> None:
            rows = self.run(kernel.list_tasks(limit=10_000), write=False)
            actual = {t.id: observed(t) for t in rows}
            assert actual == {i: t.observed() for i, t in self.model.items()}
            for key in KEYS:
                pointee = self.run(kernel.get_by_key(key), write=False)
                assert (None if pointee is None else pointee.id) == self.keys.get(key), key
            # Checked on the stored rows directly, not only through the model.
            for task in rows:
                assert (task.lease_until_ms is not None) == (task.status == "running")
                assert task.attempt <= task.max_attempts + self.model[task.id].bonus

    return TaskStateMachine


def other_worker(worker_id: str) -> str:
    return WORKERS[1] if worker_id == WORKERS[0] else WORKERS[0]


# --- running it on the driver's backend -----------------------------------------------------


def test_random_operation_sequences_keep_database_and_model_in_step(driver: Driver) -> None:
    clock = FakeClock(START_MS)
    backend = driver.open(clock=clock)
    seen: Counter[str] = Counter()
    try:
        run_state_machine_as_test(
            seed(SEED)(machine_for(backend, clock, driver.wipe, seen)),
            settings=settings(
                max_examples=EXAMPLES.get(driver.dialect, SERVER_EXAMPLES),
                stateful_step_count=STEPS,
                deadline=None,
                derandomize=True,
                database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            ),
        )
    finally:
        backend.close()
    missing = sorted(MUST_SEE - {name for name, count in seen.items() if count})
    assert not missing, f"the random runs never reached {missing}; tally: {dict(seen)}"
