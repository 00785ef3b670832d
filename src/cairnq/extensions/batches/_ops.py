"""Operations of batches (extension tables ``cairnq_batches`` and ``cairnq_batch_members``,
migration ``x0017_batches.sql``).

A batch is a group of tasks (its members) with up to three callbacks, each a task
submitted once the batch is closed and every member ended: ``on_complete`` always,
``on_success`` when every member succeeded, ``on_failure`` when one did not (failed,
canceled, or deleted before it ended). A batch is ``open`` (members can be added),
``closed`` (its callbacks are due once every member ended) or ``done`` (they were
submitted, in the transaction that marked it done: ``batches_done`` changes a batch
from ``closed`` to ``done`` once, ever, so its callbacks are submitted exactly once).

Each member's outcome is recorded in ``cairnq_batch_members`` when it ends, the first
end only:

- by ``after_ended`` in the transaction that ended it, where cairnq ends it (a
  worker's settlement, a client's cancel) while the extension is in use; that
  transaction also decides the batch, locked first, so the one ending the last member
  submits the callbacks;
- by the delete trigger of ``x0017_batches.sql`` when the task's row goes first (a
  purge: its last status, ``purged`` if it had not ended);
- by ``sweep`` otherwise (a reference SDK's worker, lease recovery, a worker that had
  not seen the batch yet), which then decides the batch.

A callback's handler reads the outcomes from the table (``members``), never from the
members' rows, so retention purging a member cannot change what it sees.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from ... import kernel
from ..._checks import check_int, check_text
from ...errors import InvalidArgument, SchemaIncomplete
from ...models import TERMINAL_STATUSES, Task
from ...protocol.steps import NOW, Call, Op, Row

BATCHES_MIGRATION = "x0017_batches.sql"
CALLBACKS = ("on_success", "on_failure", "on_complete")
STATES = ("open", "closed", "done")
SWEEP_LIMIT = 1000
MAX_PAGE = 10_000
_SPEC_FIELDS = tuple(f.name for f in fields(kernel.NewTask) if not f.name.endswith("_value"))


class BatchClosed(InvalidArgument):
    """Members were added to a batch that is closed (or done); nothing was written."""

    def __init__(self, batch_id: str, state: str) -> None:
        super().__init__(f"batch {batch_id} is {state}: no member can be added to it")
        self.batch_id = batch_id
        self.state = state


class BatchNotFound(InvalidArgument):
    """No batch has this id."""

    def __init__(self, batch_id: str) -> None:
        super().__init__(f"no batch has the id {batch_id!r}")
        self.batch_id = batch_id


def check_batch_id(value: Any) -> str:
    """A batch id: a non-empty string (``batch_`` and a ULID, as ``submit`` makes them)."""
    return check_text(value, "batch id") or ""


# --- readiness ---------------------------------------------------------------------------


def batches_ready() -> Op[bool]:
    """Whether the database has the batch tables (migration ``x0017_batches.sql``)."""
    applied = yield from kernel.applied_migrations()
    return BATCHES_MIGRATION in applied


def _require(what: str) -> Op[None]:
    ready = yield from batches_ready()
    if not ready:
        raise SchemaIncomplete(
            f"{what} needs cairnq's batch tables (migration {BATCHES_MIGRATION}), which this "
            "database lacks; run `cairnq migrate` to add them",
            missing=(BATCHES_MIGRATION,),
        )


# --- the callbacks as stored -------------------------------------------------------------


def spec_row(spec: kernel.NewTask) -> dict[str, Any]:
    """A callback's submission as stored in its batch's row (its payload already encoded)."""
    return {name: getattr(spec, name) for name in _SPEC_FIELDS}


def spec_of(row: Mapping[str, Any]) -> kernel.NewTask:
    """The submission a stored callback row describes."""
    return kernel.NewTask(**{name: row[name] for name in _SPEC_FIELDS})


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# --- submit, add, close -------------------------------------------------------------------


@dataclass(frozen=True)
class Batch:
    """A batch as ``status`` reads it.

    Attributes:
        id: The batch's id.
        state: ``"open"`` (members can be added), ``"closed"`` (its callbacks are due
            once every member ended) or ``"done"`` (they were submitted).
        total: How many members it has.
        succeeded, failed, canceled: How many members ended so, as recorded.
        purged: How many were deleted before their end was recorded as one of those.
        pending: How many have not ended yet.
        callbacks: The task id of each callback it has (``on_success``, ...): the
            ids the callbacks get when submitted (``submitted`` says which were).
        submitted: The callbacks submitted (all of them are when it is done, but
            ``on_success`` and ``on_failure``, of which exactly one is).
        created_at_ms, closed_at_ms, done_at_ms: When it was made, closed and done.
    """

    id: str
    state: str
    total: int
    succeeded: int
    failed: int
    canceled: int
    purged: int
    pending: int
    callbacks: dict[str, str]
    submitted: tuple[str, ...]
    created_at_ms: int
    closed_at_ms: int | None = None
    done_at_ms: int | None = None
    tasks: list[Task] = field(default_factory=list, compare=False, repr=False)

    @property
    def ended(self) -> int:
        """How many members ended (each outcome counted)."""
        return self.total - self.pending

    @property
    def progress(self) -> float:
        """The share of members that ended, 0.0 to 1.0 (1.0 for a batch without members)."""
        return 1.0 if self.total == 0 else self.ended / self.total


@dataclass(frozen=True)
class Member:
    """One member of a batch: its task id, its outcome as recorded when it ended (``None``
    while it runs) and its task's status now (``None`` once its row was purged)."""

    task_id: str
    outcome: str | None
    ended_at_ms: int | None
    status: str | None


