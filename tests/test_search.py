"""Tags and search on every backend: ``submit(tags=...)``, declared search fields
(``Search(fields=...)``), ``cq.search.find`` by tag, field, error text and time range,
the terms going with their task, every bad value refused with nothing written, and
nothing more written by a submit that uses none of it."""

from __future__ import annotations

import datetime
import json
import re
from typing import Any

import pytest

from cairnq import (
    AlreadyExists,
    CairnQ,
    InvalidArgument,
    Retention,
    SchemaIncomplete,
    SyncCairnQ,
    TaskDef,
    Worker,
)
from cairnq.dashboard import create_app
from cairnq.extensions import Search
from cairnq.extensions.search._model import parse
from cairnq.kernel.retention import RetentionSweeper
from cairnq.testing import FakeClock

from ._db import Database
from ._statements import sent_statements
from .test_cli import run_on
from .test_dashboard import http

FIELDS = {"customer": "metadata.customer", "order": "payload.order.id", "vip": "metadata.vip"}


def searching(db: Database, **options: Any) -> CairnQ:
    return db.client(extensions=[Search(fields=FIELDS)], **options)


def shapes(sent: list[str]) -> list[str]:
    """The statements sent, without the ids and numbers that differ from one submit to
    the next."""
    return [re.sub(r"task_[0-9A-Z]{26}|\d+", "?", statement) for statement in sent]


def ids(tasks: list[Any]) -> list[str]:
    return [t.id for t in tasks]


async def count_tasks(cq: CairnQ) -> int:
    return sum(sum(by.values()) for by in (await cq.stats()).values())


# --- tags -----------------------------------------------------------------------------------


async def test_a_submits_tags_are_stored_with_its_task(db: Database) -> None:
    async with db.client() as cq:
        task = await cq.submit("job", tags=["billing", "eu", "billing"])
        terms = await cq.search.of(task.id)
    assert (terms.tags, terms.fields) == (("billing", "eu"), {})


async def test_a_search_by_tag_finds_the_tasks_holding_it_newest_first(db: Database) -> None:
    async with db.client() as cq:
        first = await cq.submit("job", tags=["billing"])
        await cq.submit("job", tags=["shipping"])
        second = await cq.submit("job", tags=["billing", "eu"])
        found = await cq.search.find(tags="billing")
    assert ids(found) == [second.id, first.id]


async def test_a_search_by_several_tags_finds_only_the_tasks_holding_them_all(
    db: Database,
) -> None:
    async with db.client() as cq:
        await cq.submit("job", tags=["billing"])
        both = await cq.submit("job", tags=["eu", "billing"])
        await cq.submit("job", tags=["eu"])
        found = await cq.search.find(tags=["billing", "eu"])
    assert ids(found) == [both.id]


async def test_a_tag_search_narrows_by_status_queue_and_name(db: Database) -> None:
    async with db.client() as cq:
        await cq.submit("job", tags=["t"], queue="a")
        wanted = await cq.submit("other", tags=["t"], queue="b")
        canceled = await cq.submit("other", tags=["t"], queue="b")
        await cq.cancel(canceled.id)
        found = await cq.search.find(tags="t", queue="b", name="other", status="queued")
    assert ids(found) == [wanted.id]


async def test_a_reused_key_keeps_the_tags_of_its_task(db: Database) -> None:
    async with db.client() as cq:
        task = await cq.submit("job", key="k", tags=["first"])
        again = await cq.submit("job", key="k", tags=["second"])
        terms = await cq.search.of(task.id)
        found = await cq.search.find(tags="second")
    assert (again.id, terms.tags, found) == (task.id, ("first",), [])


async def test_tags_go_with_a_task_submitted_with_a_policy_or_dependencies(db: Database) -> None:
    async with db.client() as cq:
        first = await cq.submit("job", tags=["path"], unique_for="1h", key="u")
        after = await cq.submit("job", tags=["path"], depends_on=[first])
        found = await cq.search.find(tags="path")
    assert ids(found) == [after.id, first.id]


async def test_a_refused_submit_stores_no_tags(db: Database) -> None:
    async with db.client() as cq:
        await cq.submit("job", key="k", tags=["kept"])
        with pytest.raises(AlreadyExists):
            await cq.submit("job", key="k", conflict="reject", tags=["refused"])
        assert await cq.search.find(tags="refused") == []


