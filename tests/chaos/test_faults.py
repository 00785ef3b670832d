"""Fault tests with real processes, each checked by the history checker (docs/guarantees.md)."""

from __future__ import annotations

import signal
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .._db import Database, admin_connect
from .harness import Config, Run, run_standard
from .history import load

pytestmark = [pytest.mark.chaos, pytest.mark.slow]


def _assert_valid(report: object) -> None:
    assert report.valid, report.summary()  # type: ignore[attr-defined]


def test_random_kill_nine_of_workers_loses_nothing_and_settles_once(
    db: Database, tmp_path: Path
) -> None:
    config = Config(workers=3, clients=2, tasks_per_client=60, seed=11)
    report = run_standard(
        db, tmp_path, config, fault=lambda run, s: run.kill_randomly(s), fault_s=5.0
    )
    _assert_valid(report)
    assert report.counters["faults"] >= 3
    assert report.counters["submitted"] >= 100
    assert report.counters["final"].get("succeeded", 0) > 0


@pytest.mark.parametrize(
    "point",
    [
        "after_claim",
        "before_settle",
        "before_commit:complete_many",
        "after_commit:complete_many",
        "before_commit:heartbeat_batch",
        "before_commit:claim",
    ],
)
def test_a_worker_dying_at_a_fixed_point_leaves_every_task_settled_once(
    db: Database, tmp_path: Path, point: str
) -> None:
    config = Config(
        workers=0,
        clients=1,
        tasks_per_client=8,
        lease_ms=600,
        heartbeat_ms=100,
        seed=3,
        mix=(1, 0, 0, 0),
        sleep_ms=(150, 250),
    )
    run = Run(db, tmp_path, config)
    try:
        run.start_clients()
        run.wait_clients()
        doomed = run.start_worker(env={"CAIRNQ_CRASHPOINT": point}, concurrency=8)
        run.workers[doomed].wait(timeout=60)
        assert run.workers[doomed].returncode == 137, "the crash point was never reached"
        run.quiesce()
    finally:
        run.stop()
    report = run.check()
    _assert_valid(report)
    assert report.counters["final"] == {"succeeded": 8}


def test_sigterm_drains_in_flight_work_and_claims_nothing_new(db: Database, tmp_path: Path) -> None:
    config = Config(
        workers=0,
        clients=1,
        tasks_per_client=12,
        mix=(1, 0, 0, 0),
        sleep_ms=(1500, 1600),
        concurrency=6,
        lease_ms=3000,
    )
    run = Run(db, tmp_path, config)
    try:
        run.start_clients()
        run.wait_clients()
        index = run.start_worker(drain_ms=10_000)
        deadline = time.monotonic() + 30
        with db.sync_client() as client:
            while client.stats().get("default", {}).get("running", 0) < 6:
                assert time.monotonic() < deadline, "the worker never filled its slots"
                time.sleep(0.05)
            run.signal_worker(index, signal.SIGTERM)
            assert run.workers[index].wait(timeout=30) == 0
            after = client.stats()["default"]
        assert (after["running"], after["succeeded"], after["queued"]) == (0, 6, 6)
        run.quiesce()
    finally:
        run.stop()
    _assert_valid(run.check())


def test_a_frozen_worker_loses_its_lease_and_its_late_writes_change_nothing(
    db: Database, tmp_path: Path
) -> None:
    """A worker frozen at a random point past its lease, another process sharing its worker id:
    the tasks are recovered and run again, and nothing the frozen one does after resuming
    counts. Where it freezes is left to chance here, outside a write transaction (frozen
    inside one, it would hold its locks until it resumed; docs/guarantees.md); the
    scenario whose zombie is frozen just before its settlement statement, so the write
    reaches the database, is ``test_mutants``' stale-writer run."""
    config = Config(
        workers=0,
        clients=1,
        tasks_per_client=6,
        mix=(1, 0, 0, 0),
        sleep_ms=(600, 700),
        lease_ms=400,
        heartbeat_ms=100,
        worker_id="shared-worker",
        seed=5,
    )
    report = frozen_worker_run(db, tmp_path, config)
    _assert_valid(report)
    assert report.counters["refused_settlements"] + report.counters["recoveries"] >= 1


