"""Hostile input, end to end, on both backends.

Every value either is rejected at the SDK boundary with a typed error
(``SerializationError`` for JSON, ``InvalidArgument`` for text) and writes
nothing, or travels submit -> claim by a real ``Worker`` -> result unchanged.
Rows another writer left behind that Python cannot read fail their task with
``invalid_payload`` while the worker keeps serving. Where the two backends
store JSON differently (``jsonb`` normalises numbers and key order), the
difference is pinned here.

``tests/test_validation.py`` and ``tests/test_json.py`` cover the codec and
the submit boundary one value at a time; this file takes the values through
the worker, through every other entry point, and through rows written behind
cairnq's back.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import pytest

from cairnq import (
    AlreadyExists,
    CairnQ,
    InvalidArgument,
    SerializationError,
    SyncCairnQ,
    Task,
    TaskContext,
    TaskDef,
    Worker,
    migrate,
)
from cairnq.backends.postgres import PostgresBackend
from cairnq.testing import FakeClock

from ._db import Database
from ._statements import sent_statements, silent_refusal

MIB = 1024 * 1024
WAIT = {"timeout_ms": 30_000, "poll_ms": 20, "max_poll_ms": 50}
PROTOCOL_TABLES = {"cairnq_tasks", "cairnq_task_keys", "cairnq_meta", "cairnq_migrations"}


# --- helpers -------------------------------------------------------------------------------


def canon(value: Any) -> str:
    """A text that tells apart everything a JSON round trip may change: types, -0.0, digits."""
    return json.dumps(value, sort_keys=True, ensure_ascii=True, allow_nan=True)


def nested(levels: int, *, dicts: bool = False) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = {"k": value} if dicts else [value]
    return value


def varied_text(size: int) -> str:
    """ASCII text of exactly ``size`` bytes holding quotes, %, backslashes and braces."""
    return "".join(chr(33 + (i * 7919 + i // 94) % 94) for i in range(size))


def raw(db: Database, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Run SQL behind cairnq's back, as another writer would (``?`` placeholders)."""
    if db.kind == "sqlite":
        assert db.path is not None
        conn = sqlite3.connect(db.path, timeout=10)
        try:
            with conn:
                return conn.execute(statement, tuple(params)).fetchall()
        finally:
            conn.close()
    import psycopg
    from psycopg import sql

    with psycopg.connect(db.url, autocommit=True) as pg:
        pg.execute(sql.SQL("set search_path to {}").format(sql.Identifier(db.schema or "")))
        cur = pg.execute(statement.replace("?", "%s"), tuple(params))
        return cur.fetchall() if cur.description else []


def overwrite_payload(db: Database, task_id: str, text: str) -> None:
    cast = "" if db.kind == "sqlite" else "::jsonb"
    raw(db, f"update cairnq_tasks set payload = ?{cast} where id = ?", (text, task_id))


def stored_error(db: Database, task_id: str) -> Any:
    """The error column read raw (``get`` would decode the unreadable payload too)."""
    [(text,)] = raw(db, "select cast(error as text) from cairnq_tasks where id = ?", (task_id,))
    return json.loads(text)


def tables(db: Database) -> set[str]:
    if db.kind == "sqlite":
        rows = raw(db, "select name from sqlite_master where type = 'table'")
    else:
        rows = raw(db, "select tablename from pg_tables where schemaname = ?", (db.schema,))
    return {str(r[0]) for r in rows}


async def snapshot(cq: CairnQ) -> list[dict[str, Any]]:
    return sorted((t.to_dict() for t in await cq.list(limit=10_000)), key=lambda d: d["id"])


async def wait_for_status(cq: CairnQ, task_id: str, status: str) -> None:
    """Poll ``get_status`` (it never decodes JSON) until the task has ``status``."""
    import asyncio

    for _ in range(1500):
        ref = await cq.get_status(task_id)
        if ref is not None and ref.status == status:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"task {task_id} never became {status}")


