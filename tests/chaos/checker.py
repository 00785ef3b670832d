"""The history checker: proves cairnq's guarantees held in a run, from what actually happened.

Inputs: the database's transition log (``dbtools``: a row per change to a task, a
key pointer, written by triggers in the changing transaction),
the client and worker histories (JSONL, ``history``), the final rows, and, when
the run wrote any, the effect rows handlers committed with ``succeed_in``. Each
invariant is numbered as in ``docs/guarantees.md``, which says which
guarantee it checks and which mutant (a deliberately broken build) it catches.

Order and time. The log's ``seq`` is commit order per row (an update holds the
row's lock until commit) and agrees with every dependency between transactions
(a transaction that read another's write logs after it); SQLite, with one writer
at a time, logs in commit order outright. Times are compared only inside one
clock domain: the database's (``db_time``, ``*_ms`` columns), or the host's
monotonic clock that every process of a run shares (event ``t``).

Workflows. The log also holds the dependency edges the workflow tables record
(``tbl = 'dependency'``: the dependent, the task it runs after in ``ref``, the
policy in ``detail``) and the parked rows (``tbl = 'parked'``, the reason in
``detail``), and each task change's due time before and after: a parked task is
``queued`` and due at ``PARKED_RUN_AT_MS``. Edges stay in the log when their
tasks are purged.

Claims. A claim is identified by its nonce: a cairnq worker's claim writes its
worker id and a nonce fresh for the claim into ``worker_id`` (``models.holder``),
so the claim's own log row names it. A claim with no nonce (a store's, a
reference SDK's worker) is identified by (attempt, worker id) instead.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from cairnq.extensions.workflows._ops import PARKED_RUN_AT_MS
from cairnq.models import parse_holder

from .history import WAIT_OPS

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
# A parked dependent failed without running by policy "fail" (``fail_queued``) ends queued ->
# failed with this error code; no other change takes a queued task to failed.
DEPENDENCY_FAILED = "dependency_failed"
# A settlement that could not be written because of its own content, not the database.
UNWRITABLE = {"SerializationError", "InvalidArgument"}
# SQLite's julianday-based log time and the SDK's integer clock may differ by this much.
CLOCK_SLACK_MS = 2.0
DEFAULT_MAX_CLAIM_ERRORS_PER_S = 20
# How far past its grace period a stopped handler may still return on a loaded machine
# (the worker's clock): the stop is a timer on the worker's event loop.
STOP_SLACK_MS = 1000.0


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
        for violation in self.violations[:20]:
            lines.append(f"  {violation}")
            lines.extend(f"      {item}" for item in violation.evidence[:3])
        if len(self.violations) > 20:
            lines.append(f"  ... and {len(self.violations) - 20} more")
        return "\n".join(lines)

    def has(self, invariant: str) -> bool:
        return any(v.invariant == invariant for v in self.violations)

    def invariants(self) -> set[str]:
        return {v.invariant for v in self.violations}


@dataclass
class History:
    """Everything a run left behind.

    ``liveness`` says the run ended with a quiescence phase (healthy workers, faults
    over, a lease passed), so every task must have ended (INV-2); runs without
    workers (claim storms) have none to promise.
    """

    transitions: list[dict[str, Any]]
    events: list[dict[str, Any]]
    final: list[dict[str, Any]]
    integrity: str = "ok"
    liveness: bool = True
    allow_busy_errors: bool = True
    effects: list[dict[str, Any]] | None = None
    max_claim_errors_per_s: float = DEFAULT_MAX_CLAIM_ERRORS_PER_S
    # ``dbtools.schedules``: schedules, slot records, tasks by slot metadata (SCH-1, SCH-2).
    schedules: dict[str, list[dict[str, Any]]] | None = None
    # ``dbtools.batches``: batches with their callbacks' task ids, members' outcomes (BAT-1).
    batches: dict[str, list[dict[str, Any]]] | None = None


# --- claims -----------------------------------------------------------------------------------


def claim_ident(task: Any, token: Any, attempt: Any, worker: Any) -> tuple[Any, ...]:
    """What tells one claim of a task from every other: its token, else (attempt, worker)."""
    if token is not None:
        return (task, "token", token)
    return (task, "attempt", attempt, worker)


def event_ident(event: dict[str, Any]) -> tuple[Any, ...]:
    return claim_ident(
        event.get("task"), event.get("token"), event.get("attempt"), event.get("worker")
    )


@dataclass
class Claim:
    """One claim of a task, from the log: where it began and the transition that ended it."""

    task: str
    seq: int
    attempt: int
    worker: str | None
    token: int | None
    end: dict[str, Any] | None = None
    # Its holder reported a ``succeed_in`` (``complete_in``) committed: that transaction
    # held the task's row from its fenced lock to its end, so its end is the holder's
    # even when the commit came after the lease's instant.
    held: bool = False
    # The process that reported claiming it, where claims sharing its ident (a repeated
    # nonce, or none) pair one for one with the claims reported: a settlement is then its
    # holder's only if that process sent it.
    pid: int | None = None

    @property
    def ident(self) -> tuple[Any, ...]:
        return claim_ident(self.task, self.token, self.attempt, self.worker)

    @property
    def ended_by_holder(self) -> bool:
        """Left ``running`` while its lease was live, or by the ``succeed_in`` that held
        its row: only its holder may do either."""
        return self.end is not None and (_lease_live(self.end) or self._held_success)

    @property
    def ended_by_expiry(self) -> bool:
        return self.end is not None and not self.ended_by_holder

    @property
    def _held_success(self) -> bool:
        return self.held and self.end is not None and self.end["new_status"] == "succeeded"


def _lease_live(row: dict[str, Any]) -> bool:
    """Whether the lease was still live at the instant of this change (``new_updated``)."""
    return (
        row["old_lease"] is not None
        and row["new_updated"] is not None
        and row["old_lease"] > row["new_updated"]
    )


def _is_claim(row: dict[str, Any]) -> bool:
    return (
        row["tbl"] == "task"
        and row["op"] == "update"
        and row["old_status"] == "queued"
        and row["new_status"] == "running"
    )


def _leaves_running(row: dict[str, Any]) -> bool:
    return (
        row["tbl"] == "task"
        and row["op"] == "update"
        and row["old_status"] == "running"
        and row["new_status"] != "running"
    )


def _same_transaction(a: dict[str, Any], b: dict[str, Any]) -> bool:
    txa, txb = a.get("txid"), b.get("txid")
    return txa is None or txb is None or txa == txb


@dataclass
class Edge:
    """A dependency edge from the log: ``task`` runs after ``depends_on`` under ``policy``.

    ``reason`` is that of the parked row its transaction recorded next for the
    task: ``dependencies`` (``depends_on``, graphs) or ``gather`` (a parent
    waiting on its children).
    """

    task: str
    depends_on: str
    policy: str
    seq: int
    reason: str = "dependencies"


@dataclass
class Workflows:
    """The workflow side of the log: every edge, every parking, when each task first
    succeeded and first ended (the seq of the change that took it there), and each
    task's changes of status, its purge included."""

    edges_of: dict[str, list[Edge]]
    # task -> [(seq, reason)] of its parked rows written (inserted or updated), in order
    parkings: dict[str, list[tuple[int, str]]]
    succeeded_at: dict[str, int]
    ended_at: dict[str, int]
    # task -> [(seq, status)] of every change to it, in order; a delete (purge) is ``None``
    statuses: dict[str, list[tuple[int, str | None]]] = field(default_factory=dict)

    @classmethod
    def of(cls, rows: Iterable[dict[str, Any]]) -> Workflows:
        edges_of: dict[str, list[Edge]] = defaultdict(list)
        unplaced: dict[str, list[Edge]] = defaultdict(list)
        parkings: dict[str, list[tuple[int, str]]] = defaultdict(list)
        succeeded_at: dict[str, int] = {}
        ended_at: dict[str, int] = {}
        statuses: dict[str, list[tuple[int, str | None]]] = defaultdict(list)
        for row in sorted(rows, key=lambda r: r["seq"]):
            task = row["task_id"]
            if row["tbl"] == "dependency":
                edge = Edge(task, row["ref"], row["detail"], row["seq"])
                edges_of[task].append(edge)
                unplaced[task].append(edge)
            elif row["tbl"] == "parked" and row["op"] != "delete":
                parkings[task].append((row["seq"], row["detail"]))
                for edge in unplaced.pop(task, []):
                    edge.reason = row["detail"]
            elif row["tbl"] == "task" and row["op"] == "delete":
                statuses[task].append((row["seq"], None))
            elif row["tbl"] == "task":
                new = row["new_status"]
                statuses[task].append((row["seq"], new))
                if new in TERMINAL and row.get("old_status") != new:
                    ended_at.setdefault(task, row["seq"])
                    if new == "succeeded":
                        succeeded_at.setdefault(task, row["seq"])
        return cls(edges_of, parkings, succeeded_at, ended_at, statuses)

    def status_at(self, task: str, seq: int) -> tuple[str | None, bool]:
        """``task``'s status just before ``seq`` (``None`` if it had no row yet, never
        stored) and whether it had been purged by then; a purged task keeps the status
        it was purged in."""
        status: str | None = None
        purged = False
        for at, new in self.statuses.get(task, []):
            if at >= seq:
                break
            if new is None:
                purged = True
            else:
                status, purged = new, False
        return status, purged

    def reason_at(self, task: str, seq: int) -> str:
        """Why ``task`` was last parked before ``seq`` (``dependencies`` if never logged)."""
        found = "dependencies"
        for at, reason in self.parkings.get(task, []):
            if at > seq:
                break
            found = reason
        return found


