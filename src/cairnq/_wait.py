"""How a wait's poll interval grows between looks at the task."""

from __future__ import annotations


def next_poll_ms(current: int, ceiling: int) -> int:
    """The poll interval after ``current``: 1.5 times it, at least ``current + 1``
    (so a 1 ms start still grows), at most ``ceiling``."""
    return min(ceiling, max(current + 1, int(current * 1.5)))
