"""``submit_many`` and ``submit_many_ids``: one transaction per batch, on every backend.

``submit_many_ids`` writes what ``submit_many`` writes and decides keys the same
way; it answers with ids only. Tasks reach ``running`` and end through the
low-level operations a worker uses, so no worker is involved.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from cairnq import (
    AlreadyExists,
    CairnQ,
    InvalidArgument,
    SerializationError,
    TaskDef,
    error_envelope,
    kernel,
)
from cairnq.client._streaming import STREAM_PART
from cairnq.models import Lease, Task
from cairnq.testing import FakeClock

from ._db import Database
from ._statements import sent_statements, silent_refusal
from .test_keys import INSERTS, RETURNS  # a keyed item follows a keyed submit's table

WORKER = "w1"
NAN = float("nan")
START_MS = 1_700_000_000_000


async def ids_of(cq: CairnQ, method: str, items: list[Any]) -> list[str]:
    """The ids ``method`` (``submit_many`` or ``submit_many_ids``) answers for ``items``."""
    if method == "submit_many":
        return [task.id for task in await cq.submit_many(items)]
    return await cq.submit_many_ids(items)


both = pytest.mark.parametrize("method", ["submit_many", "submit_many_ids"])


async def reread(cq: CairnQ, task_id: str) -> Task:
    task = await cq.get(task_id)
    assert task is not None
    return task


async def total(cq: CairnQ) -> int:
    return sum(sum(by_status.values()) for by_status in (await cq.stats()).values())


async def make_existing(cq: CairnQ, status: str, key: str = "k") -> Task:
    """A task the key points at, in ``status``."""
    task = await cq.submit("old", {"v": "old"}, key=key)
    if status == "canceled":
        await cq.cancel(task.id)
    elif status != "queued":
        op: Any = kernel.claim(["default"], WORKER, 30_000, [kernel.Draw(["old"], 1)], 100)
        lease = Lease.of((await cq.backend.arun(op, write=True))[0])
        if status == "succeeded":
            op = kernel.complete(lease, WORKER, json.dumps({"answer": 42}))
            await cq.backend.arun(op, write=True)
        elif status == "failed":
            error = json.dumps(error_envelope("ValueError", "bad", "it broke"))
            op = kernel.fail(lease, WORKER, error, retryable=False, delay_ms=0)
            await cq.backend.arun(op, write=True)
    existing = await reread(cq, task.id)
    assert existing.status == status
    return existing


ITEMS: list[Any] = [
    ("plain", {"n": 1}),
    {"task": "keyed", "payload": [1, "two"], "key": "k1", "priority": 5, "delay_ms": 2_000},
    {
        "task": "full",
        "payload": "text",
        "queue": "media",
        "max_attempts": 7,
        "metadata": {"tenant": 7},
        "parent_id": "task_parent",
        "root_id": "task_root",
        "correlation_id": "req-1",
    },
]


async def test_submit_many_ids_returns_the_ids_of_the_stored_tasks_in_order(db: Database) -> None:
    async with db.client() as cq:
        ids = await cq.submit_many_ids(ITEMS)
        stored = [await reread(cq, task_id) for task_id in ids]
    assert [t.name for t in stored] == ["plain", "keyed", "full"]
    assert [t.payload for t in stored] == [{"n": 1}, [1, "two"], "text"]


async def test_submit_many_ids_stores_the_rows_submit_many_stores(db: Database) -> None:
    clock = FakeClock(START_MS)
    volatile = {"id", "root_id"}
    async with db.client(clock=clock) as cq:
        tasks = await cq.submit_many(ITEMS)
        # The keyed item gets another key, or it would reuse the first batch's task.
        again = [{**i, "key": "k2"} if isinstance(i, dict) and "key" in i else i for i in ITEMS]
        ids = await cq.submit_many_ids(again)
        stored = [await reread(cq, task_id) for task_id in ids]
    for task, again in zip(tasks, stored, strict=True):
        assert {k: v for k, v in again.to_dict().items() if k not in volatile} == {
            k: v for k, v in task.to_dict().items() if k not in volatile
        }
    assert [t.root_id for t in stored] == [ids[0], ids[1], "task_root"]


@both
@pytest.mark.parametrize("payload", [{"n": 1}, None, "text", [1, 2.5]])
async def test_a_name_and_payload_pair_stores_what_submit_stores(
    db: Database, method: str, payload: Any
) -> None:
    clock = FakeClock(START_MS)
    volatile = {"id", "root_id"}
    async with db.client(clock=clock) as cq:
        single = await cq.submit("plain", payload)
        ids = await ids_of(cq, method, [("plain", payload)])
        batch = await reread(cq, ids[0])
    assert {k: v for k, v in batch.to_dict().items() if k not in volatile} == {
        k: v for k, v in single.to_dict().items() if k not in volatile
    }
    assert batch.root_id == batch.id


@both
async def test_a_taskdef_item_supplies_its_name_queue_attempts_and_priority(
    db: Database, method: str
) -> None:
    resize = TaskDef("images.resize", queue="media", max_attempts=5, priority=9)
    async with db.client() as cq:
        ids = await ids_of(cq, method, [(resize, {"w": 1}), {"task": resize, "priority": 1}])
        stored = [await reread(cq, task_id) for task_id in ids]
    assert [(t.name, t.queue, t.max_attempts, t.priority) for t in stored] == [
        ("images.resize", "media", 5, 9),
        ("images.resize", "media", 5, 1),
    ]


@both
async def test_an_empty_batch_is_an_empty_list(db: Database, method: str) -> None:
    async with db.client() as cq:
        ids = await ids_of(cq, method, [])
        count = await total(cq)
    assert (ids, count) == ([], 0)


async def test_submit_many_ids_takes_any_iterable_of_items(db: Database) -> None:
    async with db.client() as cq:
        ids = await cq.submit_many_ids(("job", {"n": n}) for n in range(3))
        payloads = [(await reread(cq, task_id)).payload for task_id in ids]
    assert payloads == [{"n": 0}, {"n": 1}, {"n": 2}]


@both
@pytest.mark.parametrize(("conflict", "status"), RETURNS)
async def test_a_reused_key_gives_the_existing_task_id_and_inserts_nothing(
    db: Database, method: str, conflict: str, status: str
) -> None:
    async with db.client() as cq:
        existing = await make_existing(cq, status)
        ids = await ids_of(cq, method, [{"task": "new", "key": "k", "conflict": conflict}])
        count = await total(cq)
    assert ids == [existing.id]
    assert count == 1


@both
@pytest.mark.parametrize(("conflict", "status"), INSERTS)
async def test_a_key_on_a_finished_task_gets_a_new_task_and_the_key_moves(
    db: Database, method: str, conflict: str, status: str
) -> None:
    async with db.client() as cq:
        existing = await make_existing(cq, status)
        ids = await ids_of(cq, method, [{"task": "new", "key": "k", "conflict": conflict}])
        pointee = await cq.get_by_key("k")
        stored = await reread(cq, existing.id)
    assert ids[0] != existing.id
    assert pointee is not None
    assert pointee.id == ids[0]
    assert stored.to_dict() == existing.to_dict()


@both
@pytest.mark.parametrize("status", ["queued", "running"])
async def test_replace_cancels_the_live_task_and_points_the_key_at_the_new_one(
    db: Database, method: str, status: str
) -> None:
    async with db.client() as cq:
        existing = await make_existing(cq, status)
        ids = await ids_of(cq, method, [{"task": "new", "key": "k", "conflict": "replace"}])
        pointee = await cq.get_by_key("k")
        old = await reread(cq, existing.id)
    assert ids[0] != existing.id
    assert pointee is not None
    assert pointee.id == ids[0]
    if status == "queued":
        assert old.status == "canceled"
    else:
        assert (old.status, old.cancel_requested) == ("running", True)


@both
async def test_a_key_used_twice_in_one_batch_gives_the_first_use_twice(
    db: Database, method: str
) -> None:
    async with db.client() as cq:
        ids = await ids_of(
            cq, method, [{"task": "a", "key": "k"}, ("b", {}), {"task": "c", "key": "k"}]
        )
        count = await total(cq)
    assert ids[0] == ids[2]
    assert len(set(ids)) == 2
    assert count == 2


@both
@pytest.mark.parametrize("status", ["queued", "succeeded"])
async def test_reject_on_a_taken_key_raises_and_writes_nothing(
    db: Database, method: str, status: str
) -> None:
    async with db.client() as cq:
        existing = await make_existing(cq, status)
        items = [("first", {}), {"task": "new", "key": "k", "conflict": "reject"}]
        with pytest.raises(AlreadyExists):
            await ids_of(cq, method, items)
        count = await total(cq)
        pointee = await cq.get_by_key("k")
    assert count == 1
    assert pointee is not None
    assert pointee.id == existing.id


BAD_ITEMS: list[tuple[Any, type[Exception]]] = [
    ({"task": "job", "priority": "high"}, InvalidArgument),
    ({"task": "job", "delay_ms": -1}, InvalidArgument),
    ({"task": "job", "conflict": "maybe"}, InvalidArgument),
    ({"task": "job", "colour": "red"}, InvalidArgument),
    ({"payload": {}}, InvalidArgument),
    (("", {}), InvalidArgument),
    ("job", InvalidArgument),
    (("job", {"x": float("nan")}), SerializationError),
    (("job", {"x": object()}), SerializationError),
    ({"task": "job", "metadata": {"m": float("inf")}}, SerializationError),
]


@silent_refusal
@both
@pytest.mark.parametrize(("bad", "error"), BAD_ITEMS)
async def test_a_bad_item_raises_its_typed_error_and_writes_nothing(
    db: Database, method: str, bad: Any, error: type[Exception]
) -> None:
    async with db.client() as cq:
        with sent_statements(db) as sent, pytest.raises(error):
            await ids_of(cq, method, [("good", {}), {"task": "keyed", "key": "k"}, bad])
        assert sent == []
        count = await total(cq)
        pointee = await cq.get_by_key("k")
    assert count == 0
    assert pointee is None


async def test_submit_many_ids_gives_a_hook_callback_the_stored_task(db: Database) -> None:
    seen: list[tuple[str, str]] = []

    def hook(pending: Any) -> Any:
        return lambda task, error: seen.append((task.id, task.status))

    async with db.client() as cq:
        cq.add_submit_hook(hook)
        ids = await cq.submit_many_ids([("a", {}), ("b", {})])
    assert seen == [(ids[0], "queued"), (ids[1], "queued")]


def test_sync_submit_many_ids_returns_the_ids_of_the_stored_tasks(db: Database) -> None:
    with db.sync_client() as cq:
        ids = cq.submit_many_ids([("a", {}), {"task": "b", "key": "k"}, {"task": "c", "key": "k"}])
        names = [task.name for task in (cq.get(task_id) for task_id in ids) if task]
    assert names == ["a", "b", "b"]


@both
async def test_concurrent_batches_over_the_same_keys_store_each_key_once(
    db: Database, method: str
) -> None:
    keys = [f"k{i}" for i in range(50)]
    async with db.client() as first, db.client() as second:

        async def batches(cq: CairnQ, order: list[str]) -> list[list[str]]:
            return [
                await ids_of(cq, method, [{"task": "job", "key": k} for k in order])
                for _ in range(3)
            ]

        answers = await asyncio.gather(batches(first, keys), batches(second, list(reversed(keys))))
        count = await total(first)
    by_key = [dict(zip(keys, ids, strict=True)) for ids in answers[0]]
    by_key += [dict(zip(reversed(keys), ids, strict=True)) for ids in answers[1]]
    assert all(mapping == by_key[0] for mapping in by_key)
    assert count == len(keys)


# A batch of more than one part: ``submit_many_ids`` may build it part by part while it
# writes it (``STREAM_PART`` items at a time, on a backend that streams).
PARTS = 2 * STREAM_PART + 10


class _Heeding:
    """A payload codec that notes, at each payload it encodes, how many of the tapped
    statements were inserts already."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.inserts_seen: list[int] = []

    def encode(self, text: str) -> dict[str, Any]:
        self.inserts_seen.append(sum("insert into cairnq_tasks" in s for s in self.sent))
        return {"$cairnq_enc": "heeding", "text": text}

    def decode(self, stored: dict[str, Any]) -> str:
        return str(stored["text"])


