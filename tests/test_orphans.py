"""No silent orphans: workers publish the names they serve, and readers find tasks nobody serves.

Presence rows (x0002) and names (x0004) are written by ``Presence`` on a fake
clock; ``serving`` and ``unserved`` read them with the tasks; ``submit`` warns
with ``warn_unserved=True``; a worker's ``OrphanWatch`` logs each orphaned name
once. Both backends, real databases.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import warnings
from typing import Any

import pytest

from cairnq import UnservedTasks, UnservedTaskWarning
from cairnq.extensions.presence import _ops as _presence
from cairnq.extensions.presence._component import Presence
from cairnq.extensions.presence._orphans import OrphanWatch
from cairnq.testing import FakeClock

from ._db import Database, statement_work


def refused(exc: BaseException, context: Any) -> None:
    raise AssertionError(f"presence write failed: {exc!r}")


async def present(
    db: Database,
    clock: FakeClock,
    worker_id: str,
    queues: list[str],
    names: list[str] | None,
) -> Presence:
    """A worker's presence, written once (its first write) on ``clock``."""
    presence = Presence(
        db.backend(clock=clock), worker_id, queues, 1, refused, names=names, after_beat=None
    )
    presence.start()
    assert presence._pending is not None
    await presence._pending
    return presence


def serving(db: Database, clock: FakeClock, queue: str, name: str) -> list[str] | None:
    with db.sync_client(clock=clock) as cq:
        return cq.backend.run(_presence.serving(queue, name), write=False)


def unserved(db: Database, clock: FakeClock, **options: Any) -> list[UnservedTasks]:
    with db.sync_client(clock=clock) as cq:
        return cq.presence.unserved(**options)


# --- publishing and the serving read ------------------------------------------------------------


async def test_a_live_worker_serves_its_names_on_its_queues(db: Database) -> None:
    clock = FakeClock()
    await present(db, clock, "w-mail", ["default", "mail"], ["email.send", "report"])
    assert serving(db, clock, "mail", "email.send") == ["w-mail"]


async def test_a_worker_does_not_serve_a_name_it_lacks(db: Database) -> None:
    clock = FakeClock()
    await present(db, clock, "w-mail", ["default"], ["email.send"])
    assert serving(db, clock, "default", "emial.send") == []


async def test_a_worker_does_not_serve_a_queue_it_lacks(db: Database) -> None:
    clock = FakeClock()
    await present(db, clock, "w-mail", ["default"], ["email.send"])
    assert serving(db, clock, "emial", "email.send") == []


async def test_a_worker_not_seen_within_the_alive_window_serves_nothing(db: Database) -> None:
    clock = FakeClock()
    await present(db, clock, "w-gone", ["default"], ["email.send"])
    clock.advance(_presence.ALIVE_WINDOW_MS + 1)
    assert serving(db, clock, "default", "email.send") == []


async def test_a_worker_that_publishes_no_names_counts_as_serving_every_name_on_its_queues(
    db: Database,
) -> None:
    clock = FakeClock()
    await present(db, clock, "w-old", ["default"], None)
    assert serving(db, clock, "default", "anything.at.all") == ["w-old"]


async def test_a_clean_stop_deletes_the_names_with_the_row(db: Database) -> None:
    clock = FakeClock()
    presence = await present(db, clock, "w-stop", ["default"], ["email.send"])
    await presence.stop()
    assert serving(db, clock, "default", "email.send") == []
    with db.sync_client(clock=clock) as cq:
        rows = cq.backend.run(_presence.served(within_ms=3_600_000), write=False)
    assert rows == {}


async def test_each_refresh_writes_the_names_again(db: Database) -> None:
    clock = FakeClock()
    presence = await present(db, clock, "w-beat", ["default"], ["email.send"])
    db.sync_client().open()
    _outside(db, "delete from cairnq_worker_names")
    await presence._refresh()
    assert presence._pending is not None
    await presence._pending
    assert serving(db, clock, "default", "other.name") == []


# --- unserved ------------------------------------------------------------------------------------


async def test_unserved_groups_due_queued_tasks_nobody_serves_by_queue_and_name(
    db: Database,
) -> None:
    clock = FakeClock()
    await present(db, clock, "w-mail", ["default"], ["email.send"])
    with db.sync_client(clock=clock) as cq:
        cq.submit("email.send")
        for _ in range(3):
            cq.submit("emial.send")
        cq.submit("email.send", queue="emial")
    found = unserved(db, clock)
    assert [(u.queue, u.name, u.count, u.queue_served) for u in found] == [
        ("default", "emial.send", 3, True),
        ("emial", "email.send", 1, False),
    ]


