"""The standard ``logging`` records a handler emits, kept in its attempt's log:
``capture_logging(worker, ...)``, opt-in.

A ``logging.Handler`` on the chosen logger keeps each record emitted while a handler of
the worker runs, in the log of the attempt (or each attempt of a batch call) running
there. What runs where is a context variable a call scope of the worker sets
(``worker.add_call_scope``): it follows the handler's coroutine and, for a plain ``def``
handler, its thread. Records of cairnq's own loggers (``cairnq.*``) are left out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ...errors import InvalidArgument
from .._context import ContextHost
from ._context_async import log_line


class AttemptLogHandler(logging.Handler):
    """Keeps each record emitted inside a handler's run of its own worker in that
    attempt's log.

    Each handler has its own context variable, set by its own worker's call scope: two
    workers of one process capturing the same logger each keep only their own runs'
    records, at their own level."""

    def __init__(self, level: int) -> None:
        super().__init__(level)
        self.running: ContextVar[Sequence[ContextHost] | None] = ContextVar(
            f"cairnq_logs_running_{id(self):x}", default=None
        )

    def emit(self, record: logging.LogRecord) -> None:
        contexts = self.running.get()
        if not contexts or record.name == "cairnq" or record.name.startswith("cairnq."):
            return
        try:
            message = record.getMessage()
            if record.exc_info:
                message += "\n" + logging.Formatter().formatException(record.exc_info)
            level = record.levelname.lower()
            level = level if level in ("debug", "info", "warning", "error", "critical") else "info"
            for ctx in contexts:
                if not (ctx.settled or ctx.lost_lease):
                    log_line(ctx, level, message, record.name)
        except Exception:
            self.handleError(record)


def _level(value: Any) -> int:
    if isinstance(value, bool):
        pass
    elif isinstance(value, int) and value >= 0:
        return value
    elif isinstance(value, str) and isinstance(logging.getLevelName(value.upper()), int):
        return int(logging.getLevelName(value.upper()))
    raise InvalidArgument(
        f"level must be a logging level (a number from 0, or a name like 'INFO'); got {value!r}"
    )


def _logger(value: Any) -> logging.Logger:
    if isinstance(value, logging.Logger):
        return value
    if isinstance(value, str):
        return logging.getLogger(value or None)
    raise InvalidArgument(
        f"logger must be a logger's name ('' for the root logger) or a logging.Logger; "
        f"got {value!r}"
    )


def capture_logging(
    worker: Any, logger: Any = "", *, level: Any = logging.INFO
) -> Callable[[], None]:
    """Keep the standard ``logging`` records ``worker``'s handlers emit in their attempt's
    log (beside ``ctx.log``'s lines, under the same cap), opt-in.

    Args:
        worker: A ``Worker``.
        logger: The logger (or its name; ``""``, the default, is the root logger) whose
            records, and its children's, are kept. The logger's own level still applies.
        level: The least level kept (``logging.INFO`` by default; a number or a name).

    Returns:
        A function that stops capturing (removes the handler and the call scope).

    Raises:
        InvalidArgument: ``worker`` is not a worker, or a bad ``logger`` or ``level``.

    Example::

        from cairnq.history import capture_logging

        capture_logging(worker, "myapp")     # myapp.* records go with each attempt
    """
    add_scope = getattr(worker, "add_call_scope", None)
    if not callable(add_scope):
        raise InvalidArgument(f"capture_logging needs a cairnq Worker, got {worker!r}")
    target = _logger(logger)
    handler = AttemptLogHandler(_level(level))

    @contextmanager
    def running(contexts: Sequence[ContextHost]) -> Iterator[None]:
        token = handler.running.set(tuple(contexts))
        try:
            yield
        finally:
            handler.running.reset(token)

    remove_scope = add_scope(running)
    target.addHandler(handler)

    def stop() -> None:
        remove_scope()
        target.removeHandler(handler)

    return stop
