"""The history checker: proves cairnq's guarantees held in a run, from what actually happened.

Inputs: the database's transition log (authoritative order: ``seq``), the client
and worker histories (JSONL), and the final rows. Each invariant names the
guarantee it proves (reliability.md section 3.3) and yields violations with the
events that show them. Times are compared only inside one clock domain: the
database's ``seq`` order, or one process's monotonic clock.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

TERMINAL = {"succeeded", "failed", "canceled"}
LIVE = {"queued", "running"}

# (old status, new status) -> allowed; claim/settle/recover details checked separately.
EDGES = {
    (None, "queued"),
    ("queued", "running"),
    ("queued", "canceled"),
    ("running", "running"),
    ("running", "succeeded"),
    ("running", "failed"),
    ("running", "canceled"),
    ("running", "queued"),
    ("failed", "queued"),
    ("canceled", "queued"),
}


@dataclass
class Violation:
    invariant: str
    task: str | None
    message: str
    evidence: list[Any] = field(default_factory=list)

    def __str__(self) -> str:
        where = f" task {self.task}" if self.task else ""
        return f"{self.invariant}{where}: {self.message}"


@dataclass
class Report:
    """The outcome of a check: ``valid`` when no invariant was violated."""

    violations: list[Violation]
    counters: dict[str, Any]

    @property
    def valid(self) -> bool:
        return not self.violations

    def summary(self) -> str:
        lines = [f"valid={self.valid} " + " ".join(f"{k}={v}" for k, v in self.counters.items())]
        lines += [f"  {v}" for v in self.violations[:20]]
        if len(self.violations) > 20:
            lines.append(f"  ... and {len(self.violations) - 20} more")
        return "\n".join(lines)

    def has(self, invariant: str) -> bool:
        return any(v.invariant == invariant for v in self.violations)


@dataclass
class History:
    transitions: list[dict[str, Any]]
    events: list[dict[str, Any]]
    final: list[dict[str, Any]]
    integrity: str = "ok"
    quiescent: bool = True
    allow_busy_errors: bool = True
    purge_cutoffs: dict[str, int] = field(default_factory=dict)


def _is_settle(row: dict[str, Any]) -> bool:
    """A transition out of ``running`` made by the owner (lease still valid at that instant)."""
    return (
        row["op"] == "update"
        and row["old_status"] == "running"
        and row["new_status"] != "running"
        and row["old_lease"] is not None
        and row["new_updated"] is not None
        and row["old_lease"] > row["new_updated"]
    )


def _is_recovery(row: dict[str, Any]) -> bool:
    """A transition out of ``running`` after the lease had expired (recover_leases)."""
    return (
        row["op"] == "update"
        and row["old_status"] == "running"
        and row["new_status"] != "running"
        and not _is_settle(row)
    )


def _is_claim(row: dict[str, Any]) -> bool:
    return (
        row["op"] == "update" and row["old_status"] == "queued" and row["new_status"] == "running"
    )


def check(history: History) -> Report:
    """Run every invariant over ``history``."""
    task_rows = [r for r in history.transitions if r["tbl"] == "task"]
    violations: list[Violation] = []
    for invariant in (
        inv1_accepted_tasks_are_never_lost,
        inv2_every_task_ends_terminal,
        inv3_one_terminal_transition_per_generation,
        inv4_every_settlement_was_made_by_the_lease_holder,
        inv5_refused_settlements_change_nothing,
        inv6_only_protocol_edges_and_bounded_attempts,
        inv8_cancel_wins,
        inv9_one_live_task_per_key,
        inv12_result_comes_from_the_settling_attempt,
        inv15_purge_removes_only_settled_rows,
        inv16_storage_integrity,
        inv_no_busy_errors_escaped,
    ):
        violations.extend(invariant(history, task_rows))
    return Report(violations, _counters(history, task_rows))


# --- invariants -------------------------------------------------------------------------------


def inv1_accepted_tasks_are_never_lost(
    h: History, rows: list[dict[str, Any]]
) -> Iterator[Violation]:
    """INV-1 (G1, G6): every accepted submit was stored; only purges of finished rows delete."""
    inserted = {r["task_id"] for r in rows if r["op"] == "insert"}
    for event in h.events:
        if event["event"] == "submit_ok" and event["task"] not in inserted:
            yield Violation("INV-1", event["task"], "accepted submit never stored", [event])


def inv2_every_task_ends_terminal(h: History, rows: list[dict[str, Any]]) -> Iterator[Violation]:
    """INV-2 (G3): after quiescence nothing is left queued or running."""
    if not h.quiescent:
        return
    for row in h.final:
        if row["status"] in LIVE:
            yield Violation("INV-2", row["id"], f"still {row['status']} after quiescence", [row])


def _generations(rows: list[dict[str, Any]]) -> dict[str, list[list[dict[str, Any]]]]:
    """Per task, its transitions split into generations (a new one at each retry)."""
    out: dict[str, list[list[dict[str, Any]]]] = defaultdict(list)
    for row in rows:
        task = row["task_id"]
        if row["op"] == "insert" or (
            row["op"] == "update"
            and row["old_status"] in TERMINAL
            and row["new_status"] == "queued"
        ):
            out[task].append([])
        if not out[task]:
            out[task].append([])
        out[task][-1].append(row)
    return out


def inv3_one_terminal_transition_per_generation(
    h: History, rows: list[dict[str, Any]]
) -> Iterator[Violation]:
    """INV-3 (G4): within a generation a task enters a terminal status at most once."""
    for task, generations in _generations(rows).items():
        for generation in generations:
            terminal = [
                r
                for r in generation
                if r["op"] == "update"
                and r["new_status"] in TERMINAL
                and r["old_status"] != r["new_status"]
            ]
            if len(terminal) > 1:
                yield Violation("INV-3", task, "settled twice in one generation", terminal)


def _settle_events(h: History) -> dict[tuple[str, int, str], list[dict[str, Any]]]:
    found: dict[tuple[str, int, str], list[dict[str, Any]]] = defaultdict(list)
    for event in h.events:
        if event["event"] in ("settle_invoke", "settle_ok", "settle_info", "settle_lost"):
            found[(event["task"], event["attempt"], event["worker"])].append(event)
    return found


def inv4_every_settlement_was_made_by_the_lease_holder(
    h: History, rows: list[dict[str, Any]]
) -> Iterator[Violation]:
    """INV-4 (G4, fencing): each owner settlement matches a worker that held that very attempt.

    The database row says which attempt and worker it settled; some worker must
    have sent a settlement for exactly that (task, attempt, worker) and seen it
    succeed, or not have learned the outcome (an error, or the process died after
    sending it). A stale writer settling a newer attempt shows up here.
    """
    events = _settle_events(h)
    for row in rows:
        if not _is_settle(row):
            continue
        key = (row["task_id"], row["old_attempt"], row["old_worker"])
        kinds = {e["event"] for e in events.get(key, [])}
        unknown = "settle_invoke" in kinds and "settle_lost" not in kinds
        if not (kinds & {"settle_ok", "settle_info"} or unknown):
            stale = [
                e
                for (task, attempt, _), group in events.items()
                if task == row["task_id"] and attempt != row["old_attempt"]
                for e in group
            ]
            yield Violation(
                "INV-4",
                row["task_id"],
                f"attempt {row['old_attempt']} of {row['old_worker']} was settled by no worker "
                "holding it (a stale writer?)",
                [row, *stale[:5]],
            )


def inv5_refused_settlements_change_nothing(
    h: History, rows: list[dict[str, Any]]
) -> Iterator[Violation]:
    """INV-5 (G4): a settlement the worker saw succeed maps to exactly one database change."""
    settled: Counter[tuple[str, int, str]] = Counter(
        (r["task_id"], r["old_attempt"], r["old_worker"]) for r in rows if _is_settle(r)
    )
    for event in h.events:
        if event["event"] != "settle_ok":
            continue
        key = (event["task"], event["attempt"], event["worker"])
        if settled[key] != 1:
            yield Violation(
                "INV-5",
                event["task"],
                f"a settlement reported ok matches {settled[key]} database changes",
                [event],
            )


def inv6_only_protocol_edges_and_bounded_attempts(
    h: History, rows: list[dict[str, Any]]
) -> Iterator[Violation]:
    """INV-6 (G9): allowed edges only; a claim adds exactly one attempt; lease set iff running."""
    for row in rows:
        if row["op"] == "delete":
            continue
        old = row["old_status"] if row["op"] == "update" else None
        new = row["new_status"]
        if (old, new) not in EDGES:
            yield Violation("INV-6", row["task_id"], f"illegal edge {old} -> {new}", [row])
        if (new == "running") != (row["new_lease"] is not None):
            yield Violation(
                "INV-6", row["task_id"], "lease set while not running (or absent)", [row]
            )
        if _is_claim(row) and row["new_attempt"] != row["old_attempt"] + 1:
            yield Violation(
                "INV-6", row["task_id"], "a claim did not add exactly one attempt", [row]
            )
        if old == "running" and new == "running" and row["new_attempt"] != row["old_attempt"]:
            yield Violation(
                "INV-6", row["task_id"], "running task claimed again while running", [row]
            )
        if old == "running" and new == "running" and row["new_worker"] != row["old_worker"]:
            yield Violation("INV-6", row["task_id"], "running task changed owner", [row])


def inv8_cancel_wins(h: History, rows: list[dict[str, Any]]) -> Iterator[Violation]:
    """INV-8 (G7): once a cancel is recorded on a running attempt, that attempt ends canceled."""
    for task, generations in _generations(rows).items():
        for generation in generations:
            requested = False
            for row in generation:
                if row["op"] != "update":
                    continue
                if row["new_status"] == "running" and row["new_cancel"] is not None:
                    requested = True
                if requested and row["old_status"] == "running" and row["new_status"] != "running":
                    if row["new_status"] != "canceled":
                        yield Violation(
                            "INV-8",
                            task,
                            f"cancel was requested, attempt ended {row['new_status']}",
                            [row],
                        )
                    requested = False
                if requested and row["old_status"] == "queued" and row["new_status"] == "running":
                    yield Violation("INV-8", task, "claimed again after a cancel request", [row])


def inv9_one_live_task_per_key(h: History, rows: list[dict[str, Any]]) -> Iterator[Violation]:
    """INV-9 (G8): at every point, a key's tasks include at most one live, uncanceled one."""
    status: dict[str, str] = {}
    canceling: set[str] = set()
    tasks_of: dict[str, set[str]] = defaultdict(set)
    for row in h.transitions:
        if row["tbl"] == "task":
            if row["op"] == "delete":
                status.pop(row["task_id"], None)
                continue
            status[row["task_id"]] = row["new_status"]
            if row["new_cancel"] is not None:
                canceling.add(row["task_id"])
            elif row["new_status"] != "running":
                canceling.discard(row["task_id"])
        elif row["op"] in ("insert", "update"):
            tasks_of[row["key"]].add(row["task_id"])
        for key, tasks in tasks_of.items():
            live = [t for t in tasks if status.get(t) in LIVE and t not in canceling]
            if len(live) > 1:
                yield Violation("INV-9", None, f"key {key!r} has {len(live)} live tasks", live)
                tasks_of[key] = set()


