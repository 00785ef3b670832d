"""Slot decisions (``cairnq.extensions.schedules._plan``): pure rules, no database."""

from __future__ import annotations

from typing import Any

from cairnq.extensions.schedules._plan import COUNT_CAP, Decision, jitter_for, plan
from cairnq.extensions.schedules._timing import Timing

EVERY_10S = Timing.parse(every="10s")


def _plan(**overrides: Any) -> Any:
    options: dict[str, Any] = {
        "name": "s",
        "timing": EVERY_10S,
        "cursor_ms": 0,
        "now_ms": 0,
        "catch_up_ms": 3_600_000,
        "catch_up_policy": "all",
        "overlap": "allow",
        "jitter_ms": 0,
        "previous_live": False,
        "batch": 100,
    }
    options.update(overrides)
    return plan(**options)


def _outcomes(decisions: list[Decision]) -> list[tuple[int, str, int | None, int]]:
    return [(d.slot_ms, d.outcome, d.through_ms, d.slots) for d in decisions]


def test_nothing_due_moves_the_cursor_to_now_and_decides_nothing() -> None:
    result = _plan(cursor_ms=10_000, now_ms=15_000)
    assert result.decisions == []
    assert result.cursor_ms == 15_000


def test_every_due_slot_is_enqueued_once_oldest_first_at_its_own_time() -> None:
    result = _plan(cursor_ms=10_000, now_ms=40_000)
    assert _outcomes(result.decisions) == [
        (20_000, "enqueued", None, 1),
        (30_000, "enqueued", None, 1),
        (40_000, "enqueued", None, 1),
    ]
    assert [d.run_at_ms for d in result.decisions] == [20_000, 30_000, 40_000]
    assert result.cursor_ms == 40_000


def test_the_cursor_is_exclusive_a_slot_at_the_cursor_is_never_decided_again() -> None:
    result = _plan(cursor_ms=20_000, now_ms=20_000)
    assert result.decisions == []


def test_slots_older_than_catch_up_are_one_missed_range_with_an_exact_count() -> None:
    result = _plan(cursor_ms=0, now_ms=100_000, catch_up_ms=35_000)
    assert _outcomes(result.decisions) == [
        (10_000, "missed", 60_000, 6),
        (70_000, "enqueued", None, 1),
        (80_000, "enqueued", None, 1),
        (90_000, "enqueued", None, 1),
        (100_000, "enqueued", None, 1),
    ]


def test_a_slot_exactly_catch_up_old_is_missed() -> None:
    result = _plan(cursor_ms=0, now_ms=40_000, catch_up_ms=30_000)
    assert _outcomes(result.decisions)[0] == (10_000, "missed", None, 1)


def test_latest_policy_enqueues_the_newest_slot_and_supersedes_the_rest_of_the_window() -> None:
    result = _plan(cursor_ms=0, now_ms=100_000, catch_up_ms=35_000, catch_up_policy="latest")
    assert _outcomes(result.decisions) == [
        (10_000, "missed", 60_000, 6),
        (70_000, "superseded", 90_000, 3),
        (100_000, "enqueued", None, 1),
    ]
    assert result.cursor_ms == 100_000


def test_latest_policy_with_one_due_slot_supersedes_nothing() -> None:
    result = _plan(cursor_ms=0, now_ms=15_000, catch_up_policy="latest")
    assert _outcomes(result.decisions) == [(10_000, "enqueued", None, 1)]


def test_a_batch_limit_leaves_the_cursor_on_the_last_slot_decided() -> None:
    result = _plan(cursor_ms=0, now_ms=100_000, batch=4)
    assert [d.slot_ms for d in result.decisions] == [10_000, 20_000, 30_000, 40_000]
    assert result.cursor_ms == 40_000
    rest = _plan(cursor_ms=result.cursor_ms, now_ms=100_000, batch=4)
    assert [d.slot_ms for d in rest.decisions] == [50_000, 60_000, 70_000, 80_000]


def test_overlap_allow_enqueues_while_the_previous_task_is_live() -> None:
    result = _plan(cursor_ms=10_000, now_ms=20_000, previous_live=True)
    assert _outcomes(result.decisions) == [(20_000, "enqueued", None, 1)]


def test_overlap_skip_records_slots_due_while_the_previous_task_is_live() -> None:
    result = _plan(cursor_ms=10_000, now_ms=40_000, overlap="skip", previous_live=True)
    assert _outcomes(result.decisions) == [(20_000, "overlap", 40_000, 3)]
    assert result.cursor_ms == 40_000


def test_overlap_skip_enqueues_one_slot_and_skips_the_ones_it_would_overlap() -> None:
    result = _plan(cursor_ms=10_000, now_ms=40_000, overlap="skip")
    assert _outcomes(result.decisions) == [
        (20_000, "enqueued", None, 1),
        (30_000, "overlap", 40_000, 2),
    ]


def test_overlap_queue_waits_without_deciding_while_the_previous_task_is_live() -> None:
    result = _plan(cursor_ms=10_000, now_ms=40_000, overlap="queue", previous_live=True)
    assert result.decisions == []
    assert result.cursor_ms == 10_000


def test_overlap_queue_enqueues_the_oldest_waiting_slot_once_the_previous_ended() -> None:
    result = _plan(cursor_ms=10_000, now_ms=40_000, overlap="queue")
    assert _outcomes(result.decisions) == [(20_000, "enqueued", None, 1)]
    assert result.cursor_ms == 20_000


def test_overlap_queue_still_records_slots_that_fell_out_of_the_window_as_missed() -> None:
    result = _plan(
        cursor_ms=0, now_ms=100_000, catch_up_ms=35_000, overlap="queue", previous_live=True
    )
    assert _outcomes(result.decisions) == [(10_000, "missed", 60_000, 6)]
    assert result.cursor_ms == 65_000


def test_jitter_delays_each_task_within_bounds_the_same_in_every_process() -> None:
    delays = [jitter_for("s", slot, 5_000) for slot in range(0, 10_000_000, 10_000)]
    assert all(0 <= d <= 5_000 for d in delays)
    assert len(set(delays)) > 100  # spread, not one constant
    assert delays == [jitter_for("s", slot, 5_000) for slot in range(0, 10_000_000, 10_000)]


def test_a_planned_task_runs_at_its_slot_plus_its_jitter() -> None:
    result = _plan(cursor_ms=10_000, now_ms=20_000, jitter_ms=3_000)
    [decision] = result.decisions
    assert decision.run_at_ms == 20_000 + jitter_for("s", 20_000, 3_000)


def test_no_jitter_means_no_delay() -> None:
    assert jitter_for("s", 20_000, 0) == 0


def test_a_long_outage_counts_missed_slots_up_to_the_cap() -> None:
    every_second = Timing.parse(every="1s")
    result = _plan(timing=every_second, cursor_ms=0, now_ms=400_000_000, catch_up_ms=1_000)
    missed = result.decisions[0]
    assert (missed.outcome, missed.slot_ms, missed.through_ms) == ("missed", 1_000, 399_999_000)
    assert missed.slots == COUNT_CAP
