"""Waits on the event itself: a condition polled with a deadline, a count of claim turns.

A test that waits for something to happen polls for it (``eventually``,
``eventually_sync``); a test that waits for something *not* to happen waits
for the component's own cycles to pass (``ClaimTurns``): a claim loop that
turned several times since a change had every chance to act on it.
``results_of`` records what each run of a protocol operation found, for a
test that waits until an operation has run and then reads what it saw.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from cairnq import kernel
from cairnq.worker._claimer import Claimer

POLL_S = 0.01


async def eventually(
    check: Callable[[], Any | Awaitable[Any]], what: str = "condition", timeout: float = 10.0
) -> Any:
    """Poll ``check`` (plain or async) until it returns something truthy; return that."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        await asyncio.sleep(POLL_S)


def eventually_sync(
    check: Callable[[], Any], what: str = "condition", timeout: float = 10.0
) -> Any:
    """Poll ``check`` from a thread with no event loop until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        time.sleep(POLL_S)


class ClaimTurns:
    """Counts the turns of every worker claim loop in this test.

    A turn begins when the loop weighs its free slots, whether or not it then
    claims. ``await turns.passed(n)`` returns once ``n`` more turns began after
    the call, every earlier turn (and the claim it made) being over by then.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = Claimer._free_slots

        def counted(claimer: Claimer) -> int:
            self.count += 1
            return original(claimer)

        monkeypatch.setattr(Claimer, "_free_slots", counted)

    async def passed(self, turns: int = 3, timeout: float = 10.0) -> None:
        # _free_slots is also asked after a claim that dispatched: count twice as many
        # calls so that ``turns`` whole turns began, however each one went.
        target = self.count + 2 * turns
        await eventually(lambda: self.count >= target, f"{turns} claim turns", timeout)


def results_of(monkeypatch: pytest.MonkeyPatch, operation: str) -> list[Any]:
    """A list that each run of protocol operation ``operation`` (``ops.probe``, ...)
    appends its result to, in order, for the rest of the test."""
    results: list[Any] = []
    original = getattr(kernel, operation)

    def recorded(*args: Any, **kwargs: Any) -> Any:
        found = yield from original(*args, **kwargs)
        results.append(found)
        return found

    monkeypatch.setattr(kernel, operation, recorded)
    return results
