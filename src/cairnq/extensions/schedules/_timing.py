"""When a schedule's slots fall: a cron expression in a time zone, or a fixed interval.

A slot is an instant in epoch milliseconds (UTC). Everything here is pure
arithmetic on instants: no IO, and no clock except the default reference
instant of ``Timing.parse``'s five-year check.

Intervals count from the Unix epoch, so every process computes the same slots.
Cron expressions are evaluated in the zone's wall-clock time: ``cronsim`` walks
naive local datetimes and each one maps to a single instant (see
``_instant_ms``). That mapping never decreases, which is what makes a range of
slots split exactly: ``slots(a, c) == slots(a, b) + slots(b, c)``.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..._clock import SYSTEM_CLOCK
from ...durations import (
    MAX_DURATION_MS,
    duration_ms,
    exact_duration,
    format_duration,
    parse_duration,
)
from ...errors import InvalidArgument

if TYPE_CHECKING:
    from cronsim import CronSim

__all__ = ["Timing"]

ALIASES: dict[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MIN_EVERY_MS = 1_000
HORIZON_MS = 1_830 * 86_400_000
"""How far ahead a cron slot is looked for: five years, leap days included, and a day more."""

_NEED_CRON = (
    'cron schedules need the "cron" extra (cronsim): from the cairnq source checkout, '
    'pip install ".[cron]"; or use every='
)
_UTC = datetime.timezone.utc
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=_UTC)
_MS = datetime.timedelta(milliseconds=1)
_SECOND = datetime.timedelta(seconds=1)
# Cron slots lie in (_CRON_MIN_MS, _CRON_MAX_MS]: datetime's range less a day at
# each end, so that no UTC offset takes a wall time out of that range.
_CRON_MIN_MS = (datetime.datetime(1, 1, 2, tzinfo=_UTC) - _EPOCH) // _MS
_CRON_MAX_MS = (datetime.datetime(9999, 12, 30, tzinfo=_UTC) - _EPOCH) // _MS


@dataclass(frozen=True)
class Timing:
    """When a schedule's slots fall: a cron expression in a time zone, or a fixed interval.

    Build one with ``Timing.parse``, which validates. Slots are epoch
    milliseconds; each method takes and returns instants, never wall times.

    Attributes:
        cron: The normalised expression (aliases expanded, single spaces), or None.
        every_ms: The interval in milliseconds, or None.
        tz: The IANA zone the expression is read in; ``"UTC"`` for intervals.

    Example::

        timing = Timing.parse(cron="30 2 * * *", tz="Europe/Paris")
        timing.next_slot(0)  # 5_400_000: 1970-01-01 02:30 in Paris, 01:30 UTC
    """

    cron: str | None
    every_ms: int | None
    tz: str

    @classmethod
    def parse(
        cls,
        *,
        cron: str | None = None,
        every: str | float | datetime.timedelta | None = None,
        tz: str | None = None,
        now_ms: int | None = None,
    ) -> Timing:
        """Validate a cron expression (with its zone) or an interval.

        Args:
            cron: Five fields (minute hour day-of-month month day-of-week), six
                with seconds first (``"*/20 * * * * *"``), or one of the aliases
                ``@yearly`` ``@annually`` ``@monthly`` ``@weekly`` ``@daily``
                ``@midnight`` ``@hourly``. Needs the ``cron`` extra (cronsim).
            every: An interval of at least one second: seconds as a number
                (``3600`` is hourly), a string with a unit (``"90s"``,
                ``"1h30m"``) or a ``timedelta``; a part of a millisecond is
                rounded up.
            tz: The IANA zone whose wall clock ``cron`` is read in (default
                ``"UTC"``). Only for ``cron``.
            now_ms: Where the check that ``cron`` fires within five years
                starts; the system clock when None.

        Returns:
            The validated ``Timing``.

        Raises:
            InvalidArgument: Not exactly one of ``cron`` and ``every``; an
                expression cronsim refuses, ``@reboot`` or another unknown
                alias; an expression with no slot in the five years after
                ``now_ms``; an unknown zone; ``tz`` with ``every``; an interval
                under one second or of another type (bool included);
                ``cron`` without the cron extra installed.

        Example::

            Timing.parse(every="90s")  # Timing(cron=None, every_ms=90000, tz='UTC')
            Timing.parse(cron="@daily", tz="America/New_York").cron  # '0 0 * * *'
        """
        if (cron is None) == (every is None):
            got = "both" if cron is not None else "neither"
            raise InvalidArgument(
                f"give exactly one of cron= (a cron expression) or every= (an interval); got {got}"
            )
        if every is not None:
            if tz is not None:
                raise InvalidArgument(
                    f"tz={tz!r} given with every=: tz applies to cron schedules;"
                    " intervals are counted in absolute time"
                )
            return cls(cron=None, every_ms=_interval_ms(every), tz="UTC")
        zone_name = "UTC" if tz is None else tz
        _zone(zone_name)
        expression = _normalise(cron)
        cron_sim, cron_error = _cronsim()
        try:
            cron_sim(expression, datetime.datetime(2000, 1, 1))
        except cron_error as exc:
            raise InvalidArgument(
                f"invalid cron expression {cron!r}: {exc}; give 5 fields (minute hour"
                " day-of-month month day-of-week), 6 with seconds first, or an alias"
                " such as @daily"
            ) from None
        timing = cls(cron=expression, every_ms=None, tz=zone_name)
        start = SYSTEM_CLOCK.now_ms() if now_ms is None else _instant_arg(now_ms, "now_ms")
        if timing.next_slot(start) is None:
            raise InvalidArgument(
                f"cron expression {cron!r} has no slot in the five years after"
                f" {_iso(start)} ({zone_name}): it would never run"
            )
        return timing

    def slots(self, after_ms: int, through_ms: int, *, limit: int) -> list[int]:
        """The earliest ``limit`` slots ``s`` with ``after_ms < s <= through_ms``.

        Args:
            after_ms: Exclusive start of the range (epoch ms).
            through_ms: Inclusive end of the range (epoch ms).
            limit: How many slots at most (at least 1).

        Returns:
            The slots, ascending and distinct; empty when there are none.

        Raises:
            InvalidArgument: An instant that is not an int, or ``limit`` below 1.

        Example::

            Timing.parse(every="1m").slots(0, 180_000, limit=10)  # [60000, 120000, 180000]
        """
        _instant_arg(after_ms, "after_ms")
        _instant_arg(through_ms, "through_ms")
        _count_arg(limit, "limit")
        if self.every_ms is not None:
            every = self.every_ms
            first = after_ms // every + 1
            last = min(through_ms // every, first + limit - 1)
            return [k * every for k in range(first, last + 1)]
        found: list[int] = []
        for slot in self._cron_after(after_ms):
            if slot > through_ms:
                break
            found.append(slot)
            if len(found) == limit:
                break
        return found

    def next_slot(self, after_ms: int) -> int | None:
        """The first slot later than ``after_ms``.

        Args:
            after_ms: The instant the slot must follow (epoch ms).

        Returns:
            The slot, or None when a cron expression has none within five years
            (``HORIZON_MS``). An interval always has one.

        Raises:
            InvalidArgument: ``after_ms`` is not an int.

        Example::

            Timing.parse(every="1m").next_slot(60_000)  # 120000
        """
        _instant_arg(after_ms, "after_ms")
        if self.every_ms is not None:
            return (after_ms // self.every_ms + 1) * self.every_ms
        for slot in self._cron_after(after_ms):
            return slot if slot - after_ms <= HORIZON_MS else None
        return None

    def last_slot(self, at_or_before_ms: int, *, not_before_ms: int) -> int | None:
        """The latest slot ``s`` with ``not_before_ms < s <= at_or_before_ms``.

        Args:
            at_or_before_ms: Inclusive end of the range (epoch ms).
            not_before_ms: Exclusive start of the range (epoch ms).

        Returns:
            The slot, or None when the range holds none.

        Raises:
            InvalidArgument: An instant that is not an int.

        Example::

            Timing.parse(every="1m").last_slot(150_000, not_before_ms=0)  # 120000
        """
        _instant_arg(at_or_before_ms, "at_or_before_ms")
        _instant_arg(not_before_ms, "not_before_ms")
        if self.every_ms is not None:
            slot = at_or_before_ms // self.every_ms * self.every_ms
            return slot if slot > not_before_ms else None
        return self._cron_last(at_or_before_ms, not_before_ms)

    def count_slots(self, after_ms: int, through_ms: int, *, cap: int) -> int:
        """How many slots ``s`` have ``after_ms < s <= through_ms``, counting up to ``cap``.

        Args:
            after_ms: Exclusive start of the range (epoch ms).
            through_ms: Inclusive end of the range (epoch ms).
            cap: The most to count (at least 1): a cron range stops there.

        Returns:
            ``min(cap, number of slots in the range)``.

        Raises:
            InvalidArgument: An instant that is not an int, or ``cap`` below 1.

        Example::

            Timing.parse(every="1s").count_slots(0, 86_400_000, cap=1_000)  # 1000
        """
        _instant_arg(after_ms, "after_ms")
        _instant_arg(through_ms, "through_ms")
        _count_arg(cap, "cap")
        if self.every_ms is not None:
            return max(0, min(cap, through_ms // self.every_ms - after_ms // self.every_ms))
        counted = 0
        for slot in self._cron_after(after_ms):
            if slot > through_ms:
                break
            counted += 1
            if counted == cap:
                break
        return counted

    def describe(self) -> str:
        """The timing for people: ``"every 1m30s"`` or ``"0 9 * * 1-5 (Europe/Paris)"``.

        Returns:
            The interval as a duration, or the expression and its zone.

        Example::

            Timing.parse(every=90).describe()  # 'every 1m30s'
        """
        if self.every_ms is not None:
            return f"every {_duration_text(self.every_ms)}"
        return f"{self.cron} ({self.tz})"

    def _cron_after(self, after_ms: int) -> Iterator[int]:
        """The cron slots later than ``after_ms``: ascending, distinct, until cronsim gives up."""
        assert self.cron is not None
        cron_sim, _ = _cronsim()
        zone = _zone(self.tz)
        latest = max(after_ms, _CRON_MIN_MS)
        if latest >= _CRON_MAX_MS:
            return
        start = _wall(latest, zone)
        # ``start`` maps to an instant <= latest (it is latest's own wall time, or
        # that time's first pass), and the mapping never decreases: no wall time
        # up to ``start`` holds a slot after ``latest``.
        walls = cron_sim(self.cron, start)
        while True:
            try:
                slot = _instant_ms(next(walls), zone)
            except (StopIteration, OverflowError):
                return
            if slot > _CRON_MAX_MS:
                return
            # Wall times after ``start`` may still map to <= latest (the repeated
            # hour's first pass, or a gap collapsing onto the slot just yielded).
            if slot > latest:
                latest = slot
                yield slot

    def _cron_last(self, at_or_before_ms: int, not_before_ms: int) -> int | None:
        """The latest cron slot in ``(not_before_ms, at_or_before_ms]``, walking backwards."""
        assert self.cron is not None
        cron_sim, _ = _cronsim()
        zone = _zone(self.tz)
        floor = max(not_before_ms, _CRON_MIN_MS)
        top = min(at_or_before_ms, _CRON_MAX_MS)
        if top <= floor:
            return None
        upper = _wall(top, zone) + _SECOND
        # ``upper`` must map later than ``top``: then so does every later wall
        # time, and the backward walk from it skips no slot <= top.
        while (mapped := _instant_ms(upper, zone)) <= top:
            upper += datetime.timedelta(seconds=(top - mapped) // 1_000 + 1)
        walls = cron_sim(self.cron, upper, reverse=True)
        while True:
            try:
                slot = _instant_ms(next(walls), zone)
            except (StopIteration, OverflowError):
                return None
            if slot <= floor:
                return None
            if slot <= top:
                return slot


def _cronsim() -> tuple[type[CronSim], type[Exception]]:
    """cronsim's iterator and error classes, imported when a cron timing needs them."""
    try:
        from cronsim import CronSim, CronSimError
    except ImportError:
        raise InvalidArgument(_NEED_CRON) from None
    return CronSim, CronSimError


