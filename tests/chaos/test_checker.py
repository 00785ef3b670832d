"""The checker on hand-written histories: each defect yields exactly its violation."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from cairnq.protocol import statements as _protocol

from .checker import History, check
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


def claim(seq: int, attempt: int, worker: str, lease: int = 10_000, **f: Any) -> dict[str, Any]:
    fields = {
        "old_attempt": attempt - 1,
        "new_attempt": attempt,
        "new_worker": worker,
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


def lease_row(seq: int, token: int, task: str = T) -> dict[str, Any]:
    return {**row(seq, "update", None, None, task_id=task), "tbl": "lease", "token": token}


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
            claim(2, 1, "w"),
            lease_row(3, 1),
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
            claim(6, 1, "w"),
            lease_row(7, 2),
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
            claim(2, 1, "w1"),
            lease_row(3, 1),
            earlier_end,
            claim(5, 2, "w2"),
            lease_row(6, 2),
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
            claim(2, 1, "w1"),
            lease_row(3, 1),
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
    from . import checker, test_mutants

    text = (Path(__file__).resolve().parents[2] / "docs" / "guarantees.md").read_text()
    named = set(re.findall(r"`([a-z_]+)`: ", text))
    assert named == set(test_mutants.MUTANTS) | {"synchronous_off"}
    checked = {
        re.match(r"(INV-\w+|E\d|SCH-\d)", (fn.__doc__ or "").strip()).group(1)  # type: ignore[union-attr]
        for name, fn in vars(checker).items()
        if name.startswith(("inv", "sch"))
    }
    listed = set(re.findall(r"\b(INV-\w+|E2|SCH-\d)\b", text))
    assert checked == listed
