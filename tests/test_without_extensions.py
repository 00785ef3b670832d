"""Housekeeping on a database another SDK migrated: only the protocol's migrations, no
cairnq extension tables (x0001..x0004), opened with ``migrate=False``."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Callable
from typing import Any

import pytest

from cairnq import CairnQ, Retention
from cairnq.extensions.presence import _ops as _presence
from cairnq.extensions.presence._component import Presence
from cairnq.kernel.retention import LOCK_NAME, RetentionSweeper
from cairnq.protocol.statements import migrations
from cairnq.testing import FakeClock

from ._db import Database, admin_connect

HOUR = 3_600_000


def protocol_only(db: Database) -> list[str]:
    """Apply the reference protocol's migrations (the non-``x`` ones) and record them."""
    return migrate_only(db, lambda name: not name.startswith("x"))


def migrate_only(db: Database, keep: Callable[[str], bool]) -> list[str]:
    """Apply and record the migrations whose file name ``keep`` accepts; their names."""
    db.wipe()
    names = [m for m in migrations(db.kind) if keep(m.name)]  # type: ignore[arg-type]
    ledger = (
        "create table if not exists cairnq_migrations "
        "(name text primary key, applied_at_ms bigint not null)"
    )
    if db.kind == "sqlite":
        assert db.path is not None
        with contextlib.closing(sqlite3.connect(db.path)) as conn:
            conn.execute(ledger)
            for migration in names:
                conn.executescript(migration.source)
                conn.execute("insert into cairnq_migrations values (?, 0)", (migration.name,))
            conn.commit()
    else:
        with admin_connect(db.url) as conn:
            conn.execute(f'create schema if not exists "{db.schema}"')
            conn.execute(f'set search_path to "{db.schema}"')
            conn.execute(ledger)
            for migration in names:
                conn.execute(migration.source)  # type: ignore[call-overload]
                conn.execute("insert into cairnq_migrations values (%s, 0)", (migration.name,))
    return [m.name for m in names]


def refused(exc: BaseException, context: dict[str, Any]) -> None:
    raise AssertionError(f"reported {exc!r} in {context}")


async def finished_tasks(cq: CairnQ, clock: FakeClock, count: int) -> list[str]:
    ids = []
    for _ in range(count):
        task = await cq.submit("job")
        await cq.cancel(task.id)
        ids.append(task.id)
    clock.advance(2 * HOUR)
    return ids


async def test_retention_sweeps_a_database_without_cairnq_locks(db: Database) -> None:
    protocol_only(db)
    clock = FakeClock()
    async with db.client(clock=clock, migrate=False) as cq:
        await finished_tasks(cq, clock, 3)
        errors: list[BaseException] = []
        sweeper = RetentionSweeper(cq.backend, Retention(HOUR, limit=2, on_error=errors.append))
        deleted = await sweeper.sweep()
        left = await cq.list()
    assert errors == []
    assert deleted == 3
    assert left == []


async def test_retention_without_cairnq_locks_says_so_in_one_line_once(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    protocol_only(db)
    caplog.set_level(logging.WARNING, logger="cairnq.retention")
    async with db.client(migrate=False) as cq:
        sweeper = RetentionSweeper(cq.backend, Retention(HOUR))
        await sweeper.sweep()
        await sweeper.sweep()
    lines = [r.getMessage() for r in caplog.records if "x0001_locks.sql" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0] and "cairnq migrate" in lines[0]


async def test_retention_without_cairnq_locks_skips_while_another_sweep_holds_the_lock(
    pg_db: Database,
) -> None:
    protocol_only(pg_db)
    clock = FakeClock()
    async with pg_db.client(clock=clock, migrate=False) as cq:
        ids = await finished_tasks(cq, clock, 2)
        sweeper = RetentionSweeper(cq.backend, Retention(HOUR))
        with admin_connect(pg_db.url) as other:
            other.execute(f'set search_path to "{pg_db.schema}"')
            with other.transaction():
                other.execute(
                    "select pg_advisory_xact_lock("
                    "hashtextextended(current_schema() || '/' || %s, 0))",
                    (LOCK_NAME,),
                )
                skipped = await sweeper.sweep()
        after = await sweeper.sweep()
    assert skipped == 0
    assert after == len(ids)


async def test_presence_stopped_before_its_first_write_without_cairnq_workers_deletes_nothing(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    protocol_only(db)
    deletes: list[str] = []
    gone = _presence.worker_gone

    def recorded(worker_id: str) -> Any:
        deletes.append(worker_id)
        return gone(worker_id)

    monkeypatch.setattr(_presence, "worker_gone", recorded)
    backend = db.backend(migrate=False)
    presence = Presence(backend, "w-quick-stop", ["default"], 1, refused)
    presence.start()
    # Closed at once: the first write, which finds the table missing, has not run yet.
    await presence.close()
    await backend.aclose()
    assert presence.absent
    assert deletes == []


async def test_presence_without_cairnq_workers_steps_aside_in_one_line(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    protocol_only(db)
    caplog.set_level(logging.WARNING, logger="cairnq.worker")
    backend = db.backend(migrate=False)
    presence = Presence(
        backend, "w-reference-db", ["default"], 1, refused, names=["email.send"]
    )  # fmt: skip
    presence.start()
    assert presence._pending is not None
    await presence._pending
    await presence._refresh()
    await presence.stop()
    # Its connections belong to this test's event loop: closed on it, not after it ends.
    await backend.aclose()
    lines = [r.getMessage() for r in caplog.records if "cairnq_workers" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0] and "cairnq migrate" in lines[0]
    assert "x0002_workers.sql" in lines[0]
