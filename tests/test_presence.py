"""A worker's row in ``cairnq_workers``: refreshed on its own timer, fresh per run."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

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


async def test_a_second_live_process_under_the_same_worker_id_is_warned_of_in_one_line(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cairnq")
    clock = FakeClock()
    backend = db.backend(clock=clock)
    first = Presence(backend, "w-twice", ["default"], 1, refused)
    first.start()
    await settle(first)
    second = Presence(backend, "w-twice", ["default"], 1, refused)
    second._pid = first._pid + 1  # as another process on the same host
    second.start()
    await settle(second)
    await first._refresh()  # its first refresh finds the row another process wrote
    await settle(first)
    await first._refresh()  # and looks only once
    await settle(first)
    await first.stop()
    await second.stop()
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert line.startswith(f"another worker runs under worker id w-twice (host {first._host}, ")
    assert f"pid {second._pid})" in line and "\n" not in line


async def test_a_worker_id_started_again_after_a_crash_warns_of_nothing(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cairnq")
    clock = FakeClock()
    backend = db.backend(clock=clock)
    crashed = Presence(backend, "w-crashed", ["default"], 1, refused)
    crashed._pid += 1  # the run before, in another process, that never stopped
    crashed.start()
    await settle(crashed)
    again = Presence(backend, "w-crashed", ["default"], 1, refused)
    again.start()
    await settle(again)
    await again._refresh()
    await settle(again)
    await again.stop()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
