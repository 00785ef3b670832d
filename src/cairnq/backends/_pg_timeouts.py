"""``PostgresBackend``'s timeouts: ``listen_health`` and ``op_timeout``, durations, and
their old spellings in seconds (``listen_health_s``, ``op_timeout_s``), kept one release."""

from __future__ import annotations

import datetime

from .._deprecated import renamed
from ..durations import Duration, duration_ms
from ..errors import InvalidArgument

__all__ = ["LISTEN_HEALTH", "LISTEN_HEALTH_S", "OP_TIMEOUT", "timeouts"]

LISTEN_HEALTH_S = 10.0
LISTEN_HEALTH = datetime.timedelta(seconds=LISTEN_HEALTH_S)
OP_TIMEOUT = datetime.timedelta(seconds=60)


def timeouts(
    listen_health: Duration, op_timeout: Duration | None, old: dict[str, float | None]
) -> tuple[float, float | None]:
    """``listen_health`` and ``op_timeout`` in seconds, checked.

    Their old spellings in ``old`` (``listen_health_s``, ``op_timeout_s``: seconds)
    warn once each and may not come with the new one.

    Raises:
        InvalidArgument: a bad value (named as given), or both spellings of one.
        TypeError: another keyword in ``old``.
    """
    unknown = set(old) - {"listen_health_s", "op_timeout_s"}
    if unknown:
        raise TypeError(f"PostgresBackend() got an unexpected keyword argument {min(unknown)!r}")
    health = _renamed(old, "listen_health", listen_health, LISTEN_HEALTH)
    timeout = _renamed(old, "op_timeout", op_timeout, OP_TIMEOUT)
    health_ms = duration_ms(health, "listen_health", low_ms=1, high_ms=3_600_000)
    if timeout is None:
        return health_ms / 1000, None
    timeout_ms = duration_ms(timeout, "op_timeout", low_ms=1, high_ms=86_400_000)
    return health_ms / 1000, timeout_ms / 1000


def _renamed(
    old: dict[str, float | None], name: str, value: Duration | None, default: Duration
) -> Duration | None:
    """``value``, or the old ``<name>_s`` in ``old`` (warning once); not both."""
    if f"{name}_s" not in old:
        return value
    renamed(f"PostgresBackend({name}_s=...)", f"PostgresBackend({name}=...)")
    if value is not default:
        raise InvalidArgument(f"give {name} or {name}_s, not both")
    return old[f"{name}_s"]
