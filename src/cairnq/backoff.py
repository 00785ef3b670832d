"""Retry delays: exponential windows with equal jitter."""

from __future__ import annotations

import random
from collections.abc import Callable

DEFAULT_BASE_MS = 1000
DEFAULT_MAX_MS = 30_000


def retry_delay_ms(
    attempt: int,
    *,
    base_ms: int = DEFAULT_BASE_MS,
    max_ms: int = DEFAULT_MAX_MS,
    rand: Callable[[], float] = random.random,
) -> int:
    """How long to wait before running a task again after attempt ``attempt`` failed.

    The window doubles per attempt from ``base_ms`` up to ``max_ms``; the delay
    is uniform in ``[window/2, window)`` (equal jitter), so retries of many
    tasks that failed together spread out without ever retrying at once.
    ``base_ms <= 0`` disables the delay.

    Example:
        ``retry_delay_ms(1)`` is 500-999 ms; ``retry_delay_ms(10)`` is 15-30 s.
    """
    if base_ms <= 0:
        return 0
    window: int = min(max_ms, base_ms * 2 ** max(0, attempt - 1))
    half = window // 2
    return half + int(rand() * (window - half))