def echo_worker(db: Database, seen: dict[str, Any], **options: Any) -> Worker:
    """A worker whose ``echo`` handler records the payload it was given and returns it."""
    worker = db.worker(poll_interval_ms=20, **options)

    @worker.task("echo")
    async def echo(ctx: TaskContext, payload: Any) -> Any:
        seen[ctx.task_id] = payload
        return payload

    return worker


async def echo_all(db: Database, payloads: Sequence[Any]) -> tuple[list[Task], dict[str, Any]]:
    """Submit each payload to ``echo``, let a real worker run them all, return the settled tasks."""
    seen: dict[str, Any] = {}
    worker = echo_worker(db, seen)
    async with db.client() as cq, worker.background():
        submitted = [await cq.submit("echo", p) for p in payloads]
        done = [await cq.wait(t.id, **WAIT) for t in submitted]
    await worker.close()
    return done, seen


# --- JSON values that round-trip through a worker -----------------------------------------

ROUND_TRIPS = [
    pytest.param(
        [2**53 + 1, -(2**53) - 1, 2**63 - 1, -(2**63), -(2**63) - 1, 2**64, 2**64 + 1, 10**300],
        id="integers-past-2**53-and-64-bits",
    ),
    pytest.param(10**999, id="a-1000-digit-integer"),
    pytest.param(
        [0.1 + 0.2, 1 / 3, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308],
        id="floats-at-the-edges-of-double",
    ),
    pytest.param([1e16, 1e21, 1e22, 2.0**53, 2.0**64, 123456789.12345679], id="floats-as-integers"),
    pytest.param({"a": 1, "b": 1.0, "c": True, "d": None, "e": "1"}, id="types-kept-apart"),
    pytest.param(nested(64), id="lists-nested-64"),
    pytest.param(nested(64, dicts=True), id="dicts-nested-64"),
    pytest.param(
        {"\"'; DROP TABLE cairnq_tasks; --": "%s %I {} $1 $$ \\", "🚀": "مرحبا\u202e"},
        id="hostile-text-in-keys-and-values",
    ),
    pytest.param({"C:\\u0000": "\\u0000", "\\ud800": "\\\\"}, id="escape-lookalikes"),
    pytest.param("\U0001f600\ufeff\u200d\uffff\U0010ffff", id="non-bmp-bom-zwj-nonchars"),
    pytest.param(varied_text(1024), id="1-kb"),
]


@pytest.mark.parametrize("payload", ROUND_TRIPS)
async def test_json_values_reach_the_handler_and_come_back_unchanged(
    db: Database, payload: Any
) -> None:
    [done], seen = await echo_all(db, [payload])
    assert done.status == "succeeded"
    assert canon(seen[done.id]) == canon(payload)
    assert canon(done.payload) == canon(payload)
    assert canon(done.result) == canon(payload)


async def test_negative_zero_reads_back_as_positive_zero_on_every_backend(db: Database) -> None:
    # PostgreSQL's numeric has no negative zero, so -0.0 cannot survive jsonb; the
    # encoder writes 0.0 on every backend so that both read back the same value.
    payload = [-0.0, {"z": -0.0}, -0.05, -0.0001, "-0.0"]
    [done], seen = await echo_all(db, [payload])
    expected = [0.0, {"z": 0.0}, -0.05, -0.0001, "-0.0"]
    for value in (seen[done.id], done.payload, done.result):
        assert canon(value) == canon(expected)
        assert math.copysign(1.0, value[0]) == 1.0


async def test_object_key_order_is_kept_on_sqlite_and_normalised_by_jsonb(db: Database) -> None:
    # Equal as dicts on both backends; jsonb re-orders keys (shorter first, then bytewise).
    payload = {"b": 1, "ccc": 2, "a": 3, "dd": 4}
    [done], seen = await echo_all(db, [payload])
    assert seen[done.id] == done.result == payload
    expected = list(payload) if db.kind == "sqlite" else ["a", "b", "dd", "ccc"]
    assert list(seen[done.id]) == expected
    assert list(done.result) == expected