@dataclass
class Replay:
    """The log, regrouped: each task's rows in order, and every claim with its end."""

    rows_of: dict[str, list[dict[str, Any]]]
    claims: list[Claim]
    claims_of: dict[str, list[Claim]]
    by_ident: dict[tuple[Any, ...], list[Claim]]
    workflows: Workflows
    # Tasks a durable wait may have parked (a run began a wait's write): a send or a wake
    # time moves their due time while they are queued, which is no workflow decision.
    waiting: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, transitions: Iterable[dict[str, Any]]) -> Replay:
        rows_of: dict[str, list[dict[str, Any]]] = defaultdict(list)
        workflow_rows: list[dict[str, Any]] = []
        for row in transitions:
            if row["tbl"] in ("task", "lease"):
                rows_of[row["task_id"]].append(row)
            if row["tbl"] in ("task", "dependency", "parked"):
                workflow_rows.append(row)
        claims: list[Claim] = []
        claims_of: dict[str, list[Claim]] = defaultdict(list)
        for task, rows in rows_of.items():
            rows.sort(key=lambda r: r["seq"])
            current: Claim | None = None
            for row in rows:
                if _is_claim(row):
                    worker, nonce = parse_holder(row["new_worker"])
                    current = Claim(task, row["seq"], row["new_attempt"], worker, nonce)
                    claims.append(current)
                    claims_of[task].append(current)
                elif _leaves_running(row) and current is not None:
                    current.end = row
                    current = None
        by_ident: dict[tuple[Any, ...], list[Claim]] = defaultdict(list)
        for claim in claims:
            by_ident[claim.ident].append(claim)
        return cls(rows_of, claims, claims_of, by_ident, Workflows.of(workflow_rows))

    def task_rows(self) -> list[dict[str, Any]]:
        return sorted(
            (r for rows in self.rows_of.values() for r in rows if r["tbl"] == "task"),
            key=lambda r: r["seq"],
        )


def _pair_claimers(replay: Replay, events: list[dict[str, Any]]) -> None:
    """Give each claim the process that reported it, where an ident names several claims
    and as many claims were reported under it (log order against report order)."""
    reported: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for event in sorted((e for e in events if e["event"] == "claim_ok"), key=lambda e: e["t"]):
        reported[event_ident(event)].append(event)
    for ident, claims in replay.by_ident.items():
        if len(claims) > 1 and len(reported.get(ident, [])) == len(claims):
            for claim, event in zip(claims, reported[ident], strict=True):
                claim.pid = event.get("pid")


def check(history: History) -> Report:
    """Run every invariant over ``history``."""
    replay = Replay.of(history.transitions)
    replay.waiting = {
        e["task"]
        for e in history.events
        if e["event"] == "settle_invoke" and e.get("op") in WAIT_OPS
    }
    _pair_claimers(replay, history.events)
    for event in history.events:
        if event["event"] == "settle_ok" and event.get("op") == "complete_in":
            for held in replay.by_ident.get(event_ident(event), []):
                held.held = True
    violations: list[Violation] = []
    for invariant in (
        inv1_accepted_tasks_are_never_lost,
        inv1b_refused_submits_wrote_nothing,
        inv2_every_task_ends_terminal,
        inv3_one_terminal_transition_per_generation,
        inv4_only_the_holder_ends_a_live_claim,
        inv5_a_reported_settlement_is_exactly_one_change,
        inv6_only_protocol_edges,
        inv7_runs_overlap_only_after_the_lease_expired,
        inv8_cancel_wins,
        inv9_one_live_task_per_key,
        inv10_attempts_stay_within_max_attempts_and_retries,
        inv11_a_transactional_effect_exists_exactly_when_its_claim_succeeded,
        inv12_result_comes_from_the_settling_claim,
        inv14_error_loops_back_off,
        inv15_purge_removes_only_finished_rows_past_the_cutoff,
        inv16_storage_integrity,
        inv17_every_ended_run_is_settled_by_its_worker,
        inv18_running_per_key_stays_within_its_limit,
        inv19_a_canceled_async_handler_is_stopped_and_never_succeeds,
        inv21_a_task_never_starts_after_its_expiry,
        inv_no_busy_errors_escaped,
        inv20_one_task_per_key_per_unique_period,
        sch1_at_most_one_task_per_slot,
        sch2_every_slot_is_accounted_for,
        wf1_a_dependent_runs_only_after_its_dependencies,
        wf2_a_dependent_is_decided_once,
        wf3_a_gathered_parent_resumes_once_after_its_children,
        wf4_a_dependent_is_canceled_or_failed_only_for_a_dependency_that_did_not_succeed,
        bat1_a_batch_callback_is_submitted_exactly_once_after_its_members_ended,
    ):
        violations.extend(invariant(history, replay))
    return Report(violations, _counters(history, replay))


