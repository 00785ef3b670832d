"""A worker's row in ``cairnq_workers``: refreshed on its own timer, fresh per run."""

from __future__ import annotations

import asyncio
from typing import Any

from cairnq import WorkerInfo
from cairnq.extensions.presence._component import Presence
from cairnq.testing import FakeClock

from ._db import Database


def refused(exc: BaseException, context: Any) -> None:
    raise AssertionError(f"presence write failed: {exc!r}")


async def row(db: Database, clock: FakeClock, worker_id: str) -> WorkerInfo:
    async with db.client(clock=clock) as cq:
        infos = {i.worker_id: i for i in await cq.presence.workers(within="1h")}
    return infos[worker_id]


async def settle(presence: Presence) -> None:
    pending = presence._pending
    if pending is not None:
        await pending


async def test_the_row_is_refreshed_on_the_presence_timer(db: Database) -> None:
    clock = FakeClock()
    backend = db.backend(clock=clock)
    presence = Presence(backend, "w-timer", ["default"], 1, refused, interval_s=0.01)
    presence.start()
    await settle(presence)
    first = (await row(db, clock, "w-timer")).last_seen_ms
    clock.advance(5_000)
    runner = asyncio.ensure_future(presence.run())
    last = first
    for _ in range(200):
        await asyncio.sleep(0.01)
        await settle(presence)
        last = (await row(db, clock, "w-timer")).last_seen_ms
        if last != first:
            break
    runner.cancel()
    await presence.stop()
    assert first is not None and last == first + 5_000


async def test_a_worker_id_started_again_gets_this_runs_start_time(db: Database) -> None:
    clock = FakeClock()
    backend = db.backend(clock=clock)
    crashed = Presence(backend, "w-again", ["default"], 1, refused)
    crashed.start()
    await settle(crashed)
    clock.advance(60_000)
    again = Presence(backend, "w-again", ["default"], 1, refused)
    again.start()
    await settle(again)
    info = await row(db, clock, "w-again")
    assert info.started_at_ms == clock.now_ms()
