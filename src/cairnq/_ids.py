"""Identifiers: ``task_`` / ``worker_`` followed by a 26-character Crockford ULID."""

from __future__ import annotations

import os

from ._clock import SYSTEM_CLOCK

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# Every 10-bit group as its two Crockford characters: a ULID is 13 such groups.
_PAIRS = [high + low for high in _CROCKFORD for low in _CROCKFORD]
_SHIFTS = tuple(range(120, -1, -10))


def now_ms() -> int:
    """The host's wall clock in epoch milliseconds (what an id's timestamp holds)."""
    return SYSTEM_CLOCK.now_ms()


def ulid(now_ms: int | None = None) -> str:
    """A ULID: 48 bits of epoch milliseconds then 80 random bits, 26 uppercase chars."""
    ms = SYSTEM_CLOCK.now_ms() if now_ms is None else now_ms
    value = (ms & ((1 << 48) - 1)) << 80 | int.from_bytes(os.urandom(10), "big")
    # 26 characters carry 130 bits: the 128-bit value under 2 zero bits.
    pairs = _PAIRS
    return "".join([pairs[(value >> shift) & 1023] for shift in _SHIFTS])


def task_id(now_ms: int | None = None) -> str:
    """A new task id, ``task_`` + ULID."""
    return "task_" + ulid(now_ms)


_RANDOM_SHIFTS = tuple(range(70, -1, -10))


def task_ids(count: int, now_ms: int | None = None) -> list[str]:
    """``count`` new task ids at once, in the order they sort: a monotonic ULID run.

    All share one millisecond; the first's 80 random bits are drawn (the top one
    clear) and each next id adds 1, as the ULID spec's monotonic sequence does.
    Tasks of one batch that share a priority and a due time are claimed by id,
    so they run in the order they were submitted.
    """
    ms = SYSTEM_CLOCK.now_ms() if now_ms is None else now_ms
    stamp = ms & ((1 << 48) - 1)
    prefix = "task_" + "".join(_CROCKFORD[(stamp >> shift) & 31] for shift in range(45, -5, -5))
    # 79 random bits: adding fewer than 2**79 never carries into the timestamp.
    start = int.from_bytes(os.urandom(10), "big") >> 1
    pairs = _PAIRS
    return [
        prefix + "".join([pairs[(value >> shift) & 1023] for shift in _RANDOM_SHIFTS])
        for value in range(start, start + count)
    ]


def worker_id() -> str:
    """A new worker id, ``worker_`` + ULID."""
    return "worker_" + ulid()