async def test_a_payload_of_exactly_the_default_1_mib_limit_runs_and_returns_whole(
    db: Database,
) -> None:
    payload = "x" * (MIB - 2)  # the two quotes make it exactly 1 MiB encoded
    [done], seen = await echo_all(db, [payload])
    assert done.status == "succeeded"
    assert seen[done.id] == payload
    assert done.result == payload


@silent_refusal
async def test_a_payload_one_byte_over_the_default_limit_is_rejected_at_submit(
    db: Database,
) -> None:
    async with db.client() as cq:
        with sent_statements(db) as sent:
            with pytest.raises(SerializationError, match=f"{MIB + 1} bytes encoded"):
                await cq.submit("echo", "x" * (MIB - 1))
            with pytest.raises(SerializationError, match=f"{MIB + 1} bytes encoded"):
                await cq.submit_many([("echo", {}), ("echo", "x" * (MIB - 1))])
        assert sent == []
        assert await cq.stats() == {}


# --- JSON values that are refused at submit ---------------------------------------------

REFUSED = [
    pytest.param(float("1e999"), id="1e999-is-inf"),
    pytest.param(-float("1e999"), id="minus-1e999"),
    pytest.param({"x": [float("nan")]}, id="nan-deep-in-a-value"),
    pytest.param(10**5000, id="integer-over-pythons-4300-digit-limit"),
    pytest.param(Decimal("3.14159265358979323846"), id="decimal"),
    pytest.param(Decimal("NaN"), id="decimal-nan"),
    pytest.param(1 + 2j, id="complex"),
    pytest.param({"ok": {"deeper": ["\udfff"]}}, id="lone-low-surrogate-in-a-value"),
    pytest.param({"ok": {"a\udc80b": 1}}, id="lone-surrogate-in-a-nested-key"),
    pytest.param({"ok": {"k": "\x00"}}, id="nul-in-a-value"),
    pytest.param({"ok": {"\x00": 1}}, id="nul-in-a-nested-key"),
    pytest.param(nested(65), id="lists-nested-65"),
    pytest.param(nested(65, dicts=True), id="dicts-nested-65"),
    pytest.param(nested(5000), id="nested-past-python-recursion"),
]


@silent_refusal
@pytest.mark.parametrize("payload", REFUSED)
async def test_values_json_cannot_carry_are_refused_by_every_submit_path(
    db: Database, payload: Any
) -> None:
    async with db.client() as cq:
        with sent_statements(db) as sent:
            with pytest.raises(SerializationError, match=r"^payload "):
                await cq.submit("echo", payload)
            with pytest.raises(SerializationError, match=r"^payload "):
                await cq.submit("echo", payload, key="k", conflict="replace")
            with pytest.raises(SerializationError, match=r"^payload "):
                await cq.submit_many([("echo", {"fine": 1}), ("echo", payload)])
            with pytest.raises(SerializationError, match=r"^metadata "):
                await cq.submit("echo", {}, metadata={"m": payload})
        assert sent == []
        assert await cq.stats() == {}
        assert await cq.get_by_key("k") is None
    with db.sync_client() as sync_cq:
        with sent_statements(db) as sent, pytest.raises(SerializationError, match=r"^payload "):
            sync_cq.submit("echo", payload)
        assert sent == []
        assert sync_cq.stats() == {}


async def test_a_child_submit_with_a_refused_payload_raises_in_the_handler_and_writes_nothing(
    db: Database,
) -> None:
    worker = db.worker(poll_interval_ms=20)
    raised: list[str] = []

    @worker.task
    async def parent(ctx: TaskContext, payload: Any) -> str:
        try:
            await ctx.submit("child", {"x": float("nan")})
        except SerializationError as exc:
            raised.append(type(exc).__name__)
        return "parent-done"

    async with db.client() as cq, worker.background():
        task = await cq.submit("parent", {})
        done = await cq.wait(task.id, **WAIT)
        children = await cq.list(name="child")
    await worker.close()
    assert raised == ["SerializationError"]
    assert (done.status, done.result) == ("succeeded", "parent-done")
    assert children == []