async def test_a_batch_of_many_parts_stores_every_task_in_order(db: Database) -> None:
    async with db.client() as cq:
        ids = await cq.submit_many_ids([("job", {"n": n}) for n in range(PARTS)])
        stored = [await reread(cq, task_id) for task_id in ids]
    assert [task.payload for task in stored] == [{"n": n} for n in range(PARTS)]
    assert ids == sorted(ids)


def test_sync_a_batch_of_many_parts_stores_every_task_in_order(db: Database) -> None:
    with db.sync_client() as cq:
        ids = cq.submit_many_ids([("job", {"n": n}) for n in range(PARTS)])
        payloads = [task.payload for task in (cq.get(task_id) for task_id in ids) if task]
    assert payloads == [{"n": n} for n in range(PARTS)]


@pytest.mark.parametrize("keyed", [False, True])
async def test_a_streaming_backend_sends_a_part_before_it_builds_the_next(
    db: Database, keyed: bool
) -> None:
    codec = _Heeding()
    items: list[Any] = [
        {"task": "job", "payload": {"n": n}, "key": f"k{n}"} if keyed else ("job", {"n": n})
        for n in range(PARTS)
    ]
    async with db.client(codec=codec) as cq:
        with sent_statements(db) as sent:
            codec.sent = sent
            await cq.submit_many_ids(items)
    firsts = [codec.inserts_seen[at] for at in range(0, PARTS, STREAM_PART)]
    # SQLite builds the batch whole before its write transaction begins.
    assert firsts == ([0, 1, 2] if db.kind == "postgres" else [0, 0, 0])


