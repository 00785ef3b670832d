"""Operations on schedules (extension tables ``cairnq_schedules`` and ``cairnq_schedule_slots``).

Like the kernel's, each function validates eagerly and returns a statement-yielding
generator. ``evaluate`` is where a slot becomes a task: under the schedule's row
lock (PostgreSQL; SQLite runs one write transaction at a time) it decides the
slots after the cursor, records each decision under the slot's primary key,
submits each enqueued slot's task with a key of its own, due at its slot (so a
catch-up runs oldest slot first), and moves the cursor, all in one transaction.
A slot is recorded once, and the cursor never moves back, so a slot submits at
most one task however many processes evaluate.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ... import kernel
from ..._checks import MAX_DELAY_MS, check_int, check_text
from ..._json import DEFAULT_CODEC, JsonCodec
from ..._sealing import is_sealed
from ...durations import format_duration
from ...errors import InvalidArgument, SchemaIncomplete
from ...kernel.procedures import Procedure, Run
from ...protocol.steps import NOW, Call, Op

if TYPE_CHECKING:
    from ._model import Schedule, ScheduleSlot, ScheduleSpec
    from ._plan import Decision

SCHEDULES_MIGRATION = "x0005_schedules.sql"
EVALUATE_BATCH = 100
KEEP_SLOTS = 500
MAX_SCHEDULES = 10_000
SLOT_KEY_PREFIX = "cairnq.schedule:"


def slot_key(name: str, slot_ms: int) -> str:
    """The idempotency key of the task a slot submits."""
    return f"{SLOT_KEY_PREFIX}{name}:{slot_ms}"


def _now() -> Op[int]:
    rows = yield Call("clock_now", {"now_ms": NOW})
    return int(rows[0]["now_ms"])


def schedules_ready() -> Op[bool]:
    """Whether the database has the schedules tables (migration ``x0005_schedules.sql``)."""
    applied = yield from kernel.applied_migrations()
    return SCHEDULES_MIGRATION in applied


def require() -> Op[None]:
    """Nothing when the database has the schedules tables.

    Raises:
        SchemaIncomplete: it lacks them, naming ``x0005_schedules.sql``.
    """
    ready = yield from schedules_ready()
    if not ready:
        raise SchemaIncomplete(
            f"this database lacks cairnq's schedules (migration {SCHEDULES_MIGRATION}); "
            "run `cairnq migrate` to add them",
            missing=(SCHEDULES_MIGRATION,),
        )


def _name(name: Any) -> str:
    return check_text(name, "schedule name") or ""


# --- definitions -----------------------------------------------------------------------


def _import_model_and_planner() -> None:
    """Import the schedule model and planner on the calling thread, before the operation
    runs: on SQLite an operation runs on the writer thread, where a first import would
    hold up every write committed with it."""
    from . import _model, _plan  # noqa: F401


def put(spec: ScheduleSpec, *, source: str, replace: bool) -> Op[tuple[Schedule, bool]]:
    """Store ``spec``; returns the schedule and whether it was created.

    A new schedule's cursor starts at now: slots before it are not caught up.
    An existing one keeps its cursor, history, paused state and last task.

    Raises:
        InvalidArgument: the name is taken and ``replace`` is false.
        SchemaIncomplete: the database lacks the schedules tables.
    """
    from ._model import Schedule

    yield from require()
    now = yield from _now()
    params = spec.params()
    timing = spec.timing
    created = yield Call(
        "schedule_insert",
        {
            **params,
            "paused": spec.paused,
            "source": source,
            "cursor_ms": now,
            "next_ms": timing.next_slot(now),
            "now_ms": now,
        },
    )
    if created:
        return Schedule.from_row(created[0]), True
    if not replace:
        raise InvalidArgument(
            f"a schedule named {spec.name!r} exists; remove it first, or pass replace=True "
            "to replace its definition"
        )
    rows = yield Call("schedule_lock", {"name": spec.name})
    cursor = int(rows[0]["cursor_ms"])
    rows = yield Call(
        "schedule_define",
        {**params, "source": source, "next_ms": timing.next_slot(cursor), "now_ms": now},
    )
    return Schedule.from_row(rows[0]), False


def get(name: str) -> Op[Schedule | None]:
    """One schedule with its last task's status, or ``None``."""
    checked = _name(name)
    _import_model_and_planner()
    return _get(checked)


def _get(name: str) -> Op[Schedule | None]:
    from ._model import Schedule

    yield from require()
    rows = yield Call("schedule_get", {"name": name})
    return Schedule.from_row(rows[0]) if rows else None


def list_all(limit: int = MAX_SCHEDULES) -> Op[list[Schedule]]:
    """Every schedule, by name (at most ``limit``)."""
    checked = check_int(limit, "limit", low=1, high=MAX_SCHEDULES)
    _import_model_and_planner()
    return _list(checked)


def _list(limit: int) -> Op[list[Schedule]]:
    from ._model import Schedule

    yield from require()
    rows = yield Call("schedule_list", {"limit": limit})
    return [Schedule.from_row(r) for r in rows]


