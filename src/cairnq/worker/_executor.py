"""Runs one handler call and turns its outcome into settlements."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import inspect
import logging
import os
import time
import traceback
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any

from .._crashpoints import crashpoint
from ..durations import format_duration
from ..errors import (
    DatabaseError,
    LostLease,
    SchemaIncomplete,
    SerializationError,
    TaskError,
    error_envelope,
    is_permanent,
    safe_str,
)
from ..extensions._context import Signal
from ..kernel.periodic import ErrorHook
from ._context import CallScope, SyncTaskContext, TaskContext, envelope_for
from ._isolating import Processes
from ._registry import Registration
from ._stopping import HandlerStopped, Stop

log = logging.getLogger("cairnq.worker")

SETTLE_ATTEMPTS = 4

# The frames that call a handler (this package's, and asyncio's or a thread pool's
# between them and a sync handler): left out of the tracebacks a worker logs and stores.
_CALLER_DIRS = tuple(
    os.path.dirname(os.path.abspath(path)) + os.sep
    for path in (__file__, asyncio.__file__, concurrent.futures.__file__)
)


class HandlerTimeout(Exception):
    """The attempt ran past ``max_run_ms``."""


def _log_extra(ctx: TaskContext) -> dict[str, Any]:
    return {
        "task_id": ctx.task_id,
        "task_name": ctx.name,
        "queue": ctx.queue,
        "attempt": ctx.attempt,
        "max_attempts": ctx.max_attempts,
        "worker_id": ctx.worker_id,
    }


def _describe(ctx: TaskContext) -> str:
    """``task NAME ID attempt N/MAX on queue Q``: the words every line about a task starts with."""
    return (
        f"task {ctx.name} {ctx.task_id} attempt {ctx.attempt}/{ctx.max_attempts} "
        f"on queue {ctx.queue}"
    )


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.3g}s" if ms >= 1000 else f"{ms:.0f}ms"


def _log_end(ctx: TaskContext, raised: Exception | None, *, traceback: bool = True) -> None:
    """One line for how the attempt ended, at INFO; a handler's exception raises it to
    WARNING (a retry follows) or ERROR (final). A retry's line carries no traceback
    unless the logger is enabled for DEBUG (the stored envelope keeps it); a final
    failure's carries the traceback from the handler's own frames on (``handler_frames``),
    unless ``traceback`` is False. A final failure is an ERROR whether or not the
    handler raised. A permanent error that failed the task (``is_permanent``) is one
    line naming it, without a traceback: the stored envelope keeps the traceback. So
    is a ``SchemaIncomplete`` (a cairnq feature the database lacks): its message names
    the migration, and the traceback would only show cairnq's own frames.
    """
    if isinstance(raised, SchemaIncomplete):
        traceback = False
    duration_ms = (time.monotonic() - ctx.started) * 1000
    level = logging.INFO
    retry_in_ms = None
    suffix = ""
    status = ctx.settled_status
    if status == "queued" and ctx.ending is not None:
        # Queued again by an extension, no attempt spent: it says how.
        outcome, words = ctx.ending
    elif status == "queued":
        outcome = "retrying"
        retry_in_ms = ctx.retry_delay_ms or 0
        words = f"retrying in {_seconds(retry_in_ms)}"
        level = logging.INFO if raised is None else logging.WARNING
        traceback = traceback and log.isEnabledFor(logging.DEBUG)
    elif status == "failed":
        outcome, words, level = "failed", "failed", logging.ERROR
        if raised is not None and is_permanent(raised):
            traceback = False
            suffix = "; not retried: the same call fails the same way on every attempt"
    elif status in ("succeeded", "canceled"):
        outcome = words = status
    elif ctx.lost_lease:
        outcome, words = "lost", "lease lost"
    else:
        outcome, words, level = "unsettled", "not settled (its lease will expire)", logging.WARNING
    if not log.isEnabledFor(level):
        return
    cause = "" if raised is None else f": {type(raised).__name__}: {safe_str(raised)}{suffix}"
    log.log(
        level,
        "%s: %s after %s%s",
        _describe(ctx),
        words,
        _seconds(duration_ms),
        cause,
        exc_info=handler_frames(raised)
        if raised and traceback and level >= logging.WARNING
        else None,
        extra={
            **_log_extra(ctx),
            "duration_ms": round(duration_ms, 3),
            "outcome": outcome,
            "retry_in_ms": retry_in_ms,
        },
    )


def handler_frames(
    exc: BaseException,
) -> tuple[type[BaseException], BaseException, TracebackType | None]:
    """``exc`` as ``exc_info`` whose traceback starts at the handler's own frame.

    The frames that called the handler (the worker's, asyncio's, the thread
    pool's) are left out; the frames below the handler are all kept, cairnq's
    included (a ``ctx`` call that raised). Chained exceptions keep theirs.
    Nothing is changed on ``exc`` itself.
    """
    tb = exc.__traceback__
    while (
        tb is not None
        and tb.tb_next is not None
        and tb.tb_frame.f_code.co_filename.startswith(_CALLER_DIRS)
    ):
        tb = tb.tb_next
    return type(exc), exc, tb


def handler_failure(exc: Exception) -> tuple[dict[str, Any], bool]:
    """The envelope recorded for an exception escaping a handler, and whether to retry.

    A permanent error (``is_permanent``: a misuse of cairnq's API, a value no store
    can hold) is a ``misuse`` of its class name, never retried: the same call
    would fail the same way on every attempt. A ``TaskError`` carries its own
    envelope; anything else is a retryable ``handler_error``.
    """
    if is_permanent(exc):
        name = type(exc).__name__
        envelope = error_envelope(name, "misuse", safe_str(exc) or name, retryable=False)
        retryable = False
    else:
        envelope, retryable = envelope_for(exc, retryable=True)
    if not isinstance(exc, TaskError):
        envelope["details"] = {"traceback": _short_traceback(exc)}
    return envelope, retryable


class Executor:
    """Calls handlers (async on the loop, sync in a thread pool) and settles their tasks."""

    def __init__(
        self,
        *,
        max_run_ms: int | None,
        threads: concurrent.futures.ThreadPoolExecutor,
        on_error: ErrorHook,
        scopes: list[CallScope] | None = None,
        signals: Mapping[type[BaseException], Signal] | None = None,
    ) -> None:
        self._max_run_ms = max_run_ms
        # The handler signals the worker's extensions settle, by exception class.
        self._signals: Mapping[type[BaseException], Signal] = signals or {}
        self._threads = threads
        self._on_error = on_error
        # Shared with the worker, so scopes added while it runs apply to later calls.
        self._scopes: list[CallScope] = [] if scopes is None else scopes
        # Threads still running a sync handler whose call was cancelled (shutdown).
        # They hold a pool thread, so the worker counts them against its concurrency.
        self.stuck_threads = 0
        # Contexts whose handler runs in a thread right now: a thread cannot be stopped,
        # so a worker stopping never hands these tasks back while the thread may still run.
        self.in_threads: set[TaskContext] = set()
        self.on_thread_freed: Callable[[], None] | None = None
        # Called when a handler has returned and only its settlement is left to write.
        self.on_handler_done: Callable[[], None] | None = None
        # The child processes of isolated handlers (``isolate=True``), started on first use.
        self.processes = Processes(threads._max_workers)

    async def run(
        self, registration: Registration, contexts: Sequence[TaskContext], *, scoped: bool = False
    ) -> None:
        """Run one call to completion: handler, then settle whatever it left unsettled.

        With call scopes, the call runs again inside them (``scoped``); without,
        it costs nothing more than the check.
        """
        if self._scopes and not scoped:
            with contextlib.ExitStack() as stack:
                for scope in list(self._scopes):
                    try:
                        stack.enter_context(scope(contexts))
                    except Exception as exc:
                        self._on_error(exc, {"phase": "scope", "task_id": contexts[0].task_id})
                await self.run(registration, contexts, scoped=True)
            return
        debug = log.isEnabledFor(logging.DEBUG)
        for ctx in contexts:
            if debug:
                log.debug("%s: started", _describe(ctx), extra=_log_extra(ctx))
            ctx._emit("started")
        raised = await self._call(registration, contexts)
        for index, ctx in enumerate(contexts):
            # A batch handler raised once: its traceback goes with the first task's line.
            _log_end(ctx, raised, traceback=index == 0)

    async def _call(
        self, registration: Registration, contexts: Sequence[TaskContext]
    ) -> Exception | None:
        """Call the handler and settle its tasks; returns the exception the handler raised."""
        try:
            outcome = await self._invoke_stoppable(registration, contexts)
        except HandlerStopped as stopped:
            # A fail with the cancel pending ends the attempt canceled (cancel wins).
            await self._fail_all(contexts, stopped.envelope(), retryable=False)
            return None
        except asyncio.CancelledError:
            raise
        except LostLease as lost:
            # Only the context the error names lost its lease; in a batch, the others
            # are still held and fail like any other handler error.
            for ctx in contexts:
                if ctx.task_id == lost.task_id:
                    ctx.mark_lost()
            others = [c for c in contexts if c.task_id != lost.task_id]
            if others:
                envelope, _ = envelope_for(lost, retryable=True)
                await self._fail_all(others, envelope, retryable=True)
            return None
        except HandlerTimeout as timeout:
            for ctx in contexts:
                ctx.mark_lost(announce=False)
            bound = _run_bound_words(registration, contexts, self._max_run_ms)
            log.warning(
                "%s: handler ran past %s; failing the attempt for retry",
                _describe(contexts[0]),
                bound,
                extra=_log_extra(contexts[0]),
            )
            message = f"handler ran longer than {bound}"
            envelope = error_envelope("HandlerTimeout", "handler_timeout", message, retryable=True)
            await self._fail_all(contexts, envelope, retryable=True, fenced=False, error=timeout)
            return None
        except BaseException as exc:
            if not isinstance(exc, Exception):
                raise
            signal = self._signal(exc)
            if signal is not None:
                # The error that failed the attempts instead, if any, for their lines.
                return await signal(exc, contexts, self._settle)
            envelope, retryable = handler_failure(exc)
            await self._fail_all(contexts, envelope, retryable=retryable, error=exc)
            return exc
        if self.on_handler_done is not None:
            self.on_handler_done()
        crashpoint("before_settle")
        results = outcome if registration.listed else {contexts[0].task_id: outcome}
        if registration.listed and results is not None and not isinstance(results, dict):
            envelope = error_envelope(
                "TypeError",
                "handler_error",
                f"batch handler returned {type(results).__name__}; expected a dict or None",
                retryable=False,
            )
            await self._fail_all(contexts, envelope, retryable=False)
            return None
        if len(contexts) == 1:
            await self._succeed(contexts[0], (results or {}).get(contexts[0].task_id))
            return None
        await asyncio.gather(
            *(self._succeed(ctx, (results or {}).get(ctx.task_id)) for ctx in contexts)
        )
        return None

    async def _invoke_stoppable(
        self, registration: Registration, contexts: Sequence[TaskContext]
    ) -> Any:
        """``_invoke``, stopped ``cancel_grace`` after the cancel of its tasks was seen
        (``_stopping``), for a handler a cancel stops.

        Raises:
            HandlerStopped: the handler was stopped (and has ended).
        """
        grace_ms = registration.cancel_grace_ms
        if grace_ms is None or not registration.stoppable:
            return await self._invoke(registration, contexts)
        stop = Stop(contexts, grace_ms)
        try:
            return await self._invoke(registration, contexts)
        except asyncio.CancelledError:
            if stop.ours():
                raise HandlerStopped(grace_ms) from None
            raise
        finally:
            stop.disarm()

    async def _invoke(self, registration: Registration, contexts: Sequence[TaskContext]) -> Any:
        bound_ms = _run_bound_ms(registration, contexts, self._max_run_ms)
        if bound_ms is None:
            if registration.is_async or registration.isolated:
                return await self._call_async(registration, contexts)
            return await self._call_sync(registration, contexts)
        bound = bound_ms / 1000
        if registration.is_async or registration.isolated:
            # wait_for returns only once the cancelled handler has finished.
            try:
                return await asyncio.wait_for(self._call_async(registration, contexts), bound)
            except asyncio.TimeoutError:
                raise HandlerTimeout from None
        # A thread cannot be stopped. Past max_run_ms its writes are refused and it is
        # told to stop, but the attempt keeps its lease (renewed) and its slot until the
        # thread returns: no other run of the task starts while this one still runs.
        call = asyncio.ensure_future(self._call_sync(registration, contexts))
        try:
            done, _ = await asyncio.wait({call}, timeout=bound)
            if call in done:
                return call.result()
            for ctx in contexts:
                ctx.abandon()
            log.warning(
                "%s: handler thread ran past %s; its writes are refused, and the "
                "attempt keeps its lease until the thread returns",
                _describe(contexts[0]),
                _run_bound_words(registration, contexts, self._max_run_ms),
                extra=_log_extra(contexts[0]),
            )
            with contextlib.suppress(Exception):
                await call
        except asyncio.CancelledError:
            call.cancel()
            raise
        raise HandlerTimeout

    @staticmethod
    def _arguments(registration: Registration, contexts: Sequence[Any]) -> tuple[Any, ...]:
        if registration.listed:
            return (list(contexts),)
        ctx = contexts[0]
        return (ctx, ctx.payload) if registration.takes_payload else (ctx,)

    async def _call_async(self, registration: Registration, contexts: Sequence[TaskContext]) -> Any:
        if registration.isolated:
            ctx = contexts[0]
            fn, takes_payload = registration.fn, registration.takes_payload
            return await self.processes.call(fn, takes_payload, ctx.task, ctx.worker_id)
        return await registration.fn(*self._arguments(registration, contexts))

    async def _call_sync(self, registration: Registration, contexts: Sequence[TaskContext]) -> Any:
        loop = asyncio.get_running_loop()
        wrapped = [SyncTaskContext(ctx, loop) for ctx in contexts]
        args = self._arguments(registration, wrapped)
        if self._scopes:
            # The thread sees the context the scopes set up (the current span, say).
            running = self._threads.submit(contextvars.copy_context().run, registration.fn, *args)
        else:
            running = self._threads.submit(registration.fn, *args)
        self.in_threads.update(contexts)
        running.add_done_callback(
            lambda _: _soon(loop, lambda: self.in_threads.difference_update(contexts))
        )
        try:
            result = await asyncio.wrap_future(running)
        except asyncio.CancelledError:
            if not running.done():
                self.stuck_threads += 1
                running.add_done_callback(lambda _: _soon(loop, self._thread_freed))
            raise
        if inspect.isawaitable(result):
            result = await result
        return result

    def _thread_freed(self) -> None:
        self.stuck_threads -= 1
        if self.on_thread_freed is not None:
            self.on_thread_freed()

    async def _succeed(self, ctx: TaskContext, result: Any) -> None:
        if ctx.settled or ctx.lost_lease:
            return
        try:
            encoded = ctx._runtime.client.codec.seal_optional(result, what="result")
        except SerializationError as exc:
            envelope = error_envelope(
                "SerializationError", "unserializable_result", str(exc), retryable=False
            )
            await self._settle(ctx, lambda: ctx._record_failure(envelope, retryable=False))
            return
        await self._settle(ctx, lambda: ctx.succeed_encoded(encoded, grouped=True))

    def _signal(self, raised: Exception) -> Signal | None:
        """The signal an extension settles ``raised`` with, by its class or a base."""
        signals = self._signals
        if not signals:
            return None
        for kind in type(raised).__mro__:
            found = signals.get(kind)
            if found is not None:
                return found
        return None

    async def _fail_all(
        self,
        contexts: Sequence[TaskContext],
        envelope: dict[str, Any],
        *,
        retryable: bool,
        fenced: bool = True,
        error: object = None,
    ) -> None:
        async def fail(ctx: TaskContext) -> None:
            if ctx.settled or (fenced and ctx.lost_lease):
                return
            await self._settle(
                ctx,
                lambda: ctx._record_failure(
                    envelope, retryable=retryable, force=not fenced, error=error
                ),
            )

        await asyncio.gather(*(fail(ctx) for ctx in contexts))

    async def _settle(self, ctx: Any, write: Callable[[], Awaitable[object]]) -> None:
        """Write a settlement, retrying transient database errors while it may still matter."""
        for attempt in range(1, SETTLE_ATTEMPTS + 1):
            try:
                await write()
            except LostLease:
                log.info("%s: lease lost before settling", _describe(ctx), extra=_log_extra(ctx))
                return
            except DatabaseError as exc:
                if not exc.retryable or attempt == SETTLE_ATTEMPTS:
                    self._on_error(exc, {"phase": "settle", "task_id": ctx.task_id})
                    return
                await asyncio.sleep(0.05 * 2**attempt)
            except Exception as exc:
                self._on_error(exc, {"phase": "settle", "task_id": ctx.task_id})
                return
            else:
                return


def _run_bound_ms(
    registration: Registration, contexts: Sequence[TaskContext], max_run_ms: int | None
) -> int | None:
    """How long a call may run: the shortest timeout its tasks' submits gave, else its
    handler's ``timeout``, else the worker's ``max_run_ms`` (``None``: unbounded)."""
    own = [ctx.run_timeout_ms for ctx in contexts if ctx.run_timeout_ms is not None]
    if own:
        return min(own)
    return registration.timeout_ms or max_run_ms


def _run_bound_words(
    registration: Registration, contexts: Sequence[TaskContext], max_run_ms: int | None
) -> str:
    """The run-time limit a call ran past, as its log line and error say it."""
    bound = _run_bound_ms(registration, contexts, max_run_ms)
    if bound is not None and bound != max_run_ms:
        return f"its timeout={format_duration(bound)}"
    return f"max_run_ms={max_run_ms}"


def _soon(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
    """Schedule ``callback`` on ``loop`` from another thread; a closed loop is ignored."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback)


def _short_traceback(exc: BaseException, most: int = 4000) -> str:
    try:
        text = "".join(traceback.format_exception(*handler_frames(exc)))
    except Exception as failure:
        return f"<traceback unavailable: formatting it raised {type(failure).__name__}>"
    return text[-most:]
