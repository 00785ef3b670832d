"""``cairnq send`` (each option) and a task's waits in ``cairnq get``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cairnq import SyncCairnQ, kernel
from cairnq.models import Lease

from ._db import Database
from .test_cli import run_on


@pytest.fixture
def cq(db: Database) -> Any:
    with db.sync_client() as client:
        yield client


def _park(cq: SyncCairnQ, key: str) -> str:
    """Submit a task and park it in a wait on ``key``, as a worker's run would."""
    from cairnq.extensions.waits import _ops

    task = cq.submit("approve")
    rows = cq.backend.run(
        kernel.claim(["default"], "w1", 10_000, [kernel.Draw(None, 1)], 10), write=True
    )
    lease = Lease.of(rows[0])
    outcome = cq.backend.run(_ops.event_wait(lease, "w1", f"event:{key}", key, None), write=True)
    assert outcome.state == "parked"
    return task.id


def test_send_delivers_to_the_waiting_task(
    db: Database, capsys: pytest.CaptureFixture[str], cq: SyncCairnQ
) -> None:
    task_id = _park(cq, "k")
    result = run_on(db, capsys, "send", "k", '{"ok": true}')
    assert (result.code, result.out) == (0, "sent event 1 on k: woke 1 waiting task\n")
    [wait] = cq.events.waits(task_id)
    assert (wait.state, wait.payload) == ("delivered", {"ok": True})


def test_send_without_a_waiting_task_keeps_the_event(
    db: Database, capsys: pytest.CaptureFixture[str], cq: SyncCairnQ
) -> None:
    result = run_on(db, capsys, "send", "k")
    assert result.out == "sent event 1 on k: no task waits; kept for waits that begin later\n"
    assert [r["payload"] for r in cq.events.kept("k")] == ["null"]


def test_send_all_wakes_every_waiting_task(
    db: Database, capsys: pytest.CaptureFixture[str], cq: SyncCairnQ
) -> None:
    ids = [_park(cq, "k"), _park(cq, "k")]
    result = run_on(db, capsys, "send", "k", "1", "--all")
    assert (
        result.out == "sent event 1 on k: woke 2 waiting tasks; kept for waits that begin later\n"
    )
    assert [w.state for i in ids for w in cq.events.waits(i)] == ["delivered", "delivered"]


def test_send_task_reaches_only_that_task(
    db: Database, capsys: pytest.CaptureFixture[str], cq: SyncCairnQ
) -> None:
    first, second = _park(cq, "k"), _park(cq, "k")
    run_on(db, capsys, "send", "k", "2", "--task", second)
    assert [w.state for w in cq.events.waits(first)] == ["waiting"]
    assert [w.state for w in cq.events.waits(second)] == ["delivered"]


def test_send_retention_sets_how_long_the_event_is_kept(
    db: Database, capsys: pytest.CaptureFixture[str], cq: SyncCairnQ
) -> None:
    run_on(db, capsys, "send", "k", "--retention", "1h")
    [kept] = cq.events.kept("k")
    assert kept["expires_at_ms"] - kept["sent_at_ms"] == 3_600_000


def test_send_with_a_bad_payload_writes_nothing(
    db: Database, capsys: pytest.CaptureFixture[str], cq: SyncCairnQ
) -> None:
    result = run_on(db, capsys, "send", "k", "{not json")
    assert result.code != 0
    assert cq.events.kept("k") == []


def test_get_shows_the_task_s_waits(
    db: Database, capsys: pytest.CaptureFixture[str], cq: SyncCairnQ
) -> None:
    task_id = _park(cq, "k")
    shown = json.loads(run_on(db, capsys, "get", task_id).out)
    assert [(w["name"], w["state"]) for w in shown["waits"]] == [("event:k", "waiting")]
