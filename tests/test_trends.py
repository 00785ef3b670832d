"""Trends from the attempt history: per task name or queue over a window ending now,
the attempts that ended, succeeded, failed, the failure rate, throughput and run time
p50/p95, and counts per bucket for charts; from ``cq.attempts.trends``, ``cairnq stats
--by`` and the dashboard's Trends page. Bad options are refused."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import pytest

from cairnq import InvalidArgument
from cairnq.cli import main
from cairnq.dashboard import create_app
from cairnq.extensions.history._hooks import record
from cairnq.extensions.history._trends import series, trends
from cairnq.kernel.points import AttemptEnd
from cairnq.models import Lease
from cairnq.testing import FakeClock

from ._db import Database
from .test_cli import db_args
from .test_dashboard import http

START = 1_800_000_000_000
DAY = 24 * 3_600_000


async def _ran(db: Database) -> None:
    """Three ``ok`` tasks that succeed and two ``bad`` ones (queue ``slow``) that fail."""
    worker = db.worker(poll_interval_ms=20, retry_backoff_ms=0, queues=["default", "slow"])

    @worker.task
    async def ok(ctx: Any) -> Any:
        return 1

    @worker.task
    async def bad(ctx: Any) -> Any:
        raise RuntimeError("no")

    async with db.client() as cq:
        for _ in range(3):
            await cq.submit("ok")
        for _ in range(2):
            await cq.submit("bad", queue="slow", max_attempts=1)
    await worker.run(until_idle=True)


async def test_trends_count_each_names_attempts_and_failures(db: Database) -> None:
    await _ran(db)
    async with db.client() as cq:
        by_name = {t.key: t for t in await cq.attempts.trends("name", "1d")}
        by_queue = {t.key: t for t in await cq.attempts.trends(by="queue", since="7d")}
    ok, bad = by_name["ok"], by_name["bad"]
    assert (ok.attempts, ok.succeeded, ok.failed, ok.failure_rate) == (3, 3, 0, 0.0)
    assert (bad.attempts, bad.succeeded, bad.failed, bad.failure_rate) == (2, 0, 2, 1.0)
    assert ok.throughput_per_hour == pytest.approx(3 / 24)
    assert ok.p50_ms is not None and ok.p95_ms is not None and ok.p50_ms <= ok.p95_ms
    assert set(by_queue) == {"default", "slow"} and by_queue["slow"].failed == 2


async def _timed(db: Database, clock: FakeClock, run_ms: list[int], name: str = "timed") -> None:
    """One task of ``name`` per entry, each with an attempt that ran that long, ending now."""
    async with db.client(clock=clock) as cq:
        ends = []
        for i, ms in enumerate(run_ms):
            task = await cq.submit(name)
            ends.append(
                AttemptEnd(Lease(task.id, 1, 1000 + i), "w", clock.now_ms() - ms, "succeeded")
            )
        await cq.backend.arun(record(ends, None), write=True)


async def test_run_time_percentiles_are_the_nearest_rank_of_the_attempts(db: Database) -> None:
    clock = FakeClock(START)
    await _timed(db, clock, [ms * 100 for ms in range(20, 0, -1)])
    async with db.client(clock=clock) as cq:
        (found,) = await cq.backend.arun(trends("name", "1d", now_ms=clock.now_ms()), write=False)
    assert (found.key, found.attempts, found.p50_ms, found.p95_ms) == ("timed", 20, 1000, 1900)


async def test_attempts_older_than_the_window_are_left_out(db: Database) -> None:
    clock = FakeClock(START)
    await _timed(db, clock, [100, 200])
    clock.advance(2 * DAY)
    async with db.client(clock=clock) as cq:
        day = await cq.backend.arun(trends("name", "1d", now_ms=clock.now_ms()), write=False)
        week = await cq.backend.arun(trends("name", "7d", now_ms=clock.now_ms()), write=False)
    assert day == [] and [t.attempts for t in week] == [2]


async def test_the_series_puts_each_attempt_in_the_bucket_it_ended_in(db: Database) -> None:
    clock = FakeClock(START)
    await _timed(db, clock, [100])
    clock.advance(DAY // 2)
    await _timed(db, clock, [100, 100])
    async with db.client(clock=clock) as cq:
        found = await cq.backend.arun(series("name", "1d", 4, now_ms=clock.now_ms()), write=False)
    assert found == {"timed": [(0, 0), (1, 0), (0, 0), (2, 0)]}


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"by": "status"}, "by must be 'name' or 'queue'"),
        ({"by": None}, "by must be 'name' or 'queue'"),
        ({"since": "0s"}, "since"),
        ({"since": "400d"}, "since"),
        ({"since": "soon"}, "since"),
        ({"since": True}, "since"),
    ],
)
async def test_a_bad_trends_option_is_refused(
    db: Database, kwargs: dict[str, Any], words: str
) -> None:
    async with db.client() as cq:
        with pytest.raises(InvalidArgument, match=words):
            await cq.attempts.trends(**kwargs)


@pytest.mark.parametrize("value", [0, 401, "24", True])
def test_a_bad_series_bucket_count_is_refused(value: Any) -> None:
    with pytest.raises(InvalidArgument, match="buckets must be a whole number"):
        series("name", "1d", value, now_ms=START)


def test_cairnq_stats_by_name_prints_a_row_per_task_name(db: Database) -> None:
    asyncio.run(_ran(db))
    out = io.StringIO()
    assert main(["stats", "--by", "name", "--since", "7d", *db_args(db)], out=out) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].split()[:4] == ["NAME", "ATTEMPTS", "SUCCEEDED", "FAILED"]
    rows = {line.split()[0]: line.split()[1:5] for line in lines[1:]}
    assert rows == {"ok": ["3", "3", "0", "0.0"], "bad": ["2", "0", "2", "100.0"]}


def test_cairnq_stats_by_queue_as_json(db: Database) -> None:
    asyncio.run(_ran(db))
    out = io.StringIO()
    assert main(["stats", "--by", "queue", "--json", *db_args(db)], out=out) == 0
    found = {row["key"]: row for row in json.loads(out.getvalue())}
    assert (found["slow"]["failed"], found["default"]["succeeded"]) == (2, 3)


def test_cairnq_stats_with_a_bad_since_is_an_error(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["stats", "--by", "name", "--since", "soon", *db_args(db)], out=io.StringIO())
    assert code == 1 and "since" in capsys.readouterr().err


async def test_the_dashboard_trends_page_shows_a_row_and_chart_per_name(db: Database) -> None:
    await _ran(db)
    async with db.client() as cq, http(create_app(cq)) as client:
        page = (await client.get("/trends", params={"by": "name", "since": "1d"})).text
        refused = await client.get("/trends", params={"since": "3d"})
    assert page.count("data-trend>") == 2 and "<svg" in page
    assert refused.status_code == 400