RESULTS_REFUSED: list[tuple[str, Callable[[], Any]]] = [
    ("nan", lambda: float("nan")),
    ("inf", lambda: {"x": float("inf")}),
    ("1e999", lambda: [float("1e999")]),
    ("lone-surrogate-value", lambda: {"x": "\ud800"}),
    ("lone-surrogate-key", lambda: {"\ud800": 1}),
    ("nul-value", lambda: ["a\x00b"]),
    ("nul-key", lambda: {"\x00": 1}),
    ("nested-65", lambda: nested(65)),
    ("huge-integer", lambda: 10**5000),
    ("decimal", lambda: Decimal("1.5")),
    ("over-1-mib", lambda: "y" * (MIB - 1)),
]


async def test_a_result_json_cannot_carry_fails_its_task_once_and_the_worker_carries_on(
    db: Database,
) -> None:
    worker = db.worker(poll_interval_ms=20)
    makers = dict(RESULTS_REFUSED)

    @worker.task
    async def produce(ctx: TaskContext, payload: str) -> Any:
        return makers[payload]() if payload in makers else "fine"

    async with db.client() as cq, worker.background():
        bad = {case: await cq.submit("produce", case, max_attempts=3) for case in makers}
        good = await cq.submit("produce", "good")
        done = {case: await cq.wait(t.id, **WAIT) for case, t in bad.items()}
        after = await cq.wait(good.id, **WAIT)
    await worker.close()
    for case, task in done.items():
        assert (case, task.status, task.attempt) == (case, "failed", 1)
        assert task.error is not None
        assert (task.error["code"], task.error["retryable"]) == ("unserializable_result", False)
        assert task.result is None
    assert (after.status, after.result) == ("succeeded", "fine")


# --- rows another writer left behind -------------------------------------------------------

DEEP_1500 = "[" * 1500 + "]" * 1500
DIGITS_5000 = "1" + "0" * 4999

# (payload text written raw, outcome on sqlite, outcome on postgres); an outcome is the
# payload the handler receives, or INVALID for a task failed with invalid_payload.
INVALID = object()
RAW_ROWS = [
    pytest.param(
        '{"a":1,"n":{"b":1,"b":2},"a":2}',
        {"a": 2, "n": {"b": 2}},
        {"a": 2, "n": {"b": 2}},
        id="duplicate-keys-last-wins",
    ),
    pytest.param(
        "[3.14159265358979323846264338327950288,0.10000000000000000000000001]",
        [3.141592653589793, 0.1],
        [3.141592653589793, 0.1],
        id="decimals-with-many-digits",
    ),
    pytest.param(DEEP_1500, INVALID, INVALID, id="nested-1500-deep"),
    pytest.param(f"[{DIGITS_5000}]", INVALID, INVALID, id="5000-digit-integer"),
    # jsonb keeps 1e999 as an exact numeric and prints all 1000 digits, which Python
    # reads as an int; SQLite keeps the text, which overflows a float.
    pytest.param('{"x":1e999}', INVALID, {"x": 10**999}, id="1e999"),
    # jsonb prints numbers without an exponent, dropping the fraction when it is zero.
    pytest.param("[1.5e3,0.1e1,2E-2]", [1500.0, 1.0, 0.02], [1500, 1, 0.02], id="exponents"),
]


@pytest.mark.parametrize(("text", "on_sqlite", "on_postgres"), RAW_ROWS)
async def test_a_row_written_by_another_writer_runs_or_fails_as_invalid_payload(
    db: Database, text: str, on_sqlite: Any, on_postgres: Any
) -> None:
    await run_raw_row(db, text, on_sqlite if db.kind == "sqlite" else on_postgres)


