"""The processes a chaos run starts: workers and clients that record what they do.

``python -m tests.chaos.programs worker CONFIG`` / ``... client CONFIG`` where
CONFIG is JSON. Handlers record ``handler_start`` / ``handler_end``; the backend
wrapper records claims and settlements (``history.RecordingBackend``).

A worker or client may run a mutant: a deliberately broken build the checker
must catch (``MUTANTS``). Each substitution of a mutant must apply to the
statement text it names, or the process refuses to start: a mutant that only
partly applies would test less than it claims.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import importlib
import json
import os
import random
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cairnq import CairnQ, Limit, TaskContext, TaskEvent, Worker, errors, kernel
from cairnq.backends import Backend, SQLiteBackend
from cairnq.extensions import Limits
from cairnq.extensions.waits import Waiting, WaitTimeout
from cairnq.protocol import statements as _protocol
from cairnq.protocol.steps import NOW, Call
from cairnq.workflows import Gathering, Graph

from .history import Recorder, RecordingBackend, nonce_of

Substitution = tuple[str, str, str]  # (statement, old text, new text)

_OWNED = ("complete", "succeed", "fail", "progress", "heartbeat", "hand_back")
_CLAIMS = ("claim", "claim_one_queue", "claim_one_name", "claim_one_queue_one_name")


# The attempt history's settling statements (PostgreSQL), fenced as complete and fail.
_HISTORY_OWNED = ("history_complete", "history_fail")


def _attempt_fence(dialect: str) -> list[Substitution]:
    """Every owned write stops checking the attempt."""
    if dialect == "sqlite":
        return [
            *[(n, "attempt = :attempt and ", ":attempt is not null and ") for n in _OWNED],
            *[
                (n, "cairnq_tasks.attempt = p.attempt", "p.attempt is not null")
                for n in ("heartbeat_batch", "complete_many")
            ],
        ]
    return [
        *[
            (n, "attempt = :attempt::integer and ", ":attempt::integer is not null and ")
            for n in (*_OWNED, *_HISTORY_OWNED, "hold")
        ],
        (
            "complete_held",
            "and attempt = :attempt::integer\n",
            "and :attempt::integer is not null\n",
        ),
        *[
            (n, "and t.attempt = p.attempt", "and p.attempt is not null")
            for n in ("heartbeat_batch", "complete_many", "history_complete_many")
        ],
    ]


def _claim_module() -> Any:
    """The module ``cairnq.kernel.claim`` (the attribute of that name is its function)."""
    return importlib.import_module("cairnq.kernel.claim")


def _bare_claims() -> None:
    """Claims write the worker id without a nonce: owned writes are fenced on (worker id,
    attempt), as the reference's are."""

    def claimant(worker_id: str, bare: bool) -> str:
        return worker_id

    module = _claim_module()
    assert callable(module.claimant)  # a rename must break the mutant loudly
    module.claimant = claimant
    # Draw claimers (the limits' one-statement page) reach it as ``kernel.claimant``.
    kernel.claimant = claimant  # type: ignore[assignment]


def _repeated_nonce() -> None:
    """Every claim of this process writes the same nonce."""
    _claim_module().new_nonce = lambda: 7


def _both(substitutions: Callable[[str], list[Substitution]]) -> dict[str, list[Substitution]]:
    return {dialect: substitutions(dialect) for dialect in ("sqlite", "postgres")}


@dataclass(frozen=True)
class Mutant:
    """A broken build: statement substitutions per dialect, and/or a patch of cairnq's code."""

    sql: dict[str, list[Substitution]] = field(default_factory=dict)
    patch: Callable[[], None] | None = None
    dialects: tuple[str, ...] = ("sqlite", "postgres")


def _deferred_writes() -> None:
    """Write transactions begin deferred: a transaction that read before it writes
    cannot take the write lock once another process committed after its read.

    Each keyed submit also waits 3 ms between its read of the key and its writes, so
    that the storm's transactions meet whatever the machine's scheduling (on a loaded
    machine the processes could otherwise take turns and never meet).
    """
    SQLiteBackend.begin_write = "begin deferred"
    execute = SQLiteBackend._execute

    def slowed(self: SQLiteBackend, conn: Any, step: Any) -> Any:
        rows = execute(self, conn, step)
        if isinstance(step, Call) and step.statement == "get_key":
            time.sleep(0.003)
        return rows

    SQLiteBackend._execute = slowed  # type: ignore[method-assign]


def _thread_outlives_timeout() -> None:
    """A handler past max_run_ms is failed (and requeued) at once, its thread running on."""
    from cairnq.worker import _executor

    async def invoke(self: Any, registration: Any, contexts: Any) -> Any:
        call = self._call_async if registration.is_async else self._call_sync
        if self._max_run_ms is None:
            return await call(registration, contexts)
        try:
            return await asyncio.wait_for(call(registration, contexts), self._max_run_ms / 1000)
        except asyncio.TimeoutError:
            raise _executor.HandlerTimeout from None

    _executor.Executor._invoke = invoke  # type: ignore[method-assign]


def _leaves_one_running() -> None:
    """The worker forgets to settle the first task it runs and keeps renewing its lease;
    stopping, it does not hand it back either (handed back, another worker still
    draining could run it to its end before the final snapshot)."""
    from cairnq.worker import _claimer, _executor, _settling

    forgotten: set[str] = set()
    succeed = _executor.Executor._succeed
    release = _claimer.Claimer._release
    hand_back = _settling.Settler.release

    async def keep_forgotten(self: Any, lease: Any, started: Any = None) -> None:
        if lease.id not in forgotten:
            await hand_back(self, lease, started)

    async def skip_first(self: Any, ctx: Any, result: Any) -> None:
        if not forgotten:
            forgotten.add(ctx.task_id)
            return
        await succeed(self, ctx, result)

    def keep_renewing(self: Any, registration: Any, contexts: Any) -> None:
        kept = {c.task_id: c for c in contexts if c.task_id in forgotten}
        release(self, registration, contexts)
        self.contexts.update(kept)

    _executor.Executor._succeed = skip_first  # type: ignore[method-assign]
    _claimer.Claimer._release = keep_renewing  # type: ignore[method-assign]
    _settling.Settler.release = keep_forgotten  # type: ignore[method-assign]


def _acks_without_writing() -> None:
    """Every fifth keyless submit is acknowledged and never written."""
    from cairnq import client
    from cairnq.kernel.submit import _as_inserted

    submit = client.CairnQ._submit_spec
    count = [0]

    async def sometimes(self: Any, spec: Any, conn: Any, gate: Any) -> Any:
        count[0] += 1
        if count[0] % 5 == 0 and spec.key is None:
            return _as_inserted(spec, 0, 0)
        return await submit(self, spec, conn, gate)

    client.CairnQ._submit_spec = sometimes  # type: ignore[method-assign]


