"""Durations as people type them (``7d``, ``12h``, ``1h30m``, ``500ms``) and as they read them."""

from __future__ import annotations

import datetime
import math
import re
from typing import Any

from ._checks import MAX_DELAY_MS, check_int
from .errors import InvalidArgument

__all__ = ["format_duration", "parse_duration", "parse_milliseconds"]

UNIT_MS: dict[str, int] = {
    "d": 86_400_000,
    "h": 3_600_000,
    "m": 60_000,
    "s": 1_000,
    "ms": 1,
}
MAX_DURATION_MS = 2**62

_PART = re.compile(r"(\d+)(ms|d|h|m|s)")
_WHOLE = re.compile(r"[0-9]+")
_EXAMPLES = "e.g. 7d, 12h, 30m, 45s, 500ms or 1h30m"


def parse_duration(text: str) -> int:
    """Milliseconds in a duration such as ``7d``, ``12h``, ``30m``, ``45s``, ``500ms``.

    Parts combine largest unit first, each unit at most once: ``1h30m``, ``2d12h``,
    ``1m30s500ms``. A bare number, a negative or fractional amount, an unknown
    unit or units out of order are refused.

    Raises:
        InvalidArgument: ``text`` is not such a duration; the message says why.

    Example::

        parse_duration("1h30m")  # 5_400_000
    """
    if not isinstance(text, str):
        raise InvalidArgument(f"a duration must be a string, not {type(text).__name__}")
    source = text.strip().lower()
    if not source:
        raise InvalidArgument(f"empty duration: give a number and a unit, {_EXAMPLES}")
    if source.isdigit():
        raise InvalidArgument(f"duration {text!r} has no unit: {_EXAMPLES}")
    total = 0
    position = 0
    previous_rank = -1
    ranks = list(UNIT_MS)
    for match in _PART.finditer(source):
        if match.start() != position:
            break
        amount, unit = int(match.group(1)), match.group(2)
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
    return total


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


def delay_ms_of(delay: Any, what: str = "delay") -> int:
    """Milliseconds in a delay: seconds as a number, a ``timedelta``, or text (``"30s"``).

    Raises:
        InvalidArgument: not one of those, negative, not finite, or over 100 years.
    """
    if isinstance(delay, bool):
        raise InvalidArgument(f"{what} must be seconds, a timedelta or a duration such as '30s'")
    if isinstance(delay, datetime.timedelta):
        ms = delay // datetime.timedelta(milliseconds=1)
    elif isinstance(delay, (int, float)):
        if not math.isfinite(delay):
            raise InvalidArgument(f"{what} must be finite, got {delay!r}")
        if delay < 0:
            raise InvalidArgument(f"{what} must be >= 0 (seconds), got {delay!r}")
        ms = math.ceil(delay * 1000)
    elif isinstance(delay, str):
        try:
            ms = parse_duration(delay)
        except InvalidArgument as exc:
            raise InvalidArgument(f"{what}: {exc}; or give seconds as a number, e.g. 0.5") from None
    else:
        raise InvalidArgument(
            f"{what} must be seconds (a number), a timedelta or a duration such as '30s', "
            f"not {type(delay).__name__}"
        )
    return check_int(ms, f"{what} in milliseconds", low=0, high=MAX_DELAY_MS)
