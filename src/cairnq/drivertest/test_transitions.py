"""The transition log: the history the chaos checker reads, written by the driver's triggers.

The checker proves its invariants from this log alone, so the log must show every
change to a task and its key as it happened: one row per insert, update and
delete, in commit order, with the before and after of the columns it reads.
"""

from __future__ import annotations

from typing import Any

from .. import kernel
from .._json import DEFAULT_CODEC
from ..models import Lease
from ..testing import FakeClock
from .driver import TRANSITION_COLUMNS, Driver

__all__ = [
    "test_the_transition_log_has_every_column_the_checker_reads",
    "test_the_transition_log_shows_a_task_run_to_success",
    "test_the_transition_log_shows_a_task_failed_retried_canceled_and_purged",
]

START_MS = 1_700_000_000_000
LEASE_MS = 5_000
ERROR = '{"type":"Boom","code":"boom","message":"boom","retryable":true,"details":{}}'


class _Run:
    """One backend on the driver's database, with the transition log installed."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.clock = FakeClock(START_MS)
        self.backend = driver.open(clock=self.clock)
        driver.install_transition_log()

    def submit(self, *, key: str | None = None, max_attempts: int = 3) -> str:
        spec = kernel.new_task(DEFAULT_CODEC, "job", {}, key=key, max_attempts=max_attempts)
        return self.backend.run(kernel.submit(spec), write=True).id

    def claim(self, worker_id: str) -> Lease:
        draws = [kernel.Draw(None, 1)]
        [row] = self.backend.run(
            kernel.claim(["default"], worker_id, LEASE_MS, draws, 100), write=True
        )
        return Lease.of(row)

    def log(self, task_id: str) -> list[dict[str, Any]]:
        """The task's and its key's rows (lease rows are the driver's own business)."""
        return [
            row
            for row in self.driver.transitions()
            if row["task_id"] == task_id and row["tbl"] in ("task", "key")
        ]

    def close(self) -> None:
        self.backend.close()


def _steps(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (r["tbl"], r["op"], r["old_status"], r["new_status"], r["old_attempt"], r["new_attempt"])
        for r in rows
    ]


def test_the_transition_log_has_every_column_the_checker_reads(driver: Driver) -> None:
    run = _Run(driver)
    try:
        run.submit()
        rows = driver.transitions()
    finally:
        run.close()
    assert len(rows) == 1
    assert tuple(rows[0]) == TRANSITION_COLUMNS


def test_the_transition_log_shows_a_task_run_to_success(driver: Driver) -> None:
    run = _Run(driver)
    try:
        task_id = run.submit()
        lease = run.claim("w1")
        run.backend.run(kernel.complete(lease, "w1", '"done"'), write=True)
        rows = run.log(task_id)
    finally:
        run.close()
    assert _steps(rows) == [
        ("task", "insert", None, "queued", None, 0),
        ("task", "update", "queued", "running", 0, 1),
        ("task", "update", "running", "succeeded", 1, 1),
    ]
    inserted, claimed, settled = rows
    assert [r["seq"] for r in rows] == sorted(r["seq"] for r in rows)
    assert inserted["max_attempts"] == 3
    # The claim writes the worker id with its nonce (the lease's token), the fence of its writes.
    assert (claimed["old_worker"], claimed["new_worker"]) == (None, lease.holder("w1"))
    assert claimed["new_lease"] == START_MS + LEASE_MS
    assert (settled["old_lease"], settled["new_lease"]) == (START_MS + LEASE_MS, None)
    assert settled["new_completed"] == START_MS
    assert settled["new_result"] == '"done"'


def test_the_transition_log_shows_a_task_failed_retried_canceled_and_purged(
    driver: Driver,
) -> None:
    run = _Run(driver)
    try:
        task_id = run.submit(key="k")
        first = run.claim("w1")
        run.backend.run(kernel.fail(first, "w1", ERROR, retryable=True, delay_ms=0), write=True)
        second = run.claim("w2")
        run.backend.run(kernel.cancel(task_id), write=True)
        run.backend.run(kernel.complete(second, "w2", '"late"'), write=True)
        run.backend.run(kernel.retry(task_id, True), write=True)
        run.backend.run(kernel.cancel(task_id), write=True)
        run.clock.advance(1)
        purged = run.backend.run(kernel.purge(older_than_ms=0, limit=10), write=True)
        rows = run.log(task_id)
    finally:
        run.close()
    assert purged == [task_id]
    tasks = [r for r in rows if r["tbl"] == "task"]
    assert _steps(tasks) == [
        ("task", "insert", None, "queued", None, 0),
        ("task", "update", "queued", "running", 0, 1),
        ("task", "update", "running", "queued", 1, 1),
        ("task", "update", "queued", "running", 1, 2),
        ("task", "update", "running", "running", 2, 2),
        ("task", "update", "running", "canceled", 2, 2),
        ("task", "update", "canceled", "queued", 2, 0),
        ("task", "update", "queued", "canceled", 0, 0),
        ("task", "delete", "canceled", None, 0, None),
    ]
    # Whether the key's row goes before or after its task's in one purge is the backend's.
    keys = [(r["op"], r["key"]) for r in rows if r["tbl"] == "key"]
    assert keys == [("insert", "k"), ("delete", "k")]
    failed, canceling = tasks[2], tasks[4]
    assert (failed["new_worker"], failed["new_lease"]) == (None, None)
    assert failed["new_error_code"] == "boom"
    assert canceling["new_cancel"] == START_MS
