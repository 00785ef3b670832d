"""Client-side procedures that wait: written once, run by a blocking and an async driver.

A procedure is a generator that yields ``Run`` (run an operation, send back its
result) or ``Nap`` (pause; a subscription may end the pause early) and returns
its result. ``wait`` and the backpressure gate are procedures, so the sync and
async clients share their logic.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from .._events import Latch
from ..protocol.steps import Op

T = TypeVar("T")


@dataclass(frozen=True)
class Run:
    """Run ``op`` (a write when ``write``) and send its result back."""

    op: Op[Any]
    write: bool = False


@dataclass(frozen=True)
class Nap:
    """Pause for ``seconds``, or until the procedure's subscription fires."""

    seconds: float


Procedure = Generator[Run | Nap, Any, T]


def follow(
    procedure: Procedure[T],
    run: Callable[[Op[Any], bool], Any],
    sub: Latch | None = None,
) -> T:
    """Drive ``procedure`` in this thread."""
    reply: Any = None
    try:
        while True:
            step = procedure.send(reply)
            if isinstance(step, Run):
                reply = run(step.op, step.write)
            elif sub is not None:
                reply = sub.wait(step.seconds)
            else:
                time.sleep(step.seconds)
                reply = False
    except StopIteration as stop:
        result: T = stop.value
        return result


async def afollow(
    procedure: Procedure[T],
    run: Callable[[Op[Any], bool], Awaitable[Any]],
    sub: Latch | None = None,
) -> T:
    """Drive ``procedure`` on the running event loop."""
    reply: Any = None
    try:
        while True:
            step = procedure.send(reply)
            if isinstance(step, Run):
                reply = await run(step.op, step.write)
            elif sub is not None:
                reply = await sub.wait_async(step.seconds)
            else:
                await asyncio.sleep(step.seconds)
                reply = False
    except StopIteration as stop:
        result: T = stop.value
        return result
