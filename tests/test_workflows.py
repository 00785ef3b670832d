"""Workflows on a real database: dependencies and their policies, graphs, spawn and gather.

A reference-like worker is the protocol's claim run through ``ops`` and settled
with ``ops.complete`` without a ``task_end`` hook: what a worker that knows
nothing of the workflow tables writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from typing import Any

import pytest

from cairnq import CairnQ, InvalidGraph, SchemaIncomplete, TaskFailed, kernel
from cairnq.client._streaming import STREAM_PART
from cairnq.extensions.workflows import _ops as _workflows
from cairnq.models import Lease
from cairnq.protocol.statements import statements
from cairnq.protocol.steps import NOW, Call
from cairnq.testing import FakeClock
from cairnq.workflows import PARKED_RUN_AT_MS, Graph

from ._db import Database, admin_connect
from .test_cli import run_on
from .test_without_extensions import migrate_only, protocol_only


async def _claim_reference(cq: CairnQ, worker_id: str = "ref") -> list[Lease]:
    """A claim as any worker of the protocol makes it: every due queued task."""
    rows = await cq.backend.arun(
        kernel.claim(["default"], worker_id, 30_000, [kernel.Draw(None, 1000)], 10), write=True
    )
    return [Lease.of(r) for r in rows]


async def _complete_reference(cq: CairnQ, lease: Lease, worker_id: str = "ref") -> None:
    """A completion without the workflow decision, as a reference SDK's worker writes it."""
    await cq.backend.arun(kernel.complete(lease, worker_id, '"ok"'), write=True)


async def _statuses(cq: CairnQ, tasks: dict[str, Any]) -> dict[str, str]:
    out = {}
    for name, task in tasks.items():
        got = await cq.get(task.id)
        assert got is not None
        out[name] = got.status
    return out


async def _count_tasks(cq: CairnQ) -> int:
    return sum(sum(c.values()) for c in (await cq.stats()).values())


# --- dependencies --------------------------------------------------------------------------


async def test_a_diamond_dag_runs_each_task_after_its_dependencies(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20, concurrency=4)
    order: list[str] = []

    @worker.task
    async def step(ctx: Any, payload: Any) -> str:
        order.append(payload["node"])
        return str(payload["node"])

    async with db.client() as cq:
        tasks = await cq.submit_graph(
            {
                "a": {"task": "step", "payload": {"node": "a"}},
                "b": {"task": "step", "payload": {"node": "b"}, "after": ["a"]},
                "c": {"task": "step", "payload": {"node": "c"}, "after": ["a"]},
                "d": {"task": "step", "payload": {"node": "d"}, "after": ["b", "c"]},
            }
        )
        await asyncio.wait_for(worker.run(until_idle=True), 60)
        assert await _statuses(cq, tasks) == dict.fromkeys("abcd", "succeeded")
    assert order[0] == "a" and order[-1] == "d" and sorted(order[1:3]) == ["b", "c"]


async def test_an_until_idle_worker_runs_a_chain_to_its_end(db: Database) -> None:
    # Each link is released by its predecessor's settlement while the worker holds
    # no other call: a worker that judged itself idle from a claim made before that
    # settlement would stop partway.
    worker = db.worker(poll_interval_ms=20, concurrency=4)

    @worker.task
    async def step(ctx: Any, payload: Any) -> None:
        return None

    graph = {"n0": {"task": "step"}} | {
        f"n{i}": {"task": "step", "after": [f"n{i - 1}"]} for i in range(1, 100)
    }
    async with db.client() as cq:
        tasks = await cq.submit_graph(graph)
        await asyncio.wait_for(worker.run(until_idle=True), 60)
        assert set((await _statuses(cq, tasks)).values()) == {"succeeded"}