async def test_a_sqlite_row_with_text_after_a_nul_fails_as_invalid_payload(
    sqlite_db: Database,
) -> None:
    # SQLite's json_valid stops at the NUL and accepts the row; Python sees the junk.
    await run_raw_row(sqlite_db, '{"x":1}\x00junk', INVALID)


async def run_raw_row(db: Database, text: str, expected: Any) -> None:
    """Overwrite a queued task's payload with ``text``; a worker runs it or fails it."""
    seen: dict[str, Any] = {}
    worker = echo_worker(db, seen)
    async with db.client() as cq:
        odd = await cq.submit("echo", {"placeholder": True}, max_attempts=3)
        overwrite_payload(db, odd.id, text)
        async with worker.background():
            if expected is INVALID:
                await wait_for_status(cq, odd.id, "failed")
                later = await cq.submit("echo", {"after": True})
                after = await cq.wait(later.id, **WAIT)
                assert (after.status, after.result) == ("succeeded", {"after": True})
                with pytest.raises(SerializationError) as excinfo:
                    await cq.get(odd.id)
                assert excinfo.value.task_id == odd.id
            else:
                done = await cq.wait(odd.id, **WAIT)
                assert done.status == "succeeded"
                assert canon(done.payload) == canon(expected)
                assert canon(done.result) == canon(expected)
        ref = await cq.get_status(odd.id)
    await worker.close()
    assert ref is not None
    if expected is INVALID:
        assert ref.status == "failed"
        assert odd.id not in seen
        error = stored_error(db, odd.id)
        assert (error["type"], error["code"], error["retryable"]) == (
            "SerializationError",
            "invalid_payload",
            False,
        )
        [(attempt,)] = raw(db, "select attempt from cairnq_tasks where id = ?", (odd.id,))
        assert attempt == 1
    else:
        assert canon(seen[odd.id]) == canon(expected)


# --- names, queues, keys and ids -----------------------------------------------------------

STORED_VERBATIM = [
    pytest.param("'; DROP TABLE cairnq_tasks; --", id="sql-drop"),
    pytest.param('" OR 1=1 --', id="sql-or"),
    pytest.param("') OR ('1'='1", id="sql-paren"),
    pytest.param("%s", id="percent-s"),
    pytest.param("%I", id="percent-I"),
    pytest.param("%(x)s", id="percent-named"),
    pytest.param("%", id="like-percent"),
    pytest.param("_", id="like-underscore"),
    pytest.param("{}", id="braces"),
    pytest.param("{0!r:>{1}}", id="format-spec"),
    pytest.param("$1", id="dollar-1"),
    pytest.param("$$", id="dollar-dollar"),
    pytest.param("$q$ select 1 $q$", id="dollar-quoted"),
    pytest.param(":id ?", id="named-and-qmark"),
    pytest.param("\\", id="backslash"),
    pytest.param("a\\'b\\", id="backslash-quote"),
    pytest.param("line1\nline2\r\n", id="newline"),
    pytest.param("\t", id="tab"),
    pytest.param("🚀👩‍👩‍👧", id="emoji-zwj"),
    pytest.param("طابور الرسائل\u202e", id="rtl-with-override"),
    pytest.param(" padded ", id="spaces"),
    pytest.param(varied_text(1000), id="1000-ascii-bytes"),
    pytest.param("🚀" * 250, id="1000-bytes-of-emoji"),
]


