"""The checker on hand-written histories: each defect yields exactly its violation."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from cairnq.extensions.workflows._ops import PARKED_RUN_AT_MS
from cairnq.models import holder
from cairnq.protocol import statements as _protocol

from .checker import DEPENDENCY_FAILED, History, check
from .programs import MUTANTS, mutated

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


def claim(
    seq: int, attempt: int, worker: str, lease: int = 10_000, token: int | None = None, **f: Any
) -> dict[str, Any]:
    """A claim's row; with ``token``, the claim wrote that nonce beside the worker id."""
    fields = {
        "old_attempt": attempt - 1,
        "new_attempt": attempt,
        "new_worker": holder(worker, token),
        "new_lease": lease,
    }
    return row(seq, "update", "queued", "running", **(fields | f))


def settle(seq: int, attempt: int, worker: str, new: str = "succeeded", **f: Any) -> dict[str, Any]:
    fields = {
        "old_attempt": attempt,
        "new_attempt": attempt,
        "old_worker": worker,
        "new_worker": worker,
        "old_lease": 10_000,
        "new_completed": 1000 + seq,
    }
    return row(seq, "update", "running", new, **(fields | f))


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


def _canceled_while_running(seq: int) -> dict[str, Any]:
    return row(
        seq,
        "update",
        "running",
        "running",
        old_attempt=1,
        new_attempt=1,
        old_worker="w1",
        new_worker="w1",
        new_lease=10_000,
        new_cancel=1000 + seq,
    )


def test_a_canceled_async_handlers_attempt_that_ends_succeeded_is_caught() -> None:
    history = clean()
    history.transitions = [
        row(1, "insert", None, "queued"),
        claim(2, 1, "w1"),
        _canceled_while_running(3),
        settle(4, 1, "w1", new_cancel=1003),
    ]
    start = {"event": "handler_start", "task": T, "attempt": 1, "worker": "w1", "t": 1.0}
    start["grace_ms"] = 200
    history.events.append(start)
    assert invariants(history) == {"INV-8", "INV-19"}


def test_a_canceled_handler_returning_long_past_its_grace_period_is_caught() -> None:
    history = clean()
    history.transitions = [
        row(1, "insert", None, "queued"),
        claim(2, 1, "w1"),
        _canceled_while_running(3),
        settle(4, 1, "w1", new="canceled", new_cancel=1003),
    ]
    end = {"task": T, "attempt": 1, "worker": "w1", "grace_ms": 200, "outcome": "return"}
    history.events.append({"event": "handler_end", **end, "t": 6.0, "seen_for_ms": 5000.0})
    history.final = [{"id": T, "status": "canceled"}]
    assert invariants(history) == {"INV-19"}


def test_a_canceled_handler_stopped_within_its_grace_period_is_valid() -> None:
    history = clean()
    history.transitions = [
        row(1, "insert", None, "queued"),
        claim(2, 1, "w1"),
        _canceled_while_running(3),
        settle(4, 1, "w1", new="canceled", new_cancel=1003),
    ]
    end = {"task": T, "attempt": 1, "worker": "w1", "grace_ms": 200, "outcome": "cancelled"}
    history.events.append({"event": "handler_end", **end, "t": 1.3, "seen_for_ms": 230.0})
    history.final = [{"id": T, "status": "canceled"}]
    assert check(history).valid, check(history).summary()


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
        liveness=False,
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


def event(
    kind: str, attempt: int, worker: str, token: int | None = None, **f: Any
) -> dict[str, Any]:
    return {"event": kind, "task": T, "attempt": attempt, "worker": worker, "token": token, **f}


def reset_retry_history(stale_ok: bool) -> History:
    """Claim 1 (token 1) fails for good, a reset retry, claim 1 again (token 2) by the same
    worker id; the row ends succeeded by whoever reports ok."""
    return History(
        transitions=[
            row(1, "insert", None, "queued"),
            claim(2, 1, "w", token=1),
            row(
                4,
                "update",
                "running",
                "failed",
                old_attempt=1,
                new_attempt=1,
                old_worker="w",
                new_worker="w",
                old_lease=500,
                new_updated=600,
                new_completed=600,
            ),
            row(5, "update", "failed", "queued", old_attempt=1, new_attempt=0),
            claim(6, 1, "w", token=2),
            settle(8, 1, "w"),
        ],
        events=[
            {"event": "submit_ok", "task": T},
            event("settle_invoke", 1, "w", 1),
            event("settle_ok" if stale_ok else "settle_lost", 1, "w", 1),
            event("settle_invoke", 1, "w", 2),
            event("settle_lost" if stale_ok else "settle_ok", 1, "w", 2),
        ],
        final=[{"id": T, "status": "succeeded"}],
    )


