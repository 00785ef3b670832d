"""When a worker's settlements decide dependents: the workflows' ``in_use`` gate.

A worker's settlements decide parked dependents in their own transaction only
while a task is parked (its workflows component looks once a second) or the
worker's client made a task wait for others; otherwise they are the kernel's one
statement. A graph another process submits is seen at the next look, and a
dependency this worker settles before that is left to the sweep, which releases
its dependents within about a second more (``extensions/workflows/_component.py``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from cairnq import Worker
from cairnq.extensions import Schedules
from cairnq.extensions.workflows import _ops as _workflows
from cairnq.worker._run import Run

from ._db import Database
from .test_without_extensions import migrate_only

# One look (1 s), one sweep (1 s) and a claim, with room for a slow machine.
RELEASE_BOUND_S = 5.0


def _decides(worker: Worker) -> bool:
    """Whether a settlement of ``worker`` now runs a task-end hook (decides dependents)."""
    return bool(worker._runtime.points.ending().task)


async def _prepared(worker: Worker) -> tuple[Run, Any]:
    """``worker``'s run assembled and its workflows component prepared, no job started."""
    worker._stopping = asyncio.Event()
    assert await worker._open_checked()
    run = worker._assemble(until_idle=True)
    [part] = [p for p in worker._components(run) if p.name == "workflows"]
    await part.prepare()
    return run, part


async def test_a_worker_decides_dependents_only_once_it_saw_a_parked_task_or_made_one(
    db: Database,
) -> None:
    async with db.client() as mine, db.client() as other:
        worker = Worker(mine, extensions=[Schedules(evaluate=False)])
        run, part = await _prepared(worker)
        try:
            assert not _decides(worker)
            first = await other.submit("a")
            waiting = await other.submit("b", depends_on=[first])
            # Another client's graph is seen at the component's next look.
            assert not _decides(worker)
            await part.sweeper.look()
            assert _decides(worker)
            # Canceled, then unparked by a sweep: nothing is parked any more.
            await other.cancel(waiting.id)
            await other.backend.arun(_workflows.sweep(), write=True)
            await part.sweeper.look()
            assert not _decides(worker)
            # This worker's own client made a task wait: decided from then on, at once.
            await mine.submit("c", depends_on=[first])
            assert _decides(worker)
        finally:
            run.close()


async def test_a_worker_without_the_workflow_tables_never_decides(db: Database) -> None:
    workflows = ("x0008", "x0010", "x0013", "x0016")
    migrate_only(db, lambda name: not name.startswith(workflows))
    async with db.client(migrate=False) as mine:
        worker = Worker(mine, extensions=[Schedules(evaluate=False)])
        run, part = await _prepared(worker)
        try:
            await part.sweeper.look()
            assert not _decides(worker)
        finally:
            run.close()


async def test_without_the_success_keeping_trigger_every_settlement_decides(
    db: Database,
) -> None:
    migrate_only(db, lambda name: name != "x0016_workflows_keep_success.sql")
    async with db.client(migrate=False) as mine:
        worker = Worker(mine, extensions=[Schedules(evaluate=False)])
        run, _ = await _prepared(worker)
        try:
            # Nothing parked, nothing submitted: a purge could still forget a success
            # no settlement recorded, so every settlement decides.
            assert _decides(worker)
        finally:
            run.close()


async def test_a_dependent_another_process_submitted_is_released_within_the_bound(
    db: Database,
) -> None:
    worker = db.worker(poll_interval_ms=20, extensions=[Schedules(evaluate=False)])
    ran: dict[str, float] = {}
    decided: list[bool] = []

    @worker.task
    async def first(ctx: Any) -> None:
        decided.append(_decides(worker))
        ran["first"] = time.monotonic()

    @worker.task
    async def then(ctx: Any) -> None:
        ran["then"] = time.monotonic()

    async with db.client() as other, worker.background():
        assert not _decides(worker)  # nothing parked when the worker started
        await other.submit_graph({"a": {"task": "first"}, "b": {"task": "then", "after": ["a"]}})
        deadline = time.monotonic() + 30
        while "then" not in ran and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
    assert "then" in ran, "the dependent was never released"
    # Whether a's settlement decided b (a look came first) or the sweep did, b ran
    # within the bound of a's handler returning.
    assert ran["then"] - ran["first"] < RELEASE_BOUND_S, (ran, decided)
