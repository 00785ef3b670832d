"""The rules for ``Worker`` options that are more than a bounded integer."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from .._checks import MAX_INT4, check_int, check_names
from .._sealing import check_codec
from ..backends import Backend
from ..backpressure import DepthLimit, QueueGate
from ..client import CairnQ
from ..durations import Duration, duration_ms, duration_or_ms
from ..errors import InvalidArgument
from ..store import TaskStore

MAX_CONCURRENCY = 100_000
DEFAULT_CANCEL_GRACE: Duration = 10
"""How long an ``async def`` handler whose task was canceled may run on once its worker
saw the cancel, before the worker cancels its coroutine (seconds)."""
MAX_CANCEL_GRACE_MS = 24 * 3_600_000


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


def check_cancel_grace(value: Duration | None, what: str = "cancel_grace") -> int | None:
    """The grace period of a canceled running ``async def`` handler, in milliseconds, or
    ``None``: never stopped (its handler stops when it checks ``ctx.canceled()``).

    Raises:
        InvalidArgument: not a duration (``docs/durations.md``), or longer than a day.
    """
    if value is None:
        return None
    return duration_ms(value, what, low_ms=0, high_ms=MAX_CANCEL_GRACE_MS)


def run_bounds(
    max_run_ms: int | None, cancel_grace: Duration | None
) -> tuple[int | None, int | None]:
    """``max_run_ms`` and ``cancel_grace`` (in milliseconds), checked."""
    return check_optional(max_run_ms, "max_run_ms"), check_cancel_grace(cancel_grace)


def check_in_flight_bytes(value: int | None) -> int | None:
    return check_optional(value, "max_in_flight_bytes", high=2**62)


def periods(
    lease_ms: int,
    heartbeat_interval: Any,
    recovery_interval: Any,
    drain_timeout: Any,
    old: Mapping[str, Any],
) -> tuple[int, int, int]:
    """The heartbeat, recovery and drain periods in milliseconds, checked.

    Each is a duration (or its old ``*_ms`` spelling in ``old``, not both). By
    default, a heartbeat every third of the lease (at least 50 ms, at most half of
    it), and strictly shorter than the lease; recovery every half lease (100 ms to
    30 s); a drain of 30 s.
    """
    heartbeat_ms = duration_or_ms(
        heartbeat_interval,
        old.get("heartbeat_interval_ms"),
        "heartbeat_interval",
        low_ms=1,
        high_ms=lease_ms - 1,
    )
    if heartbeat_ms is None:
        heartbeat_ms = min(max(50, lease_ms // 3), lease_ms // 2)
    recovery_ms = duration_or_ms(
        recovery_interval,
        old.get("recovery_interval_ms"),
        "recovery_interval",
        low_ms=1,
        high_ms=2**40,
    )
    if recovery_ms is None:
        recovery_ms = min(30_000, max(100, lease_ms // 2))
    drain_ms = duration_or_ms(drain_timeout, old.get("drain_timeout_ms"), "drain_timeout")
    return heartbeat_ms, recovery_ms, 30_000 if drain_ms is None else drain_ms


def queue_gate(client: CairnQ, max_depth: DepthLimit, max_wait_ms: int) -> QueueGate:
    """The backpressure ``ctx.submit`` honours: the client's, unless the worker sets its own."""
    if max_depth is None:
        return client.gate
    return QueueGate(max_depth, max_wait_ms, extensions=client.extensions)


def client_of(store: Any, codec: Any) -> tuple[CairnQ, bool]:
    """The worker's client, and whether the worker owns it (made it from a URL): ``store``
    itself when a ``CairnQ``, else one on it; given the payload codec ``codec`` unless
    that is ``None``. The worker reads and writes through its client, so both use one codec.

    Raises:
        InvalidArgument: ``codec`` has no ``encode``/``decode``, or the client was built
            with another codec.
    """
    checked = check_codec(codec, "Worker")
    client = store if isinstance(store, CairnQ) else CairnQ(store)
    owns = not isinstance(store, (CairnQ, TaskStore, Backend))
    current = client.codec.sealer
    if checked is None or current is checked:
        return client, owns
    if current is not None:
        raise InvalidArgument(
            "Worker(codec=...) is not the codec its client was built with; give the codec "
            "to the client (CairnQ(..., codec=...)) or to the worker, not two"
        )
    client.codec = dataclasses.replace(client.codec, sealer=checked)
    if client._store is not None:
        client._store.codec = client.codec
    return client, owns