def with_last_slots(limit: int = MAX_SCHEDULES) -> Op[list[tuple[Schedule, ScheduleSlot | None]]]:
    """Every schedule, by name, with its latest slot decision (``None`` before its first).

    Both read in one transaction, so each decision belongs to the schedule beside it.
    """
    checked = check_int(limit, "limit", low=1, high=MAX_SCHEDULES)
    _import_model_and_planner()
    return _with_last_slots(checked)


def _with_last_slots(limit: int) -> Op[list[tuple[Schedule, ScheduleSlot | None]]]:
    from ._model import ScheduleSlot

    schedules = yield from _list(limit)
    rows = yield Call("schedule_last_slots", {"limit": MAX_SCHEDULES})
    last = {str(r["schedule"]): ScheduleSlot.from_row(r) for r in rows}
    return [(s, last.get(s.name)) for s in schedules]


def next_slot() -> Op[tuple[str, int] | None]:
    """The earliest next slot among schedules not paused, as ``(name, slot_ms)``.

    ``None`` when there is none, and when the database lacks the schedules
    tables: a view showing it has nothing to show then, not an error.
    """
    ready = yield from schedules_ready()
    if not ready:
        return None
    rows = yield Call("schedule_next", {})
    return (str(rows[0]["name"]), int(rows[0]["next_ms"])) if rows else None


def next_slot_line(found: tuple[str, int] | None, now_ms: int) -> str | None:
    """``next_slot``'s answer as ``cairnq top`` shows it under its header:
    ``next schedule: nightly at 02:00:00 CET (in 3h)``, in the local zone, labelled;
    ``None`` without one."""
    if found is None:
        return None
    name, slot_ms = found
    slot = datetime.fromtimestamp(slot_ms / 1000).astimezone()
    now = datetime.fromtimestamp(now_ms / 1000).astimezone()
    when = slot.strftime("%H:%M:%S %Z" if slot.date() == now.date() else "%Y-%m-%d %H:%M:%S %Z")
    wait = f"in {format_duration(slot_ms - now_ms)}" if slot_ms > now_ms else "due now"
    return f"next schedule: {name} at {when} ({wait})"


def history(name: str, limit: int = 50) -> Op[list[ScheduleSlot]]:
    """A schedule's latest slot decisions, newest first."""
    checked = _name(name)
    count = check_int(limit, "limit", low=1, high=KEEP_SLOTS)
    _import_model_and_planner()
    return _history(checked, count)


def _history(name: str, limit: int) -> Op[list[ScheduleSlot]]:
    from ._model import ScheduleSlot

    yield from require()
    rows = yield Call("schedule_slots", {"name": name, "limit": limit})
    return [ScheduleSlot.from_row(r) for r in rows]


def set_paused(name: str, paused: bool) -> Op[Schedule | None]:
    """Pause or resume; ``None`` when no schedule has the name.

    Resuming records the slots passed while paused as one ``paused`` range and
    moves the cursor to now: a resumed schedule does not catch them up.
    """
    checked = _name(name)
    _import_model_and_planner()
    return _set_paused(checked, bool(paused))


def _set_paused(name: str, paused: bool) -> Op[Schedule | None]:
    from ._model import Schedule
    from ._plan import range_decision

    yield from require()
    rows = yield Call("schedule_lock", {"name": name})
    if not rows:
        return None
    current = Schedule.from_row(rows[0])
    now = yield from _now()
    cursor = current.cursor_ms
    if current.paused and not paused:
        passed = range_decision(current.timing, cursor, now, "paused")
        if passed is not None:
            yield from _record(name, passed, now)
        cursor = max(cursor, now)
    yield Call(
        "schedule_pause",
        {
            "name": name,
            "paused": paused,
            "cursor_ms": cursor,
            "next_ms": current.timing.next_slot(cursor),
            "now_ms": now,
        },
    )
    stored = yield Call("schedule_get", {"name": name})
    return Schedule.from_row(stored[0])


def remove(name: str) -> Op[bool]:
    """Delete a schedule and its slot record; ``False`` when none had the name.

    Tasks its slots submitted stay as they are.
    """
    checked = _name(name)
    return _remove(checked)


def _remove(name: str) -> Op[bool]:
    yield from require()
    rows = yield Call("schedule_delete", {"name": name})
    yield Call("schedule_slots_delete", {"name": name})
    return bool(rows)


# --- evaluation ------------------------------------------------------------------------


@dataclass(frozen=True)
class Evaluated:
    """What one evaluation decided: the tasks submitted, by slot, and the other outcomes."""

    name: str
    enqueued: list[tuple[int, str]]
    skipped: dict[str, int]


def due(limit: int = MAX_SCHEDULES) -> Op[list[str]]:
    """The names of schedules not paused whose next slot is due now."""
    now = yield from _now()
    rows = yield Call("schedule_due", {"now_ms": now, "limit": limit})
    return [str(r["name"]) for r in rows]


