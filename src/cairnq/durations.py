"""Durations and points in time: one rule for every option that takes one.

The rule:

- A duration option whose name does not end in ``_ms`` (``delay=``, ``every=``,
  ``jitter=``, ``catch_up=``, ``per=``, ``backoff=``, ``timeout=``,
  ``older_than=``, ``heartbeat_interval=``, ``drain_timeout=``,
  ``recovery_interval=``, ``op_timeout=``, ``Snooze(...)``, ``ctx.snooze(...)``)
  takes a ``datetime.timedelta``, a string with a unit (``"5m"``, ``"1.5s"``,
  ``"1h30m"``, ``"500ms"``), or a bare ``int``/``float`` meaning **seconds**, as
  ``asyncio.sleep``, ``time.sleep`` and ``timedelta`` read a bare number. A string
  without a unit (``"60"``) and a ``bool`` are refused.
- A point in time (``run_at=``) is an aware ``datetime``; a naive one is refused.
- An option whose name ends in ``_ms`` is an ``int`` of milliseconds. These are the
  reference SDK's options: submit's ``delay_ms``, wait/call ``timeout_ms``,
  ``poll_ms``, ``max_poll_ms``, the Worker's ``lease_ms``, ``poll_interval_ms``,
  ``retry_backoff_ms``, ``retry_backoff_max_ms``, ``max_run_ms``,
  ``max_queue_wait_ms``, purge's and Retention's ``older_than_ms``, Retention's
  ``interval_ms``. Where a length of time is most often written, a duration
  option sits beside one (``timeout=``, ``older_than=``): give one of the two
  (``duration_or_ms``).
- The command line takes durations with a unit (``--delay 30s``); a bare number
  is refused there, except in options spelled ``--...-ms`` (milliseconds).

``duration_ms`` and ``point_ms`` are the one check every such option goes
through; an error names the value as the caller gave it and the bound in the
caller's unit (``snooze delay must be 0 seconds or more, got -5``).

Every duration and time option of the public API (``docs/durations.md`` has the
same table, with the old meanings):

======================================  ========================================
option                                  takes
======================================  ========================================
``submit(delay=)``                      duration (seconds when a number)
``submit(run_at=)``                     aware ``datetime`` (in the past: now)
``submit(delay_ms=)``                   int ms (reference)
``submit_many`` dict items              as ``submit``: ``delay``, ``run_at``, ``delay_ms``
``wait/wait_by_key/call/ctx.wait``      int ms (reference)
``(timeout_ms, poll_ms, max_poll_ms)``
``wait/wait_by_key/call/ctx.wait``      duration, or ``timeout_ms``
``(timeout=)``
``purge(older_than_ms=)``               int ms (reference)
``purge(older_than=)``                  duration, or ``older_than_ms``
``Worker(lease_ms, poll_interval_ms,    int ms (reference)
retry_backoff_ms,
retry_backoff_max_ms, max_run_ms,
max_queue_wait_ms)``
``Worker(heartbeat_interval,            duration (the ``_ms`` spellings kept
drain_timeout, recovery_interval)``     one release)
``Retention(older_than_ms,              int ms (reference)
interval_ms)``
``Retention(older_than=)``              duration or ``{status: duration}``
``PostgresBackend(op_timeout,           duration (the ``_s`` spellings kept
listen_health)``                        one release)
``Snooze(delay)``, ``ctx.snooze``       duration (``delay_ms`` kept one release)
``ctx.step(backoff=)``                  duration (seconds when a number)
``cq.activity(window, bucket)``         duration (the ``_ms`` spellings kept
                                        one release)
starlette ``follow/task_events(poll)``  duration (``poll_ms`` kept one release)
``cq.presence.workers/unserved``        duration (``within_ms`` kept one
``(within)``                            release)
``Limit.rate(per=)``                    duration (seconds when a number)
schedules ``every=``                    duration (seconds when a number), >= 1s
schedules ``jitter=``                   duration (seconds when a number)
schedules ``catch_up=``                 duration (seconds when a number), >= 1s
CLI ``--delay``, ``--timeout``,         duration with a unit
``--older-than``, ``--every``,
``--jitter``, ``--catch-up``,
``--per``
CLI ``--delay-ms``, ``--timeout-ms``    int ms, or a duration with a unit
CLI ``top --interval``                  seconds (a number)
======================================  ========================================

Example::

    duration_ms(90, "delay")  # 90_000
    duration_ms("1.5s", "delay")  # 1_500
    duration_ms(datetime.timedelta(minutes=5), "delay")  # 300_000
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any, TypeAlias

from ._checks import MAX_DELAY_MS, check_int
from .errors import InvalidArgument

__all__ = [
    "Duration",
    "delay_ms_of",
    "duration_ms",
    "duration_or_ms",
    "exact_duration",
    "format_duration",
    "format_instant",
    "parse_duration",
    "parse_milliseconds",
    "point_ms",
]

Duration: TypeAlias = datetime.timedelta | str | int | float
"""What a duration option takes: a ``timedelta``, a string with a unit, or seconds."""

UNIT_MS: dict[str, int] = {
    "d": 86_400_000,
    "h": 3_600_000,
    "m": 60_000,
    "s": 1_000,
    "ms": 1,
}
MAX_DURATION_MS = 2**62

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|d|h|m|s)")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)")
_WHOLE = re.compile(r"[0-9]+")
_EXAMPLES = "e.g. 7d, 12h, 30m, 1.5s, 500ms or 1h30m"
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_US = datetime.timedelta(microseconds=1)


def parse_duration(text: str) -> int:
    """Milliseconds in a duration such as ``7d``, ``12h``, ``30m``, ``1.5s``, ``500ms``.

    Parts combine largest unit first, each unit at most once: ``1h30m``, ``2d12h``,
    ``1m30s500ms``. An amount may have decimals (``1.5s``, ``0.5h``); a total
    that falls between two milliseconds is rounded up. A bare number, a negative
    amount, an unknown unit or units out of order are refused.

    Raises:
        InvalidArgument: ``text`` is not such a duration; the message says why.

    Example::

        parse_duration("1h30m")  # 5_400_000
        parse_duration("1.5s")  # 1_500
    """
    if not isinstance(text, str):
        raise InvalidArgument(f"a duration must be a string, not {type(text).__name__}")
    source = text.strip().lower()
    if not source:
        raise InvalidArgument(f"empty duration: give a number and a unit, {_EXAMPLES}")
    if _NUMBER.fullmatch(source):
        raise InvalidArgument(f"duration {text!r} has no unit: {_EXAMPLES}")
    if source.startswith("-") and source != "-":
        raise InvalidArgument(
            f"duration {text!r} is negative: give a length of time, such as {source[1:]!r}"
        )
    total = Fraction(0)
    position = 0
    previous_rank = -1
    ranks = list(UNIT_MS)
    for match in _PART.finditer(source):
        if match.start() != position:
            break
        amount, unit = Fraction(match.group(1)), match.group(2)
        rank = ranks.index(unit)
        if rank <= previous_rank:
            raise InvalidArgument(
                f"invalid duration {text!r}: give each unit once, largest first, {_EXAMPLES}"
            )
        previous_rank = rank
        total += amount * UNIT_MS[unit]
        position = match.end()
    if position != len(source):
        raise InvalidArgument(f"invalid duration {text!r}: use a number and a unit, {_EXAMPLES}")
    if total > MAX_DURATION_MS:
        raise InvalidArgument(f"duration {text!r} is too long")
    return math.ceil(total)


def parse_milliseconds(text: str) -> int:
    """Milliseconds in a plain whole number (``60000``) or in a duration (``1m``, ``1h30m``).

    What an option spelled ``--..-ms`` takes: the number it always took, or a
    duration as ``parse_duration`` reads it.

    Raises:
        InvalidArgument: ``text`` is neither; the message says what is accepted.

    Example::

        parse_milliseconds("1500")  # 1_500
        parse_milliseconds("5m")  # 300_000
    """
    if isinstance(text, str) and _WHOLE.fullmatch(text.strip()):
        total = int(text.strip())
        if total > MAX_DURATION_MS:
            raise InvalidArgument(f"duration {text!r} is too long")
        return total
    return parse_duration(text)


def format_duration(ms: int) -> str:
    """A duration for people: ``850ms``, ``42s``, ``3m05s``, ``2h07m``, ``3d04h``.

    Negative values (clock skew between hosts) read as ``0s``.
    """
    if ms <= 0:
        return "0s"
    if ms < 1_000:
        return f"{ms}ms"
    seconds = ms // 1_000
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def format_instant(ms: int, tz: str | None = "UTC") -> str:
    """An instant for people, in a zone it names: ``2026-01-02 03:04:05Z`` in UTC,
    ``2026-01-02 04:04:05+01:00 Europe/Paris`` in another IANA zone, and in the
    local zone (``tz=None``) its offset and abbreviation (``... 04:04:05+01:00 CET``).

    A zone that cannot be loaded reads as UTC.
    """
    utc = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    if tz is None:
        local = utc.astimezone()
        return local.strftime("%Y-%m-%d %H:%M:%S") + f"{_offset(local)} {local.tzname()}"
    if tz != "UTC":
        import zoneinfo

        try:
            zoned = utc.astimezone(zoneinfo.ZoneInfo(tz))
        except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
            zoned = None
        if zoned is not None:
            return zoned.strftime("%Y-%m-%d %H:%M:%S") + f"{_offset(zoned)} {tz}"
    return utc.strftime("%Y-%m-%d %H:%M:%SZ")


def _offset(moment: datetime.datetime) -> str:
    """``+01:00``, ``-03:30``, ``+00:00``."""
    text = moment.strftime("%z")
    return f"{text[:3]}:{text[3:5]}"


def duration_ms(
    value: Any,
    what: str,
    *,
    low_ms: int = 0,
    high_ms: int = MAX_DELAY_MS,
) -> int:
    """Milliseconds in a duration option, checked: the one rule (see the module docstring).

    Args:
        value: A ``datetime.timedelta``, a string with a unit (``"5m"``, ``"1.5s"``,
            ``"1h30m"``), or a bare ``int``/``float`` of seconds. A part of a
            millisecond is rounded up.
        what: The option's name for messages (``"delay"``, ``"every"``).
        low_ms, high_ms: The bounds, inclusive, in milliseconds.

    Returns:
        Whole milliseconds within ``[low_ms, high_ms]``.

    Raises:
        InvalidArgument: a ``bool``, another type, a string without a unit, a
            number that is not finite, or a value out of bounds; the message names
            the value as given and the bound in the caller's unit.

    Example::

        duration_ms(3600, "every", low_ms=1_000)  # 3_600_000
        duration_ms("500ms", "jitter")  # 500
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str, datetime.timedelta)):
        raise InvalidArgument(
            f"{what} must be a duration: seconds (a number), a timedelta or a string "
            f"with a unit ({_EXAMPLES}); got {value!r}"
        )
    if isinstance(value, str):
        try:
            ms = parse_duration(value)
        except InvalidArgument as exc:
            raise InvalidArgument(f"{what}: {exc}; or give seconds as a number, e.g. 90") from None
        _check_bounds(ms, ms, repr(value), what, low_ms, high_ms, exact_duration)
        return ms
    if isinstance(value, datetime.timedelta):
        micro = value // _US
        ms = -(-micro // 1000)
        _check_bounds(
            micro / 1000,
            ms,
            f"timedelta(seconds={value.total_seconds():g})",
            what,
            low_ms,
            high_ms,
            exact_duration,
        )
        return ms
    if not math.isfinite(value):
        raise InvalidArgument(f"{what} must be a finite number of seconds, got {value!r}")
    ms = value * 1000 if isinstance(value, int) else math.ceil(round(value * 1000, 6))
    _check_bounds(value * 1000, ms, repr(value), what, low_ms, high_ms, _seconds_text)
    return ms


def duration_or_ms(
    value: Any,
    value_ms: Any,
    what: str,
    *,
    low_ms: int = 0,
    high_ms: int = MAX_DELAY_MS,
) -> int | None:
    """Milliseconds in an option given as a duration (``what``) or as ``what_ms``, checked.

    An option with both spellings (``timeout=`` beside ``timeout_ms=``) takes at
    most one; the ``_ms`` one is an ``int`` of milliseconds.

    Args:
        value: The duration spelling's value (``None``: not given), as for ``duration_ms``.
        value_ms: The ``_ms`` spelling's value (``None``: not given).
        what: The duration spelling's name (``"timeout"``); the other is ``what + "_ms"``.
        low_ms, high_ms: The bounds, inclusive, in milliseconds.

    Returns:
        Whole milliseconds, or ``None`` when neither is given.

    Raises:
        InvalidArgument: both given, or the one given is not such a value or out
            of bounds (the message names it in the caller's unit).

    Example::

        duration_or_ms("50ms", None, "timeout")  # 50
        duration_or_ms(None, 50, "timeout")  # 50
    """
    if value is not None and value_ms is not None:
        raise InvalidArgument(f"give {what} or {what}_ms, not both")
    if value is not None:
        return duration_ms(value, what, low_ms=low_ms, high_ms=high_ms)
    if value_ms is not None:
        return check_int(value_ms, f"{what}_ms", low=low_ms, high=high_ms)
    return None


def delay_ms_of(delay: Any, what: str = "delay") -> int:
    """Milliseconds in a delay from now: ``duration_ms`` from 0 up to 100 years.

    Raises:
        InvalidArgument: as ``duration_ms``.
    """
    return duration_ms(delay, what, low_ms=0, high_ms=MAX_DELAY_MS)


def point_ms(value: Any, what: str) -> int:
    """Epoch milliseconds of a point in time given as an aware ``datetime``.

    A part of a millisecond is rounded up, so the instant is never earlier than
    the one given.

    Raises:
        InvalidArgument: not a ``datetime`` (a ``date`` alone included), or a
            naive one (no ``tzinfo``): a naive time has no single instant.

    Example::

        point_ms(datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc), "run_at")
    """
    if not isinstance(value, datetime.datetime):
        raise InvalidArgument(
            f"{what} must be an aware datetime, such as "
            f"datetime.now(timezone.utc) + timedelta(hours=1); got {value!r}"
        )
    if value.utcoffset() is None:
        raise InvalidArgument(
            f"{what}={value.isoformat()} is a naive datetime (no tzinfo), which names no "
            f"single instant: add a tzinfo, e.g. .replace(tzinfo=timezone.utc) or "
            f"datetime.now(timezone.utc)"
        )
    micro = (value - _EPOCH) // _US
    return -(-micro // 1000)


def exact_duration(ms: int) -> str:
    """``ms`` as a duration that reads back exactly: ``1h30m``, ``1s500ms``, ``36500d``."""
    if ms <= 0:
        return "0s"
    parts = []
    rest = ms
    for unit, size in UNIT_MS.items():
        amount, rest = divmod(rest, size)
        if amount:
            parts.append(f"{amount}{unit}")
    return "".join(parts)


def _check_bounds(
    exact: float,
    ms: int,
    shown: str,
    what: str,
    low_ms: int,
    high_ms: int,
    unit: Callable[[int], str],
) -> None:
    """Refuse a value below ``low_ms`` or above ``high_ms``, naming both in the caller's unit."""
    if exact < low_ms:
        raise InvalidArgument(f"{what} must be {unit(low_ms)} or more, got {shown}")
    if ms > high_ms:
        raise InvalidArgument(f"{what} must be at most {unit(high_ms)}, got {shown}")


def _seconds_text(ms: int) -> str:
    """``ms`` in seconds for messages: ``0 seconds``, ``1.5 seconds``, ``60 seconds (1m)``."""
    seconds = str(ms // 1000) if ms % 1000 == 0 else f"{ms / 1000:g}"
    word = "second" if seconds == "1" else "seconds"
    return f"{seconds} {word}" + (f" ({exact_duration(ms)})" if ms >= 60_000 else "")