async def test_unserved_leaves_out_tasks_not_yet_due(db: Database) -> None:
    clock = FakeClock()
    await present(db, clock, "w-mail", ["default"], ["email.send"])
    with db.sync_client(clock=clock) as cq:
        cq.submit("later.job", delay_ms=60_000)
    assert unserved(db, clock) == []


async def test_unserved_leaves_out_tasks_that_are_no_longer_queued(db: Database) -> None:
    clock = FakeClock()
    await present(db, clock, "w-mail", ["default"], ["email.send"])
    with db.sync_client(clock=clock) as cq:
        task = cq.submit("emial.send")
        cq.cancel(task.id)
    assert unserved(db, clock) == []


async def test_unserved_counts_stop_at_the_cap_and_say_so(db: Database) -> None:
    clock = FakeClock()
    await present(db, clock, "w-mail", ["default"], ["email.send"])
    with db.sync_client(clock=clock) as cq:
        cq.submit_many([("emial.send", {"n": n}) for n in range(5)])
        found = cq.backend.run(_presence.unserved(cap=3), write=False)
    assert [(u.count, u.capped) for u in found] == [(3, True)]


async def test_unserved_with_a_queue_lists_only_that_queue(db: Database) -> None:
    clock = FakeClock()
    with db.sync_client(clock=clock) as cq:
        cq.submit("a.job", queue="one")
        cq.submit("b.job", queue="two")
    assert [u.queue for u in unserved(db, clock, queue="two")] == ["two"]


def test_unserved_describes_each_pair_in_one_line() -> None:
    item = UnservedTasks("default", "emial.send", 3, False, 0, True)
    assert item.describe() == (
        "emial.send on default: 3 queued, no live worker has a handler for it"
    )


def test_unserved_finds_names_by_index_seeks_not_by_reading_every_task(
    db: Database,
) -> None:
    with db.sync_client() as cq:
        cq.submit_many([("served.job", {}) for _ in range(20)])
        small, pairs = statement_work(db, "queued_names", {})
        cq.submit_many([("served.job", {}) for _ in range(2000)])
        large, same = statement_work(db, "queued_names", {})
    assert pairs == same == 1
    # Twenty times the rows: an index walk stays about flat, a scan grows with the table.
    assert large < small * 3


# --- on a database without x0004 -----------------------------------------------------------------


def _outside(db: Database, statement: str) -> None:
    if db.kind == "sqlite":
        assert db.path is not None
        with contextlib.closing(sqlite3.connect(db.path)) as conn, conn:
            conn.execute(statement)
        return
    from ._db import admin_connect

    with admin_connect(db.url) as conn:
        conn.execute(f'set search_path to "{db.schema}"')
        conn.execute(statement)


def _without_x0004(db: Database) -> None:
    db.sync_client().open().close()
    _outside(db, "drop table cairnq_worker_names")
    _outside(db, "delete from cairnq_migrations where name = 'x0004_worker_names.sql'")


