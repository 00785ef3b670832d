"""Identifiers: ``task_`` / ``worker_`` followed by a 26-character Crockford ULID."""

from __future__ import annotations

import os
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def ulid(now_ms: int | None = None) -> str:
    """A ULID: 48 bits of epoch milliseconds then 80 random bits, 26 uppercase chars."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    value = (ms & ((1 << 48) - 1)) << 80 | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def task_id(now_ms: int | None = None) -> str:
    """A new task id, ``task_`` + ULID."""
    return "task_" + ulid(now_ms)


def worker_id() -> str:
    """A new worker id, ``worker_`` + ULID."""
    return "worker_" + ulid()
