"""An error no retry can fix fails its task at once; a transient one is retried.

A misuse of cairnq's API inside a handler (a bad argument, a step name used
twice, a value no store can hold) raises a permanent error (``is_permanent``):
the task fails on its first attempt, whatever ``max_attempts`` is left, with a
``misuse`` envelope naming the error's type and message. The user's own
exceptions and the database's errors are retried as before. Each case runs an
``async def`` handler and a plain ``def`` one (whose context blocks).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from cairnq import (
    DatabaseBusy,
    DatabaseError,
    DatabaseUnavailable,
    InvalidArgument,
    SerializationError,
    Task,
)

from ._db import Database

KINDS = ["async", "sync"]
ATTEMPTS = 3
# Each call a handler makes on its context, in order: (method, args, kwargs).
Calls = Sequence[tuple[str, tuple[Any, ...], dict[str, Any]]]


def handler_making(kind: str, calls: Calls, runs: list[int]) -> Callable[..., Any]:
    """A handler making ``calls`` on its context: ``async def`` awaiting each, or
    plain ``def`` on the blocking context; each run is appended to ``runs``."""
    if kind == "async":

        async def async_handler(ctx: Any) -> None:
            runs.append(ctx.attempt)
            for method, args, kwargs in calls:
                await getattr(ctx, method)(*args, **kwargs)

        return async_handler

    def sync_handler(ctx: Any) -> None:
        runs.append(ctx.attempt)
        for method, args, kwargs in calls:
            getattr(ctx, method)(*args, **kwargs)

    return sync_handler


async def ended(db: Database, handler: Callable[..., Any]) -> Task:
    """Run one task (``max_attempts=3``) through ``handler`` until nothing is left to do."""
    worker = db.worker(poll_interval_ms=20, retry_backoff_ms=0)
    worker.register("job", handler)
    async with db.client() as cq:
        task = await cq.submit("job", {}, max_attempts=ATTEMPTS)
        await worker.run(until_idle=True)
        done = await cq.get(task.id)
    assert done is not None
    return done


def assert_failed_at_once(done: Task, runs: list[int], type: str, message: str) -> None:
    assert (done.status, done.attempt, runs) == ("failed", 1, [1])
    assert done.error is not None
    assert (done.error["type"], done.error["code"], done.error["retryable"]) == (
        type,
        "misuse",
        False,
    )
    assert done.error["message"] == message
    assert f"{type}: {message}" in done.error["details"]["traceback"]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_step_result_too_large_to_store_fails_the_task_at_once(
    db: Database, kind: str
) -> None:
    runs: list[int] = []
    calls = [("step", ("big", lambda: "x" * 20_000_000), {})]
    done = await ended(db, handler_making(kind, calls, runs))
    assert_failed_at_once(
        done,
        runs,
        "SerializationError",
        "result of step 'big' is 20000002 bytes encoded, over the limit of 1048576",
    )


@pytest.mark.parametrize("kind", KINDS)
async def test_a_negative_snooze_fails_the_task_at_once(db: Database, kind: str) -> None:
    runs: list[int] = []
    done = await ended(db, handler_making(kind, [("snooze", (-5,), {})], runs))
    assert_failed_at_once(
        done, runs, "InvalidArgument", "snooze delay must be 0 seconds or more, got -5"
    )


@pytest.mark.parametrize("kind", KINDS)
async def test_a_step_name_used_twice_fails_the_task_at_once(db: Database, kind: str) -> None:
    runs: list[int] = []
    calls = [("step", ("same", lambda: 1), {}), ("step", ("same", lambda: 2), {})]
    done = await ended(db, handler_making(kind, calls, runs))
    assert_failed_at_once(
        done,
        runs,
        "InvalidArgument",
        f"step name 'same' is used twice in one run of task {done.id}; "
        "give each step its own name (for a loop, put the index in the name)",
    )


@pytest.mark.parametrize("kind", KINDS)
async def test_a_step_result_that_is_not_json_fails_the_task_at_once(
    db: Database, kind: str
) -> None:
    runs: list[int] = []
    calls = [("step", ("opaque", object), {})]
    done = await ended(db, handler_making(kind, calls, runs))
    assert_failed_at_once(
        done,
        runs,
        "SerializationError",
        "result of step 'opaque' is not JSON-serializable: "
        "Object of type object is not JSON serializable",
    )


@pytest.mark.parametrize("kind", KINDS)
async def test_a_step_backoff_string_without_a_unit_fails_the_task_at_once(
    db: Database, kind: str
) -> None:
    runs: list[int] = []
    calls = [("step", ("fetch", lambda: 1), {"retries": 2, "backoff": "5"})]
    done = await ended(db, handler_making(kind, calls, runs))
    assert_failed_at_once(
        done,
        runs,
        "InvalidArgument",
        "step backoff: duration '5' has no unit: e.g. 7d, 12h, 30m, 1.5s, 500ms or 1h30m; "
        "or give seconds as a number, e.g. 90",
    )


@pytest.mark.parametrize("kind", KINDS)
async def test_a_handler_raising_invalid_argument_itself_fails_the_task_at_once(
    db: Database, kind: str
) -> None:
    runs: list[int] = []

    def check(amount: int) -> None:
        if amount <= 0:
            raise InvalidArgument(f"amount must be positive, got {amount}")

    done = await ended(db, handler_making(kind, [("step", ("check", check, -1), {})], runs))
    assert_failed_at_once(done, runs, "InvalidArgument", "amount must be positive, got -1")


@pytest.mark.parametrize("kind", KINDS)
async def test_a_transactional_step_does_not_retry_a_result_that_is_not_json(
    db: Database, kind: str
) -> None:
    runs: list[int] = []
    tried: list[int] = []

    def opaque(conn: Any) -> object:
        tried.append(1)
        return object()

    calls = [("step", ("opaque", opaque), {"retries": 2, "backoff": 0, "transactional": True})]
    done = await ended(db, handler_making(kind, calls, runs))
    assert (done.status, done.attempt, len(tried)) == ("failed", 1, 1)
    assert done.error is not None
    assert (done.error["type"], done.error["code"]) == ("SerializationError", "misuse")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "error",
    [
        ValueError("a ValueError of the handler's own"),
        DatabaseBusy("database is locked"),
        DatabaseUnavailable("connection refused"),
        DatabaseError("the database refused", retryable=False),
    ],
    ids=lambda error: type(error).__name__,
)
async def test_a_handler_or_database_error_is_still_retried(
    db: Database, kind: str, error: Exception
) -> None:
    runs: list[int] = []

    def fail() -> None:
        raise error

    done = await ended(db, handler_making(kind, [("step", ("fail", fail), {})], runs))
    assert (done.status, done.attempt, runs) == ("failed", ATTEMPTS, [1, 2, 3])
    assert done.error is not None
    assert (done.error["type"], done.error["code"], done.error["retryable"]) == (
        type(error).__name__,
        "handler_error",
        True,
    )
    assert done.error["message"] == str(error)


def test_only_misuse_and_unstorable_values_are_permanent() -> None:
    from cairnq import LostLease, SchemaIncomplete, TaskError, UnsupportedBackend
    from cairnq.errors import is_permanent

    assert is_permanent(InvalidArgument("bad"))
    assert is_permanent(SerializationError("not JSON"))
    assert is_permanent(UnsupportedBackend("no such thing here"))
    transient: list[BaseException] = [
        ValueError("bad"),
        DatabaseBusy("locked"),
        DatabaseUnavailable("down"),
        SchemaIncomplete("missing"),
        LostLease("t1"),
        TaskError("chosen by the handler"),
        _wrapping(InvalidArgument("inner")),
    ]
    assert not any(is_permanent(exc) for exc in transient)


def _wrapping(inner: BaseException) -> BaseException:
    """A ``RuntimeError`` raised from ``inner`` (its ``__cause__``)."""
    try:
        try:
            raise inner
        except InvalidArgument as exc:
            raise RuntimeError("wrapped") from exc
    except RuntimeError as outer:
        return outer