async def test_a_task_with_dependencies_is_parked_far_in_the_future(db: Database) -> None:
    async with db.client() as cq:
        first = await cq.submit("step")
        second = await cq.submit("step", depends_on=[first], delay_ms=5_000)
        assert second.status == "queued"
        assert second.run_at_ms == PARKED_RUN_AT_MS


async def test_a_reference_like_worker_never_claims_a_parked_task(db: Database) -> None:
    async with db.client() as cq:
        first = await cq.submit("step")
        second = await cq.submit("step", depends_on=[first])
        claimed = await _claim_reference(cq)
        assert [lease.id for lease in claimed] == [first.id]
        assert await _claim_reference(cq, "ref2") == []
        again = await cq.get(second.id)
        assert again is not None and again.status == "queued"


async def test_the_last_dependency_s_completion_releases_the_dependent_in_its_transaction(
    db: Database,
) -> None:
    async with db.client() as cq:
        first = await cq.submit("step")
        second = await cq.submit("step", depends_on=[first], delay_ms=0)
        [lease] = await _claim_reference(cq)
        row = await cq.backend.arun(
            kernel.complete(
                lease, "ref", '"ok"', points=kernel.ending_with(_workflows.after_ended)
            ),
            write=True,
        )
        assert row["status"] == "succeeded"
        released = await cq.get(second.id)
        assert released is not None
        assert released.run_at_ms < PARKED_RUN_AT_MS
        assert [lease.id for lease in await _claim_reference(cq, "ref2")] == [second.id]


async def test_a_released_task_keeps_its_submitted_delay_from_the_release(db: Database) -> None:
    async with db.client() as cq:
        first = await cq.submit("step")
        second = await cq.submit("step", depends_on=[first], delay_ms=3_600_000)
        [lease] = await _claim_reference(cq)
        await cq.backend.arun(
            kernel.complete(lease, "ref", None, points=kernel.ending_with(_workflows.after_ended)),
            write=True,
        )
        released = await cq.get(second.id)
        assert released is not None
        assert released.run_at_ms == released.updated_at_ms + 3_600_000


async def test_depending_on_a_task_already_succeeded_is_due_at_once(db: Database) -> None:
    async with db.client() as cq:
        first = await cq.submit("step")
        [lease] = await _claim_reference(cq)
        await _complete_reference(cq, lease)
        second = await cq.submit("step", depends_on=[first.id])
        assert second.status == "queued" and second.run_at_ms < PARKED_RUN_AT_MS


async def test_policy_cancel_cancels_the_dependent_and_its_own_dependents(db: Database) -> None:
    async with db.client() as cq:
        tasks = await cq.submit_graph(
            {
                "a": {"task": "step"},
                "b": {"task": "step", "after": ["a"]},
                "c": {"task": "step", "after": ["b"]},
            }
        )
        await cq.cancel(tasks["a"].id)
        assert await _statuses(cq, tasks) == dict.fromkeys("abc", "canceled")


async def test_cancel_by_key_cancels_the_dependent_in_its_transaction(db: Database) -> None:
    async with db.client() as cq:
        first = await cq.submit("step", key="k1")
        second = await cq.submit("step", depends_on=[first])
        await cq.cancel_by_key("k1")
        assert await _statuses(cq, {"a": first, "b": second}) == dict.fromkeys("ab", "canceled")


@pytest.mark.parametrize(
    "submit", ["submit", "submit_many", "submit_many_ids", "submit_many_ids in parts"]
)
async def test_a_submit_replacing_a_queued_dependency_cancels_its_dependent_in_its_transaction(
    db: Database, submit: str
) -> None:
    async with db.client() as cq:
        first = await cq.submit("step", key="k1")
        second = await cq.submit("step", depends_on=[first])
        if submit == "submit":
            await cq.submit("step", key="k1", conflict="replace")
        else:
            item = {"task": "step", "key": "k1", "conflict": "replace"}
            # In parts: the batch is long enough to be built part by part where it streams.
            filler = [("filler", {})] * (2 * STREAM_PART) if submit.endswith("parts") else []
            await getattr(cq, submit.split()[0])([*filler, item])
        assert await _statuses(cq, {"a": first, "b": second}) == dict.fromkeys("ab", "canceled")


