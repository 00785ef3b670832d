"""An async client or worker belongs to the event loop that first used it, on every backend.

From any other loop a call raises ``EventLoopMismatch`` at once; nothing waits
on a future the owning loop will never wake. Every call from a second loop is
bounded here by a hard timeout, so a regression fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import pytest

from cairnq import CairnQ, EventLoopMismatch, TaskContext, Worker

from ._db import Database

T = TypeVar("T")
HARD_TIMEOUT_S = 15
MISMATCH = "belongs to the event loop that first used it"


class LoopThread:
    """An event loop running in a thread of its own, like a second ``asyncio.run``."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on this loop; a call still pending after the hard timeout fails."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(HARD_TIMEOUT_S)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(HARD_TIMEOUT_S)
        if not self.thread.is_alive():
            self.loop.close()


@pytest.fixture
def loops() -> Iterator[tuple[LoopThread, LoopThread]]:
    """The loop that opens the client, and a second one still running beside it."""
    owner, other = LoopThread(), LoopThread()
    try:
        yield owner, other
    finally:
        owner.close()
        other.close()


def test_a_client_called_from_a_second_running_event_loop_raises_event_loop_mismatch(
    db: Database, loops: tuple[LoopThread, LoopThread]
) -> None:
    owner, other = loops
    cq = db.client()
    try:
        first = owner.run(cq.submit("job", {}))
        with pytest.raises(EventLoopMismatch, match=MISMATCH):
            other.run(cq.submit("job", {}))
        still = owner.run(cq.get(first.id))
        assert still is not None and still.status == "queued"
        assert [t.id for t in owner.run(cq.list())] == [first.id]
    finally:
        owner.run(cq.close())


def test_two_event_loops_racing_to_open_one_client_leave_one_owner_and_one_clear_error(
    db: Database, loops: tuple[LoopThread, LoopThread]
) -> None:
    cq = db.client()
    pending = [
        asyncio.run_coroutine_threadsafe(cq.submit("job", {"n": n}), loop.loop)
        for n, loop in enumerate(loops)
    ]
    outcomes: list[Any] = []
    for future in pending:
        try:
            outcomes.append(future.result(HARD_TIMEOUT_S))
        except EventLoopMismatch as exc:
            outcomes.append(exc)
    refused = [o for o in outcomes if isinstance(o, EventLoopMismatch)]
    owner = loops[1 - outcomes.index(refused[0])] if refused else loops[0]
    try:
        assert len(refused) == 1, outcomes
        assert len(owner.run(cq.list())) == 1
    finally:
        owner.run(cq.close())


def test_a_worker_run_on_a_second_running_event_loop_raises_event_loop_mismatch(
    db: Database, loops: tuple[LoopThread, LoopThread]
) -> None:
    owner, other = loops
    cq = db.client()
    ran: list[str] = []

    async def job(ctx: TaskContext) -> None:
        ran.append(ctx.task_id)

    worker = Worker(cq, poll_interval_ms=20)
    worker.register("job", job)
    try:
        owner.run(cq.submit("job", {}))
        with pytest.raises(EventLoopMismatch, match=MISMATCH):
            other.run(worker.run(until_idle=True))
        assert ran == []
        owner.run(worker.run(until_idle=True))
        assert len(ran) == 1
    finally:
        owner.run(cq.close())


def test_a_client_is_refused_on_a_new_event_loop_after_its_own_has_finished(
    db: Database,
) -> None:
    cq = db.client()
    asyncio.run(cq.submit("job", {}))
    second = LoopThread()
    try:
        with pytest.raises(EventLoopMismatch, match=MISMATCH):
            second.run(cq.submit("job", {}))
        second.run(cq.close())
    finally:
        second.close()


def test_a_client_can_be_closed_from_a_new_event_loop_once_its_own_has_finished(
    db: Database,
) -> None:
    cq = db.client()
    asyncio.run(cq.submit("job", {}))
    second = LoopThread()
    try:
        second.run(cq.close())
    finally:
        second.close()
    with db.sync_client() as sync:
        assert len(sync.list()) == 1


def test_a_client_sweeping_retention_can_be_closed_from_a_new_event_loop_once_its_own_has_finished(
    db: Database,
) -> None:
    cq = CairnQ(db.backend(), retention=60_000)

    async def use() -> None:
        await cq.open()
        await cq.submit("job", {})

    asyncio.run(use())
    second = LoopThread()
    try:
        second.run(cq.close())
    finally:
        second.close()