def inv12_result_comes_from_the_settling_attempt(
    h: History, rows: list[dict[str, Any]]
) -> Iterator[Violation]:
    """INV-12 (G4): a success records the result its own attempt produced."""
    for row in rows:
        if row["op"] == "update" and row["new_status"] == "succeeded" and row["new_result"]:
            try:
                result = json.loads(row["new_result"])
            except ValueError:
                continue
            if (
                isinstance(result, dict)
                and "attempt" in result
                and result["attempt"] != row["old_attempt"]
            ):
                yield Violation(
                    "INV-12",
                    row["task_id"],
                    f"attempt {row['old_attempt']} stored attempt {result['attempt']}'s result",
                    [row],
                )


def inv15_purge_removes_only_settled_rows(
    h: History, rows: list[dict[str, Any]]
) -> Iterator[Violation]:
    """INV-15 (G12): purges delete finished rows only."""
    for row in rows:
        if row["op"] == "delete" and (
            row["old_status"] not in TERMINAL or row["old_completed"] is None
        ):
            yield Violation("INV-15", row["task_id"], f"deleted a {row['old_status']} row", [row])


def inv16_storage_integrity(h: History, rows: list[dict[str, Any]]) -> Iterator[Violation]:
    """INV-16 (G1): the storage's own consistency check passes."""
    if h.integrity != "ok":
        yield Violation("INV-16", None, f"integrity check: {h.integrity}")


