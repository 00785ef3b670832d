"""Timed pauses: ``pause_queue(..., until=...)`` and ``pause_task(..., until=...)`` end by
themselves, in the clients, the command line and a worker's claims.

The records take their time from a ``FakeClock``; the worker test gives the worker a
``FakeClock`` too, and moves it past the pause's end.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from cairnq import InvalidArgument
from cairnq.testing import FakeClock

from ._db import Database
from ._waits import ClaimTurns
from .test_cli import run_on
from .test_pause import _eventually, _true, pause_refreshes

START = 1_800_000_000_000
UTC = datetime.timezone.utc


def _at(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=UTC)


async def test_a_pause_for_a_duration_ends_by_itself_when_the_duration_has_passed(
    db: Database,
) -> None:
    clock = FakeClock(START)
    async with db.client(clock=clock) as cq:
        pause = await cq.pauses.pause_queue("emails", until="10m")
        assert pause.resume_at_ms == START + 600_000
        clock.advance(599_999)
        assert [p.target for p in await cq.pauses.list()] == ["emails"]
        clock.advance(1)
        assert await cq.pauses.list() == []
        assert await cq.pauses.resume_queue("emails") is None


async def test_a_pause_until_an_aware_datetime_ends_at_that_instant(db: Database) -> None:
    clock = FakeClock(START)
    end = START + 3_600_000
    async with db.client(clock=clock) as cq:
        pause = await cq.pauses.pause_task("report.build", until=_at(end))
        assert pause.resume_at_ms == end
        assert await cq.pauses.list() == [pause]
        clock.advance(3_600_000)
        assert await cq.pauses.list() == []


async def test_pausing_again_keeps_the_first_pause_and_takes_the_latest_end(
    db: Database,
) -> None:
    clock = FakeClock(START)
    async with db.client(clock=clock) as cq:
        first = await cq.pauses.pause_queue("emails", by="alice", until="1h")
        clock.advance(1_000)
        longer = await cq.pauses.pause_queue("emails", by="bob", until="2h")
        assert (longer.paused_at_ms, longer.paused_by) == (first.paused_at_ms, "alice")
        assert longer.resume_at_ms == START + 1_000 + 7_200_000
        endless = await cq.pauses.pause_queue("emails")
        assert endless.resume_at_ms is None
        clock.advance(10 * 3_600_000)
        assert await cq.pauses.list() == [endless]


async def test_pausing_after_a_timed_pause_ended_starts_a_new_pause(db: Database) -> None:
    clock = FakeClock(START)
    async with db.client(clock=clock) as cq:
        await cq.pauses.pause_queue("emails", by="alice", until=60)
        clock.advance(60_000)
        again = await cq.pauses.pause_queue("emails", by="bob")
        assert (again.paused_at_ms, again.paused_by, again.resume_at_ms) == (
            START + 60_000,
            "bob",
            None,
        )


async def test_resuming_a_timed_pause_before_its_end_ends_it(db: Database) -> None:
    clock = FakeClock(START)
    async with db.client(clock=clock) as cq:
        pause = await cq.pauses.pause_queue("emails", until=datetime.timedelta(minutes=5))
        assert await cq.pauses.resume_queue("emails") == pause
        assert await cq.pauses.list() == []
        assert await cq.pauses.pause_queue("emails") == pause.__class__(
            "queue", "emails", START, None, None
        )


def test_the_blocking_client_pauses_until_a_time(db: Database) -> None:
    clock = FakeClock(START)
    with db.sync_client(clock=clock) as cq:
        pause = cq.pauses.pause_task("report.build", until="30s")
        assert pause.resume_at_ms == START + 30_000
        clock.advance(30_000)
        assert cq.pauses.list() == []


@pytest.mark.parametrize(
    "until",
    [
        datetime.datetime(2030, 1, 1, 9),  # naive
        datetime.date(2030, 1, 1),
        "10",  # no unit
        "soon",
        True,
        0.5,  # under a second
        -60,
        [60],
    ],
    ids=["naive", "date", "no-unit", "words", "bool", "under-1s", "negative", "list"],
)
async def test_a_bad_until_is_refused_and_nothing_is_written(db: Database, until: Any) -> None:
    async with db.client() as cq:
        with pytest.raises(InvalidArgument, match="until"):
            await cq.pauses.pause_queue("emails", until=until)
        with pytest.raises(InvalidArgument, match="until"):
            await cq.pauses.pause_task("job", until=until)
        assert await cq.pauses.list() == []


async def test_a_worker_claims_from_a_timed_paused_queue_once_the_pause_has_ended(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    turns = ClaimTurns(monkeypatch)
    refreshes = pause_refreshes(monkeypatch)
    clock = FakeClock(START)
    worker = db.worker(clock=clock, poll_interval_ms=20)
    ran: list[str] = []

    @worker.task
    async def job(ctx: Any) -> None:
        ran.append(ctx.task_id)

    async with db.client(clock=clock) as cq:
        await cq.pauses.pause_queue("default", until="10m")
        held = await cq.submit("job")
        async with worker.background():
            await _eventually(lambda: _true(bool(refreshes) and "default" in refreshes[-1]))
            await turns.passed(3)  # claims that would have taken the paused queue's task
            assert ran == []
            clock.advance(600_000)
            await _eventually(lambda: _true(ran == [held.id]))


# --- the command line -------------------------------------------------------------------------


def test_cairnq_pause_for_a_duration_says_when_the_pause_ends(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    with db.sync_client() as cq:
        cq.submit("job", queue="emails")
    result = run_on(db, capsys, "pause", "emails", "--for", "10m")
    assert result.code == 0 and result.err == ""
    assert "queue emails paused since" in result.out and ", until 20" in result.out
    (row,) = json.loads(run_on(db, capsys, "paused", "--json").out)
    # Each statement reads PostgreSQL's clock anew: the end is 10 minutes after a
    # moment at or just after the pause's own.
    assert 600_000 <= row["resume_at_ms"] - row["paused_at_ms"] < 660_000
    assert ", until " in run_on(db, capsys, "paused").out


def test_cairnq_pause_until_an_iso_time_with_its_zone_pauses_until_then(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    with db.sync_client() as cq:
        cq.submit("job", queue="emails")
    result = run_on(db, capsys, "pause", "emails", "--until", "2099-01-01T10:00:00+01:00")
    assert result.code == 0
    assert "until 2099-01-01 09:00:00Z" in result.out


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (("--for", "10"), "unit"),
        (("--for", "-5m"), "--for"),
        (("--until", "2099-01-01T10:00:00"), "has no zone"),
        (("--until", "tomorrow"), "ISO 8601"),
        (("--for", "10m", "--until", "2099-01-01T10:00:00Z"), "not both"),
    ],
    ids=["for-no-unit", "for-negative", "until-naive", "until-words", "both"],
)
def test_cairnq_pause_refuses_a_bad_for_or_until_in_one_line_and_writes_nothing(
    db: Database, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], words: str
) -> None:
    with db.sync_client() as cq:
        cq.submit("job", queue="emails")
    result = run_on(db, capsys, "pause", "emails", *argv)
    assert result.code != 0
    assert len(result.err.splitlines()) == 1 and words in result.err
    assert json.loads(run_on(db, capsys, "paused", "--json").out) == []


# --- a queue that looks like a typo ---------------------------------------------------------


def test_cairnq_pause_warns_in_one_line_when_the_queue_holds_no_task_and_no_worker_serves_it(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    with db.sync_client() as cq:
        cq.submit("job", queue="emails")
    result = run_on(db, capsys, "pause", "emials")
    assert result.code == 0
    (line,) = result.err.splitlines()
    assert line.startswith("cairnq: warning: queue emials holds no task and no worker serves it")
    assert "did you mean emails?" in line
    assert [r["target"] for r in json.loads(run_on(db, capsys, "paused", "--json").out)] == [
        "emials"
    ]


def test_cairnq_pause_of_a_queue_holding_tasks_says_no_warning(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    with db.sync_client() as cq:
        cq.submit("job", queue="emails")
    assert run_on(db, capsys, "pause", "emails").err == ""
