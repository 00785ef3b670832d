"""SIGINT and SIGTERM handled on a worker's event loop while it serves."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Iterator
from typing import Any


@contextlib.contextmanager
def handling_signals(
    loop: asyncio.AbstractEventLoop, on_signal: Callable[[int], None]
) -> Iterator[None]:
    """SIGINT and SIGTERM call ``on_signal(signum)`` on ``loop`` for the block.

    Where the loop cannot take them (another thread than the main one, or a
    platform without them) the signals are left alone. Afterwards each signal has
    the handler it had before: asyncio's removal alone would leave it at its
    default and take a program's own handler away.
    """
    installed: dict[int, Any] = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(sig)
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, on_signal, sig)
            installed[sig] = previous
    try:
        yield
    finally:
        for signum, previous in installed.items():
            loop.remove_signal_handler(signum)
            if previous is not None:
                signal.signal(signum, previous)