def _normalise(cron: object) -> str:
    """The expression with single spaces, an alias expanded to its five fields."""
    if not isinstance(cron, str):
        raise InvalidArgument(
            f"a cron expression must be a string such as '0 9 * * 1-5', not {type(cron).__name__}"
        )
    expression = " ".join(cron.split())
    if not expression.startswith("@"):
        return expression
    alias = expression.lower()
    if alias == "@reboot":
        raise InvalidArgument(
            "cron alias '@reboot' is not accepted: a schedule's slots are instants,"
            " and start-up is none; use " + ", ".join(ALIASES)
        )
    if alias not in ALIASES:
        raise InvalidArgument(f"unknown cron alias {cron!r}: use " + ", ".join(ALIASES))
    return ALIASES[alias]


def _zone(name: object) -> ZoneInfo:
    """The IANA zone called ``name``."""
    if not isinstance(name, str):
        raise InvalidArgument(
            f"tz must be an IANA zone name such as 'Europe/Paris', not {type(name).__name__}"
        )
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidArgument(
            f"unknown time zone {name!r}: give an IANA zone name such as 'Europe/Paris' or 'UTC'"
        ) from None


def _interval_ms(every: object) -> int:
    """Milliseconds in an interval: seconds as a number, a string with a unit, or a timedelta."""
    return duration_ms(every, "every", low_ms=MIN_EVERY_MS, high_ms=MAX_DURATION_MS)


