"""Identifiers: ``task_`` / ``worker_`` followed by a 26-character Crockford ULID."""

from __future__ import annotations

import os
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# Every 10-bit group as its two Crockford characters: a ULID is 13 such groups.
_PAIRS = [high + low for high in _CROCKFORD for low in _CROCKFORD]
_SHIFTS = tuple(range(120, -1, -10))


def ulid(now_ms: int | None = None) -> str:
    """A ULID: 48 bits of epoch milliseconds then 80 random bits, 26 uppercase chars."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    value = (ms & ((1 << 48) - 1)) << 80 | int.from_bytes(os.urandom(10), "big")
    # 26 characters carry 130 bits: the 128-bit value under 2 zero bits.
    pairs = _PAIRS
    return "".join([pairs[(value >> shift) & 1023] for shift in _SHIFTS])


def task_id(now_ms: int | None = None) -> str:
    """A new task id, ``task_`` + ULID."""
    return "task_" + ulid(now_ms)


# Each random byte keeps its low 5 bits: 256 is a multiple of 32, so every symbol is uniform.
_BYTE_TO_SYMBOL = bytes(_CROCKFORD.encode("ascii")[b & 31] for b in range(256))


def task_ids(count: int, now_ms: int | None = None) -> list[str]:
    """``count`` new task ids at once, each ``task_`` + a ULID of the same millisecond.

    The same ids ``task_id`` makes (48 bits of milliseconds, then 80 random bits),
    built from one read of the clock and one ``os.urandom`` call for the lot.
    """
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    stamp = ms & ((1 << 48) - 1)
    prefix = "task_" + "".join(_CROCKFORD[(stamp >> shift) & 31] for shift in range(45, -5, -5))
    symbols = os.urandom(16 * count).translate(_BYTE_TO_SYMBOL).decode("ascii")
    return [prefix + symbols[at : at + 16] for at in range(0, 16 * count, 16)]


def worker_id() -> str:
    """A new worker id, ``worker_`` + ULID."""
    return "worker_" + ulid()