@pytest.mark.parametrize("value", STORED_VERBATIM)
async def test_hostile_text_is_stored_verbatim_and_matched_exactly_by_every_entry_point(
    db: Database, value: str
) -> None:
    clock = FakeClock(1_000_000)
    decoy_names = [d for d in dict.fromkeys(["decoy", value[:-1], value[1:]]) if d and d != value]
    async with db.client(clock=clock) as cq:
        decoys = []
        for d in decoy_names:
            decoys.append(await cq.submit(d, {"d": d}, queue=d, key=d, correlation_id=d))
            await cq.cancel(decoys[-1].id)
        queued_decoy = await cq.submit("decoy", queue="decoy", key="decoy-queued")
        before = await snapshot(cq)

        fields = {"queue": value, "correlation_id": value, "parent_id": value, "root_id": value}
        task = await cq.submit(
            value, {value: value}, key=value, metadata={value: [value]}, **fields
        )
        stored = await cq.get(task.id)
        assert stored is not None
        assert (stored.name, stored.queue, stored.correlation_id) == (value, value, value)
        assert (stored.parent_id, stored.root_id) == (value, value)
        assert (stored.payload, stored.metadata) == ({value: value}, {value: [value]})

        # Exact matching everywhere: no LIKE, no case folding, no trimming.
        for kw in ("name", "queue", "root_id", "correlation_id"):
            assert [t.id for t in await cq.list(**{kw: value})] == [task.id], kw
        assert await cq.stats(value) == {
            value: {"queued": 1, "running": 0, "succeeded": 0, "failed": 0, "canceled": 0}
        }
        assert await cq.queue_depth(value, 5) == 4

        # Keys: every key operation finds exactly this task.
        by_key = await cq.get_by_key(value)
        ref = await cq.get_status_by_key(value)
        assert by_key is not None and ref is not None
        assert by_key.id == ref.id == task.id
        assert (await cq.submit("other", key=value)).id == task.id
        with pytest.raises(AlreadyExists) as excinfo:
            await cq.submit("other", key=value, conflict="reject")
        assert excinfo.value.key == value
        replacement = await cq.submit(value, queue=value, key=value, conflict="replace")
        assert replacement.id != task.id
        canceled = await cq.cancel_by_key(value)
        assert canceled is not None
        assert (canceled.id, canceled.status) == (replacement.id, "canceled")
        finished = await cq.wait_by_key(value, **WAIT)
        assert finished.id == replacement.id
        retried = await cq.retry_by_key(value)
        assert retried is not None
        assert (retried.id, retried.status) == (replacement.id, "queued")
        assert await cq.cancel_by_key(value) is not None

        # Purge by the exact queue and name takes only these two tasks, and their key.
        clock.advance(1_000)
        purged = await cq.purge(queue=value, name=value)
        assert sorted(purged) == sorted([task.id, replacement.id])
        assert await cq.get_by_key(value) is None
        assert await cq.list(queue=value) == []

        after = await snapshot(cq)
        assert after == before
        for d in decoy_names:
            decoy = await cq.get_by_key(d)
            assert decoy is not None and decoy.name == d
        assert await cq.get_status_by_key("decoy-queued") is not None
        assert queued_decoy.id in {t["id"] for t in after}
    assert tables(db) >= PROTOCOL_TABLES


REFUSED_TEXT = [
    pytest.param("", id="empty"),
    pytest.param("\x00", id="nul"),
    pytest.param("queue\x00; drop table cairnq_tasks", id="nul-then-sql"),
    pytest.param("\ud800", id="lone-surrogate"),
    pytest.param("ok\udfff", id="trailing-lone-surrogate"),
    pytest.param("é" * 501, id="1002-bytes"),
    pytest.param("n" * 10_000, id="10000-chars"),
]