async def test_policy_fail_fails_the_dependent_with_a_dependency_failed_envelope(
    db: Database,
) -> None:
    async with db.client() as cq:
        first = await cq.submit("step")
        second = await cq.submit("step", depends_on=[first], on_dependency_failure="fail")
        [lease] = await _claim_reference(cq)
        await cq.backend.arun(
            kernel.fail(
                lease,
                "ref",
                '{"message":"boom"}',
                retryable=False,
                delay_ms=0,
                points=kernel.ending_with(_workflows.after_ended),
            ),
            write=True,
        )
        failed = await cq.get(second.id)
        assert failed is not None and failed.status == "failed"
        assert failed.error is not None
        assert failed.error["code"] == "dependency_failed"
        assert failed.error["details"]["dependency"] == first.id
        assert failed.attempt == 0


async def test_policy_run_releases_the_dependent_which_sees_the_outcomes(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20)
    seen: list[tuple[str, str | None]] = []

    @worker.task
    async def boom(ctx: Any) -> None:
        raise RuntimeError("boom")

    @worker.task
    async def ok(ctx: Any) -> int:
        return 7

    @worker.task
    async def report(ctx: Any) -> None:
        for dep in await ctx.dependencies():
            seen.append((dep.task.name, dep.status))

    async with db.client() as cq:
        bad = await cq.submit("boom", max_attempts=1)
        good = await cq.submit("ok")
        last = await cq.submit("report", depends_on=[bad, good], on_dependency_failure="run")
        await asyncio.wait_for(worker.run(until_idle=True), 60)
        done = await cq.get(last.id)
        assert done is not None and done.status == "succeeded"
    assert sorted(seen) == [("boom", "failed"), ("ok", "succeeded")]


async def test_depends_on_a_task_that_does_not_exist_raises_and_writes_nothing(
    db: Database,
) -> None:
    async with db.client() as cq:
        first = await cq.submit("step")
        before = await _count_tasks(cq)
        with pytest.raises(InvalidGraph, match="do not exist") as raised:
            await cq.submit("step", depends_on=[first.id, "no-such-task"])
        assert raised.value.missing == ("no-such-task",)
        assert await _count_tasks(cq) == before


# --- graphs ------------------------------------------------------------------------------


async def test_submit_graph_rejects_a_cycle_and_writes_nothing(db: Database) -> None:
    async with db.client() as cq:
        with pytest.raises(InvalidGraph, match="cycle") as raised:
            await cq.submit_graph(
                {
                    "a": {"task": "step"},
                    "b": {"task": "step", "after": ["a", "d"]},
                    "c": {"task": "step", "after": ["b"]},
                    "d": {"task": "step", "after": ["c"]},
                }
            )
        assert raised.value.cycle[0] == raised.value.cycle[-1]
        assert set(raised.value.cycle) == {"b", "c", "d"}
        assert await _count_tasks(cq) == 0


async def test_submit_graph_rejects_a_missing_node_and_writes_nothing(db: Database) -> None:
    async with db.client() as cq:
        graph = Graph().add("a", "step").add("b", "step", after=["a", "ghost"])
        with pytest.raises(InvalidGraph, match="ghost") as raised:
            await cq.submit_graph(graph)
        assert raised.value.missing == ("ghost",)
        assert await _count_tasks(cq) == 0


async def test_submit_graph_gives_every_node_the_first_node_s_root(db: Database) -> None:
    async with db.client() as cq:
        tasks = await cq.submit_graph(Graph().add("b", "step", after=["a"]).add("a", "step"))
        assert tasks["a"].root_id == tasks["a"].id
        assert tasks["b"].root_id == tasks["a"].id
        workflow = await cq.workflows.get(tasks["b"].id)
        assert workflow is not None
        assert [(e.task_id, e.depends_on_id) for e in workflow.edges] == [
            (tasks["b"].id, tasks["a"].id)
        ]