# --- invariants -------------------------------------------------------------------------------


def inv1_accepted_tasks_are_never_lost(h: History, r: Replay) -> Iterator[Violation]:
    """INV-1: every accepted submit was stored."""
    inserted = {row["task_id"] for row in r.task_rows() if row["op"] == "insert"}
    for event in h.events:
        if event["event"] == "submit_ok" and event["task"] not in inserted:
            yield Violation("INV-1", event["task"], "accepted submit never stored", [event])


def _payload(row: dict[str, Any]) -> dict[str, Any]:
    """A final row's payload as a dict (SQLite gives JSON text, PostgreSQL's jsonb a dict)."""
    payload = row.get("payload")
    if isinstance(payload, str):
        with contextlib.suppress(ValueError):
            payload = json.loads(payload)
    return payload if isinstance(payload, dict) else {}


def _stored_requests(h: History) -> set[Any]:
    return {_payload(row).get("req") for row in h.final} - {None}


def inv1b_refused_submits_wrote_nothing(h: History, r: Replay) -> Iterator[Violation]:
    """INV-1b: a submit refused with an error that says nothing was written wrote nothing."""
    stored = _stored_requests(h)
    for event in h.events:
        if event["event"] == "submit_fail" and event.get("req") in stored:
            yield Violation(
                "INV-1b",
                None,
                f"submit {event.get('req')} was refused ({event.get('error')}) but stored",
                [event],
            )


def inv2_every_task_ends_terminal(h: History, r: Replay) -> Iterator[Violation]:
    """INV-2: once faults stopped and healthy workers ran past a lease, nothing is live."""
    if not h.liveness:
        return
    for row in h.final:
        if row["status"] in LIVE:
            last = r.rows_of.get(row["id"], [{}])[-1]
            yield Violation(
                "INV-2",
                row["id"],
                f"still {row['status']} after quiescence (attempt {row.get('attempt')}, "
                f"worker {row.get('worker_id')}, lease until {row.get('lease_until_ms')})",
                [row, last],
            )


def _generations(rows: list[dict[str, Any]]) -> dict[str, list[list[dict[str, Any]]]]:
    """Per task, its task transitions split into generations (a new one at each retry)."""
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


def inv3_one_terminal_transition_per_generation(h: History, r: Replay) -> Iterator[Violation]:
    """INV-3: within a generation a task enters a terminal status at most once."""
    for task, generations in _generations(r.task_rows()).items():
        for generation in generations:
            terminal = [
                row
                for row in generation
                if row["op"] == "update"
                and row["new_status"] in TERMINAL
                and row["old_status"] != row["new_status"]
            ]
            if len(terminal) > 1:
                yield Violation("INV-3", task, "settled twice in one generation", terminal)


def _settle_events(h: History) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    found: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for event in h.events:
        if event["event"] in (
            "settle_invoke",
            "settle_ok",
            "settle_info",
            "settle_lost",
            "gather_ready",
            "wait_passed",
        ):
            found[event_ident(event)].append(event)
    return found


def _holder_settled(events: list[dict[str, Any]]) -> bool:
    """The claim's holder sent a settlement that may have committed.

    ``ok``, or an outcome it never learned: an error after sending, or no answer at
    all (the process died with the statement sent).
    """
    kinds = [e["event"] for e in events]
    if "settle_ok" in kinds or "settle_info" in kinds:
        return True
    # A gather that found every child ended, or a wait the run went past, wrote nothing,
    # like a refused settlement.
    unwritten = (
        kinds.count("settle_lost") + kinds.count("gather_ready") + kinds.count("wait_passed")
    )
    return kinds.count("settle_invoke") > unwritten


def inv4_only_the_holder_ends_a_live_claim(h: History, r: Replay) -> Iterator[Violation]:
    """INV-4 (fencing): a claim that left ``running`` with its lease live was settled by its holder.

    The database row says which claim it ended; the process holding exactly that
    claim (same nonce) must have sent a settlement. A writer holding an
    older claim, or recovery taking a live lease, shows up here.
    """
    events = _settle_events(h)
    for claim in r.claims:
        mine = [
            e for e in events.get(claim.ident, []) if claim.pid is None or e.get("pid") == claim.pid
        ]
        if not claim.ended_by_holder or _holder_settled(mine):
            continue
        others = [
            e
            for ident, group in events.items()
            if ident[0] == claim.task and ident != claim.ident
            for e in group
            if e["event"] == "settle_ok"
        ]
        assert claim.end is not None
        yield Violation(
            "INV-4",
            claim.task,
            f"claim {claim.ident[1:]} left running ({claim.end['new_status']}) with its lease "
            f"live, but its holder sent no settlement"
            + (" (a writer of another claim reported ok)" if others else ""),
            [claim.end, *others[:4]],
        )


def inv5_a_reported_settlement_is_exactly_one_change(h: History, r: Replay) -> Iterator[Violation]:
    """INV-5: a settlement its worker saw succeed is exactly one change: its own claim's end."""
    for event in h.events:
        if event["event"] != "settle_ok":
            continue
        ends = [c for c in r.by_ident.get(event_ident(event), []) if c.ended_by_holder]
        if len(ends) != 1:
            yield Violation(
                "INV-5",
                event["task"],
                f"a settlement reported ok matches {len(ends)} endings of its claim",
                [event],
            )


def inv6_only_protocol_edges(h: History, r: Replay) -> Iterator[Violation]:
    """INV-6: allowed edges only; a claim adds exactly one attempt; lease set iff running."""
    for row in r.task_rows():
        if row["op"] == "delete":
            continue
        old = row["old_status"] if row["op"] == "update" else None
        new = row["new_status"]
        if (old, new) not in EDGES and not _workflow_edge(row):
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


def _workflow_edge(row: dict[str, Any]) -> bool:
    """The workflow extension's two edges beyond the protocol's: a queued task's due time
    moved (parked, or released: WF-2 and WF-3 judge which), and a parked dependent failed
    without running by policy ``fail``."""
    old, new = row["old_status"], row["new_status"]
    if (old, new) == ("queued", "queued"):
        return row.get("old_run_at") != row.get("new_run_at")
    return (old, new) == ("queued", "failed") and row["new_error_code"] == DEPENDENCY_FAILED


def _runs(h: History) -> tuple[dict[tuple[Any, ...], float], dict[tuple[Any, ...], float]]:
    starts: dict[tuple[Any, ...], float] = {}
    ends: dict[tuple[Any, ...], float] = {}
    for event in h.events:
        if event["event"] == "handler_start":
            starts.setdefault(event_ident(event), event["t"])
        elif event["event"] == "handler_end":
            ends[event_ident(event)] = event["t"]
    return starts, ends


