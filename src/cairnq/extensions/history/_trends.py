"""Trends from the attempt history: per task name or queue, over a window ending now,
how many attempts ended, how many succeeded and failed, the throughput and failure
rate, and the run time's p50 and p95; and the same counts per time bucket for charts
(``cairnq stats --by name --since 7d``, the dashboard's Trends page, ``cq.attempts.trends``).

Summed from the hourly rollups (``_rollups``, migration ``x0028``) for the whole hours
rolled up, and read from ``cairnq_task_attempts`` joined to the tasks for the rest of the
window; from the attempts alone on a database without the rollups (``raw_trends``,
``raw_series``). Nothing is written at a settlement. A purged task's attempts stay counted
in the hours rolled up before it went. Attempts of a reference SDK's workers are not
recorded, so not counted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ...durations import duration_ms
from ...errors import InvalidArgument
from ...protocol.steps import Call, Op
from ..steps._ops import require
from ._rollups import (
    COUNTED,
    HOUR_MS,
    add_histogram,
    bucket_ms,
    ceil_hour,
    floor_hour,
    rolled_until,
    rollups_ready,
)

BY = ("name", "queue")
FAILED = ("failed", "retry", "lost")
MAX_SINCE_MS = 366 * 24 * 3_600_000
DAY_MS = 24 * 3_600_000


def check_by(value: Any) -> str:
    """What trends are grouped by: ``"name"`` or ``"queue"``.

    Raises:
        InvalidArgument: another value.
    """
    if isinstance(value, str) and value in BY:
        return value
    raise InvalidArgument(f"by must be 'name' or 'queue'; got {value!r}")


def check_since(value: Any) -> int:
    """The window of trends, ending now: a duration from one minute to 366 days.

    Raises:
        InvalidArgument: not a duration, or out of bounds.
    """
    return duration_ms(value, "since", low_ms=60_000, high_ms=MAX_SINCE_MS)


def check_buckets(value: Any) -> int:
    """How many buckets a chart's series has: a whole number from 1 to 400.

    Raises:
        InvalidArgument: another type or value.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 400:
        raise InvalidArgument(f"buckets must be a whole number from 1 to 400; got {value!r}")
    return value


@dataclass(frozen=True)
class Trend:
    """How the attempts of one task name (or queue) went over a window.

    Attributes:
        key: The task name (or queue).
        window_ms: The window's length, ending when it was read.
        attempts: Attempts that ended in it (every outcome).
        succeeded: Of them, succeeded.
        failed: Failed, failed and queued again (``retry``) or lost.
        canceled: Canceled.
        p50_ms: The median run time of the succeeded and failed attempts whose start is
            known (nearest rank, to two significant figures, rounded down), or
            ``None`` without any.
        p95_ms: Their 95th percentile, the same way.
    """

    key: str
    window_ms: int
    attempts: int
    succeeded: int
    failed: int
    canceled: int
    p50_ms: int | None
    p95_ms: int | None

    @property
    def throughput_per_hour(self) -> float:
        """Succeeded attempts per hour over the window."""
        return self.succeeded * 3_600_000 / self.window_ms

    @property
    def failure_rate(self) -> float | None:
        """Failed over succeeded and failed attempts (0 to 1), or ``None`` without any."""
        ran = self.succeeded + self.failed
        return None if ran == 0 else self.failed / ran

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "window_ms": self.window_ms,
            "attempts": self.attempts,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "canceled": self.canceled,
            "throughput_per_hour": round(self.throughput_per_hour, 3),
            "failure_rate": None if self.failure_rate is None else round(self.failure_rate, 4),
            "p50_ms": self.p50_ms,
            "p95_ms": self.p95_ms,
        }


def trends(by: Any = "name", since: Any = "7d", *, now_ms: int) -> Op[list[Trend]]:
    """The trends of each task name (``by="name"``) or queue over the ``since`` ending at
    ``now_ms``, the busiest first; validated eagerly.

    Raises:
        InvalidArgument: a bad ``by`` or ``since``.
        SchemaIncomplete: the database lacks the attempt history (``cairnq migrate``).
    """
    return _trends(check_by(by), check_since(since), now_ms)


def raw_trends(by: Any = "name", since: Any = "7d", *, now_ms: int) -> Op[list[Trend]]:
    """``trends`` read from the attempts alone, leaving the hourly rollups aside (what a
    database without them reads); validated eagerly.

    Raises:
        InvalidArgument: a bad ``by`` or ``since``.
        SchemaIncomplete: the database lacks the attempt history (``cairnq migrate``).
    """
    return _trends(check_by(by), check_since(since), now_ms, rolled=False)


