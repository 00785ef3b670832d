"""How a worker says what went wrong: its default error hook, a hook made safe to
call from its loops, and the task listings of its shutdown lines."""

from __future__ import annotations

import logging
from typing import Any

from ..kernel.periodic import ErrorHook
from ._context import TaskContext

log = logging.getLogger("cairnq.worker")


def default_on_error(exc: BaseException, context: dict[str, Any]) -> None:
    log.error("worker error during %s", context.get("phase", "?"), exc_info=exc, extra=context)


def listing(contexts: list[TaskContext]) -> str:
    """``ID (NAME), ...`` for a log line about several tasks."""
    return ", ".join(f"{ctx.task_id} ({ctx.name})" for ctx in contexts)


def listing_extra(worker_id: str, contexts: list[TaskContext]) -> dict[str, Any]:
    return {
        "worker_id": worker_id,
        "task_ids": [ctx.task_id for ctx in contexts],
        "task_names": [ctx.name for ctx in contexts],
    }


def safe(on_error: ErrorHook) -> ErrorHook:
    """``on_error``, made unable to take a worker loop down with it."""

    def report(exc: BaseException, context: dict[str, Any]) -> None:
        try:
            on_error(exc, context)
        except Exception:
            log.exception("on_error hook raised; the worker carries on", extra=context)

    return report