async def test_without_x0004_a_worker_still_writes_its_row_and_says_so_in_one_line(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    _without_x0004(db)
    clock = FakeClock()
    caplog.set_level(logging.WARNING, logger="cairnq.worker")
    presence = Presence(
        db.backend(clock=clock, migrate=False), "w-old-db", ["default"], 1, refused,
        names=["email.send"], after_beat=None,
    )  # fmt: skip
    presence.start()
    assert presence._pending is not None
    await presence._pending
    await presence._refresh()
    await presence._pending
    lines = [r.getMessage() for r in caplog.records if "x0004_worker_names.sql" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0] and "cairnq migrate" in lines[0]
    assert serving(db, clock, "default", "anything") == ["w-old-db"]


def test_without_x0004_submit_with_warn_unserved_still_warns_for_a_queue_nobody_serves(
    db: Database,
) -> None:
    _without_x0004(db)
    with db.sync_client(migrate=False) as cq, pytest.warns(UnservedTaskWarning):
        cq.submit("email.send", queue="nobody", warn_unserved=True)


# --- submit(warn_unserved=...) -------------------------------------------------------------------


def test_submit_with_warn_unserved_warns_when_no_live_worker_serves_the_name(
    db: Database,
) -> None:
    with db.sync_client() as cq, pytest.warns(UnservedTaskWarning) as caught:
        task = cq.submit("emial.send", warn_unserved=True)
    warning = caught[0].message
    assert isinstance(warning, UnservedTaskWarning)
    assert (warning.task_id, warning.name, warning.queue) == (task.id, "emial.send", "default")
    assert "emial.send" in str(warning) and cq._where() in str(warning)


def test_submit_with_warn_unserved_still_stores_the_task(db: Database) -> None:
    with db.sync_client() as cq, pytest.warns(UnservedTaskWarning):
        task = cq.submit("emial.send", warn_unserved=True)
    with db.sync_client() as cq:
        stored = cq.get(task.id)
    assert stored is not None and stored.status == "queued"


def test_submit_with_warn_unserved_logs_the_warning_too(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cairnq.client")
    with db.sync_client() as cq, pytest.warns(UnservedTaskWarning):
        cq.submit("emial.send", queue="emial", warn_unserved=True)
    assert any("'emial.send' on queue 'emial'" in r.getMessage() for r in caplog.records)


async def test_submit_with_warn_unserved_is_silent_when_a_live_worker_serves_it(
    db: Database,
) -> None:
    clock = FakeClock()
    await present(db, clock, "w-mail", ["default"], ["email.send"])
    with db.sync_client(clock=clock) as cq, warnings.catch_warnings():
        warnings.simplefilter("error", UnservedTaskWarning)
        cq.submit("email.send", warn_unserved=True)


async def test_the_async_client_warns_as_well(db: Database) -> None:
    async with db.client() as cq:
        with pytest.warns(UnservedTaskWarning):
            await cq.submit("emial.send", warn_unserved=True)


def test_submit_warns_nothing_by_default(db: Database) -> None:
    with db.sync_client() as cq, warnings.catch_warnings():
        warnings.simplefilter("error", UnservedTaskWarning)
        cq.submit("emial.send")


def test_the_warning_points_at_the_line_that_submitted(db: Database) -> None:
    with db.sync_client() as cq, pytest.warns(UnservedTaskWarning) as caught:
        cq.submit("emial.send", warn_unserved=True)
    assert caught[0].filename == __file__


# --- the worker's own log ------------------------------------------------------------------------


async def test_a_worker_logs_due_tasks_of_a_name_it_lacks_naming_name_queue_and_count(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    await present(db, clock, "w-mail", ["default"], ["email.send"])
    with db.sync_client(clock=clock) as cq:
        cq.submit_many([("emial.send", {}) for _ in range(3)])
    caplog.set_level(logging.WARNING, logger="cairnq.worker")
    watch = OrphanWatch(db.backend(clock=clock), "w-mail", ["default"], ["email.send"])
    await watch.check()
    [line] = [r.getMessage() for r in caplog.records]
    assert "'default'" in line and "3 due tasks" in line and "'emial.send'" in line


async def test_a_worker_logs_each_orphaned_name_once(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    await present(db, clock, "w-mail", ["default"], ["email.send"])
    with db.sync_client(clock=clock) as cq:
        cq.submit("emial.send")
    caplog.set_level(logging.WARNING, logger="cairnq.worker")
    watch = OrphanWatch(db.backend(clock=clock), "w-mail", ["default"], ["email.send"])
    await watch.check()
    with db.sync_client(clock=clock) as cq:
        cq.submit("emial.send")
    await watch.check()
    assert len(caplog.records) == 1


async def test_a_worker_says_nothing_of_names_another_live_worker_serves(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    await present(db, clock, "w-mail", ["default"], ["email.send"])
    await present(db, clock, "w-report", ["default"], ["report.build"])
    with db.sync_client(clock=clock) as cq:
        cq.submit("report.build")
    caplog.set_level(logging.WARNING, logger="cairnq.worker")
    watch = OrphanWatch(db.backend(clock=clock), "w-mail", ["default"], ["email.send"])
    assert await watch.check() == []
    assert caplog.records == []


async def test_the_orphan_check_runs_after_each_presence_refresh(db: Database) -> None:
    clock = FakeClock()
    checks: list[int] = []

    async def after_beat() -> None:
        checks.append(clock.now_ms())

    presence = Presence(
        db.backend(clock=clock), "w-hook", ["default"], 1, refused,
        names=["email.send"], after_beat=after_beat,
    )  # fmt: skip
    presence.start()
    assert presence._pending is not None
    await presence._pending
    assert checks == []  # not after the first write: workers starting together
    await presence._refresh()
    await presence._pending
    assert checks == [clock.now_ms()]
    await presence.stop()


async def test_a_presence_given_names_watches_for_orphans_by_default(db: Database) -> None:
    presence = Presence(db.backend(), "w-default", ["default"], 1, refused, names=["a"])
    assert presence.after_beat is not None
    assert getattr(presence.after_beat, "__self__", None).__class__ is OrphanWatch
