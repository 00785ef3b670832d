"""The checker on hand-written histories: each defect yields exactly its violation."""

from __future__ import annotations

from typing import Any

import pytest

from .checker import History, check

T = "task_A"


def row(seq: int, op: str, old: str | None, new: str | None, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "seq": seq,
        "tbl": "task",
        "op": op,
        "task_id": T,
        "key": None,
        "old_status": old,
        "new_status": new,
        "old_attempt": 0,
        "new_attempt": 0,
        "old_worker": None,
        "new_worker": None,
        "old_lease": None,
        "new_lease": None,
        "new_updated": 1000 + seq,
        "new_cancel": None,
        "old_completed": None,
        "new_completed": None,
        "max_attempts": 3,
        "new_error_code": None,
        "new_result": None,
        "db_time": 1000.0 + seq,
    }
    base.update(fields)
    return base


def claim(seq: int, attempt: int, worker: str, lease: int = 10_000) -> dict[str, Any]:
    return row(
        seq,
        "update",
        "queued",
        "running",
        old_attempt=attempt - 1,
        new_attempt=attempt,
        new_worker=worker,
        new_lease=lease,
    )


def settle(seq: int, attempt: int, worker: str, new: str = "succeeded", **f: Any) -> dict[str, Any]:
    return row(
        seq,
        "update",
        "running",
        new,
        old_attempt=attempt,
        new_attempt=attempt,
        old_worker=worker,
        new_worker=worker,
        old_lease=10_000,
        new_completed=1000 + seq,
        **f,
    )


def ok(attempt: int, worker: str) -> dict[str, Any]:
    return {"event": "settle_ok", "task": T, "attempt": attempt, "worker": worker}


def clean() -> History:
    return History(
        transitions=[
            row(1, "insert", None, "queued"),
            claim(2, 1, "w1"),
            settle(3, 1, "w1", new_result='{"attempt": 1}'),
        ],
        events=[{"event": "submit_ok", "task": T}, ok(1, "w1")],
        final=[{"id": T, "status": "succeeded"}],
    )


def test_a_clean_history_is_valid() -> None:
    report = check(clean())
    assert report.valid, report.summary()
    assert report.counters["settlements"] == 1


def invariants(history: History) -> set[str]:
    return {v.invariant for v in check(history).violations}


def test_an_accepted_submit_that_was_never_stored_is_a_lost_task() -> None:
    history = clean()
    history.events.append({"event": "submit_ok", "task": "task_gone"})
    assert invariants(history) == {"INV-1"}


def test_a_task_left_running_after_quiescence_is_stuck() -> None:
    history = clean()
    history.final = [{"id": T, "status": "running"}]
    assert invariants(history) == {"INV-2"}


def test_two_terminal_transitions_in_one_generation_are_a_double_settlement() -> None:
    history = clean()
    history.transitions.append(
        row(4, "update", "succeeded", "failed", old_attempt=1, new_attempt=1)
    )
    assert "INV-3" in invariants(history)


def test_a_settlement_by_a_writer_holding_an_older_attempt_is_caught() -> None:
    history = clean()
    history.transitions[-1] = settle(5, 2, "w1")
    history.transitions.insert(2, claim(4, 2, "w1"))
    history.transitions.insert(
        2,
        row(
            3,
            "update",
            "running",
            "queued",
            old_attempt=1,
            new_attempt=1,
            old_worker="w1",
            old_lease=500,
        ),
    )
    history.events = [{"event": "submit_ok", "task": T}, ok(1, "w1")]
    assert invariants(history) == {"INV-4", "INV-5"}


def test_a_settlement_reported_ok_that_changed_nothing_is_caught() -> None:
    history = clean()
    history.events.append(ok(2, "w9"))
    assert invariants(history) == {"INV-5"}


def test_a_claim_of_a_running_task_is_an_illegal_edge() -> None:
    history = clean()
    history.transitions.insert(
        2,
        row(
            3,
            "update",
            "running",
            "running",
            old_attempt=1,
            new_attempt=2,
            old_worker="w1",
            new_worker="w2",
            new_lease=10_000,
        ),
    )
    assert "INV-6" in invariants(history)


def test_a_cancel_requested_attempt_that_ends_succeeded_breaks_cancel_wins() -> None:
    history = clean()
    history.transitions.insert(
        2,
        row(
            3,
            "update",
            "running",
            "running",
            old_attempt=1,
            new_attempt=1,
            old_worker="w1",
            new_worker="w1",
            new_lease=10_000,
            new_cancel=1003,
        ),
    )
    assert invariants(history) == {"INV-8"}


def test_two_live_tasks_for_one_key_are_caught() -> None:
    history = History(
        transitions=[
            row(1, "insert", None, "queued", task_id="task_1"),
            {**row(2, "insert", None, None), "tbl": "key", "task_id": "task_1", "key": "k"},
            row(3, "insert", None, "queued", task_id="task_2"),
            {**row(4, "update", None, None), "tbl": "key", "task_id": "task_2", "key": "k"},
        ],
        events=[],
        final=[],
        quiescent=False,
    )
    assert invariants(history) == {"INV-9"}


def test_a_success_recording_another_attempts_result_is_caught() -> None:
    history = clean()
    history.transitions[-1] = settle(3, 1, "w1", new_result='{"attempt": 2}')
    assert invariants(history) == {"INV-12"}


def test_purging_a_running_task_is_caught() -> None:
    history = clean()
    history.transitions[-1] = row(3, "delete", "running", None, old_attempt=1)
    history.events = [{"event": "submit_ok", "task": T}]
    history.final = []
    assert "INV-15" in invariants(history)


def test_a_failed_integrity_check_is_reported() -> None:
    history = clean()
    history.integrity = "*** in database main ***"
    assert invariants(history) == {"INV-16"}


@pytest.mark.parametrize("allowed", [True, False])
def test_busy_errors_count_only_where_the_run_forbids_them(allowed: bool) -> None:
    history = clean()
    history.allow_busy_errors = allowed
    history.events.append({"event": "submit_info", "error": "DatabaseBusy"})
    assert invariants(history) == (set() if allowed else {"E2"})