async def test_a_tasks_tags_go_with_it_when_it_is_purged(db: Database) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        gone = await cq.submit("job", tags=["t"])
        kept = await cq.submit("job", tags=["t"])
        await cq.cancel(gone.id)
        clock.advance(1)  # a purge takes tasks that ended before its own millisecond
        assert await cq.purge(older_than_ms=0, status="canceled") == [gone.id]
        assert (await cq.search.of(gone.id)).tags == ()
        assert ids(await cq.search.find(tags="t")) == [kept.id]


# --- declared search fields -----------------------------------------------------------------


async def test_declared_fields_are_read_from_the_metadata_and_the_payload(db: Database) -> None:
    async with searching(db) as cq:
        task = await cq.submit(
            "job", {"order": {"id": 42}}, metadata={"customer": "acme", "vip": True}
        )
        terms = await cq.search.of(task.id)
    assert terms.fields == {"customer": "acme", "order": "42", "vip": "true"}


async def test_a_search_by_declared_field_matches_its_value_as_given(db: Database) -> None:
    async with searching(db) as cq:
        acme = await cq.submit("job", {"order": {"id": 42}}, metadata={"customer": "acme"})
        await cq.submit("job", {"order": {"id": 43}}, metadata={"customer": "acme"})
        await cq.submit("job", {"order": {"id": 42}}, metadata={"customer": "other"})
        found = await cq.search.find(where={"customer": "acme", "order": 42})
    assert ids(found) == [acme.id]


async def test_a_field_the_task_lacks_or_holds_no_scalar_in_records_nothing(db: Database) -> None:
    async with searching(db) as cq:
        task = await cq.submit("job", {"order": {"id": [1, 2]}}, metadata={"other": 1})
        terms = await cq.search.of(task.id)
    assert terms.fields == {}


async def test_a_submit_that_uses_no_search_writes_nothing_more(db: Database) -> None:
    async with db.client() as plain_cq, searching(db) as cq:
        await plain_cq.submit("warm")
        await cq.submit("warm")
        with sent_statements(db) as plain:
            await plain_cq.submit("job", {"order": {}}, metadata={"customer": None})
        with sent_statements(db) as declared:
            await cq.submit("job", {"order": {}}, metadata={"customer": None})
    assert shapes(declared) == shapes(plain)


# --- error text and time --------------------------------------------------------------------


async def test_a_search_by_error_text_finds_the_failed_task_in_any_case(db: Database) -> None:
    async with db.client() as cq:
        worker = Worker(cq)

        @worker.task("charge", max_attempts=1)
        async def charge(ctx: Any, payload: dict[str, Any]) -> None:
            if payload["declined"]:
                raise ValueError("Card DECLINED by issuer")

        declined = await cq.submit("charge", {"declined": True})
        await cq.submit("charge", {"declined": False})
        await worker.run(until_idle=True)
        found = await cq.search.find(error="card declined")
        by_type = await cq.search.find(error="valueerror", status="failed")
    assert ids(found) == ids(by_type) == [declined.id]


async def test_a_search_by_time_range_finds_the_tasks_created_within_it(db: Database) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        await cq.submit("job", tags=["t"])
        clock.advance(600_000)
        middle = await cq.submit("job", tags=["t"])
        clock.advance(600_000)
        await cq.submit("job", tags=["t"])
        now = datetime.datetime.fromtimestamp(clock.now_ms() / 1000, datetime.timezone.utc)
        window = {"since": now - datetime.timedelta(minutes=15), "until": "5m"}
        by_tag = await cq.search.find(tags="t", **window)
        by_time = await cq.search.find(**window)
    assert ids(by_tag) == ids(by_time) == [middle.id]


async def test_a_search_pages_on_with_the_last_id_of_the_page_before(db: Database) -> None:
    async with db.client() as cq:
        tasks = [await cq.submit("job", tags=["t"]) for _ in range(5)]
        first = await cq.search.find(tags="t", limit=2)
        second = await cq.search.find(tags="t", limit=2, before=first[-1].id)
    newest = sorted(ids(tasks), reverse=True)
    assert (ids(first), ids(second)) == (newest[:2], newest[2:4])


def test_the_blocking_client_searches_too(db: Database) -> None:
    with db.sync_client(extensions=[Search(fields=FIELDS)]) as cq:
        task = cq.submit("job", metadata={"customer": "acme"}, tags=["t"])
        assert isinstance(cq, SyncCairnQ)
        assert ids(cq.search.find(tags="t", where={"customer": "acme"})) == [task.id]