def inv7_runs_overlap_only_after_the_lease_expired(h: History, r: Replay) -> Iterator[Violation]:
    """INV-7 (bounded duplicates): a run still going when a later claim's run starts had lost
    its lease by expiry, as the database recorded it.

    If a claim's handler ended after a later claim's handler started (one host's
    monotonic clock), the earlier claim must have left ``running`` through its
    lease running out, never by a settlement while its handler still ran.
    """
    starts, ends = _runs(h)
    for claims in r.claims_of.values():
        for i, earlier in enumerate(claims):
            ended = ends.get(earlier.ident)
            if ended is None or earlier.ended_by_expiry:
                continue
            for later in claims[i + 1 :]:
                started = starts.get(later.ident)
                if started is not None and started < ended:
                    yield Violation(
                        "INV-7",
                        earlier.task,
                        f"claim {earlier.ident[1:]} was still running {ended - started:.3f} s "
                        f"into claim {later.ident[1:]}'s run, though its lease never expired",
                        [earlier.end],
                    )
                    break


def inv8_cancel_wins(h: History, r: Replay) -> Iterator[Violation]:
    """INV-8: once a cancel is recorded on a running attempt, that attempt ends canceled."""
    for task, generations in _generations(r.task_rows()).items():
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


def inv9_one_live_task_per_key(h: History, r: Replay) -> Iterator[Violation]:
    """INV-9: a key never has two live tasks that are not being canceled.

    A task is under a key from the moment the key points at it until it stops
    being live while the key points elsewhere: a task the key moved away from
    that is later retried runs again without the key (a key names one live task
    at a time, not every task it ever pointed at).
    """
    status: dict[str, str] = {}
    canceling: set[str] = set()
    pointee: dict[str, str] = {}
    under: dict[str, set[str]] = defaultdict(set)
    keys_of: dict[str, set[str]] = defaultdict(set)
    for row in h.transitions:
        task = row["task_id"]
        if row["tbl"] == "key":
            key = row["key"]
            if row["op"] == "delete":
                if pointee.get(key) == task:
                    del pointee[key]
                continue
            pointee[key] = task
            for other in [t for t in under[key] if status.get(t) not in LIVE]:
                under[key].discard(other)
                keys_of[other].discard(key)
            under[key].add(task)
            keys_of[task].add(key)
            touched = {key}
        elif row["tbl"] == "task":
            if row["op"] == "delete":
                status.pop(task, None)
            else:
                status[task] = row["new_status"]
                if row["new_cancel"] is not None:
                    canceling.add(task)
                elif row["new_status"] != "running":
                    canceling.discard(task)
            if status.get(task) not in LIVE:
                for key in [k for k in keys_of[task] if pointee.get(k) != task]:
                    under[key].discard(task)
                    keys_of[task].discard(key)
            touched = set(keys_of[task])
        else:
            continue
        for key in touched:
            live = sorted(t for t in under[key] if status.get(t) in LIVE and t not in canceling)
            if len(live) > 1:
                yield Violation("INV-9", None, f"key {key!r} has {len(live)} live tasks", live)
                for other in live:
                    if other != pointee.get(key):
                        under[key].discard(other)
                        keys_of[other].discard(key)


def inv10_attempts_stay_within_max_attempts_and_retries(
    h: History, r: Replay
) -> Iterator[Violation]:
    """INV-10 (bounded retries): a claim's attempt <= max_attempts + retries without reset.

    Retries count since the task's last ``retry(reset_attempt=True)``; crashes count
    like any other attempt.
    """
    for task, rows in r.rows_of.items():
        bonus = 0
        for row in rows:
            if row["tbl"] != "task" or row["op"] != "update":
                continue
            if row["old_status"] in TERMINAL and row["new_status"] == "queued":
                bonus = 0 if row["new_attempt"] == 0 else bonus + 1
            elif _is_claim(row) and row["new_attempt"] > row["max_attempts"] + bonus:
                yield Violation(
                    "INV-10",
                    task,
                    f"attempt {row['new_attempt']} claimed with max_attempts "
                    f"{row['max_attempts']} and {bonus} retries without reset",
                    [row],
                )


def inv11_a_transactional_effect_exists_exactly_when_its_claim_succeeded(
    h: History, r: Replay
) -> Iterator[Violation]:
    """INV-11 (``succeed_in``): a handler's own write is committed exactly when its claim
    succeeded: one effect row for each such claim that ended succeeded, none for any other."""
    if h.effects is None:
        return
    effects = Counter(claim_ident(e["task_id"], e["token"], None, None) for e in h.effects)
    for claim in r.claims:
        count = effects.pop(claim.ident, 0)
        succeeded = claim.ended_by_holder and claim.end is not None
        succeeded = succeeded and claim.end["new_status"] == "succeeded"  # type: ignore[index]
        expected = 1 if succeeded and _uses_effects(h, claim.task) else 0
        if count > 1 or (count == 1 and not succeeded) or count < expected:
            ended = claim.end["new_status"] if claim.end else "running"
            yield Violation(
                "INV-11",
                claim.task,
                f"claim {claim.ident[1:]} ended {ended} with {count} effect rows",
                [claim.end],
            )
    for ident, count in effects.items():
        yield Violation("INV-11", ident[0], f"{count} effect rows of no claim {ident[1:]}")


def _uses_effects(h: History, task: str) -> bool:
    return any(row["id"] == task and _payload(row).get("mode") == "effect" for row in h.final)


def inv12_result_comes_from_the_settling_claim(h: History, r: Replay) -> Iterator[Violation]:
    """INV-12: a success records the result its own claim's run produced."""
    for claim in r.claims:
        end = claim.end
        if end is None or end["new_status"] != "succeeded" or not end["new_result"]:
            continue
        try:
            result = json.loads(end["new_result"])
        except ValueError:
            continue
        if not isinstance(result, dict):
            continue
        if "token" in result and claim.token is not None and result["token"] != claim.token:
            yield Violation(
                "INV-12", claim.task, f"claim {claim.token} stored claim {result['token']}'s result"
            )
        elif "attempt" in result and result["attempt"] != claim.attempt:
            yield Violation(
                "INV-12",
                claim.task,
                f"attempt {claim.attempt} stored attempt {result['attempt']}'s result",
                [end],
            )


def inv14_error_loops_back_off(h: History, r: Replay) -> Iterator[Violation]:
    """INV-14: a worker whose claims keep failing backs off: few failed claims a second.

    Only worker processes count: the storms' claimers fire claims with no backoff.
    """
    workers = {e["pid"] for e in h.events if e["event"] == "worker_started"}
    times: dict[Any, list[float]] = defaultdict(list)
    for event in h.events:
        if event["event"] == "claim_error" and event["pid"] in workers:
            times[event["pid"]].append(event["t"])
    for pid, stamps in times.items():
        stamps.sort()
        start = 0
        for end, stamp in enumerate(stamps):
            while stamp - stamps[start] > 1.0:
                start += 1
            if end - start + 1 > h.max_claim_errors_per_s:
                yield Violation(
                    "INV-14",
                    None,
                    f"process {pid} failed {end - start + 1} claims within one second",
                )
                break


