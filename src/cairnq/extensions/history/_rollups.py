"""Hourly rollups of the attempt history, for the trends (``docs/trends.md``).

``cairnq_attempt_rollups`` (migration ``x0028_attempt_rollups.sql``) holds one row per
hour of attempt end, task name and queue: the attempts per outcome, the timed ones' total
run time and count, and their run times as a histogram whose buckets are the run time
rounded down to two significant figures, the very values the raw trends read rank. So a
percentile read from the rollups equals the one read from the attempts.

A worker's part (``RollupComponent``) rolls up, once a minute under the named lease
``cairnq.history.rollups``, every hour that is over, once it is: from the last mark
(``cairnq_attempt_rollup_marks``) back ``REDO_HOURS`` hours, so an attempt recorded late
into an hour rolled already is counted when the next hour is rolled up, up to the
current hour. Rolling
an hour again replaces its rows (one transaction per chunk of hours). Nothing is written at
a claim or a settlement. The rows are aggregates: they outlive the tasks they count.

The trends (``_trends``) read the rollups for the whole hours before the mark and the
attempts themselves for the rest of the window (its first, partial hour, and everything
from the mark on).
"""

from __future__ import annotations

import json
import logging
import operator
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from ... import kernel
from ...backends import Backend, clock_of
from ...kernel.periodic import ErrorHook, NamedLease, PeriodicJob
from ...protocol.steps import Call, Op, Row
from .._base import Part

log = logging.getLogger("cairnq.worker")

ROLLUPS_MIGRATION = "x0028_attempt_rollups.sql"
HOUR_MS = 3_600_000
REDO_HOURS = 3
CHUNK_HOURS = 24
LEASE_NAME = "cairnq.history.rollups"
INTERVAL_MS = 60_000
LEASE_TTL_MS = 600_000
COUNTED = ("succeeded", "failed", "retry", "canceled", "snoozed", "lost", "released")


def floor_hour(ms: int) -> int:
    """The start of the hour ``ms`` falls in."""
    return ms - ms % HOUR_MS