def _until(condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"the scenario never reached its state: {what}"
        time.sleep(0.01)


def _write_lock(db: Database) -> str:
    """Whether another process holds a write transaction open now (SQLite: the write
    lock, which every writer then waits for; PostgreSQL: a lock that a write takes on a
    table of the test's schema, whose rows a recovery then skips)."""
    if db.path is None:
        assert db.schema is not None
        with admin_connect(db.url) as conn:
            row = conn.execute(
                "select count(*) from pg_locks as l"
                " join pg_class as c on c.oid = l.relation"
                " join pg_namespace as n on n.oid = c.relnamespace"
                " where n.nspname = %s and l.granted and l.mode = 'RowExclusiveLock'",
                (db.schema,),
            ).fetchone()
        held = row[0] if row else 0
        return f"{held} table lock(s) of a write held" if held else "no write is open"
    conn = sqlite3.connect(db.path, timeout=0)
    try:
        conn.execute("begin immediate")
        conn.rollback()
        return "no write is open"
    except sqlite3.OperationalError as exc:
        return f"the SQLite write lock is held ({exc})"
    finally:
        conn.close()


def _freeze_outside_a_write(run: Run, db: Database, index: int) -> None:
    """SIGSTOP worker ``index`` at a moment it has no write transaction open, trying again
    (SIGCONT, a few milliseconds, SIGSTOP) while it has: a process frozen inside one holds
    its locks until it resumes, and what is tested is the recovery of its leases."""
    for _ in range(200):
        run.signal_worker(index, signal.SIGSTOP)
        _until(lambda: run.worker_stopped(index), "the worker stopped")
        if _write_lock(db) == "no write is open":
            return
        run.signal_worker(index, signal.SIGCONT)
        time.sleep(0.005)
    raise AssertionError(f"the worker never stopped outside a write: {_write_lock(db)}")


def _events(run: Run, index: int, names: set[str]) -> list[dict[str, Any]]:
    path = run.folder / f"worker-{index}.jsonl"
    return [e for e in load([path]) if e["event"] in names]


def frozen_worker_run(db: Database, folder: Path, config: Config) -> object:
    """Freeze the only worker while its tasks run; a second one (the same worker id) starts
    at once and the first stays frozen until the second has recovered and claimed one of
    its tasks again, past its lease; then it resumes, and the run ends once it has found
    out (a lost lease or a refused settlement) what became of its tasks."""
    run = Run(db, folder, config)
    try:
        run.start_clients()
        run.wait_clients()
        zombie = run.start_worker(concurrency=6)
        with db.sync_client() as client:
            _until(
                lambda: client.stats().get("default", {}).get("running", 0) >= 1,
                "the worker is running tasks",
            )
        _freeze_outside_a_write(run, db, zombie)
        rescuer = run.start_worker(concurrency=6)
        try:
            _until(
                lambda: any(e["attempt"] >= 2 for e in _events(run, rescuer, {"claim_ok"})),
                "the second worker claimed a task of the frozen one again",
            )
        except AssertionError as stuck:
            raise AssertionError(f"{stuck}; {_write_lock(db)}") from None
        resumed = time.monotonic()
        run.signal_worker(zombie, signal.SIGCONT)
        late = {"lease_lost", "settle_lost", "settle_ok", "settle_info"}
        _until(
            lambda: any(e["t"] > resumed for e in _events(run, zombie, late)),
            "the resumed worker found out about its tasks",
        )
        run.quiesce()
        assert run.workers[rescuer].poll() is None
    finally:
        run.stop()
    return run.check()


def test_a_poison_task_that_kills_its_worker_ends_failed_and_healthy_work_finishes(
    db: Database, tmp_path: Path
) -> None:
    config = Config(
        workers=0,
        clients=1,
        tasks_per_client=10,
        mix=(1, 0, 0, 0),
        lease_ms=500,
        heartbeat_ms=100,
        max_attempts=3,
    )
    run = Run(db, tmp_path, config)
    try:
        with db.sync_client() as client:
            poison = client.submit("job", {"mode": "crash"}, max_attempts=3)
        run.start_clients()
        run.wait_clients()
        restarts = 0
        deadline = time.monotonic() + 60
        index = run.start_worker(concurrency=1)
        while time.monotonic() < deadline:
            if run.workers[index].poll() is not None:
                restarts += 1
                index = run.start_worker(concurrency=1)
            with db.sync_client() as client:
                current = client.get(poison.id)
                stats = client.stats()["default"]
            if (
                current is not None
                and current.is_terminal
                and stats["queued"] + stats["running"] == 0
            ):
                break
            time.sleep(0.1)
    finally:
        run.stop()
    report = run.check()
    _assert_valid(report)
    assert current is not None
    assert (current.status, current.attempt) == ("failed", 3)
    assert current.error is not None and current.error["code"] == "lease_expired"
    assert restarts == 3
    assert report.counters["final"] == {"succeeded": 10, "failed": 1}
