"""Operations of durable waits (extension tables ``cairnq_waits`` and
``cairnq_waits_mailbox``, migration ``x0019_waits.sql``).

Like the kernel's, each function validates eagerly and returns a statement-yielding
generator.

A wait is one row of ``cairnq_waits``, keyed by the task and the wait's name in the
task's run (``event:<key>``, ``sleep#<n>``): the run that begins it writes it
``waiting`` and parks the task in the same transaction (the kernel's ``hand_back``:
queued, its attempt not spent, due at the wait's ``parked_run_at_ms``: the wake
time of a sleep, the deadline of an event wait with a timeout, else
``PARKED_RUN_AT_MS``). Each later run of the task reads the row and goes past the
wait (``delivered``, ``slept``) or raises its timeout (``timed_out``): a wait ends
once, and every later run sees the same end.

An event is a row of the mailbox, kept until its ``expires_at_ms``. The waits and
the sends of one key take the key's lock first (``waits_lock``), so an event sent
while a wait begins is either taken by the wait or finds it parked, never neither.
A one-receiver event is delivered to one wait (``taken_by``); a fanout event to
every wait of the key waiting when it is sent, and to every task whose wait on the
key begins before it expires (each task receives it once).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ... import kernel
from ..._checks import check_int, check_text
from ...errors import InvalidArgument, LostLease, SchemaIncomplete
from ...kernel import owned
from ...kernel.points import AttemptEnd, AttemptEndHook, settled_outcome
from ...models import Lease
from ...protocol.steps import NOW, Call, Op, Row

WAITS_MIGRATION = "x0019_waits.sql"
SEND_IDS_MIGRATION = "x0025_waits_send_ids.sql"
SEND_ID_MIN_MS = 24 * 3600 * 1000
"""How long a send's id is remembered at least (its event's retention, if longer)."""
PARKED_RUN_AT_MS = 253_402_214_400_000
"""The due time of a task parked by an event wait without a timeout (9999-12-31, as
the workflows' parked tasks): no clock reaches it; a send makes the task due."""
DEFAULT_RETENTION_MS = 7 * 24 * 3600 * 1000
MAX_RETENTION_MS = 366 * 24 * 3600 * 1000
EXPIRE_BATCH = 100
SEND_TARGETS = ("one", "all")
ALL_WAITERS = 2**62
"""The ``limit`` of a fanout send's read of the waiting waits: every one of them."""


@dataclass(frozen=True)
class WaitRecord:
    """One wait of a task's run, as stored.

    Attributes:
        task_id: The task.
        name: The wait's name in the run (``event:approval``, ``sleep#1``).
        kind: ``"event"`` or ``"sleep"``.
        event_key: The key an event wait waits on (``None`` for a sleep).
        state: ``"waiting"``, ``"delivered"``, ``"timed_out"`` or ``"slept"``.
        wake_at_ms: A sleep's wake time, or an event wait's deadline (``None``: none).
        payload: The delivered event's payload (decoded), else ``None``.
        created_at_ms: When the wait began.
        ended_at_ms: When it ended, else ``None``.
    """

    task_id: str
    name: str
    kind: str
    event_key: str | None
    state: str
    wake_at_ms: int | None
    payload: Any
    created_at_ms: int
    ended_at_ms: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "event_key": self.event_key,
            "state": self.state,
            "wake_at_ms": self.wake_at_ms,
            "payload": self.payload,
            "created_at_ms": self.created_at_ms,
            "ended_at_ms": self.ended_at_ms,
        }


@dataclass(frozen=True)
class Sent:
    """What a send did.

    Attributes:
        seq: The event's number in the mailbox (increasing).
        delivered_to: The tasks whose waiting wait received it now (made due).
        kept: Whether it is kept for waits that begin later (a one-receiver event no
            wait received, or any fanout event), until it expires.
    """

    seq: int
    delivered_to: tuple[str, ...]
    kept: bool


