"""Every failure can be recorded: the error envelope a worker writes is always storable.

NUL characters and lone surrogates (which no store holds) are written as visible
backslash escapes; what still cannot be stored falls back to the stripped
envelope. In each case the task ends with its own error at once, long before
its lease could expire.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from cairnq import Task, TaskError

from ._db import Database

LEASE_MS = 60_000  # far beyond the wait: a failure that cannot be settled shows as a timeout
WAIT_MS = 10_000
KINDS = ["async", "sync"]


def handler_of(kind: str, body: Callable[[Any], Any]) -> Callable[..., Any]:
    """``body(ctx)`` as an ``async def`` handler or a plain ``def`` one (run in a thread)."""
    if kind == "async":

        async def async_handler(ctx: Any) -> Any:
            result = body(ctx)
            if hasattr(result, "__await__"):
                return await result
            return result

        return async_handler

    def sync_handler(ctx: Any) -> Any:
        return body(ctx)

    return sync_handler


async def failed_task(db: Database, handler: Callable[..., Any]) -> Task:
    """Run one single-attempt task through ``handler``; the task as it ended."""
    errors: list[BaseException] = []
    worker = db.worker(
        poll_interval_ms=20, lease_ms=LEASE_MS, on_error=lambda exc, _: errors.append(exc)
    )
    worker.register("job", handler)
    async with db.client() as cq, worker.background():
        task = await cq.submit("job", {}, max_attempts=1)
        done = await cq.wait(task.id, timeout_ms=WAIT_MS, poll_ms=20, max_poll_ms=50)
    await worker.close()
    assert errors == []
    return done


def raise_(exc: BaseException) -> Any:
    raise exc


@pytest.mark.parametrize("kind", KINDS)
async def test_a_handler_error_with_a_nul_is_recorded_escaped(db: Database, kind: str) -> None:
    done = await failed_task(db, handler_of(kind, lambda ctx: raise_(ValueError("bad\x00byte"))))
    assert (done.status, done.attempt) == ("failed", 1)
    assert (done.error["type"], done.error["code"]) == ("ValueError", "handler_error")
    assert done.error["message"] == "bad\\x00byte"
    assert "ValueError: bad\\x00byte" in done.error["details"]["traceback"]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_handler_error_with_a_lone_surrogate_is_recorded_escaped(
    db: Database, kind: str
) -> None:
    done = await failed_task(db, handler_of(kind, lambda ctx: raise_(ValueError("\ud800!"))))
    assert (done.status, done.error["type"]) == ("failed", "ValueError")
    assert done.error["message"] == "\\ud800!"
    assert "ValueError: \\ud800!" in done.error["details"]["traceback"]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_task_error_with_unstorable_text_in_every_field_is_recorded_escaped(
    db: Database, kind: str
) -> None:
    error = TaskError(
        "card\x00declined",
        code="bad\udfff",
        type="Card\x00Error",
        details={"last4\x00": "42\ud83d", "seen": ["\x00", 1]},
    )
    done = await failed_task(db, handler_of(kind, lambda ctx: raise_(error)))
    assert done.status == "failed"
    assert done.error == {
        "type": "Card\\x00Error",
        "code": "bad\\udfff",
        "message": "card\\x00declined",
        "retryable": False,
        "details": {"last4\\x00": "42\\ud83d", "seen": ["\\x00", 1]},
    }


@pytest.mark.parametrize("kind", KINDS)
async def test_ctx_fail_with_a_nul_is_recorded_escaped(db: Database, kind: str) -> None:
    done = await failed_task(
        db, handler_of(kind, lambda ctx: ctx.fail("upstream said \x00", retryable=False))
    )
    assert done.status == "failed"
    assert (done.error["code"], done.error["message"]) == ("task_error", "upstream said \\x00")


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


@pytest.mark.parametrize("kind", KINDS)
async def test_an_exception_whose_str_raises_is_recorded_by_its_type(
    db: Database, kind: str
) -> None:
    done = await failed_task(db, handler_of(kind, lambda ctx: raise_(Unprintable())))
    assert (done.status, done.error["type"], done.error["code"]) == (
        "failed",
        "Unprintable",
        "handler_error",
    )
    assert done.error["message"] == "<unprintable Unprintable: str() raised RuntimeError>"


async def test_error_details_that_cannot_be_stored_leave_the_stripped_envelope(
    db: Database,
) -> None:
    error = TaskError("no\x00good", code="odd", details={"ids": {1, 2}}, retryable=False)
    done = await failed_task(db, handler_of("async", lambda ctx: raise_(error)))
    assert done.status == "failed"
    assert done.error == {
        "type": "TaskError",
        "code": "odd",
        "message": "no\\x00good",
        "retryable": False,
        "details": {},
    }


async def test_an_error_message_too_large_to_store_is_capped(db: Database) -> None:
    huge = "x" * 2_000_000  # over the 1 MiB limit of stored JSON
    done = await failed_task(db, handler_of("async", lambda ctx: raise_(ValueError(huge))))
    assert (done.status, done.error["type"], done.error["details"]) == ("failed", "ValueError", {})
    assert done.error["message"] == "x" * 4000 + "... (1996000 more characters)"


async def test_error_details_whose_keys_would_be_written_twice_leave_the_stripped_envelope(
    db: Database,
) -> None:
    error = TaskError("declined", code="card", details={"1": "b", 1: "c"})
    done = await failed_task(db, handler_of("async", lambda ctx: raise_(error)))
    assert done.status == "failed"
    assert (done.error["message"], done.error["details"]) == ("declined", {})
