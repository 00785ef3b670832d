"""When a submitted task may start (``delay=``, ``run_at=``, ``delay_ms=``) and its lineage
(``lineage=`` or the three keywords), on a real database with a ``FakeClock``."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from cairnq import InvalidArgument, Lineage, TaskContext
from cairnq.testing import FakeClock

from ._db import Database

NOW = 1_800_000_000_000
UTC = datetime.timezone.utc


def _at(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, UTC)


@pytest.mark.parametrize(
    "delay",
    [
        pytest.param(datetime.timedelta(minutes=5), id="timedelta"),
        pytest.param("5m", id="string"),
        pytest.param(300, id="seconds"),
    ],
)
async def test_delay_is_a_timedelta_a_string_or_seconds(db: Database, delay: Any) -> None:
    async with db.client(clock=FakeClock(NOW)) as cq:
        task = await cq.submit("job", delay=delay)
    assert task.run_at_ms == NOW + 300_000


async def test_a_decimal_delay_string_is_read_to_the_millisecond(db: Database) -> None:
    async with db.client(clock=FakeClock(NOW)) as cq:
        task = await cq.submit("job", delay="1.5s")
    assert task.run_at_ms == NOW + 1_500


async def test_run_at_is_the_instant_of_an_aware_datetime(db: Database) -> None:
    paris = datetime.timezone(datetime.timedelta(hours=1))
    async with db.client(clock=FakeClock(NOW)) as cq:
        task = await cq.submit("job", run_at=_at(NOW + 90_000).astimezone(paris))
    assert task.run_at_ms == NOW + 90_000


async def test_run_at_in_the_past_is_due_now(db: Database) -> None:
    async with db.client(clock=FakeClock(NOW)) as cq:
        task = await cq.submit("job", run_at=_at(NOW - 3_600_000))
    assert task.run_at_ms == NOW


async def test_a_naive_run_at_is_refused_and_nothing_is_stored(db: Database) -> None:
    async with db.client(clock=FakeClock(NOW)) as cq:
        with pytest.raises(InvalidArgument, match=r"naive datetime .* add a tzinfo"):
            await cq.submit("job", run_at=datetime.datetime(2030, 1, 1))
        assert await cq.list() == []


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"delay": 5, "delay_ms": 5_000}, id="delay-and-delay_ms"),
        pytest.param({"delay": 5, "run_at": _at(NOW)}, id="delay-and-run_at"),
        pytest.param({"run_at": _at(NOW), "delay_ms": 0}, id="run_at-and-delay_ms"),
    ],
)
async def test_two_ways_to_say_when_are_refused(db: Database, options: dict[str, Any]) -> None:
    async with db.client(clock=FakeClock(NOW)) as cq:
        with pytest.raises(InvalidArgument, match="give at most one of delay=, run_at= and"):
            await cq.submit("job", **options)


async def test_delay_ms_still_takes_milliseconds(db: Database) -> None:
    async with db.client(clock=FakeClock(NOW)) as cq:
        task = await cq.submit("job", delay_ms=1_500)
    assert task.run_at_ms == NOW + 1_500


async def test_submit_many_items_take_delay_and_run_at(db: Database) -> None:
    async with db.client(clock=FakeClock(NOW)) as cq:
        tasks = await cq.submit_many(
            [{"task": "a", "delay": "1m"}, {"task": "b", "run_at": _at(NOW + 2_000)}]
        )
    assert [t.run_at_ms for t in tasks] == [NOW + 60_000, NOW + 2_000]


async def test_lineage_sets_parent_root_and_correlation_ids(db: Database) -> None:
    async with db.client() as cq:
        parent = await cq.submit("parent")
        child = await cq.submit(
            "child", lineage=Lineage(parent.id, parent.root_id, correlation_id="order-42")
        )
    assert (child.parent_id, child.root_id, child.correlation_id) == (
        parent.id,
        parent.id,
        "order-42",
    )


async def test_lineage_with_a_lineage_keyword_is_refused(db: Database) -> None:
    async with db.client() as cq:
        with pytest.raises(InvalidArgument, match="give lineage= or correlation_id=, not both"):
            await cq.submit("job", lineage=Lineage(), correlation_id="c")


def test_a_lineage_field_that_is_not_a_string_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="parent_id must be a string, not int"):
        Lineage(parent_id=7)  # type: ignore[arg-type]


async def test_a_child_given_a_correlation_id_keeps_its_parent_and_root(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20)

    @worker.task
    async def parent(ctx: TaskContext, payload: Any) -> str:
        child = await ctx.submit("child", lineage=Lineage(correlation_id="own"))
        return child.id

    async with db.client() as cq, worker.background():
        top = await cq.submit("parent", correlation_id="inherited")
        child_id = await cq.wait(top.id, timeout_ms=10_000)
        child = await cq.get(str(child_id.result))
    await worker.close()
    assert child is not None
    assert (child.parent_id, child.root_id, child.correlation_id) == (top.id, top.id, "own")


async def test_a_graph_takes_its_root_and_correlation_id_as_a_lineage(db: Database) -> None:
    async with db.client() as cq:
        first = await cq.submit("first")
        tasks = await cq.workflows.submit(
            {"a": {"task": "a"}, "b": {"task": "b", "after": ["a"]}},
            lineage=Lineage(root_id=first.id, correlation_id="batch-1"),
        )
    assert {(t.root_id, t.correlation_id) for t in tasks.values()} == {(first.id, "batch-1")}