# --- validation --------------------------------------------------------------------------


def check_key(key: Any) -> str:
    """An event key: text like a task key (non-empty, no NUL, at most 1000 bytes)."""
    return check_text(key, "event key") or ""


def check_to(to: Any) -> bool:
    """``to="one"`` or ``to="all"``; returns whether it is a fanout."""
    if to not in SEND_TARGETS:
        raise InvalidArgument(f"to must be 'one' or 'all', got {to!r}")
    return bool(to == "all")


def check_retention_ms(value: Any) -> int:
    """How long an event is kept for waits that begin later: 0 to 366 days."""
    return check_int(value, "retention", low=0, high=MAX_RETENTION_MS)


# --- readiness ---------------------------------------------------------------------------


def waits_ready() -> Op[bool]:
    """Whether the database has the waits' tables (``x0019_waits.sql``)."""
    applied = yield from kernel.applied_migrations()
    return WAITS_MIGRATION in applied


def require() -> Op[None]:
    """Nothing, on a database with ``x0019_waits.sql``.

    Raises:
        SchemaIncomplete: the database lacks it.
    """
    ready = yield from waits_ready()
    if not ready:
        raise _lacking(WAITS_MIGRATION, "durable waits")


def _lacking(migration: str, what: str) -> SchemaIncomplete:
    return SchemaIncomplete(
        f"this database lacks cairnq's {what} (migration {migration}); "
        "run `cairnq migrate` to add it",
        missing=(migration,),
    )


def _now() -> Op[int]:
    rows = yield Call("clock_now", {"now_ms": NOW})
    return int(rows[0]["now_ms"])