def test_claims_of_one_attempt_number_by_one_worker_are_told_apart_by_their_token() -> None:
    assert invariants(reset_retry_history(stale_ok=False)) == set()


def test_a_settlement_from_a_claim_before_a_reset_retry_is_caught_by_its_token() -> None:
    assert invariants(reset_retry_history(stale_ok=True)) == {"INV-4", "INV-5"}


def test_a_submit_refused_with_a_typed_error_but_stored_is_caught() -> None:
    history = clean()
    history.events.append({"event": "submit_fail", "req": "r1", "error": "DatabaseBusy"})
    history.final = [{"id": T, "status": "succeeded", "payload": '{"req": "r1"}'}]
    assert invariants(history) == {"INV-1b"}


def test_without_a_quiescence_phase_live_tasks_are_not_stuck() -> None:
    history = clean()
    history.final = [{"id": T, "status": "running"}]
    history.liveness = False
    assert invariants(history) == set()


def runs_history(earlier_end: dict[str, Any], handler_end_t: float) -> History:
    """Claim 1 ends by ``earlier_end``; claim 2's run starts at t=10.0."""
    return History(
        transitions=[
            row(1, "insert", None, "queued"),
            claim(2, 1, "w1", token=1),
            earlier_end,
            claim(5, 2, "w2", token=2),
            settle(7, 2, "w2"),
        ],
        events=[
            event("handler_start", 1, "w1", 1, t=1.0),
            event("handler_end", 1, "w1", 1, t=handler_end_t),
            event("handler_start", 2, "w2", 2, t=10.0),
            event("settle_invoke", 1, "w1", 1),
            event("settle_ok", 1, "w1", 1),
            event("settle_ok", 2, "w2", 2),
        ],
        final=[{"id": T, "status": "succeeded"}],
    )


FAILED_BY_HOLDER = row(
    4,
    "update",
    "running",
    "queued",
    old_attempt=1,
    new_attempt=1,
    old_worker="w1",
    old_lease=10_000,
    new_updated=1004,
)
RECOVERED = row(
    4,
    "update",
    "running",
    "queued",
    old_attempt=1,
    new_attempt=1,
    old_worker="w1",
    old_lease=900,
    new_updated=1004,
)


def test_a_run_going_on_after_its_claim_was_settled_overlapping_the_next_is_caught() -> None:
    assert invariants(runs_history(FAILED_BY_HOLDER, handler_end_t=12.0)) == {"INV-7"}


def test_a_run_that_ended_before_the_next_started_is_no_overlap() -> None:
    assert invariants(runs_history(FAILED_BY_HOLDER, handler_end_t=9.0)) == set()


def test_a_run_overlapping_the_next_after_its_lease_expired_is_allowed() -> None:
    history = runs_history(RECOVERED, handler_end_t=12.0)
    history.events = [e for e in history.events if (e["event"], e["token"]) != ("settle_ok", 1)]
    history.events = [e for e in history.events if (e["event"], e["token"]) != ("settle_invoke", 1)]
    assert invariants(history) == set()


def attempts_history(*, reset: bool) -> History:
    """max_attempts 2: attempts 1 and 2, a retry, then a claim of attempt 3 (or 1 after reset)."""
    after = 0 if reset else 2
    return History(
        transitions=[
            row(1, "insert", None, "queued", max_attempts=2),
            claim(2, 1, "w", max_attempts=2),
            row(
                3,
                "update",
                "running",
                "queued",
                old_attempt=1,
                new_attempt=1,
                old_worker="w",
                old_lease=500,
                new_updated=600,
                max_attempts=2,
            ),
            claim(4, 2, "w", max_attempts=2),
            row(
                5,
                "update",
                "running",
                "failed",
                old_attempt=2,
                new_attempt=2,
                old_worker="w",
                new_worker="w",
                old_lease=500,
                new_updated=600,
                new_completed=600,
                max_attempts=2,
            ),
            row(6, "update", "failed", "queued", old_attempt=2, new_attempt=after, max_attempts=2),
            claim(7, after + 1, "w", max_attempts=2),
            claim(8, after + 2, "w", max_attempts=2) | {"old_status": "queued", "seq": 9},
        ],
        events=[],
        final=[],
        liveness=False,
    )


def test_an_attempt_beyond_max_attempts_and_its_retries_is_caught() -> None:
    history = attempts_history(reset=False)
    # attempt 3 is the one run a retry without reset allows; attempt 4 is not
    assert invariants(history) == {"INV-10"}


def test_attempts_count_again_from_a_retry_that_resets_them() -> None:
    assert invariants(attempts_history(reset=True)) == set()


