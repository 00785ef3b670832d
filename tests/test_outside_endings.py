"""Writes that end tasks or attempts outside a worker run: a client's cancels and
replacing submits, a store's settlements, and what the attempt history records of
the attempts they end.

A client's cancel of a running task only requests it; the attempt ends in its
worker's settlement, which records it ``canceled``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cairnq import CairnQ

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
        attempts = await cq.attempts(task.id)
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
        attempts = await cq.attempts(task.id)
    assert [(a.attempt, a.outcome, a.worker_id) for a in attempts] == [(1, "succeeded", "w-in")]