def _instant_arg(value: object, name: str) -> int:
    """``value``, an instant in epoch milliseconds."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name} must be epoch milliseconds (an int), not {value!r}")
    return value


def _count_arg(value: object, name: str) -> int:
    """``value``, a count of at least one."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgument(f"{name} must be an int of at least 1, not {value!r}")
    return value


def _wall(ms: int, zone: ZoneInfo) -> datetime.datetime:
    """The naive wall-clock time in ``zone`` at instant ``ms``, to the second at or before."""
    moment = _EPOCH + datetime.timedelta(seconds=ms // 1_000)
    return moment.astimezone(zone).replace(tzinfo=None, fold=0)


def _instant_ms(wall: datetime.datetime, zone: ZoneInfo) -> int:
    """The one instant a naive wall time in ``zone`` stands for.

    A time that occurs once is that instant; one that occurs twice (the hour a
    clock falls back) is its first occurrence; one that does not occur (the hour
    a clock springs forward) is the first instant after the gap, the transition
    itself. The result never decreases as ``wall`` increases.
    """
    first = wall.replace(tzinfo=zone, fold=0)
    at = (first - _EPOCH) // _MS
    if first.astimezone(_UTC).astimezone(zone).replace(tzinfo=None, fold=0) == wall:
        return at
    # In a gap, fold=0 reads the wall time with the offset from before the
    # transition and fold=1 with the one after: the transition lies in (early, at].
    early = (wall.replace(tzinfo=zone, fold=1) - _EPOCH) // _MS
    return _transition_ms(early, at, zone)


def _transition_ms(before_ms: int, after_ms: int, zone: ZoneInfo) -> int:
    """The first whole second in ``(before_ms, after_ms]`` at ``after_ms``'s UTC offset."""
    low, high = before_ms // 1_000, after_ms // 1_000
    target = _offset_at(high, zone)
    # Invariant: the offset at ``high`` is ``target``; at ``low`` it is not.
    while high - low > 1:
        middle = (low + high) // 2
        if _offset_at(middle, zone) == target:
            high = middle
        else:
            low = middle
    return high * 1_000


def _offset_at(seconds: int, zone: ZoneInfo) -> datetime.timedelta | None:
    """The UTC offset ``zone`` has at an instant given in epoch seconds."""
    return (_EPOCH + datetime.timedelta(seconds=seconds)).astimezone(zone).utcoffset()


def _iso(ms: int) -> str:
    """An instant as ISO 8601 UTC text, for messages."""
    try:
        moment = _EPOCH + datetime.timedelta(milliseconds=ms)
    except OverflowError:
        return f"{ms} ms"
    return moment.isoformat().replace("+00:00", "Z")


def _duration_text(ms: int) -> str:
    """``format_duration``'s text when it reads back exactly, else every unit spelled out."""
    text = format_duration(ms)
    return text if parse_duration(text) == ms else exact_duration(ms)
