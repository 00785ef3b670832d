"""What ``submit(warn_unserved=True)`` says when no live worker serves a task it stored."""

from __future__ import annotations

import difflib
import logging
import warnings

from ...errors import CairnQError, UnservedTaskWarning
from ...models import Task
from ._ops import WORKERS_MIGRATION

# The client's logger: the lines are about what the application submitted.
log = logging.getLogger("cairnq.client")


def unserved_message(
    task: Task, where: str, served: dict[str, frozenset[str] | None] | None = None
) -> str:
    """One line: ``task`` stays queued because no live worker serves it on ``where``;
    with ``served`` (queue -> names served there), the closest name or queue served."""
    hint = ""
    if served:
        names = served.get(task.queue)
        if names:
            close = difflib.get_close_matches(task.name, sorted(names), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
        elif task.queue not in served:
            close = difflib.get_close_matches(task.queue, sorted(served), n=1)
            hint = f" (did you mean queue {close[0]!r}?)" if close else ""
    return (
        f"no live cairnq worker on {where} serves task {task.name!r} on queue "
        f"{task.queue!r}{hint}; {task.id} stays queued until one does. Workers of other "
        "SDKs publish no presence: if one serves it, warn_unserved=False "
        "(cairnq submit --no-warn-unserved) silences this"
    )


def warn_unserved(task: Task, where: str, served: dict[str, frozenset[str] | None] | None) -> None:
    """Log and warn (``UnservedTaskWarning``) that no live worker serves ``task``.

    The warning points at the application's call: this frame, the client's
    check, ``submit``, the caller.
    """
    message = unserved_message(task, where, served)
    log.warning(message, extra={"task_id": task.id, "queue": task.queue})
    warnings.warn(
        UnservedTaskWarning(message, task_id=task.id, name=task.name, queue=task.queue),
        stacklevel=4,
    )


def cannot_tell(where: str) -> None:
    """Say (once per client, which the caller sees to) that the database has no presence table."""
    log.warning(
        "cannot tell whether a worker serves the tasks submitted to %s: it has no "
        "cairnq presence table (%s; run `cairnq migrate`), so warn_unserved "
        "checks nothing",
        where,
        WORKERS_MIGRATION,
    )


def check_failed(task: Task, exc: CairnQError) -> None:
    """Say that the check failed; the task is stored, so the submit does not fail."""
    log.warning(
        "task %s is submitted, but checking whether a worker serves %r on queue %r failed: %s",
        task.id,
        task.name,
        task.queue,
        exc,
    )