@pytest.mark.parametrize("whole_by", ["a submit hook", "a queue depth limit"])
async def test_a_batch_something_must_see_whole_is_built_before_it_is_written(
    db: Database, whole_by: str
) -> None:
    codec = _Heeding()
    options: dict[str, Any] = {"max_queue_depth": 10 * PARTS} if "depth" in whole_by else {}
    async with db.client(codec=codec, **options) as cq:
        if "hook" in whole_by:
            cq.add_submit_hook(lambda pending: None)
        with sent_statements(db) as sent:
            codec.sent = sent
            await cq.submit_many_ids([("job", {"n": n}) for n in range(PARTS)])
        count = await total(cq)
    firsts = [codec.inserts_seen[at] for at in range(0, PARTS, STREAM_PART)]
    assert (firsts, count) == ([0, 0, 0], PARTS)


@pytest.mark.postgres
async def test_a_batch_in_the_applications_transaction_is_built_before_it_is_written(
    pg_db: Database,
) -> None:
    import psycopg

    codec = _Heeding()
    async with pg_db.client(codec=codec) as cq:
        await cq.open()
        conn = await psycopg.AsyncConnection.connect(pg_db.url, autocommit=True)
        try:
            await conn.execute(f'set search_path to "{pg_db.schema}"')
            with sent_statements(pg_db) as sent:
                codec.sent = sent
                async with conn.transaction():
                    await cq.submit_many_ids([("job", {}) for _ in range(PARTS)], conn=conn)
        finally:
            await conn.close()
        count = await total(cq)
    firsts = [codec.inserts_seen[at] for at in range(0, PARTS, STREAM_PART)]
    assert (firsts, count) == ([0, 0, 0], PARTS)


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (("job", {"x": float("nan")}), SerializationError),
        ({"task": "job", "priority": "high"}, InvalidArgument),
    ],
)
async def test_a_bad_item_in_a_later_part_raises_its_typed_error_and_writes_nothing(
    db: Database, bad: Any, error: type[Exception]
) -> None:
    async with db.client() as cq:
        with pytest.raises(error):
            await cq.submit_many_ids([*(("job", {"n": n}) for n in range(PARTS)), bad])
        count = await total(cq)
    assert count == 0