def due_callbacks(counts: Mapping[str | None, int]) -> tuple[str, ...]:
    """The callbacks due for a batch whose every member ended with these outcome counts:
    ``on_complete``, and ``on_success`` if every member succeeded, else ``on_failure``."""
    bad = sum(n for outcome, n in counts.items() if outcome != "succeeded")
    return ("on_success" if bad == 0 else "on_failure", "on_complete")


def submit(
    batch_id: str,
    specs: Sequence[kernel.NewTask],
    callbacks: Mapping[str, kernel.NewTask],
    *,
    close: bool,
) -> Op[Batch]:
    """Store a batch, its members and its callbacks in one transaction; a batch stored
    closed whose members all ended already is decided at once (its callbacks submitted).

    Raises:
        SchemaIncomplete: the database lacks the batch tables.
        AlreadyExists: a member's key is taken under ``conflict="reject"``.
    """
    yield from _require("a batch")
    stored = {kind: spec_row(spec) for kind, spec in callbacks.items()}
    yield Call(
        "batches_insert",
        {
            "id": batch_id,
            "state": "closed" if close else "open",
            "callbacks": _json(stored),
            "now_ms": NOW,
        },
    )
    tasks = yield from _put_members(batch_id, specs)
    if close:
        yield from decide([batch_id])
    found = yield from _status(batch_id)
    assert found is not None
    return Batch(**{**found.__dict__, "tasks": tasks})


def _put_members(batch_id: str, specs: Sequence[kernel.NewTask]) -> Op[list[Task]]:
    if not specs:
        return []
    tasks = yield from kernel.submit_many(specs)
    rows = [[batch_id, t.id, t.status if t.status in TERMINAL_STATUSES else None] for t in tasks]
    yield Call("batches_members_put", {"rows": _json(rows), "now_ms": NOW})
    return list(tasks)


