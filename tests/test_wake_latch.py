"""The wake latch a claim loop sleeps on: a set from any thread is never lost."""

from __future__ import annotations

import asyncio
import threading

from cairnq._wakeups import WakeHub


async def test_a_set_from_another_thread_wakes_a_waiting_loop() -> None:
    sub = WakeHub().subscribe(lambda _: False)
    started = asyncio.Event()

    async def waiter() -> bool:
        started.set()
        return await sub.wait_async(5.0)

    waiting = asyncio.ensure_future(waiter())
    await started.wait()
    await asyncio.sleep(0)
    threading.Thread(target=sub.set).start()
    assert await asyncio.wait_for(waiting, 2.0) is True


async def test_a_set_from_another_thread_while_nobody_waits_is_seen_by_the_next_wait() -> None:
    sub = WakeHub().subscribe(lambda _: False)
    assert await sub.wait_async(0.01) is False
    setter = threading.Thread(target=sub.set)
    setter.start()
    setter.join()
    assert await asyncio.wait_for(sub.wait_async(5.0), 2.0) is True


async def test_a_cleared_latch_waits_again() -> None:
    sub = WakeHub().subscribe(lambda _: False)
    sub.set()
    sub.clear()
    assert await sub.wait_async(0.01) is False