# --- the sweep ---------------------------------------------------------------------------


async def test_the_sweep_releases_a_task_whose_dependency_a_reference_worker_completed(
    db: Database,
) -> None:
    async with db.client() as cq:
        first = await cq.submit("step")
        second = await cq.submit("step", depends_on=[first])
        [lease] = await _claim_reference(cq)
        await _complete_reference(cq, lease)
        still = await cq.get(second.id)
        assert still is not None and still.run_at_ms == PARKED_RUN_AT_MS
        changed = await cq.backend.arun(_workflows.sweep(), write=True)
        assert [r["id"] for r in changed] == [second.id]
        assert [lease.id for lease in await _claim_reference(cq, "ref2")] == [second.id]


async def test_a_cairnq_worker_sweeps_what_a_reference_worker_completed(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20)
    ran: list[str] = []

    @worker.task
    async def after(ctx: Any) -> None:
        ran.append(ctx.task_id)

    async with db.client() as cq:
        first = await cq.submit("before")
        second = await cq.submit("after", depends_on=[first])
        [lease] = await _claim_reference(cq)
        await _complete_reference(cq, lease)
        async with worker.background():
            for _ in range(500):
                done = await cq.get(second.id)
                if done is not None and done.status == "succeeded":
                    break
                await asyncio.sleep(0.02)
    assert ran == [second.id]


# --- a dependency purged after it succeeded ---------------------------------------------


def _purge_raw(db: Database, now_ms: int) -> list[str]:
    """Every finished task deleted by the protocol's own ``purge`` statement, run outside
    cairnq as a reference SDK's retention runs it; the ids deleted."""
    statement = statements("sqlite" if db.kind == "sqlite" else "postgres")["purge"]
    params = {"older_than_ms": 0, "queue": None, "status": None, "name": None}
    params |= {"limit": 1000, "now_ms": now_ms}
    if db.kind == "sqlite":
        assert db.path is not None
        with contextlib.closing(sqlite3.connect(db.path)) as conn:
            conn.execute("pragma foreign_keys = on")  # as the protocol requires of every SDK
            rows = conn.execute(statement.text, params).fetchall()
            conn.commit()
        return [str(r[0]) for r in rows]
    from psycopg import sql

    with admin_connect(db.url) as conn:
        conn.execute(sql.SQL("set search_path to {}").format(sql.Identifier(db.schema or "")))
        return [str(r[0]) for r in conn.execute(statement.text, params).fetchall()]


async def _complete_deciding(cq: CairnQ, lease: Lease) -> None:
    """A completion as cairnq's worker settles it: deciding the task's parked dependents."""
    await cq.backend.arun(
        kernel.complete(lease, "ref", '"ok"', points=kernel.ending_with(_workflows.after_ended)),
        write=True,
    )


async def test_a_dependency_purged_after_succeeding_still_releases_its_dependent(
    db: Database,
) -> None:
    clock = FakeClock()
    worker = db.worker(clock=clock, poll_interval_ms=20)
    ran: list[str] = []

    @worker.task
    async def step(ctx: Any, payload: Any) -> None:
        ran.append(payload["n"])

    async with db.client(clock=clock) as cq:
        a = await cq.submit("step", {"n": "a"})
        b = await cq.submit("step", {"n": "b"})
        c = await cq.submit("step", {"n": "c"}, depends_on=[a, b])
        leases = {lease.id: lease for lease in await _claim_reference(cq)}
        await _complete_deciding(cq, leases[a.id])
        clock.advance(1)
        assert await cq.purge(older_than_ms=0) == [a.id]
        await _complete_deciding(cq, leases[b.id])
        await asyncio.wait_for(worker.run(until_idle=True), 60)
        assert await _statuses(cq, {"c": c}) == {"c": "succeeded"}
    assert ran == ["c"]