def effect_history(status: str, effects: int) -> History:
    return History(
        transitions=[
            row(1, "insert", None, "queued"),
            claim(2, 1, "w1", token=1),
            settle(4, 1, "w1", new=status),
        ],
        events=[event("settle_ok", 1, "w1", 1)],
        final=[{"id": T, "status": status, "payload": '{"mode": "effect"}'}],
        effects=[{"task_id": T, "token": 1}] * effects,
    )


@pytest.mark.parametrize(
    ("status", "effects"), [("canceled", 1), ("succeeded", 0), ("succeeded", 2)]
)
def test_an_effect_committed_without_its_success_or_missing_from_it_is_caught(
    status: str, effects: int
) -> None:
    assert invariants(effect_history(status, effects)) == {"INV-11"}


@pytest.mark.parametrize(("status", "effects"), [("canceled", 0), ("succeeded", 1)])
def test_an_effect_exactly_when_its_claim_succeeded_is_valid(status: str, effects: int) -> None:
    assert invariants(effect_history(status, effects)) == set()


def claim_errors(pid: int, gap_s: float, *, worker: bool = True) -> list[dict[str, Any]]:
    started = [{"event": "worker_started", "pid": pid, "t": 0.5}] if worker else []
    return started + [{"event": "claim_error", "pid": pid, "t": 1.0 + i * gap_s} for i in range(30)]


def test_a_burst_of_failed_claims_is_an_error_loop() -> None:
    history = clean()
    history.events += claim_errors(7, 0.01)
    assert invariants(history) == {"INV-14"}


def test_failed_claims_that_back_off_are_no_error_loop() -> None:
    history = clean()
    history.events += claim_errors(7, 0.25)
    assert invariants(history) == set()


def test_failed_claims_of_a_process_that_is_no_worker_are_no_error_loop() -> None:
    history = clean()
    history.events += claim_errors(7, 0.01, worker=False)
    assert invariants(history) == set()


def purge_history(completed: int, deleted_at: float) -> History:
    history = clean()
    history.transitions[-1] = settle(
        3, 1, "w1", new_result='{"attempt": 1}', new_completed=completed
    )
    history.transitions.append(
        row(
            4,
            "delete",
            "succeeded",
            None,
            old_attempt=1,
            old_completed=completed,
            db_time=deleted_at,
        )
    )
    history.events.append({"event": "purge_invoke", "older_than_ms": 1000, "status": None})
    history.final = []
    return history


def test_a_delete_of_a_row_finished_after_the_cutoff_is_caught() -> None:
    assert invariants(purge_history(completed=5_000, deleted_at=5_500.0)) == {"INV-15"}


def test_a_delete_of_a_row_finished_before_the_cutoff_is_valid() -> None:
    assert invariants(purge_history(completed=5_000, deleted_at=6_500.0)) == set()


def ended_run_history(*, settled: bool, lost: bool = False) -> History:
    history = clean()
    history.events = [
        {"event": "submit_ok", "task": T},
        event("handler_start", 1, "w1", None, pid=7, t=1.0),
        event("handler_end", 1, "w1", None, pid=7, t=2.0, outcome="raise"),
        {"event": "worker_stopped", "pid": 7, "t": 9.0},
    ]
    if settled:
        history.events += [event("settle_invoke", 1, "w1", pid=7), ok(1, "w1")]
    if lost:
        history.events.append(event("lease_lost", 1, "w1", pid=7))
    return history


def test_a_raised_run_settled_without_its_error_is_caught() -> None:
    history = clean()
    history.transitions[-1] = settle(3, 1, "w1", new="failed", new_error_code=None)
    history.events += [event("handler_end", 1, "w1", outcome="raise", pid=7, t=2.0)]
    history.final = [{"id": T, "status": "failed"}]
    assert invariants(history) == {"INV-17"}


def test_a_run_its_cleanly_stopped_worker_never_settled_is_caught() -> None:
    assert "INV-17" in invariants(ended_run_history(settled=False))


@pytest.mark.parametrize(("settled", "lost"), [(True, False), (False, True)])
def test_a_run_settled_or_known_lost_by_its_worker_is_valid(settled: bool, lost: bool) -> None:
    assert "INV-17" not in invariants(ended_run_history(settled=settled, lost=lost))


def test_a_settlement_that_cannot_be_encoded_is_caught() -> None:
    history = clean()
    history.events.append(event("settle_info", 1, "w1", op="fail", error="SerializationError"))
    assert invariants(history) == {"INV-17"}


def key_row(seq: int, op: str, task: str, key: str = "k") -> dict[str, Any]:
    return {**row(seq, op, None, None), "tbl": "key", "task_id": task, "key": key}