def entry_points(cq: CairnQ, value: Any) -> dict[str, Callable[[], Any]]:
    """Every public way a name, queue, key or id reaches the database."""
    worker = Worker(cq)
    return {
        "submit(name)": lambda: cq.submit(value),
        "submit(queue)": lambda: cq.submit("job", queue=value),
        "submit(key)": lambda: cq.submit("job", key=value),
        "submit(correlation_id)": lambda: cq.submit("job", correlation_id=value),
        "submit(parent_id)": lambda: cq.submit("job", parent_id=value),
        "submit(root_id)": lambda: cq.submit("job", root_id=value),
        "submit(TaskDef)": lambda: cq.submit(TaskDef(value)),
        "submit(TaskDef queue)": lambda: cq.submit(TaskDef("job", queue=value)),
        "submit_many": lambda: cq.submit_many([("job", {}), (value, {})]),
        "submit_many(dict)": lambda: cq.submit_many([{"task": "job", "key": value}]),
        "get": lambda: cq.get(value),
        "get_status": lambda: cq.get_status(value),
        "get_by_key": lambda: cq.get_by_key(value),
        "get_status_by_key": lambda: cq.get_status_by_key(value),
        "cancel": lambda: cq.cancel(value),
        "retry": lambda: cq.retry(value),
        "cancel_by_key": lambda: cq.cancel_by_key(value),
        "retry_by_key": lambda: cq.retry_by_key(value, reset_attempt=True),
        "wait": lambda: cq.wait(value, timeout_ms=0),
        "wait_by_key": lambda: cq.wait_by_key(value, timeout_ms=0),
        "call": lambda: cq.call(value, timeout_ms=0),
        "list(name)": lambda: cq.list(name=value),
        "list(queue)": lambda: cq.list(queue=value),
        "list(root_id)": lambda: cq.list(root_id=value),
        "list(correlation_id)": lambda: cq.list(correlation_id=value),
        "purge(queue)": lambda: cq.purge(queue=value),
        "purge(name)": lambda: cq.purge(name=value),
        "stats": lambda: cq.stats(value),
        "queue_depth": lambda: cq.queue_depth(value, 5),
        "Worker(queues)": lambda: Worker(cq, queues=[value]),
        "Worker(worker_id)": lambda: Worker(cq, worker_id=value),
        "worker.register": lambda: worker.register(value, lambda ctx: None),
        "worker.task": lambda: worker.task(value)(lambda ctx: None),
    }


@silent_refusal
@pytest.mark.parametrize("value", REFUSED_TEXT)
async def test_text_that_cannot_be_stored_is_refused_by_every_entry_point_and_changes_nothing(
    db: Database, value: str
) -> None:
    import inspect

    clock = FakeClock(1_000_000)
    async with db.client(clock=clock) as cq:
        done = await cq.submit("job", {"keep": 1}, key="kept", correlation_id="c")
        await cq.cancel(done.id)
        await cq.submit("job", {"keep": 2}, queue="other")
        clock.advance(1_000)
        before = await snapshot(cq)
        outcomes: dict[str, str] = {}
        messages: dict[str, str] = {}
        heard: dict[str, list[str]] = {}
        for name, call in entry_points(cq, value).items():
            with sent_statements(db) as heard[name]:
                try:
                    result = call()
                    if inspect.isawaitable(result):
                        await result
                except Exception as exc:
                    outcomes[name] = type(exc).__name__
                    messages[name] = str(exc)
                else:
                    outcomes[name] = "accepted"
        after = await snapshot(cq)
    assert outcomes == dict.fromkeys(outcomes, "InvalidArgument")
    assert {name: sent for name, sent in heard.items() if sent} == {}
    # Each message names the problem without echoing a huge value back.
    assert {name: m[:300] for name, m in messages.items() if len(m) >= 200} == {}
    assert after == before
    assert tables(db) >= PROTOCOL_TABLES


async def test_a_worker_serves_an_emoji_rtl_queue_and_task_names_with_quotes(
    db: Database,
) -> None:
    queue = "📬 طابور\u202e; drop table x"
    names = ['it\'s "quoted"', "'; DELETE FROM cairnq_tasks; --", "%s{}$1\\"]
    worker = db.worker(queues=[queue], poll_interval_ms=20)
    for name in names:
        worker.register(name, lambda ctx, payload, name=name: {"ran": name, "got": payload})

    async with db.client() as cq, worker.background():
        tasks = [await cq.submit(n, {"n": n}, queue=queue, key=n) for n in names]
        done = [await cq.wait(t.id, **WAIT) for t in tasks]
        stats = await cq.stats(queue)
    await worker.close()
    assert [(t.status, t.queue, t.name) for t in done] == [("succeeded", queue, n) for n in names]
    assert [t.result for t in done] == [{"ran": n, "got": {"n": n}} for n in names]
    assert stats[queue]["succeeded"] == len(names)
    assert tables(db) >= PROTOCOL_TABLES