def inv15_purge_removes_only_finished_rows_past_the_cutoff(
    h: History, r: Replay
) -> Iterator[Violation]:
    """INV-15 (retention): a delete removes a finished row completed before a purge's cutoff.

    The cutoff is ``now - older_than_ms`` at the purge; the log's time of the delete
    is at or after that ``now``, so ``completed_at < db_time - older_than_ms`` must
    hold for some purge the run made (its status and queue filters matching).
    """
    purges = [e for e in h.events if e["event"] == "purge_invoke"]
    for row in r.task_rows():
        if row["op"] != "delete":
            continue
        if row["old_status"] not in TERMINAL or row["old_completed"] is None:
            yield Violation("INV-15", row["task_id"], f"deleted a {row['old_status']} row", [row])
            continue
        if not any(_admits(p, row) for p in purges):
            yield Violation(
                "INV-15",
                row["task_id"],
                f"deleted a {row['old_status']} row completed at {row['old_completed']}, "
                f"{row['db_time'] - row['old_completed']:.0f} ms before the delete: "
                "past no purge's cutoff",
                [row, *purges[:2]],
            )


def _admits(purge: dict[str, Any], row: dict[str, Any]) -> bool:
    cutoff = row["db_time"] - purge["older_than_ms"] + CLOCK_SLACK_MS
    return (
        row["old_completed"] < cutoff
        and purge.get("status") in (None, row["old_status"])
        and purge.get("queue") in (None, row.get("old_queue"), row.get("queue"))
    )


def inv16_storage_integrity(h: History, r: Replay) -> Iterator[Violation]:
    """INV-16: the storage's own consistency check passes."""
    if h.integrity != "ok":
        yield Violation("INV-16", None, f"integrity check: {h.integrity}")


def inv17_every_ended_run_is_settled_by_its_worker(h: History, r: Replay) -> Iterator[Violation]:
    """INV-17 (failures are recorded): a worker settles every run its handler finished.

    A worker that stopped cleanly (its drain done: ``worker_stopped``) must have
    sent a settlement for every run whose handler ended before that, unless it had
    noticed the claim's lease was gone. A settlement that fails for its own
    content (an error it cannot store) counts as none, and a run that raised and
    was settled by its worker must have its error recorded.
    """
    invoked: set[tuple[Any, ...]] = set()
    lost: set[tuple[Any, ...]] = set()
    stopped: dict[Any, float] = {}
    for event in h.events:
        if event["event"] == "settle_invoke":
            invoked.add((event.get("pid"), *event_ident(event)))
        elif event["event"] == "lease_lost":
            lost.add((event.get("pid"), *event_ident(event)))
        elif event["event"] == "worker_stopped":
            stopped[event["pid"]] = event["t"]
        elif event["event"] == "settle_info" and event.get("error") in UNWRITABLE:
            yield Violation(
                "INV-17",
                event.get("task"),
                f"a {event.get('op')} could not be written: {event.get('error')}",
                [event],
            )
    raised = {
        event_ident(e)
        for e in h.events
        if e["event"] == "handler_end" and e.get("outcome") == "raise"
    }
    for claim in r.claims:
        end = claim.end
        if claim.ident not in raised or not claim.ended_by_holder or end is None:
            continue
        if end["new_status"] != "succeeded" and not end["new_error_code"]:
            yield Violation(
                "INV-17",
                claim.task,
                f"claim {claim.ident[1:]} raised, and its settlement recorded no error",
                [end],
            )
    for event in h.events:
        if event["event"] != "handler_end" or event["t"] >= stopped.get(event.get("pid"), 0.0):
            continue
        run = (event.get("pid"), *event_ident(event))
        if run not in invoked and run not in lost:
            yield Violation(
                "INV-17",
                event["task"],
                f"the worker stopped cleanly without settling claim {run[2:]}, whose "
                f"handler ended ({event.get('outcome')})",
                [event],
            )


def inv21_a_task_never_starts_after_its_expiry(h: History, r: Replay) -> Iterator[Violation]:
    """INV-21 (expiry): a run a cairnq worker started comes from a claim made before its
    task's expiry (``submit(expires_in=...)``; the database's clock on both sides), or
    after the task's first start was recorded (``detail = 'started'``), itself before the
    expiry: the expiry bounds only the wait to start. A task a policy ended as
    ``expired`` ended canceled without a run of that claim."""
    expiry: dict[str, float] = {}
    started: dict[str, float] = {}
    for row in h.transitions:
        if row["tbl"] != "policy":
            continue
        if row["op"] == "insert" and row["new_run_at"] is not None:
            expiry[row["task_id"]] = float(row["new_run_at"])
        elif row["op"] == "update" and row.get("detail") == "started":
            started.setdefault(row["task_id"], float(row["db_time"]))
    if not expiry:
        return
    starts, _ = _runs(h)
    for ident in starts:
        task = ident[0]
        if task not in expiry:
            continue
        for claim in r.by_ident.get(ident, []):
            claimed = next(x for x in r.rows_of[task] if x["seq"] == claim.seq)
            late = float(claimed["db_time"]) - expiry[task]
            first = started.get(task)
            if (
                first is not None
                and first - expiry[task] < CLOCK_SLACK_MS
                and first <= float(claimed["db_time"]) + CLOCK_SLACK_MS
            ):
                continue  # a later run of a task that started in time
            if late >= CLOCK_SLACK_MS:
                yield Violation(
                    "INV-21",
                    task,
                    f"a run started from a claim made {late:.0f} ms after the task's expiry",
                    [claimed],
                )


def inv18_running_per_key_stays_within_its_limit(h: History, r: Replay) -> Iterator[Violation]:
    """INV-18 (limits hold across processes): handler runs of one limit key never overlap
    more than the limit, on the shared monotonic clock.

    A run counts from its ``handler_start`` (which names its ``limit_key`` and ``limit``)
    to its ``handler_end``; a run with no end (its process died) counts to the end of
    the history. Runs of every worker process are counted together. A run whose claim
    lost its lease by expiry (its worker killed, frozen or cut off) is not counted: the
    limit counts the tasks the database holds running, and that run may go on beside
    the task's next claim (INV-7 bounds it).
    """
    _, ends = _runs(h)
    expired = {claim.ident for claim in r.claims if claim.ended_by_expiry}
    horizon = max((event.get("t", 0.0) for event in h.events), default=0.0)
    spans: dict[Any, list[tuple[float, float, dict[str, Any]]]] = defaultdict(list)
    limits: dict[Any, int] = {}
    for event in h.events:
        if event["event"] != "handler_start" or event.get("limit_key") is None:
            continue
        if event_ident(event) in expired:
            continue
        key = event["limit_key"]
        limits[key] = int(event["limit"])
        spans[key].append((event["t"], ends.get(event_ident(event), horizon), event))
    for key, runs in spans.items():
        edges = sorted(
            [(start, 1, e) for start, _, e in runs] + [(end, -1, e) for _, end, e in runs],
            key=lambda edge: (edge[0], edge[1]),
        )
        running = 0
        for _, step, event in edges:
            running += step
            if running > limits[key]:
                yield Violation(
                    "INV-18",
                    event.get("task"),
                    f"{running} runs of limit key {key!r} overlapped; the limit is {limits[key]}",
                    [event],
                )
                break


def _cancel_requested_during(r: Replay, claim: Claim) -> bool:
    """Whether a cancel was recorded on ``claim``'s task while the claim ran."""
    end = claim.end
    assert end is not None
    return any(
        claim.seq < row["seq"] <= end["seq"] and row.get("new_cancel") is not None
        for row in r.rows_of.get(claim.task, [])
        if row["tbl"] == "task"
    )