# --- bad values -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tags", "message"),
    [
        ("billing", "tags must be a list of strings"),
        ([1], "each tag must be a string"),
        (["two words"], "without whitespace"),
        ([""], "1 to 64 characters"),
        (["x" * 65], "1 to 64 characters"),
        ([f"t{i}" for i in range(33)], "at most 32 tags"),
    ],
)
async def test_a_submit_with_bad_tags_is_refused_with_nothing_written(
    db: Database, tags: Any, message: str
) -> None:
    async with db.client() as cq:
        with pytest.raises(InvalidArgument, match=message):
            await cq.submit("job", tags=tags)
        assert await count_tasks(cq) == 0


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (["customer"], "fields must be a dict"),
        ({"two words": "metadata.x"}, "an identifier"),
        ({"customer": 1}, "its path must be a string"),
        ({"customer": "customer"}, "starts with 'metadata.' or 'payload.'"),
        ({"customer": "metadata."}, "starts with 'metadata.' or 'payload.'"),
        ({"customer": "result.x"}, "starts with 'metadata.' or 'payload.'"),
    ],
)
def test_a_bad_search_field_declaration_is_refused(fields: Any, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        Search(fields=fields)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"tags": [3]}, "each tag must be a string"),
        ({"where": ["customer"]}, "where must be a dict"),
        ({"where": {"customer": ["a"]}}, "a value is a string, a number or a boolean"),
        ({"where": {"not a name": "a"}}, "an identifier"),
        ({"error": ""}, "error must be a non-empty string"),
        ({"since": datetime.datetime(2026, 1, 1)}, "naive"),
        ({"since": "1h", "until": "2h"}, "since must come before until"),
        ({"until": "soon"}, "until"),
        ({"status": "done"}, "status must be one of"),
        ({"queue": 3}, "queue must be a string"),
        ({"before": 3}, "before must be a string"),
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
    ],
)
async def test_a_bad_search_is_refused_before_it_reaches_the_database(
    db: Database, options: dict[str, Any], message: str
) -> None:
    async with db.client() as cq:
        await cq.submit("warm")
        with sent_statements(db) as sent, pytest.raises(InvalidArgument, match=message):
            await cq.search.find(**options)
    assert sent == []


# --- the command line -----------------------------------------------------------------------


