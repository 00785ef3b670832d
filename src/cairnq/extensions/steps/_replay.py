"""Replay: a failed or canceled task queued again from one of its recorded durable steps
(``cq.retry(task_id, from_step="charge")``).

In one transaction: the task's recorded steps from that step's position on are
forgotten (``steps_forget_from``), the steps before it and the handler version the
steps were recorded by are kept, and the task is queued again by the kernel's
``retry``. The next attempt replays the kept steps and runs the rest, the named step
first, on the code the worker has now: a ``ctx.patched`` at or past the step answers
again (``True``, the new branch, as for a task that never got there), and a handler of
another declared version still fails with ``StepsChanged``.

A succeeded task is never queued again: the replay is refused (submit a new task).
"""

from __future__ import annotations

from typing import Any

from ... import kernel
from ..._checks import check_text
from ...errors import InvalidArgument
from ...models import Task
from ...protocol.steps import Call, Op
from ._ops import check_step_name, is_mark, recorded_steps

REPLAYABLE = ("failed", "canceled")
"""The statuses a task is replayed from."""


def check_from_step(value: Any) -> str:
    """The ``from_step`` of a retry: a step name (text, no NUL, not ``cairnq:...``).

    Raises:
        InvalidArgument: not text, empty, or a name cairnq keeps for its own rows.
    """
    if not isinstance(value, str):
        raise InvalidArgument(
            f"from_step must be the name of a recorded step (text), like from_step='charge'; "
            f"got {value!r}"
        )
    return check_step_name(value)


def replay(task_id: Any, from_step: Any, reset_attempt: bool = False) -> Op[Task]:
    """Queue a failed or canceled task again from its recorded step ``from_step``;
    validated eagerly.

    Returns:
        The task, queued.

    Raises:
        InvalidArgument: a bad task id or step name; no such task; a task that is not
            failed or canceled (a succeeded one is never queued again); or a task that
            recorded no step of that name. Nothing is changed.
        SchemaIncomplete: the database lacks the steps table (``cairnq migrate``).
    """
    checked = check_text(task_id, "task id") or ""
    return _replay(checked, check_from_step(from_step), bool(reset_attempt))


def _replay(task_id: str, name: str, reset_attempt: bool) -> Op[Task]:
    task = yield from kernel.get(task_id)
    if task is None:
        raise InvalidArgument(f"no task {task_id} to replay")
    if task.status not in REPLAYABLE:
        if task.status == "succeeded":
            raise InvalidArgument(
                f"task {task_id} succeeded; a succeeded task is never queued again, so it "
                f"is not replayed from step {name!r}: submit a new task instead"
            )
        raise InvalidArgument(
            f"task {task_id} is {task.status}; only a failed or canceled task is replayed "
            f"from a step"
        )
    rows = yield from recorded_steps(task_id)
    steps = {str(r["name"]): int(r["seq"]) for r in rows if not is_mark(str(r["name"]))}
    seq = steps.get(name)
    if seq is None:
        recorded = ", ".join(repr(n) for n, _ in sorted(steps.items(), key=lambda i: i[1]))
        raise InvalidArgument(
            f"task {task_id} recorded no step {name!r}, so it is not replayed from it; "
            f"its recorded steps: {recorded or 'none'}"
        )
    yield Call("steps_forget_from", {"id": task_id, "seq": seq})
    queued = yield from kernel.retry(task_id, reset_attempt)
    if queued is None:  # the status changed under us (PostgreSQL): nothing is kept
        raise InvalidArgument(f"task {task_id} is no longer failed or canceled; not replayed")
    return queued