def run_due(codec: JsonCodec) -> Procedure[list[Evaluated]]:
    """Evaluate every due schedule, each in a transaction of its own."""
    names = yield Run(due())
    out = []
    for name in names:
        done = yield Run(evaluate(name, codec), write=True)
        if done is not None:
            out.append(done)
    return out


def evaluate(name: str, codec: JsonCodec, *, batch: int = EVALUATE_BATCH) -> Op[Evaluated | None]:
    """Decide ``name``'s due slots and submit their tasks, in one transaction.

    Returns ``None`` when the schedule is gone, paused or not due.
    """
    checked = _name(name)
    _import_model_and_planner()
    return _evaluate(checked, codec, batch)


def _evaluate(name: str, codec: JsonCodec, batch: int) -> Op[Evaluated | None]:
    from ._model import Schedule
    from ._plan import plan

    rows = yield Call("schedule_lock", {"name": name})
    if not rows:
        return None
    schedule = Schedule.from_row(rows[0])
    now = yield from _now()
    if schedule.paused or schedule.next_ms is None or schedule.next_ms > now:
        return None
    previous_live = False
    if schedule.last_task_id is not None and schedule.overlap != "allow":
        status = yield Call("get_status", {"id": schedule.last_task_id})
        previous_live = bool(status) and status[0]["status"] in ("queued", "running")
    decided = plan(
        name=name,
        timing=schedule.timing,
        cursor_ms=schedule.cursor_ms,
        now_ms=now,
        catch_up_ms=schedule.catch_up_ms,
        catch_up_policy=schedule.catch_up_policy,
        overlap=schedule.overlap,
        jitter_ms=schedule.jitter_ms,
        previous_live=previous_live,
        batch=batch,
    )
    enqueued: list[tuple[int, str]] = []
    skipped: dict[str, int] = {}
    last_slot, last_task = schedule.last_slot_ms, schedule.last_task_id
    for decision in decided.decisions:
        recorded = yield from _record(name, decision, now)
        if not recorded:
            continue  # decided already: the cursor and this key keep it decided once
        if decision.outcome != "enqueued":
            skipped[decision.outcome] = skipped.get(decision.outcome, 0) + decision.slots
            continue
        run_at = decision.run_at_ms if decision.run_at_ms is not None else decision.slot_ms
        task = yield from kernel.submit(_slot_task(codec, schedule, decision.slot_ms, run_at - now))
        yield Call(
            "schedule_slot_task",
            {"schedule": name, "slot_ms": decision.slot_ms, "task_id": task.id},
        )
        enqueued.append((decision.slot_ms, task.id))
        last_slot, last_task = decision.slot_ms, task.id
    cursor = max(schedule.cursor_ms, decided.cursor_ms)
    yield Call(
        "schedule_advance",
        {
            "name": name,
            "cursor_ms": cursor,
            "next_ms": schedule.timing.next_slot(cursor),
            "last_slot_ms": last_slot,
            "last_task_id": last_task,
            "now_ms": now,
        },
    )
    yield Call("schedule_slots_trim", {"name": name, "keep": KEEP_SLOTS})
    return Evaluated(name, enqueued, skipped)


def _slot_task(
    codec: JsonCodec, schedule: Schedule, slot_ms: int, offset_ms: int
) -> kernel.NewTask:
    """The task of a slot, due ``offset_ms`` from now: before now for a slot caught up late.

    A caught-up task is due at its slot (plus jitter), not at the moment of the
    catch-up, so tasks claimed by due time run oldest slot first.
    """
    metadata = schedule.metadata
    if isinstance(metadata, dict):
        metadata = {**metadata, "cairnq.schedule": {"name": schedule.name, "slot_ms": slot_ms}}
    # A payload the schedule stores encoded (codec=) is copied as it is: whoever
    # evaluates the slot needs no key, and the handler's worker decodes it once.
    sealed = is_sealed(schedule.payload)
    task = kernel.new_task(
        codec,
        schedule.task,
        None if sealed else schedule.payload,
        key=slot_key(schedule.name, slot_ms),
        queue=schedule.queue,
        max_attempts=schedule.max_attempts,
        priority=schedule.priority,
        metadata=metadata,
    )
    if sealed:
        text = DEFAULT_CODEC.encode(schedule.payload, what="payload")
        task = dataclasses.replace(task, payload=text, payload_value=schedule.payload)
    return dataclasses.replace(task, delay_ms=min(offset_ms, MAX_DELAY_MS))


def _record(name: str, decision: Decision, now: int) -> Op[bool]:
    """Record a slot's decision under its primary key; ``False``: it was decided already."""
    rows = yield Call(
        "schedule_slot_insert",
        {
            "schedule": name,
            "slot_ms": decision.slot_ms,
            "through_ms": decision.through_ms,
            "slots": decision.slots,
            "outcome": decision.outcome,
            "now_ms": now,
        },
    )
    return bool(rows)
