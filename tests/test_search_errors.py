"""The index of error text on every backend (``x0026_search_errors.sql``: the text,
scanned, on SQLite; a tsvector under GIN on PostgreSQL): the words a search gives, the
rows written only for tasks whose error is set (and for those that held one before the
migration), removed with the error or the task."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cairnq import CairnQ, InvalidArgument, Retention, Retry, Worker
from cairnq.kernel.retention import RetentionSweeper
from cairnq.testing import FakeClock

from ._db import Database
from .test_hostile import raw


def ids(tasks: list[Any]) -> list[str]:
    return [t.id for t in tasks]


def indexed(db: Database) -> list[str]:
    """The task ids the error index holds."""
    return sorted(str(r[0]) for r in raw(db, "select task_id from cairnq_search_errors"))


async def fail_one(cq: CairnQ, message: str, *, retries: int = 0) -> Any:
    """A task whose only attempt (of ``retries + 1``) raises ``ValueError(message)``,
    drained; with ``retries`` its error stays on the queued task."""
    worker = Worker(cq)

    @worker.task(
        "charge",
        retry=Retry(max_attempts=retries + 1, backoff="constant", base="1h", jitter="none"),
    )
    async def charge(ctx: Any, payload: dict[str, Any]) -> None:
        raise ValueError(message)

    task = await cq.submit("charge", {})
    await worker.run(until_idle=True)
    return task


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("issuer card", True),
        ("CARD declined", True),
        ("valueerror", True),
        ("card-declined", True),
        ("declin*", True),
        ("declin", False),
        ("card refused", False),
    ],
    ids=["any-order", "any-case", "type", "punctuation", "prefix", "no-substring", "all-words"],
)
async def test_error_text_matches_every_word_as_a_whole_word_or_a_prefix(
    db: Database, text: str, found: bool
) -> None:
    async with db.client() as cq:
        task = await fail_one(cq, "Card DECLINED by issuer")
        result = await cq.search.find(error=text)
    assert ids(result) == ([task.id] if found else [])


async def test_a_drain_without_failures_writes_nothing_to_the_error_index(db: Database) -> None:
    async with db.client() as cq:
        worker = Worker(cq)

        @worker.task("ok")
        async def ok(ctx: Any, payload: Any) -> None:
            return None

        for _ in range(3):
            await cq.submit("ok")
        await worker.run(until_idle=True)
    assert indexed(db) == []


async def test_a_failed_attempt_that_will_be_retried_is_found_by_its_error(db: Database) -> None:
    async with db.client() as cq:
        task = await fail_one(cq, "gateway timeout", retries=1)
        assert (await cq.get(task.id)).status == "queued"
        assert ids(await cq.search.find(error="gateway timeout")) == [task.id]
    assert indexed(db) == [task.id]


async def test_a_retried_tasks_cleared_error_leaves_the_index(db: Database) -> None:
    async with db.client() as cq:
        task = await fail_one(cq, "gateway timeout")
        await cq.retry(task.id)
        assert await cq.search.find(error="gateway") == []
    assert indexed(db) == []


async def test_a_purged_tasks_error_leaves_the_index_with_it(db: Database) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        gone = await fail_one(cq, "disk full")
        clock.advance(1)  # a purge takes tasks that ended before its own millisecond
        assert await cq.purge(older_than_ms=0, status="failed") == [gone.id]
        assert await cq.search.find(error="disk full") == []
    assert indexed(db) == []


async def test_retention_removes_a_tasks_error_from_the_index(db: Database) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        old = await fail_one(cq, "disk full")
        clock.advance(2 * 3_600_000)
        assert await RetentionSweeper(cq.backend, Retention(3_600_000)).sweep() == 1
        assert await cq.search.find(error="disk") == []
    assert old.id not in indexed(db)


async def test_error_words_narrow_a_tag_search(db: Database) -> None:
    async with db.client() as cq:
        worker = Worker(cq)

        @worker.task("charge", max_attempts=1)
        async def charge(ctx: Any, payload: dict[str, Any]) -> None:
            raise ValueError(payload["why"])

        wanted = await cq.submit("charge", {"why": "card declined"}, tags=["billing"])
        await cq.submit("charge", {"why": "card declined"}, tags=["other"])
        await cq.submit("charge", {"why": "card expired"}, tags=["billing"])
        await worker.run(until_idle=True)
        found = await cq.search.find(error="declined card", tags="billing")
    assert ids(found) == [wanted.id]


async def test_an_error_text_without_a_word_is_refused(db: Database) -> None:
    async with db.client() as cq:
        with pytest.raises(InvalidArgument, match="must hold a word"):
            await cq.search.find(error="--- * ---")


async def test_without_the_error_index_error_text_is_matched_as_a_substring(
    db: Database,
) -> None:
    from .test_without_extensions import migrate_only

    migrate_only(db, lambda name: name != "x0026_search_errors.sql")
    async with db.client(migrate=False) as cq:
        task = await fail_one(cq, "Card DECLINED by issuer")
        assert ids(await cq.search.find(error="card declin")) == [task.id]
        assert ids(await cq.search.find(error="declin", tags=None)) == [task.id]


async def test_a_task_failed_before_the_error_index_is_found_once_it_is_applied(
    db: Database,
) -> None:
    from .test_without_extensions import migrate_only

    migrate_only(db, lambda name: name != "x0026_search_errors.sql")
    async with db.client(migrate=False) as cq:
        task = await fail_one(cq, "Card DECLINED by issuer")
    async with db.client() as cq:
        assert ids(await cq.search.find(error="declined card")) == [task.id]
    assert indexed(db) == [task.id]


async def test_a_huge_error_a_reference_sdk_writes_is_recorded_and_its_first_words_found(
    db: Database,
) -> None:
    # 1.3 MB of distinct words (cairnq cuts a message it writes; another SDK may not):
    # more than a PostgreSQL tsvector holds.
    message = " ".join(f"w{i}" for i in range(190_000))
    assert len(message) > 1_300_000
    envelope = json.dumps({"type": "ValueError", "message": message})
    cast = "?" if db.kind == "sqlite" else "cast(? as jsonb)"
    async with db.client() as cq:
        task = await fail_one(cq, "short")
        raw(db, f"update cairnq_tasks set error = {cast} where id = ?", (envelope, task.id))
        stored = await cq.get(task.id)
        assert stored.error is not None and stored.error["message"] == message
        assert ids(await cq.search.find(error="w0 w1 w9999")) == [task.id]
        # Only the first 100,000 characters of `type: message` are indexed.
        assert await cq.search.find(error="w189999") == []


@pytest.mark.parametrize(
    ("text", "on_sqlite", "on_postgres"),
    [("ve", True, False), ("école", False, True), ("naïve", True, True)],
    ids=["a-letter-beyond-ascii-separates", "a-capital-beyond-ascii-is-lowered", "as-written"],
)
async def test_letters_beyond_ascii_are_read_as_each_backend_documents(
    db: Database, text: str, on_sqlite: bool, on_postgres: bool
) -> None:
    async with db.client() as cq:
        task = await fail_one(cq, "naïve ÉCOLE")
        found = ids(await cq.search.find(error=text))
    assert found == ([task.id] if (on_sqlite if db.kind == "sqlite" else on_postgres) else [])


async def test_the_error_index_adds_no_virtual_table_to_a_sqlite_database(
    db: Database,
) -> None:
    if db.kind != "sqlite":
        pytest.skip("a SQLite database's schema")
    async with db.client():
        pass
    virtual = raw(db, "select name from sqlite_master where sql like '%virtual table%'")
    tasks_triggers = raw(
        db, "select sql from sqlite_master where type = 'trigger' and tbl_name = 'cairnq_tasks'"
    )
    assert virtual == []
    assert tasks_triggers and not any("fts" in str(sql).lower() for (sql,) in tasks_triggers)