def _trends(by: str, window: int, now_ms: int, *, rolled: bool = True) -> Op[list[Trend]]:
    yield from require()
    counts: dict[str, dict[str, int]] = {}
    runs: dict[str, dict[int, int]] = {}
    since, until = now_ms - window, now_ms + 1
    mark = None
    ready = rolled and (yield from rollups_ready())
    if ready:
        mark = yield from rolled_until()
    first = ceil_hour(since)
    last = None if mark is None else min(mark, floor_hour(until))
    if last is None or first >= last:
        yield from _raw(by, since, until, counts, runs)
    else:
        yield from _raw(by, since, first, counts, runs)
        hours = {"since_ms": first, "until_ms": last, "by": by}
        rows = yield Call("history_rollup_trends", hours)
        for r in rows:
            mine = counts.setdefault(str(r["key"]), {})
            for outcome in COUNTED:
                if int(r[outcome]):
                    mine[outcome] = mine.get(outcome, 0) + int(r[outcome])
        rows = yield Call("history_rollup_histograms", hours)
        histograms: dict[str, list[int]] = {}
        for r in rows:
            key = str(r["key"])
            histograms[key] = add_histogram(histograms.get(key, []), json.loads(r["histogram"]))
        for key, histogram in histograms.items():
            spread = runs.setdefault(key, {})
            for index, many in enumerate(histogram):
                if many:
                    ms = bucket_ms(index)
                    spread[ms] = spread.get(ms, 0) + many
        yield from _raw(by, last, until, counts, runs)
    found = [
        Trend(
            key,
            window,
            sum(mine.values()),
            mine.get("succeeded", 0),
            sum(mine.get(o, 0) for o in FAILED),
            mine.get("canceled", 0),
            nearest_rank(runs.get(key, {}), 50),
            nearest_rank(runs.get(key, {}), 95),
        )
        for key, mine in counts.items()
    ]
    return sorted(found, key=lambda t: (-t.attempts, t.key))


def _raw(
    by: str,
    since: int,
    until: int,
    counts: dict[str, dict[str, int]],
    runs: dict[str, dict[int, int]],
) -> Op[None]:
    """Add the attempts that ended in [``since``, ``until``), read from the history."""
    if since >= until:
        return
    rows = yield Call("history_trends", {"since_ms": since, "until_ms": until, "by": by})
    for r in rows:
        key, outcome, many = str(r["key"]), str(r["outcome"]), int(r["attempts"])
        mine = counts.setdefault(key, {})
        mine[outcome] = mine.get(outcome, 0) + many
        if r["run_ms"] is not None:
            spread = runs.setdefault(key, {})
            ms = max(0, int(r["run_ms"]))
            spread[ms] = spread.get(ms, 0) + many


def nearest_rank(spread: dict[int, int], percent: int) -> int | None:
    """The ``percent``-th percentile (nearest rank) of run times given as {ms: count}."""
    total = sum(spread.values())
    if not total:
        return None
    rank = -(-total * percent // 100)
    seen = 0
    for ms in sorted(spread):
        seen += spread[ms]
        if seen >= rank:
            return ms
    return max(spread)


def series(
    by: Any = "name", since: Any = "1d", buckets: Any = 24, *, now_ms: int
) -> Op[dict[str, list[tuple[int, int]]]]:
    """Per task name (or queue), ``buckets`` counts of (succeeded, failed) attempts over
    the ``since`` ending at ``now_ms``, oldest first; validated eagerly.

    Raises:
        InvalidArgument: a bad ``by``, ``since`` or ``buckets``.
        SchemaIncomplete: the database lacks the attempt history.
    """
    return _series(check_by(by), check_since(since), check_buckets(buckets), now_ms)


def raw_series(
    by: Any = "name", since: Any = "1d", buckets: Any = 24, *, now_ms: int
) -> Op[dict[str, list[tuple[int, int]]]]:
    """``series`` read from the attempts alone, leaving the hourly rollups aside (what a
    database without them reads); validated eagerly."""
    return _series(check_by(by), check_since(since), check_buckets(buckets), now_ms, rolled=False)


def _series(
    by: str, window: int, buckets: int, now_ms: int, *, rolled: bool = True
) -> Op[dict[str, list[tuple[int, int]]]]:
    yield from require()
    width = -(-window // buckets)
    since, until = now_ms + 1 - width * buckets, now_ms + 1
    mark = None
    ready = rolled and (yield from rollups_ready())
    if ready:
        mark = yield from rolled_until()
    # The hours rolled up that lie in one bucket whole come from the rollups; the rest
    # of the window (an hour across a bucket's edge, the hours not rolled up) from the
    # attempts.
    whole: set[int] = set()
    if mark is not None:
        last = min(mark, floor_hour(until))
        for hour in range(ceil_hour(since), last, HOUR_MS):
            if (hour - since) // width == (hour + HOUR_MS - 1 - since) // width:
                whole.add(hour)
    found: dict[str, list[tuple[int, int]]] = {}

    def add(key: str, bucket: int, succeeded: int, failed: int) -> None:
        counts = found.setdefault(key, [(0, 0)] * buckets)
        if 0 <= bucket < buckets:
            was = counts[bucket]
            counts[bucket] = (was[0] + succeeded, was[1] + failed)

    if whole:
        rows = yield Call(
            "history_rollup_series",
            {"since_ms": min(whole), "until_ms": max(whole) + HOUR_MS, "by": by},
        )
        for r in rows:
            hour = int(r["hour_ms"])
            if hour in whole:
                add(str(r["key"]), (hour - since) // width, int(r["succeeded"]), int(r["failed"]))
    for low, high in _gaps(since, until, sorted(whole)):
        rows = yield Call(
            "history_trends_series",
            {"since_ms": low, "until_ms": high, "by": by, "origin_ms": since, "bucket_ms": width},
        )
        for r in rows:
            add(str(r["key"]), int(r["bucket"]), int(r["succeeded"]), int(r["failed"]))
    return found


def _gaps(since: int, until: int, hours: list[int]) -> list[tuple[int, int]]:
    """The ranges of [``since``, ``until``) that the whole ``hours`` (sorted) leave."""
    gaps, at = [], since
    for hour in hours:
        if hour > at:
            gaps.append((at, hour))
        at = hour + HOUR_MS
    if at < until:
        gaps.append((at, until))
    return gaps
