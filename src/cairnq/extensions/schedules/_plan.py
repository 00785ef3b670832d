"""Deciding a schedule's due slots: pure, so every rule is tested without a database.

The evaluator holds the schedule's row (locked) and its cursor: every slot at or
before the cursor is decided. ``plan`` decides the slots after it, up to now, and
says where the cursor moves. Each slot gets exactly one outcome:

- older than ``now - catch_up_ms``: ``missed`` (one record for the whole range);
- with ``catch_up_policy="latest"``, every due slot but the newest: ``superseded``;
- with ``overlap="skip"``, a slot due while the previous slot's task is queued or
  running: ``overlap``; with ``overlap="queue"`` it is not decided yet (the cursor
  stays before it) until that task ends;
- otherwise ``enqueued``, its task due at the slot plus the schedule's jitter.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ._timing import Timing

COUNT_CAP = 100_000


@dataclass(frozen=True)
class Decision:
    """The outcome of one slot, or of the range of slots ``slot_ms``..``through_ms``."""

    slot_ms: int
    outcome: str
    through_ms: int | None = None
    slots: int = 1
    run_at_ms: int | None = None


@dataclass(frozen=True)
class Plan:
    """The decisions, oldest first, and the cursor after them."""

    decisions: list[Decision]
    cursor_ms: int


def jitter_for(name: str, slot_ms: int, jitter_ms: int) -> int:
    """The delay of a slot's task: 0..``jitter_ms``, the same in every process."""
    if jitter_ms <= 0:
        return 0
    digest = hashlib.blake2b(f"{name}\x00{slot_ms}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % (jitter_ms + 1)


def range_decision(timing: Timing, after_ms: int, through_ms: int, outcome: str) -> Decision | None:
    """One decision for every slot in ``(after_ms, through_ms]``, or ``None`` when there is none."""
    first = timing.next_slot(after_ms)
    if first is None or first > through_ms:
        return None
    last = timing.last_slot(through_ms, not_before_ms=after_ms)
    count = timing.count_slots(after_ms, through_ms, cap=COUNT_CAP)
    return Decision(first, outcome, through_ms=None if last in (None, first) else last, slots=count)


def plan(
    *,
    name: str,
    timing: Timing,
    cursor_ms: int,
    now_ms: int,
    catch_up_ms: int,
    catch_up_policy: str,
    overlap: str,
    jitter_ms: int,
    previous_live: bool,
    batch: int,
) -> Plan:
    """Decide the slots in ``(cursor_ms, now_ms]``, at most ``batch`` enqueued at once.

    ``previous_live``: the task of the latest enqueued slot is queued or running.
    """
    decisions: list[Decision] = []
    cursor = cursor_ms
    window_start = now_ms - catch_up_ms
    if window_start > cursor:
        missed = range_decision(timing, cursor, window_start, "missed")
        if missed is not None:
            decisions.append(missed)
        cursor = window_start
    if overlap == "queue" and previous_live:
        # The next slot waits for the running one: nothing after the window is decided.
        return Plan(decisions, cursor)
    due = timing.slots(cursor, now_ms, limit=batch + 1)
    if not due:
        return Plan(decisions, now_ms)
    if catch_up_policy == "latest":
        latest = timing.last_slot(now_ms, not_before_ms=cursor)
        assert latest is not None  # ``due`` is not empty
        older = range_decision(timing, cursor, latest - 1, "superseded")
        if older is not None:
            decisions.append(older)
        due = [latest]
    more = len(due) > batch
    due = due[:batch]
    if overlap == "queue":
        # One at a time: the next slot is decided once this one's task ends.
        due, more = due[:1], True
    if overlap == "skip" and previous_live:
        run, skipped = [], due
    elif overlap == "skip":
        run, skipped = due[:1], due[1:]
    else:
        run, skipped = due, []
    for slot in run:
        decisions.append(
            Decision(slot, "enqueued", run_at_ms=slot + jitter_for(name, slot, jitter_ms))
        )
    if skipped:
        decisions.append(
            Decision(
                skipped[0],
                "overlap",
                through_ms=skipped[-1] if len(skipped) > 1 else None,
                slots=len(skipped),
            )
        )
    return Plan(decisions, due[-1] if more else now_ms)
