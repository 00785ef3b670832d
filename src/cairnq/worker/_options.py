"""The rules for ``Worker`` options that are more than a bounded integer."""

from __future__ import annotations

from collections.abc import Iterable

from .._checks import MAX_INT4, check_int, check_names
from ..backpressure import DepthLimit, QueueGate
from ..client import CairnQ
from ..errors import InvalidArgument

MAX_CONCURRENCY = 100_000


def check_queues(queues: Iterable[str]) -> list[str]:
    """The queues a worker serves: at least one name."""
    checked = check_names(queues, "queues")
    if not checked:
        raise InvalidArgument("a worker needs at least one queue")
    return checked


def check_concurrency(concurrency: int) -> int:
    return check_int(concurrency, "concurrency", low=1, high=MAX_CONCURRENCY)


def check_ms(value: int, what: str) -> int:
    """A duration in milliseconds, 0 and up."""
    return check_int(value, what, low=0)


def check_optional(value: int | None, what: str, *, high: int = MAX_INT4) -> int | None:
    """``None`` (no bound), or a bound of at least 1."""
    return None if value is None else check_int(value, what, low=1, high=high)


def check_in_flight_bytes(value: int | None) -> int | None:
    return check_optional(value, "max_in_flight_bytes", high=2**62)


def lease_periods(
    lease_ms: int, heartbeat_ms: int | None, recovery_ms: int | None
) -> tuple[int, int]:
    """The heartbeat and recovery intervals, by default derived from the lease.

    A heartbeat every third of the lease (at least 50 ms, at most half of it),
    and strictly shorter than the lease; recovery every half lease (100 ms to 30 s).
    """
    if heartbeat_ms is None:
        heartbeat_ms = min(max(50, lease_ms // 3), lease_ms // 2)
    heartbeat_ms = check_int(heartbeat_ms, "heartbeat_interval_ms", low=1, high=lease_ms - 1)
    if recovery_ms is None:
        recovery_ms = min(30_000, max(100, lease_ms // 2))
    return heartbeat_ms, check_int(recovery_ms, "recovery_interval_ms", low=1, high=2**40)


def queue_gate(client: CairnQ, max_depth: DepthLimit, max_wait_ms: int) -> QueueGate:
    """The backpressure ``ctx.submit`` honours: the client's, unless the worker sets its own."""
    return client.gate if max_depth is None else QueueGate(max_depth, max_wait_ms)