def test_cairnq_ls_searches_by_tag_and_field_and_get_shows_them(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    with db.sync_client(extensions=[Search(fields=FIELDS)]) as cq:
        task = cq.submit("job", metadata={"customer": "acme"}, tags=["billing"])
        cq.submit("job", metadata={"customer": "other"}, tags=["billing"])
    listed = run_on(db, capsys, "ls", "--tag", "billing", "--where", "customer=acme", "--jsonl")
    shown = run_on(db, capsys, "get", task.id)
    assert [json.loads(line)["id"] for line in listed.lines] == [task.id]
    got = json.loads(shown.out)
    assert (got["tags"], got["search_fields"]) == (["billing"], {"customer": "acme"})


def test_cairnq_ls_refuses_a_where_without_a_value(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_on(db, capsys, "ls", "--where", "customer")
    assert result.code != 0 and "--where takes FIELD=VALUE" in result.err


# --- the search box ---------------------------------------------------------------------------


def test_the_search_box_syntax_reads_as_finds_keywords() -> None:
    text = 'tag:billing #eu customer=acme error:"card declined" status:failed since:1d'
    assert parse(text) == {
        "tags": ["billing", "eu"],
        "where": {"customer": "acme"},
        "error": "card declined",
        "status": "failed",
        "since": "1d",
    }


def test_words_alone_in_the_search_box_are_error_text() -> None:
    assert parse("card declined queue:emails") == {"error": "card declined", "queue": "emails"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('error:"open', "unbalanced quote"),
        ("status:failed status:queued", "given twice"),
        ("tag:", "needs a value"),
        ("error:x loose", "words alone are error text"),
    ],
)
def test_a_bad_search_box_text_is_refused(text: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        parse(text)


async def test_a_search_by_the_box_syntax_finds_what_find_does(db: Database) -> None:
    async with searching(db) as cq:
        task = await cq.submit("job", metadata={"customer": "acme"}, tags=["billing"])
        await cq.submit("job", metadata={"customer": "other"}, tags=["billing"])
        found = await cq.search.query("tag:billing customer=acme since:1h")
    assert ids(found) == [task.id]


async def test_the_dashboards_search_page_lists_what_its_box_finds(db: Database) -> None:
    async with searching(db) as cq:
        task = await cq.submit("job", metadata={"customer": "acme"}, tags=["billing"])
        other = await cq.submit("job", metadata={"customer": "other"}, tags=["billing"])
        async with http(create_app(cq)) as client:
            page = await client.get("/search", params={"q": "#billing customer=acme"})
            bad = await client.get("/search", params={"q": "status:done"})
            shown = await client.get("/task", params={"id": task.id})
    assert page.status_code == 200 and 'href="/search"' in page.text
    assert f'data-task="{task.id}"' in page.text and other.id not in page.text
    assert "tag:billing" in page.text  # the syntax is shown
    assert bad.status_code == 400 and "status must be one of" in bad.text
    assert 'class="search-tags"' in shown.text and "acme" in shown.text


async def test_a_taskdefs_tags_tag_its_submits_that_give_none(db: Database) -> None:
    billing = TaskDef("charge", options={"tags": ["billing"]})
    async with db.client() as cq:
        default = await cq.submit(billing)
        own = await cq.submit(billing, tags=["manual"])
        assert (await cq.search.of(default.id)).tags == ("billing",)
        assert (await cq.search.of(own.id)).tags == ("manual",)


async def test_a_taskdef_with_bad_tags_is_refused_with_nothing_written(db: Database) -> None:
    async with db.client() as cq:
        with pytest.raises(InvalidArgument, match="tags must be a list of strings"):
            await cq.submit(TaskDef("charge", options={"tags": "billing"}))
        assert await count_tasks(cq) == 0


# --- transactions, retention and a database without the table --------------------------------


def test_tags_rolled_back_with_the_applications_transaction_are_gone(pg_db: Database) -> None:
    import psycopg

    with psycopg.connect(pg_db.url) as conn, pg_db.sync_client() as cq:
        cq.stats()
        conn.execute(f'set search_path to "{pg_db.schema}"')
        conn.commit()
        gone = cq.submit("job", tags=["t"], conn=conn)
        conn.rollback()
        kept = cq.submit("job", tags=["t"], conn=conn)
        conn.commit()
        assert cq.search.of(gone.id).tags == ()
        assert ids(cq.search.find(tags="t")) == [kept.id]


async def test_retention_removes_a_tasks_tags_with_it(db: Database) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        old = await cq.submit("job", tags=["t"])
        await cq.cancel(old.id)
        clock.advance(2 * 3_600_000)
        new = await cq.submit("job", tags=["t"])
        assert await RetentionSweeper(cq.backend, Retention(3_600_000)).sweep() == 1
        assert (await cq.search.of(old.id)).tags == ()
        assert ids(await cq.search.find(tags="t")) == [new.id]


async def test_a_tagged_submit_on_a_database_without_the_table_says_what_is_missing(
    db: Database,
) -> None:
    from .test_without_extensions import migrate_only

    migrate_only(db, lambda name: name != "x0024_search.sql")
    async with db.client(migrate=False) as cq:
        with pytest.raises(SchemaIncomplete, match=r"x0024_search\.sql"):
            await cq.submit("job", tags=["t"])
        with pytest.raises(SchemaIncomplete, match=r"x0024_search\.sql"):
            await cq.search.find(tags="t")
        assert await cq.stats() == {}
        assert (await cq.submit("job")).status == "queued"
        assert len(await cq.search.find(since="1h")) == 1


# --- batches --------------------------------------------------------------------------------


async def test_a_batchs_tags_and_declared_fields_go_to_each_member(db: Database) -> None:
    async with searching(db) as cq:
        batch = await cq.batches.submit(
            [("job", {"order": {"id": 1}}), ("job", {"order": {"id": 2}})],
            on_complete="report",
            close=False,
            tags=["import"],
        )
        added = await cq.batches.add(batch.id, [("job", {})], tags=["late"])
        tagged = await cq.search.find(tags="import")
        second = await cq.search.find(where={"order": 2})
        late = await cq.search.find(tags="late")
    assert sorted(ids(tagged)) == sorted(ids(batch.tasks))
    assert ids(second) == [batch.tasks[1].id]
    assert ids(late) == ids(added)


async def test_a_batch_with_bad_tags_is_refused_with_nothing_written(db: Database) -> None:
    async with db.client() as cq:
        with pytest.raises(InvalidArgument, match="tags must be a list of strings"):
            await cq.batches.submit([("job", {})], tags="import")
        assert await count_tasks(cq) == 0