def test_a_retried_task_the_key_moved_away_from_runs_without_the_key() -> None:
    history = History(
        transitions=[
            row(1, "insert", None, "queued", task_id="task_1"),
            key_row(2, "insert", "task_1"),
            row(3, "update", "queued", "canceled", task_id="task_1"),
            row(4, "insert", None, "queued", task_id="task_2"),
            key_row(5, "update", "task_2"),
            row(6, "update", "canceled", "queued", task_id="task_1"),
        ],
        events=[],
        final=[],
        liveness=False,
    )
    assert invariants(history) == set()


def test_a_replaced_task_still_being_canceled_does_not_count_as_live() -> None:
    history = History(
        transitions=[
            row(1, "insert", None, "queued", task_id="task_1"),
            key_row(2, "insert", "task_1"),
            row(3, "update", "queued", "running", task_id="task_1", new_attempt=1, new_lease=9),
            row(4, "update", "running", "running", task_id="task_1", new_lease=9, new_cancel=4),
            row(5, "insert", None, "queued", task_id="task_2"),
            key_row(6, "update", "task_2"),
        ],
        events=[],
        final=[],
        liveness=False,
    )
    assert invariants(history) == set()


def limited_history(*, expired: bool) -> History:
    """Three runs of limit key c1 (limit 2) overlap; the first claim's lease expired or not."""
    tasks = ["task_1", "task_2", "task_3"]
    transitions = []
    for i, task in enumerate(tasks):
        transitions += [
            row(10 * i + 1, "insert", None, "queued", task_id=task),
            claim(10 * i + 2, 1, "w", task_id=task, token=i + 1),
        ]
    first_end = settle(40, 1, "w", task_id="task_1")
    if expired:
        first_end = first_end | {"new_status": "queued", "old_lease": 500, "new_completed": None}
    transitions.append(first_end)
    transitions += [settle(41 + i, 1, "w", task_id=task) for i, task in enumerate(tasks[1:])]
    events = []
    for i, task in enumerate(tasks):
        start = {"task": task, "attempt": 1, "worker": "w", "token": i + 1}
        events += [
            {"event": "handler_start", "t": 1.0 + i, **start, "limit_key": "c1", "limit": 2},
            {"event": "handler_end", "t": 9.0, **start},
        ]
        if not (expired and i == 0):
            events += settled(task, i + 1)
    return History(transitions=transitions, events=events, final=[], liveness=False)


def test_runs_of_one_limit_key_overlapping_past_the_limit_are_inv18() -> None:
    assert invariants(limited_history(expired=False)) == {"INV-18"}


def test_a_run_whose_lease_expired_does_not_count_toward_its_limit() -> None:
    assert invariants(limited_history(expired=True)) == set()


# --- schedules -------------------------------------------------------------------------------

S = 1_000_000  # a slot of the every-second schedule "tick" (created at S - 500)


def slot(
    at: int, outcome: str = "enqueued", through: int | None = None, **f: Any
) -> dict[str, Any]:
    last = at if through is None else through
    base = {
        "schedule": "tick",
        "slot_ms": at,
        "through_ms": through,
        "slots": (last - at) // 1000 + 1,
        "outcome": outcome,
        "task_id": f"task_{at}" if outcome == "enqueued" else None,
        "recorded_at_ms": last + 100,
    }
    return base | f


def scheduled(slots: list[dict[str, Any]], cursor: int, **extra: Any) -> History:
    tasks = [
        {"id": r["task_id"], "name": "tick", "slot_ms": r["slot_ms"]}
        for r in slots
        if r["task_id"] is not None
    ]
    schedule = {
        "name": "tick",
        "cron": None,
        "every_ms": 1000,
        "catch_up_ms": 5000,
        "catch_up_policy": "all",
        "overlap": "allow",
        "cursor_ms": cursor,
        "created_at_ms": S - 500,
    }
    return History(
        transitions=extra.pop("transitions", []),
        events=[],
        final=[],
        schedules={
            "schedules": [schedule],
            "slots": slots,
            "tasks": tasks + extra.pop("tasks", []),
        },
    )


def test_a_schedule_with_every_slot_decided_once_is_valid() -> None:
    late = slot(S, "missed", S + 3000, recorded_at_ms=S + 8100)
    report = check(scheduled([late, slot(S + 4000), slot(S + 5000)], cursor=S + 5500))
    assert report.valid, report.summary()


def test_a_second_task_for_a_slot_is_sch1() -> None:
    extra = {"id": "task_again", "name": "tick", "slot_ms": S}
    report = check(scheduled([slot(S)], cursor=S + 500, tasks=[extra]))
    assert report.invariants() == {"SCH-1"}


def test_a_slot_key_pointing_at_a_second_task_is_sch1_even_once_purged() -> None:
    key = f"cairnq.schedule:tick:{S}"
    repointed = row(1, "update", None, None, tbl="key", task_id="task_gone", key=key)
    report = check(scheduled([slot(S)], cursor=S + 500, transitions=[repointed]))
    assert report.invariants() == {"SCH-1"}