def add(batch_id: str, specs: Sequence[kernel.NewTask]) -> Op[list[Task]]:
    """Add members to an open batch, in one transaction.

    Raises:
        BatchNotFound: no batch has this id.
        BatchClosed: the batch is closed or done; nothing is written.
        SchemaIncomplete: the database lacks the batch tables.
    """
    yield from _require("a batch")
    locked = yield Call("batches_lock", {"ids": [batch_id]})
    if not locked:
        raise BatchNotFound(batch_id)
    state = str(locked[0]["state"])
    if state != "open":
        raise BatchClosed(batch_id, state)
    return (yield from _put_members(batch_id, specs))


def close(batch_id: str) -> Op[Batch]:
    """Close a batch: no member can be added from then on, and its callbacks are submitted
    once every member ended (at once, in this transaction, if they all did). Closing a
    closed or done batch changes nothing.

    Raises:
        BatchNotFound: no batch has this id.
        SchemaIncomplete: the database lacks the batch tables.
    """
    yield from _require("a batch")
    locked = yield Call("batches_lock", {"ids": [batch_id]})
    if not locked:
        raise BatchNotFound(batch_id)
    yield Call("batches_close", {"id": batch_id, "now_ms": NOW})
    yield from decide([batch_id])
    found = yield from _status(batch_id)
    assert found is not None
    return found


# --- deciding ----------------------------------------------------------------------------


def after_ended(rows: Iterable[Row]) -> Op[list[str]]:
    """Record the outcome of the members among the tasks in ``rows`` that just ended, and
    decide their batches. Run in the transaction that ended them; one statement when none
    of them is a member. Returns the ids of the batches it made done."""
    ended = [[str(r["id"]), str(r["status"])] for r in rows if r["status"] in TERMINAL_STATUSES]
    if not ended:
        return []
    recorded = yield Call("batches_record", {"rows": _json(ended), "now_ms": NOW})
    if not recorded:
        return []
    return (yield from decide(sorted({str(r["batch_id"]) for r in recorded})))


def decide(batch_ids: Sequence[str]) -> Op[list[str]]:
    """Submit the due callbacks of each batch of ``batch_ids`` that is closed with every
    member's end recorded, and mark it done; returns the ids of the batches made done.

    The batches are locked first (PostgreSQL), so of two transactions ending a batch's
    last two members, the later one sees the other's record, and a batch is made done
    once (``batches_done`` changes only a closed batch).
    """
    if not batch_ids:
        return []
    locked = yield Call("batches_lock", {"ids": sorted(batch_ids)})
    closed = {str(r["id"]): str(r["callbacks"]) for r in locked if r["state"] == "closed"}
    if not closed:
        return []
    unfinished = yield Call("batches_unfinished", {"ids": sorted(closed)})
    ready = sorted(set(closed) - {str(r["id"]) for r in unfinished})
    if not ready:
        return []
    counts = yield from _counts(ready)
    done: list[str] = []
    specs: list[kernel.NewTask] = []
    for batch_id in ready:
        marked = yield Call("batches_done", {"id": batch_id, "now_ms": NOW})
        if not marked:
            continue
        done.append(batch_id)
        stored = json.loads(closed[batch_id])
        for kind in due_callbacks(counts.get(batch_id, {})):
            if kind in stored:
                specs.append(spec_of(stored[kind]))
    if specs:
        yield from kernel.submit_many(specs)
    return done


def _counts(batch_ids: Sequence[str]) -> Op[dict[str, dict[str | None, int]]]:
    rows = yield Call("batches_counts", {"ids": list(batch_ids)})
    out: dict[str, dict[str | None, int]] = {}
    for r in rows:
        outcome = None if r["outcome"] is None else str(r["outcome"])
        out.setdefault(str(r["batch_id"]), {})[outcome] = int(r["n"])
    return out


def in_use() -> Op[bool]:
    """Whether a batch is open or closed: while none is, no settlement has a member to record."""
    rows = yield Call("batches_in_use", {})
    return bool(rows and rows[0]["in_use"])