def ceil_hour(ms: int) -> int:
    """The start of the first hour that starts at or after ``ms``."""
    return -(-ms // HOUR_MS) * HOUR_MS


def rollups_ready() -> Op[bool]:
    """Whether the database has the rollup tables (``x0028_attempt_rollups.sql``)."""
    applied = yield from kernel.applied_migrations()
    return ROLLUPS_MIGRATION in applied


def bucket_index(run_ms: int) -> int:
    """The index of a run time's histogram bucket, from a run time rounded down to two
    significant figures: 0 to 99 ms are their own buckets, then 90 buckets a decade."""
    if run_ms < 100:
        return max(0, run_ms)
    digits = len(str(run_ms))
    scale: int = 10 ** (digits - 2)
    return 100 + (digits - 3) * 90 + run_ms // scale - 10


def bucket_ms(index: int) -> int:
    """The run time a histogram bucket starts at (``bucket_index``'s inverse)."""
    if index < 100:
        return index
    decade, mantissa = divmod(index - 100, 90)
    scale: int = 10 ** (decade + 1)
    return (mantissa + 10) * scale


def add_histogram(into: list[int], more: list[int]) -> list[int]:
    """The bucket-wise sum of two histograms (lists of counts by bucket index)."""
    if len(more) > len(into):
        into, more = more, into
    return [*map(operator.add, into, more), *into[len(more) :]]


def rolled_until() -> Op[int | None]:
    """Where the rollups reach: every hour before it is rolled up (``None`` before the
    first rollup)."""
    rows = yield Call("history_rollup_marked", {})
    return None if not rows else int(rows[0]["rolled_until_ms"])


@dataclass
class _Group:
    counts: dict[str, int] = field(default_factory=dict)
    run_ms: int = 0
    runs: int = 0
    histogram: list[int] = field(default_factory=list)


def rollup_rows(source: Sequence[Row]) -> list[list[object]]:
    """The rollup rows of ``history_rollup_source``'s groups, one per (hour, name, queue)."""
    found: dict[tuple[int, str, str], _Group] = {}
    for r in source:
        key = (int(r["hour_ms"]), str(r["name"]), str(r["queue"]))
        group = found.setdefault(key, _Group())
        many, outcome = int(r["attempts"]), str(r["outcome"])
        group.counts[outcome] = group.counts.get(outcome, 0) + many
        if r["run_ms"] is not None:
            bucket = bucket_index(int(r["run_ms"]))
            if bucket >= len(group.histogram):
                group.histogram.extend([0] * (bucket + 1 - len(group.histogram)))
            group.histogram[bucket] += many
            group.runs += many
            group.run_ms += int(r["total_ms"])
    return [
        [
            hour,
            name,
            queue,
            sum(group.counts.values()),
            *(group.counts.get(outcome, 0) for outcome in COUNTED),
            group.run_ms,
            group.runs,
            json.dumps(group.histogram, separators=(",", ":")),
        ]
        for (hour, name, queue), group in sorted(found.items())
    ]


def roll(since_ms: int, until_ms: int) -> Op[int]:
    """Roll up the hours in [``since_ms``, ``until_ms``) (whole hours), replacing their
    rows, and move the mark to ``until_ms`` (never back), in one transaction; returns the
    rows written."""
    rows = yield from rolled_rows(since_ms, until_ms)
    return (yield from store(since_ms, until_ms, rows))


def rolled_rows(since_ms: int, until_ms: int) -> Op[list[list[object]]]:
    """The rollup rows of the hours in [``since_ms``, ``until_ms``): a read."""
    source = yield Call("history_rollup_source", {"since_ms": since_ms, "until_ms": until_ms})
    return rollup_rows(source)


def store(since_ms: int, until_ms: int, rows: list[list[object]]) -> Op[int]:
    """Replace the rollup rows of the hours in [``since_ms``, ``until_ms``) with ``rows``
    and move the mark to ``until_ms`` (never back); returns the rows written."""
    yield Call("history_rollup_clear", {"since_ms": since_ms, "until_ms": until_ms})
    if rows:
        yield Call(
            "history_rollup_write",
            {"rows": json.dumps(rows, ensure_ascii=False, separators=(",", ":"))},
        )
    yield Call("history_rollup_mark", {"until_ms": until_ms})
    return len(rows)


def first_ended() -> Op[int | None]:
    """The end of the first recorded attempt, or ``None``."""
    rows = yield Call("history_rollup_first", {})
    value = rows[0]["first_ended_ms"] if rows else None
    return None if value is None else int(value)


def chunks(mark: int | None, first_ms: int | None, now_ms: int) -> list[tuple[int, int]]:
    """The ranges of hours a turn at ``now_ms`` rolls up, a transaction each: from the
    ``REDO_HOURS`` before ``mark`` (from the first attempt's hour, before the first
    rollup) to the current hour, ``CHUNK_HOURS`` at most each."""
    if mark is None:
        start = floor_hour(now_ms if first_ms is None else first_ms)
    else:
        start = mark - REDO_HOURS * HOUR_MS
    end = floor_hour(now_ms)
    found = []
    while start < end:
        stop = min(end, start + CHUNK_HOURS * HOUR_MS)
        found.append((start, stop))
        start = stop
    return found


async def roll_up(backend: Backend, now_ms: int) -> int:
    """One turn: once an hour is over, roll it up with the ``REDO_HOURS`` before the mark
    again (``chunks``); nothing while the mark is the current hour. Returns the rollup
    rows written.

    Each chunk's attempts are read outside any write transaction; only replacing its
    rows and moving the mark write, so a turn holds SQLite's write lock briefly.
    """
    mark = await backend.arun(rolled_until(), write=False)
    if mark is not None and floor_hour(now_ms) <= mark:
        return 0
    first = None if mark is not None else await backend.arun(first_ended(), write=False)
    written = 0
    for start, stop in chunks(mark, first, now_ms):
        rows = await backend.arun(rolled_rows(start, stop), write=False)
        written += await backend.arun(store(start, stop, rows), write=True)
    return written


def now_of(backend: Backend) -> int:
    """Now, on ``backend``'s clock (the host's when it has none)."""
    clock = clock_of(backend)
    return clock.now_ms() if clock is not None else int(time.time() * 1000)


class RollupComponent(Part):
    """The history's worker part: rolls up the attempt history every ``interval_ms``
    under its named lease, on a database with the rollup tables (looked up again each
    turn until it has them)."""

    name = "history rollups"

    def __init__(
        self,
        backend: Backend,
        worker_id: str,
        *,
        report: ErrorHook,
        interval_ms: int = INTERVAL_MS,
        lease_ttl_ms: int = LEASE_TTL_MS,
    ) -> None:
        self.backend = backend
        self.worker_id = worker_id
        self.ready = False
        self.job = PeriodicJob(
            LEASE_NAME,
            self.tick,
            interval_ms=interval_ms,
            first_delay_ms=0,
            on_error=report,
            lease=NamedLease(backend, holder=worker_id, ttl_ms=lease_ttl_ms),
            phase="history",
            context={"worker_id": worker_id},
            when=self.has_tables,
        )

    async def has_tables(self) -> bool:
        """Whether the database has the rollup tables (read again while it has not)."""
        if not self.ready:
            self.ready = await self.backend.arun(rollups_ready(), write=False)
        return self.ready

    async def tick(self) -> int:
        """Roll up once; returns the rollup rows written."""
        written = await roll_up(self.backend, now_of(self.backend))
        if written:
            log.debug(
                "history rollup wrote %d row(s)",
                written,
                extra={"worker_id": self.worker_id, "phase": "history"},
            )
        return written