def test_sync_a_bad_item_in_a_later_part_raises_its_typed_error_and_writes_nothing(
    db: Database,
) -> None:
    with db.sync_client() as cq:
        with pytest.raises(SerializationError):
            cq.submit_many_ids([*(("job", {"n": n}) for n in range(PARTS)), ("job", {"x": NAN})])
        count = sum(sum(by_status.values()) for by_status in cq.stats().values())
    assert count == 0


@pytest.mark.parametrize("key", ["", 7, "a\x00b"])
async def test_a_bad_key_in_a_later_part_is_refused_before_anything_is_sent(
    db: Database, key: Any
) -> None:
    async with db.client() as cq:
        with sent_statements(db) as sent, pytest.raises(InvalidArgument, match="key"):
            await cq.submit_many_ids(
                [*(("job", {}) for _ in range(PARTS)), {"task": "job", "key": key}]
            )
        assert sent == []
        count = await total(cq)
    assert count == 0


def _keyed_parts(tail: list[Any]) -> list[Any]:
    """A batch whose first part holds a keyed item ("first"), then plain items, then ``tail``
    in its last part."""
    head: list[Any] = [{"task": "job", "key": "first"}]
    return [*head, *(("job", {"n": n}) for n in range(PARTS)), *tail]


async def test_a_key_in_a_later_part_is_decided_as_in_a_batch_built_whole(db: Database) -> None:
    async with db.client() as cq:
        live = await cq.submit("old", {}, key="live")
        ids = await cq.submit_many_ids(
            _keyed_parts([{"task": "job", "key": "first"}, {"task": "job", "key": "live"}])
        )
        count = await total(cq)
    assert ids[-2:] == [ids[0], live.id]
    assert count == PARTS + 2


