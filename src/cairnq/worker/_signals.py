"""SIGINT and SIGTERM handled on a worker's event loop while it serves."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

SAME_SIGNAL_WINDOW_S = 1.0
"""The same signal again within this long of the one counted is that one delivered twice."""


class SignalCount:
    """Counts the stop signals a worker receives, a signal delivered twice once.

    GNU ``timeout`` (and supervisors like it) signals the process and then its
    process group, which holds the process: the one SIGTERM arrives twice, and
    counting it twice would skip the drain. So the same signal number again
    within ``window_s`` of the last one counted is not counted; another signal,
    or the same one later, is.

    Args:
        window_s: The window, in seconds.
        clock: A monotonic clock in seconds.

    Example::

        count = SignalCount()
        count.note(signal.SIGTERM)   # 1
        count.note(signal.SIGTERM)   # None: the same delivery, to the group
    """

    def __init__(
        self, window_s: float = SAME_SIGNAL_WINDOW_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.window_s = window_s
        self._clock = clock
        self._last: tuple[int, float] | None = None
        self.counted = 0

    def note(self, signum: int) -> int | None:
        """The signal's number in the count (1, 2...), or ``None`` for a duplicate."""
        now = self._clock()
        last = self._last
        if last is not None and last[0] == signum and now - last[1] < self.window_s:
            return None
        self._last = (signum, now)
        self.counted += 1
        return self.counted


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