def _refuses_after_writing() -> None:
    """Every fifth keyless submit is written, then reported as refused (DatabaseBusy)."""
    from cairnq import client

    submit = client.CairnQ._submit_spec
    count = [0]

    async def sometimes(self: Any, spec: Any, conn: Any, gate: Any) -> Any:
        task = await submit(self, spec, conn, gate)
        count[0] += 1
        if count[0] % 5 == 0 and spec.key is None:
            raise errors.DatabaseBusy("the write lock was held past the busy budget")
        return task

    client.CairnQ._submit_spec = sometimes  # type: ignore[method-assign]


def _unwritable_errors() -> None:
    """An error holding NUL or a lone surrogate is written as it is, and cannot be stored."""
    from cairnq import _json

    _json.storable_text = lambda text: text  # type: ignore[assignment]


def _stop_succeeds() -> None:
    """A handler stopped after its cancel is settled with ``succeed``, which ignores the
    pending cancel."""
    from cairnq import kernel
    from cairnq.worker import _executor, _stopping

    invoke = _executor.Executor._invoke_stoppable

    async def succeeding(self: Any, registration: Any, contexts: Any) -> Any:
        try:
            return await invoke(self, registration, contexts)
        except _stopping.HandlerStopped:
            for ctx in contexts:
                row = await ctx._owned(kernel.succeed(ctx.lease, ctx.worker_id, None))
                ctx._settled_as(row)
            return None

    _executor.Executor._invoke_stoppable = succeeding  # type: ignore[method-assign]


def _never_stopped() -> None:
    """The grace period passes and nothing stops the handler: it runs to its end."""
    from cairnq.worker import _stopping

    _stopping.Stop._fire = lambda self: None  # type: ignore[method-assign]


def _no_error_backoff() -> None:
    """A failed claim waits on the wake-up latch, which any change cuts short."""
    from cairnq.worker._claimer import Claimer

    Claimer._pause_after_error = lambda self, s: self.wake.wait_async(s)  # type: ignore[method-assign, assignment]


