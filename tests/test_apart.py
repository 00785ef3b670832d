"""Calls that commit apart (``Call.apart``): read ahead before any runs, sent again whole
where a backend runs the operation in one transaction, and on PostgreSQL committed by
themselves, before the rest of the operation runs in a transaction of its own.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from cairnq import CairnQ, Limit, kernel
from cairnq.extensions.limits._keyed import keyed_fitting
from cairnq.extensions.limits._ops import database_now
from cairnq.protocol.steps import Call, Emit, Op, Pipelined, drive, read_ahead, together

from ._db import Database

WORKER = "worker-a"
LOCK = Call("limits_lock", {"names": ["l"]}, discard=True, apart=True)
READ = Call("r", {})
LATER = Call("later", {})


def _op(*steps: Any, value: Any = "done") -> Generator[Any, Any, Any]:
    """Send ``steps`` in turn, keeping each reply; return ``value`` and the replies."""
    replies = []
    for step in steps:
        replies.append((yield step))
    return value, replies


def _answers(step: Call | Any) -> Any:
    return [{"from": step.statement}]


def test_read_ahead_stops_at_the_first_read_and_takes_it_apart_when_it_says_so() -> None:
    emit = Emit("queued", "default")
    apart = Call("r", {}, apart=True)
    ahead = read_ahead(_op(LOCK, emit, apart, LATER))
    assert (ahead.apart, ahead.emits) == ([LOCK, apart], [emit])
    rest = ahead.rest([{"from": "both"}])
    assert not ahead.ended
    value, emits = drive(rest, _answers)
    assert value == ("done", [[], None, [{"from": "both"}], [{"from": "later"}]])
    assert emits == []


def test_the_rest_of_an_operation_that_returned_with_its_apart_calls_is_its_value() -> None:
    ahead = read_ahead(_op(LOCK, Call("r", {}, apart=True), value=7))
    rest = ahead.rest([])
    assert (ahead.ended, ahead.value[0]) == (True, 7)
    assert drive(rest, _answers)[0] == ahead.value


def test_an_operation_whose_first_read_is_not_apart_is_sent_again_whole() -> None:
    ahead = read_ahead(_op(LOCK, READ, LATER))
    assert ahead.apart == []
    sent: list[Call] = []

    def execute(step: Call | Any) -> Any:
        sent.append(step)
        return _answers(step)

    value, _ = drive(ahead.whole(), execute)
    assert sent == [LOCK, READ, LATER]
    # The lock's reply was given while reading ahead; the read's comes from the run.
    assert value == ("done", [[], [{"from": "r"}], [{"from": "later"}]])


def test_a_discard_step_not_marked_apart_ends_the_reading_unanswered() -> None:
    """An operation that does not begin apart builds nothing ahead of what is sent."""
    plain = Call("part", {}, discard=True)
    built: list[int] = []

    def streamed() -> Generator[Any, Any, Any]:
        for n in range(3):
            built.append(n)
            yield plain
        return "sent"

    ahead = read_ahead(streamed())
    assert (ahead.apart, built) == ([], [0])
    sent: list[int] = []

    def execute(step: Call | Any) -> Any:
        sent.append(len(built))
        return []

    assert drive(ahead.whole(), execute)[0] == "sent"
    assert sent == [1, 2, 3]  # each part sent before the next is built


def test_an_operation_that_ended_while_read_ahead_is_sent_again_with_its_value() -> None:
    ahead = read_ahead(_op(LOCK, LOCK, value=3))
    sent: list[Call] = []

    def execute(step: Call | Any) -> Any:
        sent.append(step)
        return []

    value, _ = drive(ahead.whole(), execute)
    assert (ahead.apart, sent, value[0]) == ([], [LOCK, LOCK], 3)


def test_together_takes_the_apart_marks_off_and_keeps_the_replies() -> None:
    apart = Call("r", {}, apart=True)
    sent: list[Call] = []

    def execute(step: Call | Any) -> Any:
        sent.append(step)
        return _answers(step)

    value, _ = drive(together(_op(LOCK, apart, READ)), execute)
    assert [step.apart for step in sent] == [False, False, False]
    assert [step.statement for step in sent] == ["limits_lock", "r", "r"]
    assert value == ("done", [[{"from": "limits_lock"}], [{"from": "r"}], [{"from": "r"}]])


async def _running(cq: CairnQ) -> int:
    return len(await cq.list(status="running"))


async def test_a_failure_after_calls_that_commit_apart_undoes_only_what_came_after_them(
    db: Database,
) -> None:
    """The lock and a fitting claim of 2 commit by themselves on PostgreSQL; the claim
    after them and the failure share a transaction, which rolls back. SQLite runs the
    whole operation in its write transaction: nothing stays claimed there."""
    async with db.client() as cq:
        limit = Limit.concurrency(10, queue="default")
        await cq.limits.set(limit)
        ids = [t.id for t in await cq.submit_many([("job", {}) for _ in range(3)])]

        def claims_then_fails() -> Op[None]:
            yield Call("limits_lock", {"names": [limit.id]}, discard=True, apart=True)
            first = yield from keyed_fitting(
                limit, ["default"], None, 2, WORKER, 60_000, apart=True
            )
            assert len(first) == 2
            yield Call("limits_lock", {"names": [limit.id]}, discard=True)
            rest = [i for i in ids if i not in {row["id"] for row, _ in first}]
            later = yield from _claim_ids(rest)
            assert len(later) == 1
            raise RuntimeError("after the apart calls")

        with pytest.raises(RuntimeError, match="after the apart calls"):
            await cq.backend.arun(Pipelined(claims_then_fails()), write=True)
        kept = {"postgres": 2, "sqlite": 0}[cq.backend.dialect]
        assert await _running(cq) == kept


async def test_each_run_of_apart_calls_in_turn_commits_by_itself(db: Database) -> None:
    """Two runs of the lock and a fitting claim, then a failure: on PostgreSQL both
    claims stay (each run committed as it was sent); on SQLite neither does."""
    async with db.client() as cq:
        limit = Limit.concurrency(10, queue="default")
        await cq.limits.set(limit)
        await cq.submit_many([("job", {}) for _ in range(4)])

        def claims_twice_then_fails() -> Op[None]:
            for want in (2, 1):
                yield Call("limits_lock", {"names": [limit.id]}, discard=True, apart=True)
                rows = yield from keyed_fitting(
                    limit, ["default"], None, want, WORKER, 60_000, apart=True
                )
                assert len(rows) == want
            raise RuntimeError("after both runs")

        with pytest.raises(RuntimeError, match="after both runs"):
            await cq.backend.arun(Pipelined(claims_twice_then_fails()), write=True)
        kept = {"postgres": 3, "sqlite": 0}[cq.backend.dialect]
        assert await _running(cq) == kept


def _claim_ids(ids: list[str]) -> Op[list[Any]]:
    now = yield from database_now()
    return (yield from kernel.claim_ids(ids, now, WORKER, 60_000))


def test_the_blocking_half_commits_apart_calls_as_the_async_half_does(db: Database) -> None:
    with db.sync_client() as cq:
        limit = Limit.concurrency(10, queue="default")
        cq.limits.set(limit)
        cq.submit_many([("job", {}) for _ in range(3)])

        def claims_then_fails() -> Op[None]:
            yield Call("limits_lock", {"names": [limit.id]}, discard=True, apart=True)
            first = yield from keyed_fitting(
                limit, ["default"], None, 2, WORKER, 60_000, apart=True
            )
            assert len(first) == 2
            raise RuntimeError("after the apart calls")

        with pytest.raises(RuntimeError, match="after the apart calls"):
            cq.backend.run(Pipelined(claims_then_fails()), write=True)
        kept = {"postgres": 2, "sqlite": 0}[cq.backend.dialect]
        assert len(cq.list(status="running")) == kept