@pytest.mark.parametrize(
    ("slots", "cursor", "message"),
    [
        ([slot(S), slot(S + 2000)], S + 2500, f"slot {S + 1000} undecided"),
        ([slot(S + 1000)], S + 1500, f"slot {S} undecided"),
        ([slot(S), slot(S + 1000)], S + 2500, f"slot {S + 2000} is before the cursor"),
        ([slot(S, "missed", S + 2000, recorded_at_ms=S + 6000)], S + 6000, "missed inside"),
        ([slot(S, "missed", S + 1000), slot(S + 1000)], S + 1500, "decided twice"),
        ([slot(S, task_id=None)], S + 500, "enqueued, no task"),
        ([slot(S, "missed", S + 1000, slots=1, recorded_at_ms=S + 9000)], S + 1500, "miscounts"),
    ],
)
def test_a_slot_not_accounted_for_is_sch2(
    slots: list[dict[str, Any]], cursor: int, message: str
) -> None:
    report = check(scheduled(slots, cursor))
    assert report.invariants() == {"SCH-2"}, report.summary()
    assert any(message in v.message for v in report.violations), report.summary()


# --- workflows -------------------------------------------------------------------------------

PARKED = PARKED_RUN_AT_MS
DEP, DEPENDENT = "task_dep", "task_dependent"


def wf_row(seq: int, tbl: str, task: str, **f: Any) -> dict[str, Any]:
    return row(seq, "insert", None, None, tbl=tbl, task_id=task, **f)


def moved(seq: int, task: str, old_run_at: int, new_run_at: int) -> dict[str, Any]:
    """A queued task's due time changed: parked (to ``PARKED``) or released (from it)."""
    return row(
        seq,
        "update",
        "queued",
        "queued",
        task_id=task,
        old_run_at=old_run_at,
        new_run_at=new_run_at,
    )


def run_to(seq: int, task: str, status: str, token: int) -> list[dict[str, Any]]:
    """A claim of ``task`` (its lease row beside it) and its settlement to ``status``."""
    return [
        claim(seq, 1, "w", task_id=task, token=token),
        settle(seq + 2, 1, "w", new=status, task_id=task),
    ]


def settled(task: str, token: int) -> list[dict[str, Any]]:
    return [
        {"event": "settle_invoke", "task": task, "attempt": 1, "worker": "w", "token": token},
        {"event": "settle_ok", "task": task, "attempt": 1, "worker": "w", "token": token},
    ]


def dependent_history(
    policy: str = "cancel", dependency_ends: str = "succeeded", *, claimed_first: bool = False
) -> History:
    """A dependent parked on one dependency, released when it ends (or, with
    ``claimed_first``, released and run before the dependency is claimed)."""
    parked = [
        row(1, "insert", None, "queued", task_id=DEP, new_run_at=1000),
        row(2, "insert", None, "queued", task_id=DEPENDENT, new_run_at=1000),
        wf_row(3, "dependency", DEPENDENT, ref=DEP, detail=policy),
        wf_row(4, "parked", DEPENDENT, detail="dependencies"),
        moved(5, DEPENDENT, 1000, PARKED),
    ]
    dependency = run_to(10, DEP, dependency_ends, token=1)
    dependent = [moved(20, DEPENDENT, PARKED, 1020), *run_to(21, DEPENDENT, "succeeded", 2)]
    if claimed_first:
        dependency = [{**r, "seq": r["seq"] + 20} for r in dependency]
    return History(
        transitions=sorted(parked + dependency + dependent, key=lambda r: r["seq"]),
        events=settled(DEP, 1) + settled(DEPENDENT, 2),
        final=[{"id": DEP, "status": dependency_ends}, {"id": DEPENDENT, "status": "succeeded"}],
    )


@pytest.mark.parametrize(
    ("policy", "ends"), [("cancel", "succeeded"), ("fail", "succeeded"), ("run", "failed")]
)
def test_a_dependent_run_after_its_dependency_ended_as_its_policy_needs_is_valid(
    policy: str, ends: str
) -> None:
    report = check(dependent_history(policy, ends))
    assert report.valid, report.summary()
    assert report.counters["parked_decisions"] == {"released": 1}


@pytest.mark.parametrize(
    ("policy", "ends", "claimed_first"),
    [
        ("cancel", "succeeded", True),
        ("run", "failed", True),
        ("cancel", "failed", False),
        ("fail", "canceled", False),
    ],
)
def test_a_dependent_claimed_before_its_dependency_succeeded_or_ended_is_wf1(
    policy: str, ends: str, claimed_first: bool
) -> None:
    history = dependent_history(policy, ends, claimed_first=claimed_first)
    assert invariants(history) == {"WF-1"}