async def test_a_dependency_purged_by_the_protocol_s_own_purge_statement_still_counts_succeeded(
    db: Database,
) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        a = await cq.submit("step")
        b = await cq.submit("step")
        c = await cq.submit("step", depends_on=[a, b])
        leases = {lease.id: lease for lease in await _claim_reference(cq)}
        await _complete_deciding(cq, leases[a.id])
        assert _purge_raw(db, clock.advance(1)) == [a.id]
        await _complete_deciding(cq, leases[b.id])
        released = await cq.get(c.id)
        assert released is not None and released.status == "queued"
        assert [lease.id for lease in await _claim_reference(cq, "ref2")] == [c.id]


async def test_the_sweep_releases_a_dependent_whose_purged_dependency_succeeded(
    db: Database,
) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        a = await cq.submit("step")
        b = await cq.submit("step")
        c = await cq.submit("step", depends_on=[a, b])
        leases = {lease.id: lease for lease in await _claim_reference(cq)}
        await _complete_deciding(cq, leases[a.id])
        assert _purge_raw(db, clock.advance(1)) == [a.id]
        await _complete_reference(cq, leases[b.id])
        changed = await cq.backend.arun(_workflows.sweep(), write=True)
        assert [(r["id"], r["status"]) for r in changed] == [(c.id, "queued")]
        assert [lease.id for lease in await _claim_reference(cq, "ref2")] == [c.id]


async def test_the_sweep_records_a_success_a_reference_worker_settled_before_it_is_purged(
    db: Database,
) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        a = await cq.submit("step")
        b = await cq.submit("step")
        c = await cq.submit("step", depends_on=[a, b])
        leases = {lease.id: lease for lease in await _claim_reference(cq)}
        await _complete_reference(cq, leases[a.id])
        assert await cq.backend.arun(_workflows.sweep(), write=True) == []
        assert _purge_raw(db, clock.advance(1)) == [a.id]
        await _complete_reference(cq, leases[b.id])
        changed = await cq.backend.arun(_workflows.sweep(), write=True)
        assert [(r["id"], r["status"]) for r in changed] == [(c.id, "queued")]


async def test_a_success_no_settlement_recorded_survives_a_purge_before_any_sweep(
    db: Database,
) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        a = await cq.submit("step")
        b = await cq.submit("step")
        c = await cq.submit("step", depends_on=[a, b], on_dependency_failure="cancel")
        leases = {lease.id: lease for lease in await _claim_reference(cq)}
        await _complete_reference(cq, leases[a.id])
        # No sweep ran: the purge's trigger records a's success for c.
        assert _purge_raw(db, clock.advance(1)) == [a.id]
        await _complete_reference(cq, leases[b.id])
        clock.advance(1)
        assert await cq.purge(older_than_ms=0) == [b.id]
        changed = await cq.backend.arun(_workflows.sweep(), write=True)
        assert [(r["id"], r["status"]) for r in changed] == [(c.id, "queued")]


async def test_a_task_still_waiting_on_a_purged_success_takes_no_place_in_a_sweep(
    db: Database,
) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        a = await cq.submit("step")
        b = await cq.submit("step")
        await cq.submit("step", depends_on=[a, b])
        leases = {lease.id: lease for lease in await _claim_reference(cq)}
        await _complete_deciding(cq, leases[a.id])
        assert _purge_raw(db, clock.advance(1)) == [a.id]
        x = await cq.submit("step")
        y = await cq.submit("step", depends_on=[x])
        [lease] = await _claim_reference(cq, "ref2")
        await _complete_reference(cq, lease, "ref2")
        changed = await cq.backend.arun(_workflows.sweep(limit=1), write=True)
        assert [r["id"] for r in changed] == [y.id]