def inv_no_busy_errors_escaped(h: History, rows: list[dict[str, Any]]) -> Iterator[Violation]:
    """E2/E3: within the busy budget, lock contention never reaches callers as an error."""
    if h.allow_busy_errors:
        return
    for event in h.events:
        if event.get("error") == "DatabaseBusy":
            yield Violation("E2", event.get("task"), "a busy error escaped to a caller", [event])


# --- counters ---------------------------------------------------------------------------------


def _counters(h: History, rows: list[dict[str, Any]]) -> dict[str, Any]:
    starts: Counter[tuple[str, int]] = Counter(
        (e["task"], e["attempt"]) for e in h.events if e["event"] == "handler_start"
    )
    tasks_started: Counter[str] = Counter(task for task, _ in starts)
    submitted = sum(e["event"] == "submit_ok" for e in h.events)
    indeterminate = [e for e in h.events if e["event"] == "submit_info"]
    inserted = {r["task_id"] for r in rows if r["op"] == "insert"}
    stored_requests = set()
    for row in h.final:
        payload = row.get("payload")
        if isinstance(payload, str) and '"req"' in payload:
            with contextlib.suppress(ValueError, AttributeError):
                stored_requests.add(json.loads(payload).get("req"))
    return {
        "submitted": submitted,
        "indeterminate": len(indeterminate),
        "indeterminate_found_stored": sum(e.get("req") in stored_requests for e in indeterminate),
        "tasks": len(inserted),
        "executions": sum(starts.values()),
        "tasks_run_more_than_once": sum(1 for n in tasks_started.values() if n > 1),
        "settlements": sum(_is_settle(r) for r in rows),
        "recoveries": sum(_is_recovery(r) for r in rows),
        "refused_settlements": sum(e["event"] == "settle_lost" for e in h.events),
        "final": dict(Counter(r["status"] for r in h.final)),
    }