def test_a_dependent_retried_by_hand_runs_whatever_its_dependencies() -> None:
    history = dependent_history("cancel", "failed")
    history.transitions[-3:] = [
        row(20, "update", "queued", "canceled", task_id=DEPENDENT, old_run_at=PARKED),
        row(21, "update", "canceled", "queued", task_id=DEPENDENT, new_run_at=1021),
        *run_to(22, DEPENDENT, "succeeded", 2),
    ]
    report = check(history)
    assert report.valid, report.summary()
    assert report.counters["parked_decisions"] == {"canceled": 1}


def test_a_second_release_of_a_dependent_already_released_is_wf2() -> None:
    history = dependent_history()
    history.transitions.append(moved(20, DEPENDENT, 1020, 1500) | {"seq": 20.5})
    history.transitions.sort(key=lambda r: r["seq"])
    assert invariants(history) == {"WF-2"}


WAITER = "task_waiter"


def waiter_history(*, wait_recorded: bool) -> History:
    """A task a durable wait parks (handed back, due at its deadline), then a send wakes
    (its due time moved to now) and it runs to its end; with ``wait_recorded``, the
    worker's history shows the wait's write."""
    transitions = [
        row(1, "insert", None, "queued", task_id=WAITER, new_run_at=1000),
        claim(2, 1, "w", task_id=WAITER, token=1),
        settle(4, 1, "w", new="queued", task_id=WAITER, new_attempt=0, new_run_at=90_000),
        moved(5, WAITER, 90_000, 1005),
        claim(6, 1, "w", task_id=WAITER, token=2),
        settle(8, 1, "w", task_id=WAITER),
    ]
    op = "event_wait" if wait_recorded else "complete"
    park = {"event": "settle_invoke", "task": WAITER, "attempt": 1, "worker": "w", "token": 1}
    events = [park | {"op": op}, park | {"event": "settle_ok", "op": op}, *settled(WAITER, 2)]
    return History(
        transitions=transitions, events=events, final=[{"id": WAITER, "status": "succeeded"}]
    )


def test_a_durable_wait_s_wake_is_no_workflow_decision() -> None:
    report = check(waiter_history(wait_recorded=True))
    assert report.valid, report.summary()


def test_a_due_time_moved_on_a_task_no_wait_parked_is_still_wf2() -> None:
    assert "WF-2" in invariants(waiter_history(wait_recorded=False))


def test_a_dependent_failed_by_policy_after_its_release_is_wf2() -> None:
    history = dependent_history()
    history.transitions[-3:] = [
        row(21, "update", "queued", "failed", task_id=DEPENDENT, new_error_code="dependency_failed")
    ]
    history.events = settled(DEP, 1)
    history.final[1]["status"] = "failed"
    assert invariants(history) == {"WF-2"}


SLOW = "task_slow"


def purged_dependency_history(
    policy: str = "cancel", fast_ends: str = "succeeded", decision: str = "canceled"
) -> History:
    """A dependent parked on a fast and a slow dependency: the fast one ends
    (``fast_ends``) and a purge deletes it while the slow one runs; the slow one
    succeeds, then the dependent is decided: ``canceled``, ``failed`` (by policy
    ``fail``, its ``dependency_failed`` envelope) or ``released``."""
    parked = [
        row(1, "insert", None, "queued", task_id=DEP, new_run_at=1000),
        row(2, "insert", None, "queued", task_id=SLOW, new_run_at=1000),
        row(3, "insert", None, "queued", task_id=DEPENDENT, new_run_at=1000),
        wf_row(4, "dependency", DEPENDENT, ref=DEP, detail=policy),
        wf_row(5, "dependency", DEPENDENT, ref=SLOW, detail=policy),
        wf_row(6, "parked", DEPENDENT, detail="dependencies"),
        moved(7, DEPENDENT, 1000, PARKED),
    ]
    purge = row(13, "delete", fast_ends, None, task_id=DEP, old_attempt=1, old_completed=1012)
    if decision == "released":
        decided = [moved(30, DEPENDENT, PARKED, 1030), *run_to(31, DEPENDENT, "succeeded", 3)]
        final = "succeeded"
    else:
        code = DEPENDENCY_FAILED if decision == "failed" else None
        decided = [
            row(
                30,
                "update",
                "queued",
                decision,
                task_id=DEPENDENT,
                old_run_at=PARKED,
                new_run_at=PARKED,
                new_completed=1030,
                new_error_code=code,
            )
        ]
        final = decision
    transitions = [
        *parked,
        *run_to(10, DEP, fast_ends, token=1),
        purge,
        *run_to(20, SLOW, "succeeded", token=2),
        *decided,
    ]
    events = (
        settled(DEP, 1) + settled(SLOW, 2) + (settled(DEPENDENT, 3) if final == "succeeded" else [])
    )
    return History(
        transitions=transitions,
        events=[*events, {"event": "purge_invoke", "older_than_ms": 0, "status": None}],
        final=[{"id": SLOW, "status": "succeeded"}, {"id": DEPENDENT, "status": final}],
    )