async def test_a_dependency_purged_before_it_succeeded_still_cancels_its_dependent(
    db: Database,
) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        a = await cq.submit("step")
        b = await cq.submit("step")
        c = await cq.submit("step", depends_on=[a, b])
        leases = {lease.id: lease for lease in await _claim_reference(cq)}
        await cq.backend.arun(
            kernel.fail(leases[a.id], "ref", '{"message":"boom"}', retryable=False, delay_ms=0),
            write=True,
        )
        assert _purge_raw(db, clock.advance(1)) == [a.id]
        await _complete_deciding(cq, leases[b.id])
        assert await _statuses(cq, {"c": c}) == {"c": "canceled"}


def _park_as_before_x0010(task_id: str, dependencies: list[str]) -> Any:
    """Park a stored task on its dependencies with the statements a cairnq without
    ``x0010_dependencies_satisfied.sql`` submitted it with."""
    edges = [[task_id, d, "cancel"] for d in dependencies]
    yield Call("workflows_edges_put", {"rows": json.dumps(edges)})
    parked = [[task_id, "dependencies", 0]]
    yield Call("workflows_parked_put", {"rows": json.dumps(parked), "now_ms": NOW})
    yield from kernel.defer([task_id], PARKED_RUN_AT_MS)


def _before_satisfied(name: str) -> bool:
    """The migrations of a cairnq before ``x0010_dependencies_satisfied.sql`` (and the later
    ``x0013_workflows_forget.sql``, which reshapes its table)."""
    return name not in (_workflows.SATISFIED_MIGRATION, "x0013_workflows_forget.sql")


async def test_the_migration_records_the_successes_a_parked_task_already_has(
    db: Database,
) -> None:
    migrate_only(db, _before_satisfied)
    clock = FakeClock()
    async with db.client(clock=clock, migrate=False) as cq:
        a = await cq.submit("step")
        b = await cq.submit("step")
        c = await cq.submit("step")
        await cq.backend.arun(_park_as_before_x0010(c.id, [a.id, b.id]), write=True)
        leases = {lease.id: lease for lease in await _claim_reference(cq)}
        await _complete_reference(cq, leases[a.id])
    async with db.client(clock=clock) as cq:
        assert _purge_raw(db, clock.advance(1)) == [a.id]
        await _complete_deciding(cq, leases[b.id])
        assert [lease.id for lease in await _claim_reference(cq, "ref2")] == [c.id]


async def test_depends_on_without_the_satisfied_table_names_its_migration(db: Database) -> None:
    migrate_only(db, _before_satisfied)
    async with db.client(migrate=False) as cq:
        first = await cq.submit("step")
        with pytest.raises(SchemaIncomplete, match=r"x0010_dependencies_satisfied\.sql") as caught:
            await cq.submit("step", depends_on=[first])
        assert caught.value.missing == (_workflows.SATISFIED_MIGRATION,)


# --- fan-out and fan-in ------------------------------------------------------------------


async def test_a_parent_gathers_100_children_on_a_worker_with_one_slot(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20, concurrency=1)
    runs: list[int] = []

    @worker.task
    async def parent(ctx: Any) -> int:
        runs.append(ctx.attempt)
        children = [await ctx.spawn("child", {"n": n}) for n in range(100)]
        results = await ctx.gather(children)
        return sum(results)

    @worker.task
    async def child(ctx: Any, payload: Any) -> int:
        return int(payload["n"])

    async with db.client() as cq:
        task = await cq.submit("parent")
        await asyncio.wait_for(worker.run(until_idle=True), 120)
        done = await cq.get(task.id)
        assert done is not None and done.status == "succeeded"
        assert done.result == sum(range(100))
        assert done.attempt == 1
        children = await cq.list(name="child", limit=1000)
    assert len(children) == 100
    assert {c.parent_id for c in children} == {task.id}
    assert len(runs) == 2


