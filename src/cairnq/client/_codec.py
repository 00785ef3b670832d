"""Tasks read back through the client's payload codec (``codec=``, ``docs/encryption.md``)."""

from __future__ import annotations

import dataclasses
from typing import TypeVar

from .._json import JsonCodec
from .._sealing import is_sealed
from ..models import Task

T = TypeVar("T")


def opened_tasks(codec: JsonCodec, found: T) -> T:
    """``found`` (an operation's answer) with the payload and result of each ``Task`` in
    it (a task, or a list of tasks) decoded by ``codec``; any other answer as it is.

    Raises:
        DecryptionError: a value the codec cannot decode (a key its ring lacks).
    """
    if isinstance(found, Task):
        return _opened_task(codec, found)  # type: ignore[return-value]
    if isinstance(found, list) and found and isinstance(found[0], Task):
        return [_opened_task(codec, task) for task in found]  # type: ignore[return-value]
    return found


def _opened_task(codec: JsonCodec, task: Task) -> Task:
    if not (is_sealed(task.payload) or is_sealed(task.result)):
        return task
    return dataclasses.replace(
        task,
        payload=codec.opened(task.payload, what="payload", task_id=task.id),
        result=codec.opened(task.result, what="result", task_id=task.id),
    )