# --- a run's waits -----------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What a wait's step in a run came to.

    ``state`` is ``"delivered"`` (``payload`` is the event's, encoded), ``"timed_out"``,
    ``"slept"`` (go on past the wait) or ``"parked"`` (``row`` is the task as the
    park wrote it; the attempt is settled).
    """

    state: str
    payload: str | None = None
    row: Row | None = None
    wake_at_ms: int | None = None


def _write(
    lease: Lease,
    worker_id: str,
    now_ms: int,
    name: str,
    kind: str,
    key: str | None,
    state: str,
    *,
    wake_at_ms: int | None = None,
    parked_run_at_ms: int = 0,
    message_seq: int | None = None,
    payload: str | None = None,
) -> Op[Row]:
    params = owned(lease, worker_id) | {
        "now_ms": now_ms,
        "name": name,
        "kind": kind,
        "key": key,
        "state": state,
        "wake_at_ms": wake_at_ms,
        "parked_run_at_ms": parked_run_at_ms,
        "message_seq": message_seq,
        "payload": payload,
    }
    rows: Sequence[Row] = yield Call("waits_write", params)
    if not rows:
        raise LostLease(lease.id)
    return rows[0]


@dataclass(frozen=True)
class Ending:
    """What a park runs beside its write: the attempt-end hooks in use (the history's),
    and when the attempt was claimed."""

    hooks: Sequence[AttemptEndHook] = ()
    started: int | None = None


def _park(lease: Lease, worker_id: str, run_at_ms: int, ending: Ending) -> Op[Row]:
    """Hand the attempt back unspent, due at ``run_at_ms``; the hooks see it ``snoozed``
    (its attempt given back), or ``canceled`` when a pending cancel won."""
    row = yield from kernel.hand_back(lease, worker_id, run_at_ms=run_at_ms)
    if ending.hooks:
        outcome = "snoozed" if row["status"] == "queued" else settled_outcome(row["status"])
        end = AttemptEnd(lease, worker_id, ending.started, outcome)
        for hook in ending.hooks:
            yield from hook([end], None)
    return row


def event_wait(
    lease: Lease,
    worker_id: str,
    name: str,
    key: str,
    timeout_ms: int | None,
    ending: Ending = Ending(),
) -> Op[Outcome]:
    """One run's step through the event wait ``name`` on ``key``, fenced on ``lease``.

    A wait that ended already gives its end back. Otherwise, under the key's lock:
    the oldest event kept for it is taken (``delivered``); or, past the wait's
    deadline, the wait times out; or the wait is written ``waiting`` (its deadline
    ``timeout_ms`` from its first beginning) and the task parked until a send or
    the deadline.

    Raises:
        LostLease: the attempt is no longer owned; nothing is written.
        SchemaIncomplete: the database lacks ``x0019_waits.sql``.
    """
    yield from require()
    yield Call("waits_lock", {"key": key})
    found = yield Call("waits_get", {"id": lease.id, "name": name})
    if found and found[0]["state"] != "waiting":
        return _ended(found[0])
    now_ms = yield from _now()
    kept = yield Call("waits_take", {"key": key, "id": lease.id, "now_ms": now_ms})
    if kept:
        seq, payload = int(kept[0]["seq"]), str(kept[0]["payload"])
        yield from _write(
            lease, worker_id, now_ms, name, "event", key, "delivered",
            message_seq=seq, payload=payload,
        )  # fmt: skip
        yield Call("waits_taken", {"seq": seq, "id": lease.id, "now_ms": now_ms})
        return Outcome("delivered", payload)
    deadline = (
        _int(found[0]["wake_at_ms"])
        if found
        else (None if timeout_ms is None else now_ms + timeout_ms)
    )
    if deadline is not None and deadline <= now_ms:
        yield from _write(lease, worker_id, now_ms, name, "event", key, "timed_out")
        return Outcome("timed_out", wake_at_ms=deadline)
    parked_at = PARKED_RUN_AT_MS if deadline is None else deadline
    yield from _write(
        lease, worker_id, now_ms, name, "event", key, "waiting",
        wake_at_ms=deadline, parked_run_at_ms=parked_at,
    )  # fmt: skip
    row = yield from _park(lease, worker_id, parked_at, ending)
    return Outcome("parked", row=row, wake_at_ms=deadline)


def sleep(
    lease: Lease,
    worker_id: str,
    name: str,
    wake_at_ms: int | None,
    delay_ms: int,
    ending: Ending = Ending(),
) -> Op[Outcome]:
    """One run's step through the sleep ``name``, fenced on ``lease``.

    Its wake time is written when the sleep first begins (``wake_at_ms``, else
    ``delay_ms`` after the database's now) and never moves. Before it, the task is
    parked until it; from it on, the sleep ends (``slept``) and the run goes on.

    Raises:
        LostLease: the attempt is no longer owned; nothing is written.
        SchemaIncomplete: the database lacks ``x0019_waits.sql``.
    """
    yield from require()
    found = yield Call("waits_get", {"id": lease.id, "name": name})
    if found and found[0]["state"] != "waiting":
        return _ended(found[0])
    now_ms = yield from _now()
    if found:
        wake = _int(found[0]["wake_at_ms"]) or 0
    else:
        wake = wake_at_ms if wake_at_ms is not None else now_ms + delay_ms
    if wake <= now_ms:
        if found:
            yield from _write(lease, worker_id, now_ms, name, "sleep", None, "slept")
        return Outcome("slept", wake_at_ms=wake)
    yield from _write(
        lease, worker_id, now_ms, name, "sleep", None, "waiting",
        wake_at_ms=wake, parked_run_at_ms=wake,
    )  # fmt: skip
    row = yield from _park(lease, worker_id, wake, ending)
    return Outcome("parked", row=row, wake_at_ms=wake)


def _ended(row: Row) -> Outcome:
    payload = row["payload"]
    return Outcome(
        str(row["state"]),
        None if payload is None else str(payload),
        wake_at_ms=_int(row["wake_at_ms"]),
    )


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


# --- sends -------------------------------------------------------------------------------


def check_send_id(value: Any) -> str | None:
    """A send's id (``None``: none): text like a task key (non-empty, no NUL, at most
    1000 bytes)."""
    return check_text(value, "send id", optional=True)


def send(
    key: Any,
    payload: str,
    *,
    task_id: Any = None,
    to: Any = "one",
    retention_ms: Any = DEFAULT_RETENTION_MS,
    send_id: Any = None,
) -> Op[Sent]:
    """Send an event on ``key`` (``payload`` encoded JSON); validated eagerly.

    ``to="one"``: the oldest wait waiting on the key receives it, its task made due
    now; with none waiting, it is kept until a wait takes it or ``retention_ms``
    passes. ``to="all"``: every wait waiting on the key receives it, and it is kept
    for every task whose wait on the key begins before it expires. ``task_id``
    addresses it to that task's waits alone. With ``send_id``, a send with the same
    id remembered (the event's retention, and at least ``SEND_ID_MIN_MS``) writes
    nothing and returns what the first did.

    Raises:
        InvalidArgument: a bad key, task id, ``to``, retention or send id, or a send id
            remembered for another key; nothing is written.
        SchemaIncomplete: the database lacks ``x0019_waits.sql`` (or, for a send with an
            id, ``x0025_waits_send_ids.sql``).
    """
    checked = check_key(key)
    addressed = check_text(task_id, "task id", optional=True)
    fanout = check_to(to)
    retention = check_retention_ms(retention_ms)
    once = check_send_id(send_id)
    return _send(checked, payload, addressed, fanout, retention, once)


def _send(
    key: str,
    payload: str,
    task_id: str | None,
    fanout: bool,
    retention_ms: int,
    send_id: str | None,
) -> Op[Sent]:
    applied = yield from kernel.applied_migrations()
    if WAITS_MIGRATION not in applied:
        raise _lacking(WAITS_MIGRATION, "durable waits")
    ids_ready = SEND_IDS_MIGRATION in applied
    if send_id is not None and not ids_ready:
        raise _lacking(SEND_IDS_MIGRATION, "idempotent sends")
    yield Call("waits_lock", {"key": key})
    now_ms = yield from _now()
    address = json.dumps([task_id, fanout])
    if send_id is not None:
        earlier = yield Call("waits_send_find", {"send_id": send_id, "now_ms": now_ms})
        if earlier:
            return _sent_before(send_id, key, address, earlier[0])
    yield Call("waits_expire", {"now_ms": now_ms, "limit": EXPIRE_BATCH})
    if ids_ready:
        yield Call("waits_sends_expire", {"now_ms": now_ms, "limit": EXPIRE_BATCH})
    waiting = yield Call(
        "waits_waiting", {"key": key, "id": task_id, "limit": ALL_WAITERS if fanout else 50}
    )
    chosen: list[Row] = []
    for row in waiting:
        made_due = yield from kernel.undefer({str(row["task_id"]): 0}, int(row["parked_run_at_ms"]))
        if made_due:
            chosen.append(row)
            if not fanout:
                break
    taken_by = str(chosen[0]["task_id"]) if chosen and not fanout else None
    sent = yield Call(
        "waits_send",
        {
            "key": key,
            "id": task_id,
            "fanout": fanout,
            "payload": payload,
            "now_ms": now_ms,
            "expires_at_ms": now_ms + retention_ms,
            "taken_by": taken_by,
        },
    )
    seq = int(sent[0]["seq"])
    for row in chosen:
        yield Call(
            "waits_deliver",
            {
                "id": row["task_id"],
                "name": row["name"],
                "message_seq": seq,
                "payload": payload,
                "now_ms": now_ms,
            },
        )
    result = Sent(seq, tuple(str(r["task_id"]) for r in chosen), fanout or not chosen)
    if send_id is not None:
        put = yield Call(
            "waits_send_put",
            {
                "send_id": send_id,
                "key": key,
                "address": address,
                "seq": seq,
                "delivered_to": json.dumps(list(result.delivered_to)),
                "kept": result.kept,
                "now_ms": now_ms,
                "expires_at_ms": now_ms + max(retention_ms, SEND_ID_MIN_MS),
            },
        )
        if not put:
            # Another key's send with this id committed meanwhile: undo this one whole.
            raise InvalidArgument(f"send id {send_id!r} is taken by another send")
    return result


def _sent_before(send_id: str, key: str, address: str, row: Row) -> Sent:
    """What the remembered send with ``send_id`` did; refused for another key, or for
    another task or fan-out (``address``)."""
    if str(row["event_key"]) != key:
        raise InvalidArgument(
            f"send id {send_id!r} was used for a send on key {row['event_key']!r}, not {key!r}"
        )
    if str(row["address"]) != address:
        was_task, was_all = json.loads(str(row["address"]))
        raise InvalidArgument(
            f"send id {send_id!r} was used for a send on key {key!r} to "
            f"{'task ' + repr(was_task) if was_task else 'any task'} "
            f"({'all waiters' if was_all else 'one waiter'}), not this one"
        )
    delivered = tuple(str(t) for t in json.loads(str(row["delivered_to"])))
    return Sent(int(row["seq"]), delivered, bool(row["kept"]))


# --- reads -------------------------------------------------------------------------------


def parked(queue: str | None) -> Op[dict[str, int]]:
    """Per queue (``queue`` alone when given), the tasks a wait holds parked now: queued,
    not yet due, due at the time a wait of theirs still waiting parked them for (a
    sleep's wake time, a wait's deadline, or ``PARKED_RUN_AT_MS``). A task a send or
    its wake time made due is no longer parked."""
    rows = yield Call("waits_parked", {"queue": queue, "now_ms": NOW})
    return {str(r["queue"]): int(r["parked"]) for r in rows}


def waits_of(task_id: Any, decode: Any) -> Op[list[WaitRecord]]:
    """A task's waits, in the order they began; ``decode`` turns a payload's JSON into
    its value.

    Raises:
        InvalidArgument: a bad task id.
        SchemaIncomplete: the database lacks ``x0019_waits.sql``.
    """
    return _waits_of(check_text(task_id, "task id") or "", decode, True)


def waits_if_ready(task_id: Any, decode: Any) -> Op[list[WaitRecord] | None]:
    """``waits_of``, or ``None`` on a database without the waits' tables (for displays)."""
    return _waits_of(check_text(task_id, "task id") or "", decode, False)


def _waits_of(task_id: str, decode: Any, strict: bool) -> Op[Any]:
    if strict:
        yield from require()
    else:
        ready = yield from waits_ready()
        if not ready:
            return None
    rows = yield Call("waits_of_task", {"id": task_id})
    return [_record(task_id, r, decode) for r in rows]


def _record(task_id: str, row: Row, decode: Any) -> WaitRecord:
    payload = row["payload"]
    return WaitRecord(
        task_id,
        str(row["name"]),
        str(row["kind"]),
        None if row["event_key"] is None else str(row["event_key"]),
        str(row["state"]),
        _int(row["wake_at_ms"]),
        None if payload is None else decode(str(payload)),
        int(row["created_at_ms"]),
        _int(row["ended_at_ms"]),
    )


def kept(key: Any, limit: Any = 100) -> Op[list[Row]]:
    """The unexpired events kept for ``key`` that a wait may still take, oldest first.

    Raises:
        InvalidArgument: a bad key or limit.
        SchemaIncomplete: the database lacks ``x0019_waits.sql``.
    """
    return _kept(check_key(key), check_int(limit, "limit", low=1, high=10_000))


def _kept(key: str, limit: int) -> Op[list[Row]]:
    yield from require()
    now_ms = yield from _now()
    rows = yield Call("waits_kept", {"key": key, "now_ms": now_ms, "limit": limit})
    return list(rows)
