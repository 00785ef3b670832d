"""What durable steps add to a handler's context: ``ctx.step``, ``ctx.transaction_step``
and ``ctx.steps`` (``StepsContext``; its blocking twin for a plain ``def`` handler is
generated from it, ``_context_sync``), with the step's checked options, its retries and
the transactional step's one transaction.

Each attempt keeps the step names its run used and the recorded results it read
(``RunSteps``, the attempt's state of the mixin); the functions below run one
step's function and record its value.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from ..._checks import check_int
from ..._handoff import in_waiting_thread
from ..._json import JsonCodec
from ...backends import AroundRunner
from ...durations import delay_ms_of
from ...errors import InvalidArgument, LostLease, StepsChanged, UnsupportedBackend, is_permanent
from ...protocol.steps import Op, Row
from .._context import ContextHost
from ._ops import (
    PATCH_MARK,
    VERSION_MARK,
    check_step_name,
    is_mark,
    record_first,
    record_step,
    recorded_steps,
)

log = logging.getLogger("cairnq.worker")

UNRECORDED: Any = object()
"""What a run's lookup of a step name gives when no attempt recorded the step."""


@dataclass(frozen=True)
class StepOptions:
    """A step's validated name and retry options."""

    name: str
    retries: int
    backoff_ms: int

    def delay_s(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (1, 2, ...): the backoff, doubling."""
        return float(self.backoff_ms * 2 ** (retry - 1)) / 1000


def step_options(name: Any, fn: Any, retries: Any, backoff: Any) -> StepOptions:
    """Validate a step's name, function and retry options.

    Raises:
        InvalidArgument: a bad name, a ``fn`` that is not callable, ``retries`` not a
            whole number from 0, or a bad ``backoff``.
    """
    checked = check_step_name(name)
    if not callable(fn):
        raise InvalidArgument(f"step {checked!r} needs a function to run, not {type(fn).__name__}")
    return StepOptions(
        checked,
        check_int(retries, "step retries", low=0, high=1000),
        delay_ms_of(backoff, "step backoff"),
    )


async def run_step(
    options: StepOptions,
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    guard: Callable[[], None],
    task_id: str,
) -> Any:
    """``fn(*args, **kwargs)``'s value (awaited when it is awaitable), retried after an
    exception ``options.retries`` times; ``guard()`` runs before each try. ``fn`` is
    called in the handler's thread: here for an async handler, in its thread for a plain
    ``def`` one (``_handoff.in_waiting_thread``).

    Raises:
        Exception: ``fn``'s, once no retry is left or at once when it is permanent
            (``errors.is_permanent``).
    """
    tried = 0
    while True:
        guard()
        try:
            value = await in_waiting_thread(fn, *args, **kwargs)
            if inspect.isawaitable(value):
                value = await value
            return value
        except Exception as exc:
            if tried >= options.retries or is_permanent(exc):
                raise
            tried += 1
            log.info(
                "task %s step %r raised; retry %d of %d",
                task_id,
                options.name,
                tried,
                options.retries,
                exc_info=log.isEnabledFor(logging.DEBUG),
            )
            await asyncio.sleep(options.delay_s(tried))


async def run_transactional(
    backend: object,
    codec: JsonCodec,
    write: Callable[[str], Op[Row]],
    options: StepOptions,
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    guard: Callable[[], None],
) -> Any:
    """Run ``fn(conn, *args, **kwargs)`` and record its value (``write(encoded)``, a fenced
    write of the step's record) in one transaction of ``backend``'s (retried as
    ``run_step``); returns the value as read back from JSON.

    Raises:
        UnsupportedBackend: ``backend`` runs no application write in its transactions.
        LostLease: the attempt is no longer owned; nothing of ``fn``'s is kept.
    """
    if not isinstance(backend, AroundRunner):
        raise UnsupportedBackend(
            f"transactional steps need the SQLite or the PostgreSQL backend, not "
            f"{type(backend).__name__}"
        )
    name = options.name

    def record(value: Any) -> Op[str]:
        what = f"result of step {name!r}"
        encoded = codec.encode(value, what=what)
        yield from write(codec.seal_text(encoded, what=what))
        return encoded

    tried = 0
    while True:
        guard()
        try:
            encoded = await backend.arun_around(lambda conn: fn(conn, *args, **kwargs), record)
            break
        except LostLease:
            raise
        except Exception as exc:
            if tried >= options.retries or is_permanent(exc):
                raise
            tried += 1
            await asyncio.sleep(options.delay_s(tried))
    return codec.decode(encoded, what="step result")


@dataclass
class RunSteps:
    """One attempt's steps: what earlier attempts recorded (read at the first step, once
    for the steps that start together) and the names this run used so far (their count
    is the next step's seq).

    ``recorded`` holds the recorded results by step name, ``positions`` each recorded
    step's seq, ``marks`` the names of cairnq's own rows beside them (the version,
    ``ctx.patched``'s), ``version`` the handler version they were recorded by (``None``:
    none declared) and ``fresh`` whether nothing was recorded before this run, whose
    first record then writes its handler's version too.
    """

    recorded: dict[str, Any] | None = None
    names: list[str] = field(default_factory=list)
    positions: dict[str, int] = field(default_factory=dict)
    marks: set[str] = field(default_factory=set)
    version: str | None = None
    fresh: bool = False
    loading: asyncio.Future[None] | None = None


class StepsContext:
    """``ctx.step``, ``ctx.transaction_step`` and ``ctx.steps``, mixed into ``TaskContext``."""

    async def step(
        self: ContextHost,
        name: str,
        fn: Callable[..., Any],
        *args: Any,
        retries: int = 0,
        backoff: Any = 1.0,
        transactional: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Run ``fn(*args, **kwargs)`` once per task: its result is recorded, and a later
        attempt (a retry, a run after a crash) gets the recorded result back instead.

        The result is written fenced on this attempt's lease, so a stale attempt's
        write is refused. It must be JSON the client's codec can encode (the same
        rules as a task's result); it is returned as read back from JSON, so the
        first run and a replay see the same value (a tuple comes back a list).
        Each step name may be used once per run; a name used twice raises.

        ``fn`` may be a plain or a coroutine function; it runs in the handler's thread
        (a plain ``def`` handler's own), a transactional step's where the transaction
        is. An exception from ``fn`` is
        retried ``retries`` times, waiting ``backoff`` (doubling each time); after
        that it propagates, and the attempt fails like any handler error (nothing
        is recorded, so the next attempt runs the step again). A permanent error
        (``errors.is_permanent``: an ``InvalidArgument`` such as a result that is
        not JSON, a name used twice or a bad option) is not retried: it fails the
        task at once, whatever attempts are left.

        With ``transactional=True``, ``fn(conn, *args, **kwargs)`` runs inside the
        transaction that records the step, so its writes commit exactly when the
        step is recorded: on PostgreSQL ``conn`` is the ``psycopg.AsyncConnection``
        (``fn`` may be async); on SQLite it is the ``sqlite3.Connection`` of the
        write transaction (``fn`` must be a plain function; use it for tables in
        the same database file). ``fn`` must not commit or roll back.

        Args:
            name: The step's name, unique within the task (``"fetch-invoice"``).
            fn: What the step does.
            *args: Positional arguments for ``fn``.
            retries: How many times to retry ``fn`` after an exception (0 by default).
            backoff: The wait before the first retry: seconds, a ``timedelta`` or
                ``"2s"`` (1 second by default), doubling for each further retry.
            transactional: Run ``fn`` inside the recording transaction.
            **kwargs: Keyword arguments for ``fn`` (other than the names above).

        Returns:
            The step's result: recorded now, or by an earlier attempt.

        Raises:
            InvalidArgument: a bad name or option, or a name this run used already
                (nothing is written).
            SerializationError: the result is not JSON the codec accepts (nothing is written).
            LostLease: this attempt no longer owns the task; nothing is recorded.
            SchemaIncomplete: the database lacks the steps table (``cairnq migrate``).
            UnsupportedBackend: ``transactional=True`` on a backend without it.

        Example::

            @worker.task
            async def bill(ctx, payload):
                invoice = await ctx.step("fetch-invoice", fetch_invoice, payload["id"])
                charge = await ctx.step("charge", charge_card, invoice, retries=3)
                await ctx.step("email", send_receipt, charge)
        """
        options = step_options(name, fn, retries, backoff)
        recorded, seq = await step_begin(self, options.name)
        if recorded is not UNRECORDED:
            return recorded
        if transactional:
            return await transaction_step(self, options, seq, fn, args, kwargs)
        value = await run_step(options, fn, args, kwargs, guard=self._guard, task_id=self.task.id)
        return await step_record(self, options.name, seq, value)

    transaction_step = functools.partialmethod(step, transactional=True)

    async def steps(self: ContextHost) -> dict[str, Any]:
        """The results every attempt of this task recorded so far, by step name."""
        return await read_steps(self)

    async def patched(self: ContextHost, name: str) -> bool:
        """Whether this run takes the new branch of a change made to the handler's steps
        while tasks were in flight (as DBOS's ``patch``).

        ``True`` for a task that had not run past this point before the change (a new
        task, or a retry of one that never got here): that is recorded, so every later
        attempt of the task gets ``True`` too. ``False`` for a task whose earlier
        attempts recorded steps past this point on the old code: it keeps to the old
        branch, whose steps were recorded. Remove the call with the old branch once
        no such task is left; a task that recorded ``True`` goes on without it.

        Args:
            name: The change's name, unique within the handler (``"new-charge"``).

        Returns:
            Whether to run the new code.

        Raises:
            InvalidArgument: a bad name.
            StepsChanged: the recorded steps no longer match the handler (``step``).
            LostLease: this attempt no longer owns the task; nothing is recorded.

        Example::

            if await ctx.patched("charge-in-cents"):
                charge = await ctx.step("charge-cents", charge_cents, invoice)
            else:
                charge = await ctx.step("charge", charge_card, invoice)
        """
        mark = PATCH_MARK + check_step_name(name)
        run = await load_run(self)
        if mark in run.marks:
            return True
        seq = len(run.names) + 1
        if any(at >= seq for at in run.positions.values()):
            return False
        run.marks.add(mark)
        await step_record(self, mark, seq, True)
        return True


async def read_steps(ctx: ContextHost) -> dict[str, Any]:
    """The results every attempt of ``ctx``'s task recorded so far, by step name."""
    ctx._guard()
    client = ctx._runtime.client
    rows = await client.backend.arun(recorded_steps(ctx.task.id), write=False)
    return {
        str(r["name"]): _result(client.codec, r["result"], ctx.task.id)
        for r in rows
        if not is_mark(str(r["name"]))
    }


async def load_run(ctx: ContextHost) -> RunSteps:
    """This attempt's ``RunSteps``, with what earlier attempts recorded read once: the
    steps that start together wait for one read and go on in the order they started.

    Raises:
        StepsChanged: the steps were recorded by another version of the handler.
    """
    ctx._guard()
    run = ctx._state(RunSteps)
    if run.recorded is None:
        if run.loading is None:
            run.loading = asyncio.ensure_future(_load(ctx, run))
        await asyncio.shield(run.loading)
    return run


async def _load(ctx: ContextHost, run: RunSteps) -> None:
    client = ctx._runtime.client
    rows = await client.backend.arun(recorded_steps(ctx.task.id), write=False)
    recorded: dict[str, Any] = {}
    version = None
    for row in rows:
        name = str(row["name"])
        if name == VERSION_MARK:
            version = client.codec.decode(row["result"], what="handler version")
        elif is_mark(name):
            run.marks.add(name)
        else:
            recorded[name] = _result(client.codec, row["result"], ctx.task.id)
            run.positions[name] = int(row["seq"])
    run.version, run.fresh = version, not rows
    declared = handler_version(ctx)
    if rows and version != declared:
        raise StepsChanged(
            f"task {ctx.task.id}'s steps were recorded by {_version_words(version)} of its "
            f"handler, and this worker runs {_version_words(declared)}; its recorded results "
            f"are not handed to another version's steps, so the task fails",
            details={
                "recorded_version": version,
                "version": declared,
                "recorded": _in_order(run.positions),
            },
        )
    run.recorded = recorded


def handler_version(ctx: ContextHost) -> str | None:
    """The version of the handler's steps: its own (``@worker.task(version=...)``), else
    its worker's (``Steps(version=...)``), else ``None``."""
    return cast("str | None", ctx._option("version"))


def _version_words(version: str | None) -> str:
    return "no declared version" if version is None else f"version {version!r}"


def _in_order(positions: Mapping[str, int]) -> list[str]:
    return [name for name, _ in sorted(positions.items(), key=lambda item: (item[1], item[0]))]


def _check_position(ctx: ContextHost, run: RunSteps, name: str, seq: int) -> None:
    """Refuse a step whose recorded position is not ``seq``, or a ``seq`` another step
    was recorded at.

    Raises:
        StepsChanged: the recorded steps stood in another order.
    """
    recorded_at = run.positions.get(name)
    there = [n for n, at in run.positions.items() if at == seq]
    if recorded_at is None and (not there or name in there):
        return
    if recorded_at == seq:
        return
    where = (
        f"step {name!r} was recorded as step {recorded_at}"
        if recorded_at is not None
        else f"step {seq} was recorded as {there[0]!r}"
    )
    raise StepsChanged(
        f"task {ctx.task.id}'s recorded steps do not match its handler: this run's step {seq} "
        f"is {name!r}, but {where}; its recorded results are not handed to other steps, so "
        f"the task fails (to change steps under tasks in flight, branch with ctx.patched)",
        details={
            "step": name,
            "seq": seq,
            "recorded": _in_order(run.positions),
            "version": handler_version(ctx),
        },
    )


async def step_begin(ctx: ContextHost, name: str) -> tuple[Any, int]:
    """Claim ``name`` for this run; returns its recorded result (or ``UNRECORDED``) and
    its seq."""
    run = await load_run(ctx)
    if name in run.names:
        raise InvalidArgument(
            f"step name {name!r} is used twice in one run of task {ctx.task.id}; "
            "give each step its own name (for a loop, put the index in the name)"
        )
    _check_position(ctx, run, name, len(run.names) + 1)
    run.names.append(name)
    assert run.recorded is not None
    return run.recorded.get(name, UNRECORDED), len(run.names)


async def step_record(ctx: ContextHost, name: str, seq: int, value: Any) -> Any:
    """Record ``value`` as step ``seq``, fenced on ``ctx``'s lease; returns it as read
    back from JSON."""
    codec = ctx._runtime.client.codec
    what = f"result of step {name!r}"
    encoded = codec.encode(value, what=what)
    await ctx._owned(recording(ctx, name, seq, codec.seal_text(encoded, what=what)))
    return codec.decode(encoded, what="step result")


def _result(codec: JsonCodec, text: Any, task_id: str) -> Any:
    """A recorded step result, decoded by the client's codec (``codec=``) if encoded."""
    return codec.opened(codec.decode(text, what="step result"), what="step result", task_id=task_id)


def recording(ctx: ContextHost, name: str, seq: int, encoded: str) -> Op[Row]:
    """The write of a step's record; the task's first record (of a handler that declares
    a version) writes the version with it."""
    run = ctx._state(RunSteps)
    version = handler_version(ctx)
    if not run.fresh or version is None:
        row = yield from record_step(ctx.lease, ctx.worker_id, name, seq, encoded)
        return row
    run.fresh = False  # taken now: a step recording alongside must not write it again
    try:
        row = yield from record_first(ctx.lease, ctx.worker_id, version, name, seq, encoded)
    except BaseException:
        run.fresh = True  # nothing was written: the next record writes the version
        raise
    return row


async def transaction_step(
    ctx: ContextHost,
    options: StepOptions,
    seq: int,
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
) -> Any:
    """Run a transactional step for ``ctx`` (``run_transactional``); a lost lease marks
    ``ctx`` lost."""
    client = ctx._runtime.client
    try:
        return await run_transactional(
            client.backend,
            client.codec,
            lambda encoded: recording(ctx, options.name, seq, encoded),
            options,
            fn,
            args,
            kwargs,
            guard=ctx._guard,
        )
    except LostLease:
        ctx.mark_lost()
        raise
