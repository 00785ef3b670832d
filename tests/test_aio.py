"""Waiting on an event with a timeout: set, timed out, and cancelled as it is set."""

from __future__ import annotations

import asyncio

import pytest

from cairnq._aio import wait_set


async def test_an_event_set_while_waiting_ends_the_wait_with_true() -> None:
    event = asyncio.Event()
    waiting = asyncio.create_task(wait_set(event, 10.0))
    await asyncio.sleep(0)
    event.set()
    assert await waiting is True


async def test_a_wait_that_times_out_returns_false() -> None:
    assert await wait_set(asyncio.Event(), 0.01) is False


async def test_an_event_already_set_returns_true_at_once() -> None:
    event = asyncio.Event()
    event.set()
    assert await wait_set(event, 0.0) is True


async def test_a_cancel_landing_as_the_event_is_set_raises_instead_of_being_lost() -> None:
    # asyncio.wait_for before Python 3.12 returns here and drops the cancel
    # (CPython gh-86296): a claim loop cancelled this way kept running.
    event = asyncio.Event()
    waiting = asyncio.create_task(wait_set(event, 10.0))
    await asyncio.sleep(0)
    event.set()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting


async def test_a_cancelled_wait_leaves_no_task_behind() -> None:
    event = asyncio.Event()
    before = asyncio.all_tasks()
    waiting = asyncio.create_task(wait_set(event, 10.0))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await asyncio.sleep(0)
    assert asyncio.all_tasks() == before