async def test_reject_in_a_later_part_raises_and_writes_nothing(db: Database) -> None:
    async with db.client() as cq:
        await cq.submit("old", {}, key="live")
        with pytest.raises(AlreadyExists):
            await cq.submit_many_ids(
                _keyed_parts([{"task": "job", "key": "live", "conflict": "reject"}])
            )
        count = await total(cq)
        pointee = await cq.get_by_key("first")
    assert (count, pointee) == (1, None)


async def test_replace_in_a_later_part_cancels_the_live_task_and_moves_its_key(
    db: Database,
) -> None:
    async with db.client() as cq:
        live = await cq.submit("old", {}, key="live")
        ids = await cq.submit_many_ids(
            _keyed_parts([{"task": "job", "key": "live", "conflict": "replace"}])
        )
        old = await reread(cq, live.id)
        pointee = await cq.get_by_key("live")
    assert old.status == "canceled"
    assert pointee is not None and pointee.id == ids[-1]


async def test_concurrent_streamed_batches_over_the_same_keys_store_each_key_once(
    db: Database,
) -> None:
    keys = [f"k{i}" for i in range(PARTS)]
    async with db.client() as first, db.client() as second:
        batches = await asyncio.gather(
            first.submit_many_ids([{"task": "job", "key": k} for k in keys]),
            second.submit_many_ids([{"task": "job", "key": k} for k in reversed(keys)]),
        )
        count = await total(first)
    assert batches[0] == batches[1][::-1]
    assert count == PARTS