# --- PostgreSQL schema names ---------------------------------------------------------------

HOSTILE_SCHEMAS = [
    pytest.param('a"; drop table x; --', id="quote-escape"),
    pytest.param('"', id="double-quote"),
    pytest.param("'", id="single-quote"),
    pytest.param("\\", id="backslash"),
    pytest.param("%", id="percent"),
    pytest.param("%I", id="format-identifier"),
    pytest.param(".", id="dot"),
    pytest.param("public.evil", id="qualified"),
    pytest.param("a b", id="space"),
    pytest.param("jobs\n", id="trailing-newline"),
    pytest.param("jobs\nset role postgres", id="embedded-newline"),
    pytest.param("a\tb", id="tab"),
    pytest.param("a\x00b", id="nul"),
    pytest.param("a\x1bb", id="escape-char"),
    pytest.param("a\x7f", id="delete-char"),
    pytest.param("é" * 32, id="64-bytes-of-2-byte-chars"),
    pytest.param("s" * 62 + "é", id="63-chars-64-bytes"),
    pytest.param("s" * 64, id="64-ascii"),
    pytest.param("", id="empty"),
]


def as_url(dsn: str) -> str:
    """A ``postgresql://`` URL for a key=value DSN (``migrate`` picks the backend by URL)."""
    from urllib.parse import quote

    from psycopg.conninfo import conninfo_to_dict

    parts = conninfo_to_dict(dsn)
    user = f"{quote(str(parts['user']))}@" if parts.get("user") else ""
    host = parts.get("host", "127.0.0.1")
    return f"postgresql://{user}{host}:{parts.get('port', 5432)}/{parts['dbname']}"


def pg_schemas(dsn: str) -> set[str]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        return {r[0] for r in conn.execute("select nspname from pg_namespace").fetchall()}


@pytest.mark.postgres
@pytest.mark.parametrize("schema", HOSTILE_SCHEMAS)
def test_schema_names_that_try_to_escape_quoting_are_refused_and_create_nothing(
    pg_dsn: str, schema: str
) -> None:
    before = pg_schemas(pg_dsn)
    attempts: dict[str, Callable[[], Any]] = {
        "CairnQ.postgres": lambda: CairnQ.postgres(pg_dsn, schema=schema),
        "SyncCairnQ.postgres": lambda: SyncCairnQ.postgres(pg_dsn, schema=schema),
        "PostgresBackend": lambda: PostgresBackend(pg_dsn, schema=schema),
        "Worker.postgres": lambda: Worker.postgres(pg_dsn, schema=schema),
        "migrate": lambda: migrate(as_url(pg_dsn), schema=schema),
    }
    outcomes: dict[str, str] = {}
    for where, attempt in attempts.items():
        try:
            attempt()
        except InvalidArgument as exc:
            outcomes[where] = "rejected" if "schema" in str(exc) else str(exc)
        else:
            outcomes[where] = "accepted"
    assert outcomes == dict.fromkeys(attempts, "rejected")
    assert pg_schemas(pg_dsn) == before


@pytest.mark.postgres
@pytest.mark.parametrize(
    "schema",
    [
        pytest.param("s" * 63, id="63-ascii-bytes"),
        pytest.param("Mixed_Case$9", id="mixed-case-and-dollar"),
    ],
)
def test_a_legal_schema_name_is_created_exactly_as_given(pg_dsn: str, schema: str) -> None:
    from ._db import drop_schema

    try:
        with SyncCairnQ.postgres(pg_dsn, schema=schema, listen=False) as cq:
            task = cq.submit("job", {})
        assert schema in pg_schemas(pg_dsn)
        assert schema.lower() not in pg_schemas(pg_dsn) - {schema}
        db = Database.postgres(pg_dsn, schema)
        assert tables(db) >= PROTOCOL_TABLES
        assert raw(db, "select id from cairnq_tasks") == [(task.id,)]
    finally:
        drop_schema(pg_dsn, schema)