async def test_a_sync_handler_spawns_and_gathers(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20, concurrency=1)

    @worker.task
    def parent(ctx: Any) -> list[int]:
        children = [ctx.spawn("child", {"n": n}) for n in range(3)]
        return ctx.gather(children)

    @worker.task
    def child(ctx: Any, payload: Any) -> int:
        return int(payload["n"]) * 10

    async with db.client() as cq:
        task = await cq.submit("parent")
        await asyncio.wait_for(worker.run(until_idle=True), 60)
        done = await cq.get(task.id)
        assert done is not None and done.result == [0, 10, 20]


async def test_a_retried_parent_gets_the_same_children_back(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20, retry_backoff_ms=0)
    attempts: list[int] = []

    @worker.task
    async def parent(ctx: Any) -> int:
        attempts.append(ctx.attempt)
        children = [await ctx.spawn("child", {"n": n}) for n in range(3)]
        if ctx.attempt == 1:
            raise RuntimeError("crash after spawning")
        return len(await ctx.gather(children))

    @worker.task
    async def child(ctx: Any) -> None:
        return None

    async with db.client() as cq:
        task = await cq.submit("parent")
        await asyncio.wait_for(worker.run(until_idle=True), 60)
        done = await cq.get(task.id)
        assert done is not None and done.status == "succeeded" and done.result == 3
        assert len(await cq.list(name="child")) == 3
    assert attempts[:2] == [1, 2]


async def test_gather_raises_task_failed_for_a_failed_child(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20)
    caught: list[str] = []

    @worker.task
    async def parent(ctx: Any) -> None:
        kid = await ctx.spawn("child", max_attempts=1)
        try:
            await ctx.gather([kid])
        except TaskFailed as exc:
            caught.append(exc.message)

    @worker.task
    async def child(ctx: Any) -> None:
        raise RuntimeError("child broke")

    async with db.client() as cq:
        await cq.submit("parent")
        await asyncio.wait_for(worker.run(until_idle=True), 60)
    assert caught == ["child broke"]


# --- without the workflow tables ---------------------------------------------------------


async def test_depends_on_without_the_workflow_tables_names_the_migration(db: Database) -> None:
    protocol_only(db)
    async with db.client(migrate=False) as cq:
        first = await cq.submit("step")
        with pytest.raises(SchemaIncomplete, match=r"x0008_workflows\.sql.*cairnq migrate"):
            await cq.submit("step", depends_on=[first])
        with pytest.raises(SchemaIncomplete, match=r"x0008_workflows\.sql"):
            await cq.submit_graph({"a": {"task": "step"}})
        assert (await cq.cancel(first.id)) is not None


# --- cairnq get --tree -------------------------------------------------------------------


def test_cairnq_get_tree_prints_the_graph_with_dependencies_and_statuses(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    with db.sync_client() as cq:
        tasks = cq.submit_graph(
            Graph().add("a", "fetch").add("b", "clean", after=["a"], on_dependency_failure="run")
        )
    lines = run_on(db, capsys, "get", tasks["b"].id, "--tree").out.splitlines()
    a, b = tasks["a"].id, tasks["b"].id
    assert lines == [
        f"{a} fetch queued",
        f"{b} clean queued (parked) after {a} queued [run] <-",
    ]


async def test_ctx_submit_with_depends_on_parks_the_child_until_its_dependency_ends(
    db: Database,
) -> None:
    worker = db.worker(poll_interval_ms=20)
    order: list[str] = []

    @worker.task
    async def parent(ctx: Any) -> None:
        first = await ctx.submit("leaf", {"n": "first"})
        await ctx.submit("leaf", {"n": "second"}, depends_on=[first])

    @worker.task
    async def leaf(ctx: Any, payload: Any) -> None:
        order.append(payload["n"])

    async with db.client() as cq:
        await cq.submit("parent")
        await asyncio.wait_for(worker.run(until_idle=True), 60)
    assert order == ["first", "second"]