def test_a_dependent_released_once_its_dependencies_succeeded_one_then_purged_is_valid() -> None:
    report = check(purged_dependency_history(decision="released"))
    assert report.valid, report.summary()
    assert report.counters["released_past_a_purge"] == 1


@pytest.mark.parametrize(
    ("policy", "fast_ends", "decision"),
    [
        ("cancel", "succeeded", "canceled"),
        ("fail", "succeeded", "failed"),
        ("run", "failed", "canceled"),
    ],
)
def test_a_dependent_canceled_or_failed_with_no_dependency_ended_badly_is_wf4(
    policy: str, fast_ends: str, decision: str
) -> None:
    history = purged_dependency_history(policy, fast_ends, decision)
    assert invariants(history) == {"WF-4"}


@pytest.mark.parametrize(
    ("policy", "fast_ends", "decision"),
    [("cancel", "failed", "canceled"), ("fail", "canceled", "failed")],
)
def test_a_dependent_canceled_or_failed_for_a_dependency_purged_without_succeeding_is_valid(
    policy: str, fast_ends: str, decision: str
) -> None:
    report = check(purged_dependency_history(policy, fast_ends, decision))
    assert report.valid, report.summary()


def test_a_dependent_a_client_canceled_is_not_held_to_its_dependencies() -> None:
    history = purged_dependency_history()
    history.events.append({"event": "cancel_invoke", "task": DEPENDENT})
    report = check(history)
    assert report.valid, report.summary()


PARENT, CHILD = "task_parent", "task_child"


def gather_history(*, resumed_at: int = 20) -> History:
    """A parent's first run spawns a child and parks in gather; the child runs; the parent
    is released at ``resumed_at`` and runs again."""
    first = [claim(2, 1, "w", task_id=PARENT, token=1)]
    park = row(
        5,
        "update",
        "running",
        "queued",
        task_id=PARENT,
        old_attempt=1,
        new_attempt=0,
        old_worker="w",
        old_lease=10_000,
        old_run_at=1000,
        new_run_at=PARKED,
    )
    transitions = [
        row(1, "insert", None, "queued", task_id=PARENT, new_run_at=1000),
        *first,
        row(4, "insert", None, "queued", task_id=CHILD, new_run_at=1004),
        park,
        wf_row(6, "dependency", PARENT, ref=CHILD, detail="run"),
        wf_row(7, "parked", PARENT, detail="gather"),
        *run_to(10, CHILD, "succeeded", 2),
        moved(resumed_at, PARENT, PARKED, 1020),
        *run_to(30, PARENT, "succeeded", 3),
    ]
    return History(
        transitions=sorted(transitions, key=lambda r: r["seq"]),
        events=settled(PARENT, 1) + settled(CHILD, 2) + settled(PARENT, 3),
        final=[{"id": PARENT, "status": "succeeded"}, {"id": CHILD, "status": "succeeded"}],
    )


def test_a_gathered_parent_resumed_once_after_its_children_ended_is_valid() -> None:
    report = check(gather_history())
    assert report.valid, report.summary()
    assert report.counters["gathers"] == 1


def test_a_gathered_parent_resumed_before_its_child_ended_is_wf3() -> None:
    assert invariants(gather_history(resumed_at=11)) == {"WF-3"}


def test_a_gathered_parent_resumed_twice_is_wf3() -> None:
    history = gather_history()
    history.transitions.append(moved(25, PARENT, 1020, 1500))
    history.transitions.sort(key=lambda r: r["seq"])
    assert invariants(history) == {"WF-3"}


@pytest.mark.parametrize(
    ("mutant", "dialect"),
    [(name, dialect) for name, m in MUTANTS.items() for dialect in m.dialects],
)
def test_every_substitution_of_a_mutant_applies(mutant: str, dialect: str) -> None:
    statements = _protocol.statements(dialect)  # type: ignore[arg-type]
    changed = mutated(mutant, dialect, statements)
    expected = {statement for statement, _, _ in MUTANTS[mutant].sql.get(dialect, [])}
    assert {n for n in statements if changed[n] is not statements[n]} == expected
    assert expected or MUTANTS[mutant].patch is not None


def test_a_mutant_whose_text_is_not_found_refuses_to_run() -> None:
    statements = dict(_protocol.statements("sqlite"))
    complete = statements["complete"]
    statements["complete"] = _protocol._load_statement(
        "sqlite", "complete", complete.source.replace("attempt = :attempt and ", "")
    )
    with pytest.raises(SystemExit, match="appears 0 times in the sqlite complete statement"):
        mutated("no_fence", "sqlite", statements)