def sweep(limit: int = SWEEP_LIMIT) -> Op[list[str]]:
    """Record the ends no transaction recorded (a reference SDK's worker, lease recovery,
    a worker that had not seen the batch) and decide the batches they complete; returns
    the ids of the batches made done. Nothing on a database without the batch tables."""
    done, _ = yield from sweep_turn(limit)
    return done


def sweep_turn(limit: int = SWEEP_LIMIT) -> Op[tuple[list[str], bool]]:
    """``sweep``, and whether it read ``limit`` unrecorded ends or batches to decide (more
    may wait: a turn that only recorded members made no batch done)."""
    ready = yield from batches_ready()
    if not ready:
        return [], False
    stalled = yield Call("batches_stalled", {"limit": limit})
    touched: set[str] = set()
    if stalled:
        rows = [[str(r["task_id"]), str(r["status"])] for r in stalled]
        recorded = yield Call("batches_record", {"rows": _json(rows), "now_ms": NOW})
        touched.update(str(r["batch_id"]) for r in recorded)
    waiting = yield Call("batches_ready", {"limit": limit})
    touched.update(str(r["id"]) for r in waiting)
    done = yield from decide(sorted(touched))
    return done, len(stalled) >= limit or len(waiting) >= limit


# --- reads -------------------------------------------------------------------------------


def status(batch_id: Any) -> Op[Batch | None]:
    """A batch's state, counts and callbacks, or ``None`` for an id no batch has.

    Raises:
        InvalidArgument: a bad batch id.
        SchemaIncomplete: the database lacks the batch tables.
    """
    return _checked_status(check_batch_id(batch_id))


def _checked_status(batch_id: str) -> Op[Batch | None]:
    yield from _require("batch_status")
    return (yield from _status(batch_id))


def _status(batch_id: str) -> Op[Batch | None]:
    rows = yield Call("batches_get", {"id": batch_id})
    if not rows:
        return None
    row = rows[0]
    counts = (yield from _counts([batch_id])).get(batch_id, {})
    stored = json.loads(str(row["callbacks"]))
    state = str(row["state"])
    submitted: tuple[str, ...] = ()
    if state == "done":
        submitted = tuple(k for k in due_callbacks(counts) if k in stored)
    return Batch(
        id=str(row["id"]),
        state=state,
        total=sum(counts.values()),
        succeeded=counts.get("succeeded", 0),
        failed=counts.get("failed", 0),
        canceled=counts.get("canceled", 0),
        purged=counts.get("purged", 0),
        pending=counts.get(None, 0),
        callbacks={k: str(stored[k]["id"]) for k in CALLBACKS if k in stored},
        submitted=submitted,
        created_at_ms=int(row["created_at_ms"]),
        closed_at_ms=None if row["closed_at_ms"] is None else int(row["closed_at_ms"]),
        done_at_ms=None if row["done_at_ms"] is None else int(row["done_at_ms"]),
    )


def members(batch_id: Any, *, after: Any = None, limit: Any = 1000) -> Op[list[Member]]:
    """A page of a batch's members in task id order: those after the task id ``after``
    (``None``: from the first), at most ``limit`` (1 to 10,000).

    Raises:
        InvalidArgument: a bad batch id, ``after`` or ``limit``.
        SchemaIncomplete: the database lacks the batch tables.
    """
    bid = check_batch_id(batch_id)
    start = check_text(after, "after", optional=True)
    size = check_int(limit, "limit", low=1, high=MAX_PAGE)
    return _members(bid, start, size)


def _members(batch_id: str, after: str | None, limit: int) -> Op[list[Member]]:
    yield from _require("batch members")
    rows = yield Call("batches_members", {"id": batch_id, "after": after, "limit": limit})
    return [
        Member(
            str(r["task_id"]),
            None if r["outcome"] is None else str(r["outcome"]),
            None if r["ended_at_ms"] is None else int(r["ended_at_ms"]),
            None if r["status"] is None else str(r["status"]),
        )
        for r in rows
    ]
