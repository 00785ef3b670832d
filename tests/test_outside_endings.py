"""Writes that end tasks or attempts outside a worker run: a client's cancels and
replacing submits, a store's settlements, and what the attempt history records of
the attempts they end.

A client's cancel of a running task only requests it; the attempt ends in its
worker's settlement, which records it ``canceled``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from cairnq import CairnQ
from cairnq.extensions import AttemptEnd, Extension, Hooks, Op, Row

from ._db import Database

ERROR = {"type": "Boom", "code": "boom", "message": "it broke", "retryable": False, "details": {}}


async def _cancel_via(cq: CairnQ, how: str, task_id: str) -> None:
    if how == "cancel":
        await cq.cancel(task_id)
    elif how == "cancel_by_key":
        await cq.cancel_by_key("k1")
    else:
        await cq.submit("other", key="k1", conflict="replace")


@pytest.mark.parametrize("how", ["cancel", "cancel_by_key", "replace"])
async def test_a_client_cancel_of_a_running_task_is_recorded_canceled_when_its_worker_settles(
    db: Database, how: str
) -> None:
    worker = db.worker(poll_interval_ms=20, worker_id="w-cancel")
    started, canceled = asyncio.Event(), asyncio.Event()

    @worker.task
    async def job(ctx: Any) -> str:
        started.set()
        await canceled.wait()
        return "done anyway"

    async with db.client() as cq:
        task = await cq.submit("job", key="k1")
        run = asyncio.create_task(worker.run(until_idle=True))
        await asyncio.wait_for(started.wait(), 10)
        await _cancel_via(cq, how, task.id)
        canceled.set()
        await asyncio.wait_for(run, 10)
        ended = await cq.get(task.id)
        attempts = await cq.attempts.list(task.id)
    assert ended is not None and ended.status == "canceled"
    assert [(a.attempt, a.outcome, a.worker_id) for a in attempts] == [(1, "canceled", "w-cancel")]


async def test_a_handler_s_succeed_in_is_recorded_succeeded(pg_db: Database) -> None:
    worker = pg_db.worker(poll_interval_ms=20, worker_id="w-in")

    @worker.task
    async def job(ctx: Any) -> None:
        await ctx.succeed_in(lambda conn: asyncio.sleep(0))

    async with pg_db.client() as cq:
        task = await cq.submit("job")
        await worker.run(until_idle=True)
        attempts = await cq.attempts.list(task.id)
    assert [(a.attempt, a.outcome, a.worker_id) for a in attempts] == [(1, "succeeded", "w-in")]


async def test_a_store_s_settlements_are_recorded_in_the_attempt_history(db: Database) -> None:
    async with db.client() as cq:
        done = await cq.store.submit(name="job")
        broken = await cq.store.submit(name="job", max_attempts=1)
        await cq.store.claim(queues=["default"], worker_id="w-store", limit=2)
        await cq.store.complete(task_id=done.id, worker_id="w-store", result=1)
        await cq.store.fail(task_id=broken.id, worker_id="w-store", error=ERROR)
        succeeded = await cq.attempts.list(done.id)
        failed = await cq.attempts.list(broken.id)
    assert [(a.attempt, a.outcome, a.worker_id) for a in succeeded] == [(1, "succeeded", "w-store")]
    assert [(a.attempt, a.outcome) for a in failed] == [(1, "failed")]
    assert failed[0].error is not None and failed[0].error["message"] == "it broke"


async def test_a_store_complete_after_a_client_cancel_is_recorded_canceled(db: Database) -> None:
    async with db.client() as cq:
        task = await cq.store.submit(name="job")
        await cq.store.claim(queues=["default"], worker_id="w-store")
        await cq.cancel(task.id)
        ended = await cq.store.complete(task_id=task.id, worker_id="w-store", result=1)
        attempts = await cq.attempts.list(task.id)
    assert ended.status == "canceled"
    assert [(a.attempt, a.outcome) for a in attempts] == [(1, "canceled")]


async def test_a_store_complete_in_is_recorded_succeeded(pg_db: Database) -> None:
    async with pg_db.client() as cq:
        task = await cq.store.submit(name="job")
        await cq.store.claim(queues=["default"], worker_id="w-store")
        done, _ = await cq.store.complete_in(
            task_id=task.id, worker_id="w-store", write=lambda conn: asyncio.sleep(0)
        )
        attempts = await cq.attempts.list(task.id)
    assert done.status == "succeeded"
    assert [(a.attempt, a.outcome) for a in attempts] == [(1, "succeeded")]


class Ends(Extension):
    """An extension outside cairnq whose ending hooks note what the writes end."""

    name = "ends"

    def __init__(self, *, in_use: bool = True, needs: tuple[str, ...] = ()) -> None:
        self.tasks: list[tuple[str, str]] = []
        self.attempts: list[tuple[str, str]] = []
        self._in_use = in_use
        self.needs = needs  # type: ignore[misc]

    def ending_hooks(self) -> Hooks:
        def task_end(rows: Sequence[Row]) -> Op[None]:
            self.tasks.extend((str(r["id"]), str(r["status"])) for r in rows)
            yield from ()

        def attempt_end(ended: Sequence[AttemptEnd], recovered: object) -> Op[None]:
            self.attempts.extend((e.lease.id, e.outcome) for e in ended)
            yield from ()

        return Hooks(attempt_end=attempt_end, task_end=task_end, in_use=lambda: self._in_use)


@pytest.mark.parametrize("how", ["cancel", "cancel_by_key", "replace", "store"])
async def test_an_extension_given_to_the_client_sees_the_tasks_its_cancels_end(
    db: Database, how: str
) -> None:
    ends = Ends()
    async with db.client(extensions=[ends]) as cq:
        task = await cq.submit("job", key="k1")
        dependent = await cq.submit("job", depends_on=[task])
        if how == "store":
            await cq.store.cancel(task.id)
        else:
            await _cancel_via(cq, how, task.id)
        waiting = await cq.get(dependent.id)
    assert ends.tasks == [(task.id, "canceled")]
    # The built-in workflows' hook ran beside it: the dependent is canceled with it.
    assert waiting is not None and waiting.status == "canceled"


async def test_an_extension_given_to_the_client_sees_the_attempts_its_store_settles(
    db: Database,
) -> None:
    ends = Ends()
    async with db.client(extensions=[ends]) as cq:
        task = await cq.store.submit(name="job")
        await cq.store.claim(queues=["default"], worker_id="w-store")
        await cq.store.complete(task_id=task.id, worker_id="w-store", result=None)
    assert ends.attempts == [(task.id, "succeeded")]
    assert ends.tasks == [(task.id, "succeeded")]


@pytest.mark.parametrize(
    "options", [{"in_use": False}, {"needs": ("x_ends_0001_never.sql",)}], ids=["unused", "unready"]
)
async def test_an_ending_hook_not_in_use_or_not_ready_is_left_out(
    db: Database, options: dict[str, Any]
) -> None:
    ends = Ends(**options)
    async with db.client(extensions=[ends]) as cq:
        task = await cq.submit("job")
        await cq.cancel(task.id)
        settled = await cq.store.submit(name="job")
        await cq.store.claim(queues=["default"], worker_id="w-store")
        await cq.store.complete(task_id=settled.id, worker_id="w-store", result=None)
    assert (ends.tasks, ends.attempts) == ([], [])