def test_docs_guarantees_lists_every_mutant_and_every_invariant() -> None:
    from . import checker, test_mutants, waits_program

    text = (Path(__file__).resolve().parents[2] / "docs" / "guarantees.md").read_text()
    named = set(re.findall(r"`([a-z_]+)`: ", text))
    assert named == set(test_mutants.MUTANTS) | set(waits_program.MUTANTS) | {"synchronous_off"}
    checked = {
        re.match(r"(INV-\w+|E\d|SCH-\d|WF-\d)", (fn.__doc__ or "").strip()).group(1)  # type: ignore[union-attr]
        for name, fn in vars(checker).items()
        if name.startswith(("inv", "sch", "wf"))
    }
    listed = set(re.findall(r"\b(INV-\w+|E2|SCH-\d|WF-\d)\b", text))
    assert checked == listed


def held_history(op: str) -> History:
    """A claim (lease until 10,000) whose success committed at 10,005, past its lease."""
    return History(
        transitions=[
            row(1, "insert", None, "queued"),
            claim(2, 1, "w1", token=1),
            settle(4, 1, "w1", new_updated=10_005, new_result='{"attempt": 1}'),
        ],
        events=[event("settle_ok", 1, "w1", 1, op=op)],
        final=[{"id": T, "status": "succeeded", "payload": '{"mode": "effect"}'}],
        effects=[{"task_id": T, "token": 1}] if op == "complete_in" else [],
    )


def test_a_succeed_in_that_held_the_row_past_its_lease_is_its_holders_success() -> None:
    assert invariants(held_history("complete_in")) == set()


def test_a_plain_completion_reported_after_its_lease_ran_out_is_still_caught() -> None:
    assert invariants(held_history("complete")) == {"INV-5"}


def unique_history(gap_ms: float) -> History:
    """Two tasks submit(key="k", unique_for=1 s) returned, inserted ``gap_ms`` apart."""
    submits = [
        {"event": "submit_ok", "task": task, "key": "k", "unique_for_ms": 1000}
        for task in ("task_A", "task_B", "task_A")
    ]
    return History(
        transitions=[
            row(1, "insert", None, "queued", task_id="task_A", db_time=5000.0),
            row(2, "update", "queued", "canceled", task_id="task_A", new_completed=5001),
            row(3, "insert", None, "queued", task_id="task_B", db_time=5000.0 + gap_ms),
            row(4, "update", "queued", "canceled", task_id="task_B", new_completed=5002),
        ],
        events=submits,
        final=[],
        liveness=False,
    )


def test_unique_tasks_of_a_key_a_period_apart_are_valid() -> None:
    assert invariants(unique_history(1000.0)) == set()


def test_a_second_unique_task_of_a_key_within_the_period_is_inv20() -> None:
    assert invariants(unique_history(400.0)) == {"INV-20"}


def expiring_history(claimed_at: float, started_at: float | None = None) -> History:
    """A task that may wait until 5,000 (database clock), claimed at ``claimed_at`` and run;
    its first start recorded at ``started_at`` (by an earlier claim), if given."""
    start = []
    if started_at is not None:
        start = [row(3, "update", None, None, tbl="policy", detail="started", db_time=started_at)]
    return History(
        transitions=[
            row(1, "insert", None, "queued"),
            row(2, "insert", None, None, tbl="policy", new_run_at=5_000, db_time=1_000.0),
            *start,
            claim(4, 1, "w", token=1, db_time=claimed_at),
            settle(5, 1, "w", old_worker=holder("w", 1), new_worker=holder("w", 1)),
        ],
        events=[
            event("handler_start", 1, "w", 1, t=1.0),
            event("handler_end", 1, "w", 1, t=2.0),
            event("settle_ok", 1, "w", 1, op="complete", status="succeeded"),
        ],
        final=[{"id": T, "status": "succeeded"}],
    )


def test_a_run_started_from_a_claim_after_the_tasks_expiry_is_caught() -> None:
    assert invariants(expiring_history(5_010.0)) == {"INV-21"}


def test_a_run_started_from_a_claim_before_the_tasks_expiry_is_valid() -> None:
    assert invariants(expiring_history(4_990.0)) == set()


def test_a_run_after_the_expiry_of_a_task_whose_start_was_recorded_in_time_is_valid() -> None:
    assert invariants(expiring_history(9_000.0, started_at=4_000.0)) == set()


def test_a_start_recorded_after_the_expiry_excuses_no_later_run() -> None:
    assert invariants(expiring_history(9_000.0, started_at=5_010.0)) == {"INV-21"}
