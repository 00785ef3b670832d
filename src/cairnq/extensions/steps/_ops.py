"""Operations on durable steps (extension table ``cairnq_task_steps``, ``x0009_steps.sql``).

Like the kernel's, each function validates eagerly and returns a statement-yielding
generator.

A step's result is written fenced on the attempt's lease, exactly as every
owned write: a stale attempt (its lease lost, the task perhaps running
elsewhere) writes nothing and gets ``LostLease``. The steps a task recorded are
read back by its next attempt, which returns them instead of running the steps
again.

``x0009_steps.sql`` creates the attempt history's table too (``cairnq_task_attempts``):
the history needs this migration, and reads its readiness here (``steps_ready``,
``require``).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from ... import kernel
from ..._checks import check_text
from ..._json import JsonCodec
from ...errors import InvalidArgument, SchemaIncomplete
from ...kernel import owned, owned_row
from ...models import Lease
from ...protocol.steps import Call, Op, Row

STEPS_MIGRATION = "x0009_steps.sql"

MARK = "cairnq:"
"""The prefix of the rows cairnq records beside a task's steps (no step is named so)."""
VERSION_MARK = MARK + "version"
"""The row that holds the handler version the task's steps were recorded by."""
PATCH_MARK = MARK + "patch:"
"""The prefix of the row ``ctx.patched(name)`` records when it takes the new branch."""


@dataclass(frozen=True)
class StepRecord:
    """One recorded step of a task.

    Attributes:
        task_id: The task.
        name: The step's name, unique within the task.
        seq: Its position in the run that recorded it (1 for the first step).
        result: The step's result, decoded from JSON.
        attempt: The attempt that recorded it.
        recorded_at_ms: When it was recorded (epoch ms).
    """

    task_id: str
    name: str
    seq: int
    result: Any
    attempt: int
    recorded_at_ms: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "name": self.name,
            "seq": self.seq,
            "result": self.result,
            "attempt": self.attempt,
            "recorded_at_ms": self.recorded_at_ms,
        }


# --- readiness ---------------------------------------------------------------------------


def steps_ready() -> Op[bool]:
    """Whether the database has the steps and attempts tables (``x0009_steps.sql``)."""
    applied = yield from kernel.applied_migrations()
    return STEPS_MIGRATION in applied


def require() -> Op[None]:
    """Nothing, on a database with ``x0009_steps.sql``.

    Raises:
        SchemaIncomplete: the database lacks it.
    """
    ready = yield from steps_ready()
    if not ready:
        raise SchemaIncomplete(
            f"this database lacks cairnq's durable steps and attempt history (migration "
            f"{STEPS_MIGRATION}); run `cairnq migrate` to add it",
            missing=(STEPS_MIGRATION,),
        )


# --- steps -------------------------------------------------------------------------------


def check_step_name(name: Any) -> str:
    """A step name: text like a task name (non-empty, no NUL, at most 1000 bytes), not
    starting with ``cairnq:`` (the prefix of the rows cairnq records beside the steps)."""
    checked = check_text(name, "step name") or ""
    if checked.startswith(MARK):
        raise InvalidArgument(
            f"step name {checked!r} starts with {MARK!r}, which cairnq keeps for its own records"
        )
    return checked


def check_version(value: Any) -> str | None:
    """A handler's version (``@worker.task(version=...)``): ``None``, text (no NUL, at
    most 200 characters) or a whole number, which is kept as its text.

    Raises:
        InvalidArgument: another type, empty text, or too long.
    """
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value or "\x00" in value or len(value) > 200:
        raise InvalidArgument(
            f"version must be None, a whole number or text of 1 to 200 characters without "
            f"NUL, like version=2 or version='2026-12'; got {value!r}"
        )
    return value


def is_mark(name: str) -> bool:
    """Whether a recorded row is one of cairnq's own beside the steps."""
    return name.startswith(MARK)


def recorded_steps(task_id: str) -> Op[list[Row]]:
    """The raw rows of a task's recorded steps, in ``seq`` order (for the worker).

    Raises:
        SchemaIncomplete: the database lacks ``x0009_steps.sql``.
    """
    yield from require()
    rows = yield Call("steps_list", {"id": task_id})
    return list(rows)


def step_rows(task_id: str) -> Op[list[Row]]:
    """The raw rows of a task's recorded steps, read without the readiness check (for a
    reader that made it already); cairnq's own rows beside them are left out."""
    rows = yield Call("steps_list", {"id": task_id})
    return [r for r in rows if not is_mark(str(r["name"]))]


def record_step(lease: Lease, worker_id: str, name: str, seq: int, result: str) -> Op[Row]:
    """Record a step's encoded result, fenced on the attempt's lease.

    Raises:
        LostLease: the attempt is no longer owned (a stale attempt); nothing is written.
    """
    rows = yield Call(
        "steps_record",
        owned(lease, worker_id) | {"name": name, "seq": seq, "result": result},
    )
    return owned_row(lease, rows)


def record_first(
    lease: Lease, worker_id: str, version: str, name: str, seq: int, result: str
) -> Op[Row]:
    """``record_step`` of the first row a task records, with the handler version its steps
    are recorded by, in one transaction.

    Raises:
        LostLease: the attempt is no longer owned; nothing is written.
    """
    yield from record_step(lease, worker_id, VERSION_MARK, 0, json.dumps(version))
    return (yield from record_step(lease, worker_id, name, seq, result))


def steps(task_id: Any) -> Op[list[StepRecord]]:
    """A task's recorded steps, ``seq`` order; validated eagerly.

    Raises:
        InvalidArgument: a bad task id.
        SchemaIncomplete: the database lacks ``x0009_steps.sql``.
    """
    return _steps(check_text(task_id, "task id") or "")


def _steps(task_id: str) -> Op[list[StepRecord]]:
    rows = yield from recorded_steps(task_id)
    return [step_of(task_id, r) for r in rows if not is_mark(str(r["name"]))]


def step_of(task_id: str, row: Row) -> StepRecord:
    """A ``StepRecord`` from a ``steps_list`` row."""
    return StepRecord(
        task_id,
        str(row["name"]),
        int(row["seq"]),
        JsonCodec.decode(row["result"], what="step result", task_id=task_id),
        int(row["attempt"]),
        int(row["recorded_at_ms"]),
    )


def opened(codec: JsonCodec, records: list[StepRecord], *, shown: bool = False) -> list[StepRecord]:
    """``records`` with their results decoded by ``codec`` (``codec=``); ``shown``: for
    people, a result it cannot decode reads ``"<encrypted, ...>"`` instead of raising."""
    read = codec.shown if shown else codec.opened
    return [
        dataclasses.replace(r, result=read(r.result, what="step result", task_id=r.task_id))
        for r in records
    ]


def steps_if_ready(task_id: Any) -> Op[list[StepRecord] | None]:
    """A task's recorded steps, or ``None`` without ``x0009_steps.sql`` (for displays)."""
    return _steps_if_ready(check_text(task_id, "task id") or "")


def _steps_if_ready(task_id: str) -> Op[list[StepRecord] | None]:
    ready = yield from steps_ready()
    if not ready:
        return None
    rows = yield from step_rows(task_id)
    return [step_of(task_id, r) for r in rows]