def inv19_a_canceled_async_handler_is_stopped_and_never_succeeds(
    h: History, r: Replay
) -> Iterator[Violation]:
    """INV-19 (stopping running work): a canceled ``async def`` handler's attempt never
    succeeds, and the handler does not run on past its grace period.

    For every claim of a handler a cancel stops (its ``handler_start`` names its
    ``grace_ms``) during which a cancel was recorded, the attempt did not end
    ``succeeded``; and no such handler returned by itself more than its grace period
    (and ``STOP_SLACK_MS``) after its worker saw the cancel (``seen_for_ms``, the
    worker's own clock): past its grace it is stopped, and ends ``cancelled``.
    """
    stoppable = {
        event_ident(e)
        for e in h.events
        if e["event"] == "handler_start" and e.get("grace_ms") is not None
    }
    for claim in r.claims:
        end = claim.end
        if claim.ident not in stoppable or end is None or end["new_status"] != "succeeded":
            continue
        if _cancel_requested_during(r, claim):
            yield Violation(
                "INV-19",
                claim.task,
                f"claim {claim.ident[1:]} of a canceled async handler ended succeeded",
                [end],
            )
    for event in h.events:
        grace, seen = event.get("grace_ms"), event.get("seen_for_ms")
        if event["event"] != "handler_end" or event.get("outcome") != "return":
            continue
        if grace is not None and seen is not None and seen > grace + STOP_SLACK_MS:
            yield Violation(
                "INV-19",
                event.get("task"),
                f"a canceled handler returned {seen:.0f} ms after its worker saw the cancel; "
                f"its grace period was {grace} ms",
                [event],
            )


def inv_no_busy_errors_escaped(h: History, r: Replay) -> Iterator[Violation]:
    """E2: within the busy budget, lock contention never reaches callers as an error."""
    if h.allow_busy_errors:
        return
    for event in h.events:
        if event.get("error") == "DatabaseBusy":
            yield Violation("E2", event.get("task"), "a busy error escaped to a caller", [event])


def inv20_one_task_per_key_per_unique_period(h: History, r: Replay) -> Iterator[Violation]:
    """INV-20 (uniqueness over time): the tasks ``submit(key=..., unique_for=...)`` calls
    returned under one key were inserted at least the earlier one's period apart, in the
    database's clock.

    A client records each such submit's key and period beside the task it got; the
    insert times are the log's. A task a period started with without inserting it (the
    key's live task) was inserted before its period began, so the bound holds for it too.
    """
    period_of: dict[str, int] = {}
    tasks_of: dict[str, set[str]] = defaultdict(set)
    for event in h.events:
        if event["event"] == "submit_ok" and event.get("unique_for_ms") is not None:
            period_of.setdefault(event["task"], int(event["unique_for_ms"]))
            tasks_of[event["key"]].add(event["task"])
    inserted = {row["task_id"]: row for row in r.task_rows() if row["op"] == "insert"}
    for key, tasks in tasks_of.items():
        rows = sorted((inserted[t] for t in tasks if t in inserted), key=lambda row: row["seq"])
        for earlier, later in itertools.pairwise(rows):
            gap = float(later["db_time"]) - float(earlier["db_time"])
            period = period_of[earlier["task_id"]]
            if gap < period - CLOCK_SLACK_MS:
                yield Violation(
                    "INV-20",
                    later["task_id"],
                    f"key {key!r} got a second task {gap:.0f} ms after {earlier['task_id']}, "
                    f"within its unique_for period of {period} ms",
                    [earlier, later],
                )


SLOT_KEY_PREFIX = "cairnq.schedule:"
KEEP_SLOTS = 500  # a schedule keeps its latest 500 slot records


def sch1_at_most_one_task_per_slot(h: History, r: Replay) -> Iterator[Violation]:
    """SCH-1: a schedule's slot submits at most one task, ever.

    A slot's tasks are every task its key pointed at (the key log: purged tasks
    included) and every task whose metadata names the slot (a submit past the key).
    """
    if h.schedules is None:
        return
    tasks: dict[tuple[str, int], set[str]] = defaultdict(set)
    for row in h.transitions:
        key = row.get("key")
        if row["tbl"] == "key" and row["op"] != "delete" and key.startswith(SLOT_KEY_PREFIX):
            name, _, slot = key[len(SLOT_KEY_PREFIX) :].rpartition(":")
            tasks[(name, int(slot))].add(row["task_id"])
    for task in h.schedules["tasks"]:
        tasks[(task["name"], int(task["slot_ms"]))].add(task["id"])
    for (name, slot), ids in sorted(tasks.items()):
        if len(ids) > 1:
            yield Violation("SCH-1", None, f"slot {slot} of {name!r} has {len(ids)} tasks", [ids])


