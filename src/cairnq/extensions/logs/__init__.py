"""Attempt logs: what a handler logs (``ctx.log``, and opt-in the standard ``logging``
records it emits: ``capture_logging``) kept with its attempt in ``cairnq_task_logs``
(``x0023_logs.sql``), capped per attempt, written by the attempt's settlement, read by
``cq.attempts.logs``, ``cairnq get`` and the dashboard's task page, and gone with the
task (a delete trigger).

The buffer, the hook and the reads are ``_ops``; the context's ``log`` is
``_context_async``; ``capture_logging`` is ``_capture``. ``cairnq.history`` re-exports
the public names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from .._base import Extension, Hooks, Option, TaskRows, WorkerView
from ._capture import capture_logging
from ._ops import DEFAULT_MAX_BYTES, AttemptLog, LogLine, check_max_bytes, in_use, record

__all__ = ["AttemptLog", "AttemptLogs", "LogLine", "capture_logging"]


class AttemptLogs(Extension):
    """Keeps what each attempt's handler logged, written by the attempt's settlement
    (one statement for every attempt a settlement ended that logged; none otherwise).

    Args:
        log_max_bytes: How many bytes of lines one attempt keeps (64 KiB by default,
            256 bytes to 16 MiB); a handler's own with ``@worker.task(log_max_bytes=...)``.

    Example::

        worker = Worker(cq, extensions=[AttemptLogs(log_max_bytes=16_384)])
    """

    name = "logs"
    migrations = ("x0023_logs.sql",)
    tables: ClassVar[Mapping[str, TaskRows]] = {"cairnq_task_logs": "trigger"}
    words = ("task_logs", "attempt_logs", "logs_record", "logs_list")
    cli = "cairnq.extensions.logs._surfaces.cli"
    pages = "cairnq.extensions.logs._surfaces.pages"
    options: ClassVar[Mapping[str, Option]] = {
        "log_max_bytes": Option(DEFAULT_MAX_BYTES, check_max_bytes)
    }
    task_options: ClassVar[Mapping[str, Option]] = {
        "log_max_bytes": Option(None, lambda v: None if v is None else check_max_bytes(v))
    }

    def __init__(self, *, log_max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        super().__init__(log_max_bytes=log_max_bytes)

    def hooks(self, worker: WorkerView) -> Hooks:
        return Hooks(attempt_end=record, in_use=in_use)
