"""Tasks read back through the client's payload codec (``codec=``, ``docs/encryption.md``)."""

from __future__ import annotations

from typing import TypeVar

from .._json import JsonCodec
from ..models import Task

T = TypeVar("T")


def opened_tasks(codec: JsonCodec, found: T) -> T:
    """``found`` (an operation's answer) with the payload and result of each ``Task`` in
    it (a task, or a list of tasks) decoded by ``codec``; any other answer as it is.

    Raises:
        DecryptionError: a value the codec cannot decode (a key its ring lacks).
    """
    if isinstance(found, Task):
        opened: T = codec.opened_task(found)
        return opened
    if isinstance(found, list) and found and isinstance(found[0], Task):
        return [codec.opened_task(task) for task in found]  # type: ignore[return-value]
    return found