def sch2_every_slot_is_accounted_for(h: History, r: Replay) -> Iterator[Violation]:
    """SCH-2: every slot of an interval schedule from its creation to its cursor has exactly
    one decision; none inside ``catch_up`` when decided is ``missed``; an enqueued slot
    names its task.

    Checks interval schedules (their slots are multiples of the interval) whose
    interval never changed; from the creation on only while no record was trimmed.
    """
    if h.schedules is None:
        return
    records: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in h.schedules["slots"]:
        records[row["schedule"]].append(row)
    for schedule in h.schedules["schedules"]:
        every = schedule["every_ms"]
        if every is None:
            continue
        name = schedule["name"]
        rows = sorted(records[name], key=lambda row: row["slot_ms"])
        expected = (schedule["created_at_ms"] // every + 1) * every
        if len(rows) >= KEEP_SLOTS:
            expected = rows[0]["slot_ms"]
        for row in rows:
            last = row["through_ms"] if row["through_ms"] is not None else row["slot_ms"]
            if row["slot_ms"] != expected:
                what = "undecided" if row["slot_ms"] > expected else "decided twice"
                yield Violation("SCH-2", None, f"{name!r}: slot {expected} {what}", [row])
            if row["slots"] != (last - row["slot_ms"]) // every + 1:
                yield Violation("SCH-2", None, f"{name!r}: a range miscounts its slots", [row])
            if (
                row["outcome"] == "missed"
                and last > row["recorded_at_ms"] - schedule["catch_up_ms"]
            ):
                yield Violation(
                    "SCH-2", None, f"{name!r}: slot {last} missed inside catch_up", [row]
                )
            if row["outcome"] == "enqueued" and row["task_id"] is None:
                yield Violation("SCH-2", None, f"{name!r}: slot {last} enqueued, no task", [row])
            expected = max(expected, last + every)
        if expected <= schedule["cursor_ms"]:
            yield Violation(
                "SCH-2", None, f"{name!r}: slot {expected} is before the cursor, undecided"
            )


# --- workflows --------------------------------------------------------------------------------


def _generation_start(rows: list[dict[str, Any]], seq: int) -> int:
    """The seq where the generation holding ``seq`` began: the task's insert, or the last
    retry (a terminal status back to queued) before ``seq``."""
    begun = 0
    for row in rows:
        if row["seq"] >= seq:
            break
        if row["tbl"] == "task" and (
            row["op"] == "insert"
            or (row["old_status"] in TERMINAL and row["new_status"] == "queued")
        ):
            begun = row["seq"]
    return begun


def wf1_a_dependent_runs_only_after_its_dependencies(h: History, r: Replay) -> Iterator[Violation]:
    """WF-1: a dependent is claimed (so its handler starts) only after each dependency
    succeeded, under policy ``cancel`` or ``fail``, or ended, under ``run``.

    The edges are those ``depends_on`` and graphs recorded in the claim's generation
    before it (a manual retry starts a new generation that runs regardless). Order is
    the log's: the dependency's change to succeeded (or to any end) must come before
    the claim, which comes before the handler start it leads to.
    """
    w = r.workflows
    starts, _ = _runs(h)
    for claim in r.claims:
        edges = [e for e in w.edges_of.get(claim.task, []) if e.reason == "dependencies"]
        if not edges:
            continue
        begun = _generation_start(r.rows_of[claim.task], claim.seq)
        for edge in edges:
            if not begun <= edge.seq < claim.seq:
                continue
            run = edge.policy == "run"
            at = (w.ended_at if run else w.succeeded_at).get(edge.depends_on)
            if at is None or at > claim.seq:
                started = starts.get(claim.ident)
                yield Violation(
                    "WF-1",
                    claim.task,
                    f"claim {claim.ident[1:]} came before dependency {edge.depends_on} "
                    f"{'ended' if run else 'succeeded'} (policy {edge.policy})"
                    + ("" if started is None else "; its handler started"),
                    [edge, *([] if at is None else [f"the dependency got there at seq {at}"])],
                )
                break


def _leaving_parked(r: Replay) -> Iterator[tuple[str, dict[str, Any], str]]:
    """Each change that took a task out of its parked state (``decided``) and each
    workflow decision written to a task that was not parked (``again``), with the reason
    it was last parked for.

    A decision is a release (still queued, no longer due at ``PARKED_RUN_AT_MS``), a
    cancel, or a failure by policy ``fail``; a release moves only the due time, and a
    failure by policy is the one change from queued to failed.
    """
    for task, rows in r.rows_of.items():
        for row in rows:
            if row["tbl"] != "task" or row["op"] != "update":
                continue
            old_run_at, new_run_at = row.get("old_run_at"), row.get("new_run_at")
            was = row["old_status"] == "queued" and old_run_at == PARKED_RUN_AT_MS
            stays = row["new_status"] == "queued" and new_run_at == PARKED_RUN_AT_MS
            released = (
                row["old_status"] == row["new_status"] == "queued"
                and new_run_at != old_run_at
                and not stays
            )
            failed_by_policy = (
                row["old_status"] == "queued"
                and row["new_status"] == "failed"
                and row["new_error_code"] == DEPENDENCY_FAILED
            )
            reason = r.workflows.reason_at(task, row["seq"])
            if task in r.waiting and task not in r.workflows.parkings:
                continue  # a durable wait's park and wake, no workflow's
            if was and not stays:
                yield "decided", row, reason
            elif released or failed_by_policy:
                yield "again", row, reason


def _decision(row: dict[str, Any]) -> str:
    if row["new_status"] == "queued":
        return "released"
    if row["new_status"] == "running":
        return "claimed"
    return row["new_status"]  # type: ignore[no-any-return]


def wf2_a_dependent_is_decided_once(h: History, r: Replay) -> Iterator[Violation]:
    """WF-2: a dependent leaves its parked state once, by one decision (released, or
    canceled or failed by its policy), and no decision is written to it after that.

    A dependent still parked after quiescence is INV-2's (it is queued).
    """
    for kind, row, reason in _leaving_parked(r):
        if reason != "dependencies":
            continue
        if kind == "again":
            yield Violation(
                "WF-2",
                row["task_id"],
                f"{_decision(row)} again: a dependent decided while no longer parked",
                [row],
            )
        elif row["new_status"] == "running":
            yield Violation("WF-2", row["task_id"], "a parked dependent was claimed", [row])


def wf3_a_gathered_parent_resumes_once_after_its_children(
    h: History, r: Replay
) -> Iterator[Violation]:
    """WF-3: a parent parked by ``gather`` is released once per parking, and only after
    every child it gathers has ended (each child's change to a terminal status comes
    before the release in the log).
    """
    w = r.workflows
    for kind, row, reason in _leaving_parked(r):
        if reason != "gather":
            continue
        task = row["task_id"]
        if kind == "again":
            yield Violation("WF-3", task, "a gathered parent was resumed twice", [row])
        elif row["new_status"] == "running":
            yield Violation("WF-3", task, "a parked parent was claimed", [row])
        elif row["new_status"] == "queued":
            for edge in w.edges_of.get(task, []):
                if edge.reason != "gather" or edge.seq > row["seq"]:
                    continue
                ended = w.ended_at.get(edge.depends_on)
                if ended is None or ended > row["seq"]:
                    yield Violation(
                        "WF-3",
                        task,
                        f"a gathered parent resumed before its child {edge.depends_on} ended",
                        [row, edge],
                    )
                    break


# Events of a client's cancel: the cancel a policy decision writes is the same change.
CANCEL_EVENTS = {"cancel_invoke", "cancel_ok", "cancel_info"}


def _canceled_by_hand(h: History) -> set[str]:
    """Tasks something other than a policy may have canceled: every task a client asked
    to cancel, and every task under a key that later pointed at another task (a
    ``replace`` submit cancels the task it replaces)."""
    tasks = {e["task"] for e in h.events if e["event"] in CANCEL_EVENTS and e.get("task")}
    pointed: dict[str, str] = {}
    for row in sorted(h.transitions, key=lambda r: r["seq"]):
        if row["tbl"] != "key" or row["op"] == "delete":
            continue
        before = pointed.get(row["key"])
        if before is not None and before != row["task_id"]:
            tasks.add(before)
        pointed[row["key"]] = row["task_id"]
    return tasks


def _dependency_state(status: str | None, purged: bool) -> str:
    if status is None:
        return "never stored"
    return f"{status}, then purged" if purged else status


def wf4_a_dependent_is_canceled_or_failed_only_for_a_dependency_that_did_not_succeed(
    h: History, r: Replay
) -> Iterator[Violation]:
    """WF-4: a dependent is canceled or failed by its policy only when one of its
    dependencies under ``cancel`` or ``fail``, recorded in its current generation, had
    ended failed or canceled, or was gone without having succeeded, when the decision
    was written. A dependency that succeeded counts as succeeded from then on, purged
    or not: a dependent whose every dependency succeeded is released, never canceled or
    failed.

    A dependency's state is the log's at the decision: its last change before it, so a
    success stays a success once a purge deleted the row. A decision by policy is a
    parked dependent's change to failed with the ``dependency_failed`` code, or to
    canceled; a client's cancel writes that same change, so the cancel of a task a
    client asked to cancel, or whose key moved on to another task, is not judged.
    """
    w = r.workflows
    by_hand = _canceled_by_hand(h)
    for kind, row, reason in _leaving_parked(r):
        if kind != "decided" or reason != "dependencies":
            continue
        task, status = row["task_id"], row["new_status"]
        by_policy = (status == "failed" and row["new_error_code"] == DEPENDENCY_FAILED) or (
            status == "canceled" and task not in by_hand
        )
        if not by_policy:
            continue
        begun = _generation_start(r.rows_of[task], row["seq"])
        edges = [
            e
            for e in w.edges_of.get(task, [])
            if e.reason == "dependencies" and begun <= e.seq < row["seq"]
        ]
        states = {e.depends_on: w.status_at(e.depends_on, row["seq"]) for e in edges}
        if any(
            e.policy != "run" and states[e.depends_on][0] in (None, "failed", "canceled")
            for e in edges
        ):
            continue
        found = ", ".join(
            f"{e.depends_on} ({e.policy}) {_dependency_state(*states[e.depends_on])}" for e in edges
        )
        yield Violation(
            "WF-4",
            task,
            f"{status} by its policy, though no dependency under cancel or fail had ended "
            f"badly or gone without succeeding: {found or 'no dependencies'}",
            [row, *edges],
        )


# --- counters ---------------------------------------------------------------------------------


def _first_end(r: Replay, task: str) -> tuple[int, str] | None:
    """The seq and status of the task's first change to a terminal status, or of its
    deletion (status ``purged``) if it was deleted before any; ``None`` if neither."""
    for row in r.rows_of.get(task, []):
        if row["tbl"] != "task":
            continue
        if row["op"] == "delete":
            return row["seq"], "purged"
        if row["new_status"] in TERMINAL:
            return row["seq"], row["new_status"]
    return None


def bat1_a_batch_callback_is_submitted_exactly_once_after_its_members_ended(
    h: History, r: Replay
) -> Iterator[Violation]:
    """BAT-1: a batch's callbacks are submitted exactly once, after every member ended.

    For each batch: each member's recorded outcome is the status of its first end in the
    log (``purged`` for a member deleted before it ended); a callback's task is inserted
    at most once, and only once the batch is done; a done batch has ``on_complete`` and
    exactly one of ``on_success`` (every member succeeded) and ``on_failure`` inserted;
    each callback's insert comes after every member's first end in the log's order; and,
    after quiescence, no closed batch whose members all ended is left undone.
    """
    if h.batches is None:
        return
    inserts: dict[str, list[int]] = defaultdict(list)
    for row in r.task_rows():
        if row["op"] == "insert":
            inserts[row["task_id"]].append(row["seq"])
    members: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for member in h.batches["members"]:
        members[member["batch_id"]].append(member)
    for batch in h.batches["batches"]:
        bid = batch["id"]
        ends: dict[str, tuple[int, str] | None] = {
            m["task_id"]: _first_end(r, m["task_id"]) for m in members[bid]
        }
        for m in members[bid]:
            end = ends[m["task_id"]]
            if end is not None and m["outcome"] is not None and m["outcome"] != end[1]:
                yield Violation(
                    "BAT-1",
                    m["task_id"],
                    f"batch {bid} recorded outcome {m['outcome']} for a member whose first "
                    f"end was {end[1]}",
                    [m, end],
                )
        good = all(m["outcome"] == "succeeded" for m in members[bid])
        due = {"on_complete", "on_success" if good else "on_failure"}
        for kind, task in sorted(batch["callbacks"].items()):
            seqs = inserts.get(task, [])
            expected = 1 if batch["state"] == "done" and kind in due else 0
            if len(seqs) != expected:
                yield Violation(
                    "BAT-1",
                    task,
                    f"callback {kind} of batch {bid} ({batch['state']}) was submitted "
                    f"{len(seqs)} time(s), not {expected}",
                    [batch],
                )
            for seq in seqs:
                early = sorted(t for t, end in ends.items() if end is None or end[0] > seq)
                if early:
                    yield Violation(
                        "BAT-1",
                        task,
                        f"callback {kind} of batch {bid} was submitted before member(s) "
                        f"{', '.join(early[:5])} ended",
                        [batch, seq],
                    )
        if (
            h.liveness
            and batch["state"] == "closed"
            and members[bid]
            and all(end is not None for end in ends.values())
        ):
            yield Violation(
                "BAT-1", None, f"batch {bid} is closed, every member ended, yet not done", [batch]
            )


def _counters(h: History, r: Replay) -> dict[str, Any]:
    starts: Counter[str] = Counter(e["task"] for e in h.events if e["event"] == "handler_start")
    indeterminate = [e for e in h.events if e["event"] == "submit_info"]
    stored = _stored_requests(h)
    return {
        "submitted": sum(e["event"] == "submit_ok" for e in h.events),
        "refused_submits": sum(e["event"] == "submit_fail" for e in h.events),
        "indeterminate": len(indeterminate),
        "indeterminate_found_stored": sum(e.get("req") in stored for e in indeterminate),
        "tasks": sum(1 for row in r.task_rows() if row["op"] == "insert"),
        "claims": len(r.claims),
        "executions": sum(starts.values()),
        "tasks_run_more_than_once": sum(1 for n in starts.values() if n > 1),
        "settlements": sum(_leaves_running(row) and _lease_live(row) for row in r.task_rows()),
        "recoveries": sum(_leaves_running(row) and not _lease_live(row) for row in r.task_rows()),
        "refused_settlements": sum(e["event"] == "settle_lost" for e in h.events),
        "claim_errors": sum(e["event"] == "claim_error" for e in h.events),
        "final": dict(Counter(row["status"] for row in h.final)),
        "ended": dict(Counter(_last_status(r).values())),
        "purged": sum(row["op"] == "delete" for row in r.task_rows()),
        "schedule_slots": sum(row["slots"] for row in (h.schedules or {}).get("slots", [])),
        "batches_done": sum(b["state"] == "done" for b in (h.batches or {}).get("batches", [])),
        "dependents": len(
            {e.task for es in r.workflows.edges_of.values() for e in es if e.reason != "gather"}
        ),
        "gathers": sum(
            reason == "gather" for ps in r.workflows.parkings.values() for _, reason in ps
        ),
        "parked_decisions": dict(
            Counter(_decision(row) for kind, row, _ in _leaving_parked(r) if kind == "decided")
        ),
        "released_past_a_purge": sum(
            kind == "decided" and _decision(row) == "released" and _past_a_purge(r, row)
            for kind, row, _ in _leaving_parked(r)
        ),
    }


def _past_a_purge(r: Replay, row: dict[str, Any]) -> bool:
    """Whether a dependency of the task ``row`` decides succeeded and was purged before it
    (the case WF-4 holds to its success)."""
    w = r.workflows
    return any(
        w.status_at(e.depends_on, row["seq"]) == ("succeeded", True)
        for e in w.edges_of.get(row["task_id"], [])
        if e.reason == "dependencies" and e.seq < row["seq"]
    )


def _last_status(r: Replay) -> dict[str, str]:
    """Each task's last status, purged tasks included (their status before the purge)."""
    last: dict[str, str] = {}
    for row in r.task_rows():
        if row["op"] != "delete":
            last[row["task_id"]] = row["new_status"]
    return last