def _catch_up_in_seconds() -> None:
    """Schedule evaluation reads ``catch_up`` as seconds: a slot a few ms late is missed."""
    from cairnq.extensions.schedules import _plan as plans

    plan = plans.plan

    def in_seconds(**options: Any) -> Any:
        return plan(**{**options, "catch_up_ms": options["catch_up_ms"] // 1000})

    plans.plan = in_seconds


def _slots_unguarded(dialect: str) -> list[Substitution]:
    """A slot decided again is recorded again, and the cursor stays where it was."""
    cast = "::bigint" if dialect == "postgres" else ""
    return [
        (
            "schedule_slot_insert",
            "do nothing",
            "do update set recorded_at_ms = excluded.recorded_at_ms",
        ),
        (
            "schedule_advance",
            f"set cursor_ms = :cursor_ms{cast}, next_ms",
            f"set cursor_ms = cursor_ms + 0 * :cursor_ms{cast}, next_ms",
        ),
    ]


def _answering(op: Any, statement: str, answer: Callable[[Any], Any]) -> Any:
    """Step ``op`` (an operation's generator of statement calls) as the backend would,
    except that its calls of ``statement`` are answered by the generator ``answer(call)``
    (which may make calls of its own) instead of running that statement."""
    from cairnq.protocol.steps import Call

    reply: Any = None
    while True:
        try:
            step = op.send(reply)
        except StopIteration as stop:
            return stop.value
        if isinstance(step, Call) and step.statement == statement:
            reply = yield from answer(step)
        else:
            reply = yield step


def _limit_per_process() -> None:
    """Limits counted per process: a limited claim sees only this worker's running tasks
    (what a process-local counter, like a worker's ``resources``, would know), so every
    process admits up to the limit per key on its own. PostgreSQL's keyed statements (the
    page and the fitting claim) count so by the statement substitution of the mutant;
    SQLite's have no worker to count by, so there the claim takes the general path, whose counts
    (``limits_running`` and ``limits_running_by_path``) this patch answers."""
    from cairnq.extensions.limits import _claim as _limits
    from cairnq.models import worker_of
    from cairnq.protocol.steps import Call

    real = _limits.ClaimGate.claim

    def claim(self: Any, queues: Any, names: Any, want: Any, worker_id: str, *rest: Any) -> Any:
        if self.keyed == "admit":
            self.keyed = None
        recorded = _answering(
            real(self, queues, names, want, worker_id, *rest),
            "limits_running",
            lambda step: _own_running(self, step.params["names"], worker_id),
        )
        return (
            yield from _answering(
                recorded,
                "limits_running_by_path",
                lambda step: _own_running_by_path(self, step.params, worker_id),
            )
        )

    def _own_running_by_path(gate: Any, params: dict[str, Any], worker_id: str) -> Any:
        (limit,) = [
            limit
            for limit in gate.limits
            if (limit.scope, limit.target, limit.key_root, limit.json_path)
            == (params["scope"], params["target"], params["key_root"], params["key_path"])
        ]
        rows = yield from _own_running(gate, [limit.id], worker_id)
        return [{"key_value": row["key_value"], "running": row["running"]} for row in rows]

    def _own_running(gate: Any, names: list[str], worker_id: str) -> Any:
        params = dict.fromkeys(("status", "queue", "name", "root_id", "correlation_id"))
        rows = yield Call("list", {**params, "status": "running", "limit": 10_000, "offset": 0})
        counts: dict[tuple[str, str], int] = {}
        for row in rows:
            if worker_of(row["worker_id"]) != worker_id:
                continue
            payload = (
                json.loads(row["payload"]) if isinstance(row["payload"], str) else row["payload"]
            )
            for limit in gate.limits:
                if limit.id in names and limit.governs(row["queue"], row["name"]):
                    key = limit.key_in(payload, payload)
                    counts[(limit.id, key)] = counts.get((limit.id, key), 0) + 1
        return [{"limit_name": n, "key_value": k, "running": c} for (n, k), c in counts.items()]

    _limits.ClaimGate.claim = claim  # type: ignore[method-assign]


def _pretend_succeeded(applies: Callable[[list[dict[str, Any]]], bool]) -> None:
    """Deciding a parked task whose dependencies' rows satisfy ``applies`` takes every one
    still queued or running as succeeded (``workflows.decide`` sees them so)."""
    from cairnq.extensions.workflows import _ops as _workflows

    real = _workflows.decide

    def decide(edges: Any) -> Any:
        rows = [dict(r) for r in edges]
        by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in rows:
            if r["depends_on_id"] is not None:
                by_task[str(r["task_id"])].append(r)
        for deps in by_task.values():
            if applies(deps):
                for r in deps:
                    if r["depends_on_status"] in ("queued", "running"):
                        r["depends_on_status"] = "succeeded"
        return real(rows)

    _workflows.decide = decide


def _release_ignores_a_dependency() -> None:
    """A dependent under policy cancel or fail is released once any one of its dependencies
    succeeded, whatever the others' state."""
    _pretend_succeeded(
        lambda deps: (
            any(r["policy"] != "run" for r in deps)
            and any(r["depends_on_status"] == "succeeded" for r in deps)
        )
    )


def _gather_resumes_early() -> None:
    """A parked task whose dependencies are all under policy run (every parent parked by
    gather, and a graph's run-policy dependents) is released when the first of them ends."""
    _pretend_succeeded(
        lambda deps: (
            all(r["policy"] == "run" for r in deps)
            and any(r["depends_on_status"] in ("succeeded", "failed", "canceled") for r in deps)
        )
    )


def _purged_success_forgotten() -> None:
    """Deciding ignores the recorded successes (``cairnq_dependencies_satisfied``): a
    dependency purged after it succeeded counts as gone, so its dependent is canceled or
    failed by policy ``cancel`` or ``fail`` once its other dependencies end."""
    from cairnq.extensions.workflows import _ops as _workflows

    real = _workflows.decide

    def decide(edges: Any) -> Any:
        return real([{**dict(r), "satisfied": False} for r in edges])

    _workflows.decide = decide


def _decided_stay_parked() -> None:
    """Deciding never forgets the decided tasks (``workflows_unpark`` is skipped), so the
    sweep finds them again."""
    from cairnq.extensions.workflows import _ops as _workflows

    real = _workflows._decide_rounds

    def skipped(step: Any) -> Any:
        return None
        yield  # a generator that answers without a statement

    def rounds(ended: list[str], candidates: list[str]) -> Any:
        return (yield from _answering(real(ended, candidates), "workflows_unpark", skipped))

    _workflows._decide_rounds = rounds


def _expiry_ignored() -> None:
    """Workers run what they claim whatever its expiry, and never cancel an expired task."""
    from cairnq.extensions.policies import _ops as _policies

    def claimed(rows: Any, worker_id: str, points: Any) -> Any:
        found = yield Call("policies_for", {"ids": [str(r["id"]) for r in rows], "now_ms": NOW})
        by_id = {str(p["task_id"]): {**p} for p in found}
        return [
            {**r, "policies": by_id[str(r["id"])]} if str(r["id"]) in by_id else r for r in rows
        ]

    def due(limit: int = 0) -> Any:
        return []
        yield  # a generator that answers without a statement

    _policies.claimed = claimed
    _policies.due = due


MUTANTS: dict[str, Mutant] = {
    # Workers start tasks past their expiry (and leave expired queued tasks alone).
    "ignores_expiry": Mutant(patch=_expiry_ignored),
    # Claims without a nonce and owned writes not fenced on the attempt: the worker id
    # alone fences them.
    "no_fence": Mutant(sql=_both(_attempt_fence), patch=_bare_claims),
    # Claims write the worker id without a nonce: fenced on (worker id, attempt), as the
    # reference's are.
    "claim_without_nonce": Mutant(patch=_bare_claims),
    # Every claim writes the same nonce: claims of one worker id are told apart by the
    # attempt alone.
    "nonce_repeated": Mutant(patch=_repeated_nonce),
    # Recovery that requeues (or fails) a task whose cancel was requested.
    "recover_ignores_cancel": Mutant(
        sql=_both(
            lambda d: [
                (
                    "recover_leases",
                    "when cancel_requested_at_ms is not null then",
                    "when 1 = 0 then",
                )
            ]
        )
    ),
    # Recovery that takes leases up to a minute before they expire.
    "recover_live_leases": Mutant(
        sql={
            "sqlite": [
                (
                    "recover_leases",
                    "lease_until_ms <= :now_ms",
                    "lease_until_ms <= :now_ms + 60000",
                ),
                (
                    "expired_lease_probe",
                    "lease_until_ms <= :now_ms",
                    "lease_until_ms <= :now_ms + 60000",
                ),
            ],
            "postgres": [
                (
                    "recover_leases",
                    "and lease_until_ms <= (select now_ms from clock)",
                    "and lease_until_ms <= (select now_ms from clock) + 60000",
                ),
                (
                    "recover_leases",
                    "and t.lease_until_ms <= (select now_ms from clock)",
                    "and t.lease_until_ms <= (select now_ms from clock) + 60000",
                ),
                ("expired_lease_probe", "lease_until_ms <=", "lease_until_ms - 60000 <="),
            ],
        }
    ),
    # A retryable failure requeues the task whatever its attempts.
    "retries_unbounded": Mutant(
        sql={
            "sqlite": [("fail", ":retryable and attempt < max_attempts", ":retryable")],
            "postgres": [("fail", ":retryable::boolean and attempt < max_attempts", ":retryable")],
        }
    ),
    # Purge deletes finished rows however recently they finished.
    "purge_ignores_cutoff": Mutant(
        sql={
            "sqlite": [("purge", ":now_ms - :older_than_ms", ":now_ms + :older_than_ms")],
            "postgres": [
                (
                    "purge",
                    "(select now_ms from clock) - :older_than_ms::bigint",
                    "(select now_ms from clock) + :older_than_ms::bigint",
                )
            ],
        }
    ),
    # A keyed submit never sees the task its key points at.
    "keys_unseen": Mutant(
        sql={
            "sqlite": [
                ("get_key", "where key = :key", "where key = :key and 1 = 0"),
                ("key_pointers", "where k.key in", "where 1 = 0 and k.key in"),
            ],
            "postgres": [
                ("get_key", "where key = :key::text", "where key = :key::text and 1 = 0"),
                ("key_pointers", "where k.key = any", "where 1 = 0 and k.key = any"),
            ],
        }
    ),
    # A submit(unique_for=...) never sees its key's period.
    "periods_unseen": Mutant(
        sql={
            "sqlite": [
                ("uniqueness_period", "where key = :key and", "where key = :key and 1 = 0 and")
            ],
            "postgres": [
                ("uniqueness_period", "where key = :key::text", "where key = :key::text and 1 = 0")
            ],
        }
    ),
    # succeed_in runs the application's write although a cancel is pending.
    "succeed_in_ignores_cancel": Mutant(
        sql={
            "postgres": [
                (
                    "hold",
                    "select cancel_requested_at_ms\nfrom",
                    "select null::bigint as cancel_requested_at_ms\nfrom",
                )
            ]
        },
        dialects=("postgres",),
    ),
    # Claims that neither skip locked rows nor re-check the row once they hold it.
    "claim_without_fence": Mutant(
        sql={
            "postgres": [
                *[(n, "for update skip locked", "") for n in _CLAIMS],
                *[(n, "  and status = 'queued'\nreturning", "returning") for n in _CLAIMS],
            ]
        },
        dialects=("postgres",),
    ),
    # SQLite write transactions opened deferred instead of immediate.
    "deferred": Mutant(patch=_deferred_writes, dialects=("sqlite",)),
    "thread_outlives_timeout": Mutant(patch=_thread_outlives_timeout),
    "leaves_one_running": Mutant(patch=_leaves_one_running),
    "acks_without_writing": Mutant(patch=_acks_without_writing),
    "refuses_after_writing": Mutant(patch=_refuses_after_writing),
    "unwritable_errors": Mutant(patch=_unwritable_errors),
    "no_error_backoff": Mutant(patch=_no_error_backoff, dialects=("sqlite",)),
    "stop_succeeds": Mutant(patch=_stop_succeeds),
    "never_stopped": Mutant(patch=_never_stopped),
    # Neither a slot's primary key nor the schedule's cursor keeps a slot decided once.
    "slots_unguarded": Mutant(sql=_both(_slots_unguarded)),
    "catch_up_in_seconds": Mutant(patch=_catch_up_in_seconds),
    "limit_per_process": Mutant(
        patch=_limit_per_process,
        sql={
            "postgres": [
                (
                    statement,
                    "    select t.payload, t.metadata from cairnq_tasks t\n"
                    "    where t.queue = :queue::text and t.status = 'running'",
                    "    select t.payload, t.metadata from cairnq_tasks t\n"
                    "    where t.queue = :queue::text and t.status = 'running'\n"
                    "      and split_part(t.worker_id, '#', 1)"
                    " = split_part(:worker_id::text, '#', 1)",
                )
                for statement in ("limits_claim_keyed", "limits_claim_fitting")
            ]
        },
    ),
    # Claims under one limit no longer take turns: the limit's row is read without its
    # lock, so two claims can count the same running tasks and both take a key's last
    # place. The page statement is slowed by 20 ms after its snapshot so that the
    # scenario's claims overlap on any machine (the statement reads the counts as of its
    # start, whatever it does after).
    "limit_unlocked": Mutant(
        sql={
            "postgres": [
                ("limits_lock", "order by name\nfor update;", "order by name;"),
                *[
                    (
                        statement,
                        " * 1000)::bigint) as now_ms\n),\nstored",
                        " * 1000)::bigint) as now_ms\n"
                        "    from (select pg_sleep(0.02)) as widened\n),\nstored",
                    )
                    for statement in ("limits_claim_keyed", "limits_claim_fitting")
                ],
            ]
        },
        dialects=("postgres",),
    ),
    "release_ignores_a_dependency": Mutant(patch=_release_ignores_a_dependency),
    # The sweep decides a decided dependent again: decided tasks stay in cairnq_parked, and
    # a release no longer checks that the task is still parked.
    # A batch is decided as if every member had ended: the first member to end submits
    # its callbacks.
    "batch_fires_early": Mutant(
        sql=_both(lambda d: [("batches_unfinished", "m.outcome is null", "m.outcome = 'never'")])
    ),
    "sweep_decides_twice": Mutant(
        sql={
            "sqlite": [
                ("undefer", "and run_at_ms = :run_at_ms", "and :run_at_ms is not null"),
            ],
            "postgres": [
                (
                    "undefer",
                    "and t.run_at_ms = :run_at_ms::bigint",
                    "and :run_at_ms::bigint is not null",
                )
            ],
        },
        patch=_decided_stay_parked,
    ),
    "gather_resumes_early": Mutant(patch=_gather_resumes_early),
    "purged_success_forgotten": Mutant(patch=_purged_success_forgotten),
}


def mutated(name: str, dialect: str, statements: dict[str, Any]) -> dict[str, Any]:
    """``statements`` with mutant ``name``'s substitutions made; every one must apply once.

    Raises:
        SystemExit: the mutant has no build for ``dialect``, or a substitution's text
            is not found exactly once (the mutant would test less than it claims).
    """
    mutant = MUTANTS[name]
    if dialect not in mutant.dialects:
        raise SystemExit(f"mutant {name} has no {dialect} build")
    out = dict(statements)
    for statement, old, new in mutant.sql.get(dialect, []):
        current = out[statement]
        found = current.source.count(old)
        if found != 1:
            raise SystemExit(
                f"mutant {name}: {old!r} appears {found} times in the {dialect} "
                f"{statement} statement, not once"
            )
        source = current.source.replace(old, new)
        out[statement] = _protocol._load_statement(current.dialect, statement, source)
    return out


def apply_mutant(name: str | None, dialect: str) -> None:
    """Break this process as mutant ``name`` says; refuses one that does not fully apply."""
    if not name:
        return
    loaded = _protocol.statements(dialect)  # type: ignore[arg-type]
    loaded.update(mutated(name, dialect, loaded))
    patch = MUTANTS[name].patch
    if patch is not None:
        patch()


def open_backend(spec: dict[str, Any], **options: Any) -> Backend:
    if spec["kind"] == "sqlite":
        options.pop("listen", None)
        if spec.get("busy_ms") is not None:
            options["busy_timeout_ms"] = spec["busy_ms"]
        return SQLiteBackend(spec["url"][len("sqlite:///") :], **options)
    from cairnq.backends.postgres import PostgresBackend

    if spec.get("op_timeout_s") is not None:
        options["op_timeout"] = spec["op_timeout_s"]
    return PostgresBackend(spec["url"], schema=spec["schema"], **options)


# Messages a handler raises with in ``nasty_error`` mode: none can be stored as given.
NASTY_MESSAGES = ("bad\x00byte", "lone \ud800 surrogate", "\x00")


def _ms(value: int | None) -> datetime.timedelta | None:
    """A config's milliseconds as a duration (``None`` stays)."""
    return None if value is None else datetime.timedelta(milliseconds=value)


def run_worker(config: dict[str, Any]) -> None:
    spec = config["db"]
    apply_mutant(config.get("mutant"), spec["kind"])
    if config.get("reference"):
        # Claims as a reference SDK's worker makes them: the bare worker id, no nonce.
        _bare_claims()
    record = Recorder(config["history"])
    options = {"listen": True} if spec["kind"] == "postgres" else {}
    backend = RecordingBackend(open_backend(spec, **options), record)
    worker = Worker(
        CairnQ(backend),  # type: ignore[arg-type]
        queues=config.get("queues", ["default"]),
        concurrency=config.get("concurrency", 4),
        lease_ms=config.get("lease_ms", 1000),
        heartbeat_interval=_ms(config.get("heartbeat_ms")),
        poll_interval_ms=config.get("poll_ms", 100),
        retry_backoff_ms=config.get("backoff_ms", 50),
        retry_backoff_max_ms=config.get("backoff_max_ms", 200),
        recovery_interval=_ms(config.get("recovery_ms", 200)),
        worker_id=config.get("worker_id"),
        drain_timeout=_ms(config.get("drain_ms", 2000)),
        max_run_ms=config.get("max_run_ms"),
        extensions=[Limits(_limits_of(config))],
        **_grace_of(config),
    )
    grace_ms = config.get("cancel_grace_ms", worker.cancel_grace_ms)
    rng = random.Random(config.get("seed", 0) * 1000 + os.getpid())
    tokens: dict[tuple[str, int], Any] = {}

    def noticed(event: TaskEvent) -> None:
        if event.kind == "lost":
            token = tokens.get((event.task_id, event.attempt))
            record(
                "lease_lost",
                task=event.task_id,
                attempt=event.attempt,
                token=token,
                worker=event.worker_id,
            )

    worker.subscribe(noticed)

    def claim_of(ctx: TaskContext) -> dict[str, Any]:
        tokens[(ctx.task_id, ctx.attempt)] = nonce_of(ctx.lease)
        return {
            "task": ctx.task_id,
            "attempt": ctx.attempt,
            "token": nonce_of(ctx.lease),
            "worker": ctx.worker_id,
        }

    @worker.task
    async def job(ctx: TaskContext, payload: dict[str, Any]) -> Any:
        limited = {}
        queue = config.get("limit_queue", "default")
        if config.get("limit") and "customer" in payload and ctx.task.queue == queue:
            limited = {"limit_key": payload["customer"], "limit": config["limit"]}
        record("handler_start", **claim_of(ctx), **limited, grace_ms=grace_ms)
        outcome = "cancelled"
        ended: dict[str, float] = {}
        try:
            # ``hold_ms``: every run of this worker lasts at least that long, so a scenario
            # can act while its calls are surely running.
            await asyncio.sleep(config.get("hold_ms", 0) / 1000)
            result = await _run(ctx, payload, rng, record)
            outcome = "return"
            return result
        except asyncio.CancelledError:
            raise
        except Gathering as parked:
            # The run ended when gather parked its attempt (that was its settlement).
            outcome = "gathering"
            ended["t"] = getattr(parked, "called_at", time.monotonic())
            raise
        except Waiting:
            # The run ended when a wait parked its attempt (that was its settlement).
            outcome = "waiting"
            raise
        except BaseException:
            outcome = "raise"
            raise
        finally:
            seen = ctx.cancel_seen_at
            if seen is not None:
                # How long the worker had known of the cancel when the handler ended (INV-19).
                ended["seen_for_ms"] = (time.monotonic() - seen) * 1000
            record("handler_end", outcome=outcome, **claim_of(ctx), **ended, grace_ms=grace_ms)

    @worker.task("sync_job")
    def sync_job(ctx: Any, payload: dict[str, Any]) -> Any:
        record("handler_start", **claim_of(ctx))
        outcome = "raise"
        try:
            time.sleep(payload.get("sleep_s", 0.05))
            outcome = "return"
            return {"n": payload.get("n"), "attempt": ctx.attempt, "token": nonce_of(ctx.lease)}
        finally:
            record("handler_end", outcome=outcome, **claim_of(ctx))

    record("worker_started")
    worker.serve()
    # A clean stop: every call drained or handed back (INV-17 holds it to that).
    record("worker_stopped")


def _grace_of(config: dict[str, Any]) -> dict[str, Any]:
    """``cancel_grace_ms: N`` in a worker's config: its ``cancel_grace`` (the default when
    absent; ``None`` never stops a handler)."""
    if "cancel_grace_ms" not in config:
        return {}
    return {"cancel_grace": _ms(config["cancel_grace_ms"])}


def _limits_of(config: dict[str, Any]) -> list[Limit]:
    """``limit: N`` in a worker's config: at most N running at once per ``payload.customer``
    in queue ``limit_queue`` (``default``)."""
    if not config.get("limit"):
        return []
    queue = config.get("limit_queue", "default")
    return [Limit.concurrency(config["limit"], queue=queue, key="payload.customer")]


async def _run(
    ctx: TaskContext, payload: dict[str, Any], rng: random.Random, record: Recorder | None = None
) -> Any:
    """What a ``job`` does, by its payload's ``mode``."""
    mode = payload.get("mode", "ok")
    low, high = payload.get("sleep_ms", [5, 50])
    if mode == "block":
        time.sleep(payload.get("block_s", 2.0))
    elif mode == "ignore_cancel":
        # Never checks for a cancel: only a stop (cancel_grace) ends it early.
        await asyncio.sleep(payload.get("stuck_s", 3.0))
    else:
        await asyncio.sleep(rng.uniform(low, high) / 1000)
    if mode == "crash":
        os._exit(137)
    if mode == "fail" and ctx.attempt < payload.get("fail_until", 2):
        raise ConnectionError("scripted failure")
    if mode == "fail_always":
        raise ConnectionError("scripted failure, every attempt")
    if mode == "permanent":
        raise errors.TaskError("scripted permanent failure")
    if mode == "nasty_error":
        raise ValueError(NASTY_MESSAGES[ctx.attempt % len(NASTY_MESSAGES)])
    if mode == "watch_cancel":
        for _ in range(200):
            if await ctx.canceled():
                break
            await asyncio.sleep(0.01)
    result = {"n": payload.get("n"), "attempt": ctx.attempt, "token": nonce_of(ctx.lease)}
    if mode == "effect":
        for _ in range(payload.get("wait_cancel_polls", 0)):
            if await ctx.canceled():
                break
            await asyncio.sleep(0.01)
        token = nonce_of(ctx.lease)

        async def write(conn: Any) -> dict[str, Any]:
            await conn.execute(
                "insert into cairnq_test_effects (task_id, token) values (%s, %s)",
                (ctx.task_id, token),
            )
            return result

        await ctx.succeed_in(write)
    if mode == "steps":
        result["steps"] = await _steps(ctx, payload, rng)
    if mode == "gather":
        result["children"] = await _gather(ctx, payload)
    if mode == "wait":
        result["answer"] = await _wait(ctx, payload, record)
    return result


async def _wait(ctx: TaskContext, payload: dict[str, Any], record: Recorder | None) -> Any:
    """A durable sleep of ``nap_ms``, then a wait for the event on ``payload.event`` (up to
    ``WAIT_TIMEOUT``: a client stopped before it sent lets the task end); each run past
    either is recorded (``slept``, ``waited``) for the waits' invariants."""
    await ctx.sleep(payload["nap_ms"] / 1000)
    if record is not None:
        record("slept", task=ctx.task_id, attempt=ctx.attempt)
    key = payload["event"]
    try:
        answer = await ctx.wait_for(key, timeout=WAIT_TIMEOUT)
    except WaitTimeout:
        return None
    if record is not None:
        record("waited", task=ctx.task_id, attempt=ctx.attempt, name=f"event:{key}", payload=answer)
    return answer


async def _steps(ctx: TaskContext, payload: dict[str, Any], rng: random.Random) -> list[Any]:
    """Durable steps: each records the claim that ran it; the first attempts fail after
    the first step, so a later attempt replays it."""
    low, high = payload.get("sleep_ms", [5, 50])
    done = []
    for i in range(payload.get("steps", 3)):

        async def one() -> dict[str, Any]:
            await asyncio.sleep(rng.uniform(low, high) / 1000)
            return {"attempt": ctx.attempt, "token": nonce_of(ctx.lease)}

        done.append(await ctx.step(f"s{i}", one))
        if i == 0 and ctx.attempt < payload.get("fail_until", 2):
            raise ConnectionError("scripted failure after a step")
    return done


async def _gather(ctx: TaskContext, payload: dict[str, Any]) -> list[str]:
    """Spawn the payload's children, then gather them: parks until every one has ended."""
    children = [await ctx.spawn("job", child) for child in payload.get("children", [])]
    called_at = time.monotonic()
    try:
        tasks = await ctx.gather(children, return_tasks=True)
    except Gathering as parked:
        parked.called_at = called_at  # type: ignore[attr-defined]
        raise
    return [task.status for task in tasks]


MODES = [
    "ok",
    "fail",
    "permanent",
    "watch_cancel",
    "fail_always",
    "nasty_error",
    "effect",
    "graph",
    "gather",
    "steps",
    "limited",
    "batch",
    "wait",
]
# How long a ``wait`` task waits for its event (its client may be stopped before sending).
WAIT_TIMEOUT = "30s"
# Errors that say the submit wrote nothing: the checker holds them to it (INV-1b).
REFUSED = (errors.AlreadyExists, errors.DatabaseBusy, errors.InvalidArgument)
POLICIES = ("cancel", "cancel", "fail", "run")


async def _client(config: dict[str, Any]) -> None:
    spec = config["db"]
    apply_mutant(config.get("mutant"), spec["kind"])
    record = Recorder(config["history"])
    rng = random.Random(config.get("seed", 0) * 7919 + os.getpid())
    weights = list(config.get("mix", [8, 1, 1, 1]))
    weights += [0] * (len(MODES) - len(weights))
    purge_every = config.get("purge_every", 0)
    async with CairnQ(open_backend(spec)) as cq:
        cq._owns_backend = True
        purger = None
        if config.get("graph_purge_every_ms"):
            purger = asyncio.ensure_future(_purge_graphs(cq, record, config))
        cycle = config.get("cycle")
        graphs = 0
        for n in range(config["count"]):
            mode = cycle[n % len(cycle)] if cycle else rng.choices(MODES, weights=weights)[0]
            request = f"{os.getpid()}-{n}"
            if mode == "graph":
                await _graph(cq, record, rng, config, request, POLICIES[graphs % len(POLICIES)])
                graphs += 1
                await asyncio.sleep(config.get("gap_ms", 2) / 1000)
                continue
            if mode == "batch":
                await _batch(cq, record, rng, config, request)
                await asyncio.sleep(config.get("gap_ms", 2) / 1000)
                continue
            payload: dict[str, Any] = {
                "n": n,
                "mode": mode,
                "sleep_ms": config.get("sleep_ms", [5, 50]),
                "req": request,
                "wait_cancel_polls": config.get("wait_cancel_polls", 0),
            }
            queue = "default"
            if mode == "wait":
                await _wait_task(cq, record, rng, request, payload)
                await asyncio.sleep(config.get("gap_ms", 2) / 1000)
                continue
            if mode == "gather":
                payload["children"] = _children(rng, config.get("gather_slow_ms", [105, 180]))
            elif mode == "limited":
                payload |= {"mode": "ok", "customer": f"c{rng.randrange(3)}"}
                queue = config.get("limit_queue", "default")
            key = f"k{rng.randrange(config.get('keys', 0))}" if config.get("keys") else None
            conflict = rng.choice(["reuse", "replace", "reject"]) if key else "reuse"
            record("submit_invoke", req=request, key=key)
            expiring = {}
            if config.get("expires_in_ms"):
                expiring["expires_in"] = f"{config['expires_in_ms']}ms"
            try:
                task = await cq.submit(
                    "job",
                    payload,
                    key=key,
                    conflict=conflict,
                    queue=queue,
                    max_attempts=config.get("max_attempts", 3),
                    **expiring,
                )
            except REFUSED as exc:
                record("submit_fail", req=request, error=type(exc).__name__)
                continue
            except errors.CairnQError as exc:
                record("submit_info", req=request, error=type(exc).__name__)
                continue
            record("submit_ok", req=request, task=task.id, key=key)
            if mode in ("watch_cancel", "effect") and rng.random() < config.get("cancel_p", 0.7):
                await asyncio.sleep(rng.uniform(0, config.get("cancel_after_s", 0.05)))
                record("cancel_invoke", task=task.id)
                try:
                    await cq.cancel(task.id)
                    record("cancel_ok", task=task.id)
                except errors.CairnQError as exc:
                    record("cancel_info", task=task.id, error=type(exc).__name__)
                if key and rng.random() < config.get("retry_p", 0.0):
                    await _retry_later(cq, record, task.id)
            if purge_every and n % purge_every == purge_every - 1:
                await _purge(cq, record, config.get("purge_older_than_ms", 1000))
            await asyncio.sleep(config.get("gap_ms", 2) / 1000)
        if purger is not None:
            purger.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await purger


async def _wait_task(
    cq: CairnQ, record: Recorder, rng: random.Random, request: str, payload: dict[str, Any]
) -> None:
    """A task that sleeps 100-600 ms, then waits for its own event; the event is sent
    before the submit (kept, taken when the wait begins) or after it (often to a parked
    wait), with an id, and sent again with that id after an error or, one time in four,
    as a sender's retry would."""
    key = f"ev-{request}"
    payload |= {"mode": "wait", "event": key, "nap_ms": rng.randint(100, 600)}
    first = rng.random() < 0.5
    if first and not await _send(cq, record, key, request, rng):
        return
    record("submit_invoke", req=request, key=None)
    try:
        task = await cq.submit("job", payload, max_attempts=3)
    except REFUSED as exc:
        record("submit_fail", req=request, error=type(exc).__name__)
        return
    except errors.CairnQError as exc:
        record("submit_info", req=request, error=type(exc).__name__)
        return
    record("submit_ok", req=request, task=task.id, key=None)
    if not first:
        await asyncio.sleep(rng.uniform(0, 0.8))
        await _send(cq, record, key, request, rng)


async def _send(cq: CairnQ, record: Recorder, key: str, request: str, rng: random.Random) -> bool:
    """Send ``key``'s event (payload ``request``) with the id ``request``, again after an
    error (the send may have committed) and one time in four after a success; whether a
    send answered."""
    answered = False
    for _ in range(5):
        try:
            sent = await cq.events.send(key, request, id=f"send-{request}")
        except errors.CairnQError as exc:
            record("send_info", key=key, id=f"send-{request}", error=type(exc).__name__)
            await asyncio.sleep(0.2)
            continue
        record("send", seq=sent.seq, key=key, to="one", payload=request, id=f"send-{request}")
        answered = True
        if rng.random() >= 0.25:
            break
    return answered


def _children(rng: random.Random, slow_ms: list[int]) -> list[dict[str, Any]]:
    """Two to four children for a gather, each slower than the one before (the second
    sleeps ``slow_ms``); one in eight fails for good."""
    low, high = slow_ms
    return [
        {
            "mode": "permanent" if rng.random() < 0.125 else "ok",
            "sleep_ms": [5, 30] if i == 0 else [low + 100 * (i - 1), high + 150 * (i - 1)],
        }
        for i in range(rng.randint(2, 4))
    ]


async def _graph(
    cq: CairnQ,
    record: Recorder,
    rng: random.Random,
    config: dict[str, Any],
    request: str,
    policy: str,
) -> None:
    """A diamond (``a``; ``b`` and ``c`` after it, ``c`` the slower; ``d`` after both, all
    under ``policy``) in one ``submit_graph``, then ``e`` after ``d`` by ``depends_on``
    under a random policy, due ``graph_delay_ms`` after its release, every node in queue
    ``graph_queue``. One node in eight fails for good, and the root is canceled with
    ``graph_cancel_p``. ``c`` sleeps ``graph_slow_ms``: longer than the workflow sweep's
    interval, a sweep always runs while ``b`` has ended and ``c`` has not."""
    slow = config.get("graph_slow_ms", [100, 250])
    sleep = {"a": [5, 30], "b": [5, 30], "c": slow, "d": [5, 30], "e": [5, 30]}
    queue = config.get("graph_queue", "default")

    def node(name: str) -> dict[str, Any]:
        mode = "permanent" if rng.random() < 0.125 else "ok"
        return {"mode": mode, "sleep_ms": sleep[name], "req": f"{request}-{name}"}

    graph = Graph().add("a", "job", node("a"), queue=queue)
    for name, after in (("b", ["a"]), ("c", ["a"]), ("d", ["b", "c"])):
        graph.add(name, "job", node(name), after=after, on_dependency_failure=policy, queue=queue)
    names = list(graph.nodes)
    tasks = await _submit_recorded(record, request, names, cq.submit_graph(graph))
    if tasks is None:
        return
    follow = cq.submit(
        "job",
        node("e"),
        depends_on=[tasks["d"]],
        on_dependency_failure=rng.choice(POLICIES),
        delay_ms=config.get("graph_delay_ms", 0),
        queue=queue,
    )
    await _submit_recorded(record, request, ["e"], _one("e", follow))
    if rng.random() < config.get("graph_cancel_p", 0.0):
        record("cancel_invoke", task=tasks["a"].id)
        try:
            await cq.cancel(tasks["a"].id)
            record("cancel_ok", task=tasks["a"].id)
        except errors.CairnQError as exc:
            record("cancel_info", task=tasks["a"].id, error=type(exc).__name__)


async def _batch(
    cq: CairnQ, record: Recorder, rng: random.Random, config: dict[str, Any], request: str
) -> None:
    """A batch of three to six members, one in eight failing for good, with all three
    callbacks (each a ``job``); half the batches are submitted open, given one more
    member and closed. A member sleeps ``batch_sleep_ms``, its last one longer, so
    members of one batch end in different settlements, some on each worker."""
    low, high = config.get("batch_sleep_ms", [5, 60])
    count = rng.randint(3, 6)

    def member(i: int) -> dict[str, Any]:
        mode = "permanent" if rng.random() < 0.125 else "ok"
        sleep = [low, high] if i < count - 1 else [high, high * 2]
        return {"mode": mode, "sleep_ms": sleep, "req": f"{request}-m{i}"}

    def callback(kind: str) -> dict[str, Any]:
        payload = {"mode": "ok", "sleep_ms": [5, 10], "req": f"{request}-{kind}"}
        return {"task": "job", "payload": payload}

    names = [f"m{i}" for i in range(count)]
    opened = rng.random() < 0.5
    first = names[:-1] if opened else names

    async def submit() -> dict[str, Any]:
        batch = await cq.batch(
            [("job", member(i)) for i in range(len(first))],
            on_success=callback("on_success"),
            on_failure=callback("on_failure"),
            on_complete=callback("on_complete"),
            close=not opened,
        )
        return dict(zip(first, batch.tasks, strict=True)) | {"batch": batch}

    tasks = await _submit_recorded(record, request, first, submit())
    if tasks is None or not opened:
        return
    batch_id = tasks["batch"].id
    await asyncio.sleep(rng.uniform(0, high / 1000))
    added = cq.batches.add(batch_id, [("job", member(count - 1))])
    await _submit_recorded(record, request, names[-1:], _named(names[-1:], added))
    try:
        await cq.batches.close(batch_id)
    except errors.CairnQError as exc:
        record("batch_close_info", batch=batch_id, error=type(exc).__name__)


async def _named(names: list[str], submit: Any) -> dict[str, Any]:
    return dict(zip(names, await submit, strict=True))


async def _one(name: str, submit: Any) -> dict[str, Any]:
    return {name: await submit}


async def _submit_recorded(
    record: Recorder, request: str, names: list[str], submit: Any
) -> dict[str, Any] | None:
    """Await ``submit`` (tasks by node name), recording each node as its own submit."""
    for name in names:
        record("submit_invoke", req=f"{request}-{name}", key=None)
    try:
        tasks: dict[str, Any] = await submit
    except REFUSED as exc:
        for name in names:
            record("submit_fail", req=f"{request}-{name}", error=type(exc).__name__)
        return None
    except errors.CairnQError as exc:
        for name in names:
            record("submit_info", req=f"{request}-{name}", error=type(exc).__name__)
        return None
    for name in names:
        record("submit_ok", req=f"{request}-{name}", task=tasks[name].id, key=None)
    return tasks


async def _retry_later(cq: CairnQ, record: Recorder, task_id: str) -> None:
    """Retry a keyed task once it has ended (canceled), racing keyed submits of its key."""
    for _ in range(50):
        try:
            retried = await cq.retry(task_id)
        except errors.CairnQError as exc:
            record("retry_info", task=task_id, error=type(exc).__name__)
            return
        if retried is not None:
            record("retry_ok", task=task_id)
            return
        await asyncio.sleep(0.01)


async def _purge(
    cq: CairnQ, record: Recorder, older_than_ms: int, queue: str | None = None
) -> None:
    record("purge_invoke", older_than_ms=older_than_ms, status=None, queue=queue)
    try:
        deleted = await cq.purge(older_than_ms=older_than_ms, queue=queue)
    except errors.CairnQError as exc:
        record("purge_info", error=type(exc).__name__)
        return
    record("purge_ok", deleted=len(deleted))


async def _purge_graphs(cq: CairnQ, record: Recorder, config: dict[str, Any]) -> None:
    """Every ``graph_purge_every_ms``, purge the finished tasks of ``graph_queue`` however
    recently they finished: a graph's fast branch is often purged as soon as it succeeded,
    while the slow one still runs and the task after both waits."""
    while True:
        await asyncio.sleep(config["graph_purge_every_ms"] / 1000)
        await _purge(cq, record, 0, config.get("graph_queue", "default"))


def run_client(config: dict[str, Any]) -> None:
    asyncio.run(_client(config))


async def _wait_until(instant: float) -> None:
    await asyncio.sleep(max(0.0, instant - time.time()))


GATE_MARGIN_S = 0.3


def open_gate(gate: Path, procs: list[Any], timeout: float = 120) -> float:
    """Wait until the processes ``procs`` (``Popen``) all stand at ``gate``, then open it
    for them all at one instant a moment from now, returned. However slowly each process
    started (a loaded machine), they all start at once; one that exits before it reached
    the gate fails the wait at once.
    """
    deadline = time.monotonic() + timeout
    while len(list(gate.glob("ready-*"))) < len(procs):
        exited = [p.returncode for p in procs if p.poll() is not None]
        if exited:
            raise RuntimeError(f"a process exited ({exited}) before it reached {gate}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"fewer than {len(procs)} processes reached {gate}")
        time.sleep(0.01)
    start_at = time.time() + GATE_MARGIN_S
    go = gate / "go.tmp"
    go.write_text(repr(start_at))
    go.rename(gate / "go")
    return start_at


async def _start_together(config: dict[str, Any]) -> float:
    """Stand at the config's gate (see ``open_gate``) and wait for its instant; returns it."""
    gate = Path(config["gate"])
    (gate / f"ready-{os.getpid()}").touch()
    go = gate / "go"
    while not go.exists():
        await asyncio.sleep(0.005)
    start_at = float(go.read_text())
    await _wait_until(start_at)
    return start_at


async def _claimers(config: dict[str, Any]) -> None:
    """Round after round, ``per_process`` claims fired at once at one shared instant."""
    spec = config["db"]
    apply_mutant(config.get("mutant"), spec["kind"])
    record = Recorder(config["history"])
    per = config["per_process"]
    options = {"max_size": per, "min_size": per} if spec["kind"] == "postgres" else {}
    backend = RecordingBackend(open_backend(spec, **options), record)
    await backend.aopen()
    start_at = await _start_together(config)
    for r in range(config["rounds"]):
        await _wait_until(start_at + r * config["interval_s"])
        draws = [kernel.Draw(None, 1)]
        claims = [
            backend.arun(
                kernel.claim([f"storm{r}"], f"w{os.getpid()}-{i}", config["lease_ms"], draws, 100),
                write=True,
            )
            for i in range(per)
        ]
        # A failed claim is recorded by the backend wrapper (claim_error).
        await asyncio.gather(*claims, return_exceptions=True)
    await backend.aclose()


def run_claimers(config: dict[str, Any]) -> None:
    asyncio.run(_claimers(config))


async def _keyed(config: dict[str, Any]) -> None:
    """Every process submits the same keys under one conflict strategy, all at once; with
    ``unique_for_ms``, each key's submits in turn (the keys side by side), each after
    canceling the task the one before got."""
    spec = config["db"]
    apply_mutant(config.get("mutant"), spec["kind"])
    record = Recorder(config["history"])
    async with CairnQ(open_backend(spec)) as cq:
        cq._owns_backend = True
        await cq.stats()
        await _start_together(config)

        unique_for_ms = config.get("unique_for_ms")
        unique = {} if unique_for_ms is None else {"unique_for": _ms(unique_for_ms)}

        async def one(key: str, i: int) -> None:
            request = f"{os.getpid()}-{key}-{i}"
            record("submit_invoke", req=request, key=key)
            try:
                task = await cq.submit(
                    "job", {"i": i}, key=key, conflict=config["conflict"], **unique
                )
            except REFUSED as exc:
                record("submit_fail", req=request, key=key, error=type(exc).__name__)
                return
            except errors.CairnQError as exc:
                record("submit_info", req=request, key=key, error=type(exc).__name__)
                return
            record("submit_ok", req=request, task=task.id, key=key, unique_for_ms=unique_for_ms)
            if unique_for_ms is not None:
                # Ended, the task no longer holds its key: only the period keeps the next
                # submits of the key from inserting.
                record("cancel_invoke", task=task.id)
                try:
                    await cq.cancel(task.id)
                    record("cancel_ok", task=task.id)
                except errors.CairnQError as exc:
                    record("cancel_info", task=task.id, error=type(exc).__name__)

        async def in_turn(key: str) -> None:
            # Each submit of a key after the cancel of the task the one before got: the
            # key is free again at every submit but the first, so only the period holds
            # (all at once, every submit could land before any cancel).
            for i in range(config["per_key"]):
                await one(key, i)

        if unique_for_ms is None:
            await asyncio.gather(
                *(
                    one(f"key{k}", i)
                    for k in range(config["keys"])
                    for i in range(config["per_key"])
                )
            )
        else:
            await asyncio.gather(*(in_turn(f"key{k}") for k in range(config["keys"])))


def run_keyed(config: dict[str, Any]) -> None:
    asyncio.run(_keyed(config))


if __name__ == "__main__":
    role, raw = sys.argv[1], sys.argv[2]
    roles = {
        "worker": run_worker,
        "client": run_client,
        "claimers": run_claimers,
        "keyed": run_keyed,
    }
    roles[role](json.loads(raw))
