"""Bad input gets a typed error and writes nothing; odd-but-legal text round-trips verbatim."""

from __future__ import annotations

import datetime
import logging
from typing import Any

import pytest

from cairnq import CairnQ, CairnQError, InvalidArgument, SerializationError, TaskTimeout, Worker
from cairnq._checks import MAX_DELAY_MS
from cairnq.testing import FakeClock

from ._db import Database
from ._statements import sent_statements, silent_refusal

# --- helpers -------------------------------------------------------------------------------


async def assert_nothing_written(cq: CairnQ) -> None:
    assert await cq.stats() == {}
    assert await cq.list() == []


def nested_lists(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = [value]
    return value


def nested_dicts(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = {"k": value}
    return value


def varied_text(size: int) -> str:
    """ASCII text of exactly ``size`` bytes that does not compress (quotes, %, \\ included)."""
    return "".join(chr(33 + (i * 7919 + i // 94) % 94) for i in range(size))


TEXT_FIELDS = [
    pytest.param("name", "task name", id="name"),
    pytest.param("queue", "queue", id="queue"),
    pytest.param("key", "key", id="key"),
    pytest.param("correlation_id", "correlation_id", id="correlation_id"),
    pytest.param("parent_id", "parent_id", id="parent_id"),
    pytest.param("root_id", "root_id", id="root_id"),
]

BAD_TEXT = [
    pytest.param("", "must not be empty", id="empty"),
    pytest.param(42, "must be a string", id="int"),
    pytest.param(b"job", "must be a string", id="bytes"),
    pytest.param(["job"], "must be a string", id="list"),
    pytest.param("a\x00b", "NUL", id="nul"),
    pytest.param("a\ud800b", "lone surrogate", id="lone-surrogate"),
    pytest.param("x" * 1001, "1001 bytes", id="1001-ascii-bytes"),
    pytest.param("é" * 501, "1002 bytes", id="501-chars-1002-bytes"),
]


async def submit_with(cq: CairnQ, field: str, value: Any) -> Any:
    if field == "name":
        return await cq.submit(value)
    return await cq.submit("job", **{field: value})


# --- the error types -----------------------------------------------------------------------


def test_invalid_argument_is_both_a_cairnq_error_and_a_value_error() -> None:
    assert issubclass(InvalidArgument, CairnQError)
    assert issubclass(InvalidArgument, ValueError)


def test_serialization_error_is_an_invalid_argument() -> None:
    assert issubclass(SerializationError, InvalidArgument)
    assert issubclass(SerializationError, CairnQError)
    assert issubclass(SerializationError, ValueError)


@silent_refusal
async def test_a_rejected_submit_can_be_caught_as_value_error(db: Database) -> None:
    async with db.client() as cq:
        with sent_statements(db) as sent, pytest.raises(ValueError, match="task name"):
            await cq.submit("")
        assert sent == []
        await assert_nothing_written(cq)


@silent_refusal
async def test_a_rejected_payload_can_be_caught_as_cairnq_error(db: Database) -> None:
    async with db.client() as cq:
        with sent_statements(db) as sent, pytest.raises(CairnQError, match="payload"):
            await cq.submit("job", {"x": float("nan")})
        assert sent == []
        await assert_nothing_written(cq)


# --- names, queues, keys, ids --------------------------------------------------------------


@silent_refusal
@pytest.mark.parametrize(("field", "label"), TEXT_FIELDS)
@pytest.mark.parametrize(("value", "why"), BAD_TEXT)
async def test_submit_rejects_bad_text_and_writes_nothing(
    db: Database, field: str, label: str, value: Any, why: str
) -> None:
    async with db.client() as cq:
        with sent_statements(db) as sent, pytest.raises(InvalidArgument) as excinfo:
            await submit_with(cq, field, value)
        assert sent == []
        await assert_nothing_written(cq)
    assert type(excinfo.value) is InvalidArgument
    assert label in str(excinfo.value)
    assert why in str(excinfo.value)


@silent_refusal
async def test_submit_rejects_none_as_task_name(db: Database) -> None:
    async with db.client() as cq:
        with (
            sent_statements(db) as sent,
            pytest.raises(InvalidArgument, match="task name must be a string"),
        ):
            await cq.submit(None)  # type: ignore[arg-type]
        assert sent == []
        await assert_nothing_written(cq)


@silent_refusal
async def test_submit_rejects_a_10000_character_name(db: Database) -> None:
    async with db.client() as cq:
        with sent_statements(db) as sent, pytest.raises(InvalidArgument) as excinfo:
            await cq.submit("n" * 10_000)
        assert sent == []
        await assert_nothing_written(cq)
    assert type(excinfo.value) is InvalidArgument
    assert "10000 bytes" in str(excinfo.value)


@pytest.mark.parametrize(("field", "label"), TEXT_FIELDS)
async def test_text_of_exactly_1000_utf8_bytes_is_accepted(
    db: Database, field: str, label: str
) -> None:
    value = "é" * 500  # 500 characters, 1000 bytes
    async with db.client() as cq:
        task = await submit_with(cq, field, value)
        stored = await cq.get(task.id)
    assert stored is not None
    if field == "key":
        async with db.client() as cq:
            by_key = await cq.get_by_key(value)
        assert by_key is not None
        assert by_key.id == task.id
    else:
        assert getattr(stored, field) == value


@silent_refusal
async def test_rejected_keyed_submit_leaves_the_key_free(db: Database) -> None:
    async with db.client() as cq:
        with sent_statements(db) as sent, pytest.raises(SerializationError):
            await cq.submit("job", {"x": float("inf")}, key="k1")
        assert sent == []
        assert await cq.get_by_key("k1") is None
        assert await cq.get_status_by_key("k1") is None
        await assert_nothing_written(cq)


# --- conflict and numbers ------------------------------------------------------------------


@silent_refusal
@pytest.mark.parametrize("conflict", ["overwrite", "REUSE", "reuse_succeeded", "", None, 1])
async def test_submit_rejects_an_unknown_conflict(db: Database, conflict: Any) -> None:
    async with db.client() as cq:
        with (
            sent_statements(db) as sent,
            pytest.raises(InvalidArgument, match="conflict must be one of") as excinfo,
        ):
            await cq.submit("job", key="k", conflict=conflict)
        assert sent == []
        await assert_nothing_written(cq)
    assert type(excinfo.value) is InvalidArgument


@silent_refusal
@pytest.mark.parametrize(
    "value",
    [0, -1, True, False, 1.5, 2**31, "3"],
    ids=["zero", "minus-one", "true", "false", "float", "2**31", "string"],
)
async def test_submit_rejects_bad_max_attempts(db: Database, value: Any) -> None:
    async with db.client() as cq:
        with (
            sent_statements(db) as sent,
            pytest.raises(InvalidArgument, match="max_attempts") as excinfo,
        ):
            await cq.submit("job", max_attempts=value)
        assert sent == []
        await assert_nothing_written(cq)
    assert type(excinfo.value) is InvalidArgument


@silent_refusal
@pytest.mark.parametrize(
    "value", [True, 1.5, 2**31, -(2**31) - 1], ids=["true", "float", "2**31", "below-int4"]
)
async def test_submit_rejects_bad_priority(db: Database, value: Any) -> None:
    async with db.client() as cq:
        with (
            sent_statements(db) as sent,
            pytest.raises(InvalidArgument, match="priority") as excinfo,
        ):
            await cq.submit("job", priority=value)
        assert sent == []
        await assert_nothing_written(cq)
    assert type(excinfo.value) is InvalidArgument


@silent_refusal
@pytest.mark.parametrize(
    "value",
    [-1, 1.5, True, MAX_DELAY_MS + 1],
    ids=["negative", "float", "true", "over-100-years"],
)
async def test_submit_rejects_bad_delay_ms(db: Database, value: Any) -> None:
    async with db.client() as cq:
        with (
            sent_statements(db) as sent,
            pytest.raises(InvalidArgument, match="delay_ms") as excinfo,
        ):
            await cq.submit("job", delay_ms=value)
        assert sent == []
        await assert_nothing_written(cq)
    assert type(excinfo.value) is InvalidArgument


async def test_int4_extremes_of_max_attempts_and_priority_are_stored(db: Database) -> None:
    async with db.client() as cq:
        high = await cq.submit("job", max_attempts=2**31 - 1, priority=2**31 - 1)
        low = await cq.submit("job", priority=-(2**31))
        stored_high = await cq.get(high.id)
        stored_low = await cq.get(low.id)
    assert stored_high is not None
    assert stored_low is not None
    assert (stored_high.max_attempts, stored_high.priority) == (2**31 - 1, 2**31 - 1)
    assert stored_low.priority == -(2**31)


# --- JSON payloads and metadata ------------------------------------------------------------

BAD_JSON = [
    pytest.param(float("nan"), "not valid JSON", id="nan"),
    pytest.param(float("inf"), "not valid JSON", id="infinity"),
    pytest.param(float("-inf"), "not valid JSON", id="minus-infinity"),
    pytest.param({"x": [1, float("nan")]}, "not valid JSON", id="nested-nan"),
    pytest.param("\ud800", "lone surrogate", id="lone-surrogate"),
    pytest.param({"x": "a\ud800"}, "lone surrogate", id="lone-surrogate-in-value"),
    pytest.param({"\ud800": 1}, "lone surrogate", id="lone-surrogate-in-key"),
    pytest.param("\u0000", "NUL", id="nul"),
    pytest.param({"x": "a\u0000b"}, "NUL", id="nul-in-value"),
    pytest.param({"a\u0000": 1}, "NUL", id="nul-in-key"),
    pytest.param(nested_lists(65), "nested 65 levels", id="65-nested-lists"),
    pytest.param(nested_dicts(65), "nested 65 levels", id="65-nested-dicts"),
    pytest.param({1, 2}, "not JSON-serializable", id="set"),
    pytest.param(b"bytes", "not JSON-serializable", id="bytes"),
    pytest.param(datetime.datetime(2026, 1, 1), "not JSON-serializable", id="datetime"),
    pytest.param(object(), "not JSON-serializable", id="object"),
    pytest.param({"when": datetime.date(2026, 1, 1)}, "not JSON-serializable", id="nested-date"),
]


@silent_refusal
@pytest.mark.parametrize(("value", "why"), BAD_JSON)
async def test_submit_rejects_bad_payload_and_writes_nothing(
    db: Database, value: Any, why: str
) -> None:
    async with db.client() as cq:
        with sent_statements(db) as sent, pytest.raises(SerializationError) as excinfo:
            await cq.submit("job", value)
        assert sent == []
        await assert_nothing_written(cq)
    assert str(excinfo.value).startswith("payload ")
    assert why in str(excinfo.value)


@silent_refusal
@pytest.mark.parametrize(("value", "why"), [p for p in BAD_JSON if isinstance(p.values[0], dict)])
async def test_submit_rejects_bad_metadata_and_writes_nothing(
    db: Database, value: Any, why: str
) -> None:
    async with db.client() as cq:
        with sent_statements(db) as sent, pytest.raises(SerializationError) as excinfo:
            await cq.submit("job", {"ok": 1}, metadata=value)
        assert sent == []
        await assert_nothing_written(cq)
    assert str(excinfo.value).startswith("metadata ")
    assert why in str(excinfo.value)


@pytest.mark.parametrize("make", [nested_lists, nested_dicts], ids=["lists", "dicts"])
async def test_payload_nested_64_levels_is_accepted_and_round_trips(
    db: Database, make: Any
) -> None:
    payload = make(64)
    async with db.client() as cq:
        task = await cq.submit("job", payload, metadata={"nested": make(63)})
        stored = await cq.get(task.id)
    assert stored is not None
    assert stored.payload == payload
    assert stored.metadata == {"nested": make(63)}


async def test_payload_of_exactly_max_payload_bytes_is_accepted(db: Database) -> None:
    payload = "x" * 998  # '"' + 998 + '"' = 1000 bytes encoded
    async with db.client(max_payload_bytes=1000) as cq:
        task = await cq.submit("job", payload)
        stored = await cq.get(task.id)
    assert stored is not None
    assert stored.payload == payload


@silent_refusal
async def test_payload_one_byte_over_max_payload_bytes_is_rejected(db: Database) -> None:
    async with db.client(max_payload_bytes=1000) as cq:
        with (
            sent_statements(db) as sent,
            pytest.raises(SerializationError, match="1001 bytes encoded"),
        ):
            await cq.submit("job", "x" * 999)
        assert sent == []
        await assert_nothing_written(cq)


@silent_refusal
async def test_payload_size_limit_counts_utf8_bytes(db: Database) -> None:
    async with db.client(max_payload_bytes=1000) as cq:
        with (
            sent_statements(db) as sent,
            pytest.raises(SerializationError, match="1002 bytes encoded"),
        ):
            await cq.submit("job", "é" * 500)  # 502 characters encoded, 1002 bytes
        assert sent == []
        await assert_nothing_written(cq)


@silent_refusal
async def test_metadata_one_byte_over_max_payload_bytes_is_rejected(db: Database) -> None:
    async with db.client(max_payload_bytes=1000) as cq:
        with (
            sent_statements(db) as sent,
            pytest.raises(SerializationError, match=r"^metadata is 1001 bytes"),
        ):
            await cq.submit("job", {}, metadata={"x": "x" * 993})  # {"x":"..."}: 8 + 993
        assert sent == []
        await assert_nothing_written(cq)


async def test_metadata_of_exactly_max_payload_bytes_is_accepted(db: Database) -> None:
    async with db.client(max_payload_bytes=1000) as cq:
        task = await cq.submit("job", {}, metadata={"x": "x" * 992})
        stored = await cq.get(task.id)
    assert stored is not None
    assert stored.metadata == {"x": "x" * 992}


async def test_payload_with_literal_backslash_u0000_text_is_accepted(db: Database) -> None:
    payload = {"path": "C:\\u0000\\dir", "k\\u0000": "v"}
    async with db.client() as cq:
        task = await cq.submit("job", payload)
        stored = await cq.get(task.id)
    assert stored is not None
    assert stored.payload == payload


# --- read and maintenance arguments --------------------------------------------------------


@silent_refusal
@pytest.mark.parametrize(
    "kwargs",
    [
        {"status": "done"},
        {"status": "QUEUED"},
        {"status": ""},
        {"limit": -1},
        {"limit": 10_001},
        {"limit": "5"},
        {"offset": -1},
        {"offset": 1.0},
        {"queue": ""},
        {"name": "a\x00"},
        {"root_id": 7},
        {"correlation_id": "x" * 1001},
    ],
    ids=lambda kw: "-".join(f"{k}={v!r}"[:30] for k, v in kw.items()),
)
async def test_list_rejects_bad_arguments(db: Database, kwargs: dict[str, Any]) -> None:
    async with db.client() as cq:
        await cq.submit("job")
        with sent_statements(db) as sent, pytest.raises(InvalidArgument) as excinfo:
            await cq.list(**kwargs)
        assert sent == []
    assert type(excinfo.value) is InvalidArgument
    assert next(iter(kwargs)) in str(excinfo.value)


@silent_refusal
@pytest.mark.parametrize(
    "kwargs",
    [
        {"status": "queued"},
        {"status": "running"},
        {"status": "gone"},
        {"limit": 0},
        {"limit": -5},
        {"limit": 10_001},
        {"older_than_ms": -1},
        {"queue": ""},
        {"name": 3},
    ],
    ids=lambda kw: "-".join(f"{k}={v!r}" for k, v in kw.items()),
)
async def test_purge_rejects_bad_arguments_and_deletes_nothing(
    db: Database, kwargs: dict[str, Any]
) -> None:
    clock = FakeClock(1_000_000)
    async with db.client(clock=clock) as cq:
        task = await cq.submit("job")
        await cq.cancel(task.id)
        clock.advance(60_000)
        with sent_statements(db) as sent, pytest.raises(InvalidArgument) as excinfo:
            await cq.purge(**kwargs)
        assert sent == []
        still = await cq.get(task.id)
    assert type(excinfo.value) is InvalidArgument
    assert next(iter(kwargs)) in str(excinfo.value)
    assert still is not None
    assert still.status == "canceled"


@silent_refusal
@pytest.mark.parametrize(
    ("queue", "max_depth"),
    [("default", -1), ("default", 1.5), ("default", True), ("", 5), (None, 5)],
    ids=["negative", "float", "bool", "empty-queue", "none-queue"],
)
async def test_queue_depth_rejects_bad_arguments(db: Database, queue: Any, max_depth: Any) -> None:
    async with db.client() as cq:
        with sent_statements(db) as sent, pytest.raises(InvalidArgument) as excinfo:
            await cq.queue_depth(queue, max_depth)
        assert sent == []
    assert type(excinfo.value) is InvalidArgument


@silent_refusal
async def test_stats_rejects_an_empty_queue_name(db: Database) -> None:
    async with db.client() as cq:
        with (
            sent_statements(db) as sent,
            pytest.raises(InvalidArgument, match="queue must not be empty"),
        ):
            await cq.stats("")
        assert sent == []


@silent_refusal
@pytest.mark.parametrize(
    "kwargs",
    [{"timeout_ms": -1}, {"poll_ms": 0}, {"max_poll_ms": 0}, {"timeout_ms": 1.5}],
    ids=lambda kw: "-".join(f"{k}={v!r}" for k, v in kw.items()),
)
async def test_wait_rejects_bad_timing_arguments(db: Database, kwargs: dict[str, Any]) -> None:
    async with db.client() as cq:
        task = await cq.submit("job")
        with sent_statements(db) as sent, pytest.raises(InvalidArgument, match=next(iter(kwargs))):
            await cq.wait(task.id, **kwargs)
        assert sent == []


# --- the reference SDK's wording, kept inside cairnq's messages ----------------------------


@silent_refusal
async def test_a_negative_max_depth_says_max_depth_must_be_at_least_zero(db: Database) -> None:
    async with db.client() as cq:
        with (
            sent_statements(db) as sent,
            pytest.raises(InvalidArgument, match="max_depth must be >= 0"),
        ):
            await cq.queue_depth("default", -1)
        assert sent == []


def test_a_batch_of_zero_says_batch_must_be_at_least_one(tmp_path: Any) -> None:
    worker = Worker(tmp_path / "tasks.db")

    async def embed(contexts: list[Any]) -> None:
        return None

    with pytest.raises(InvalidArgument, match="batch must be >= 1"):
        worker.register("embed", embed, batch=0)


@silent_refusal
async def test_a_limit_over_the_ceiling_says_which_ceiling(db: Database) -> None:
    async with db.client() as cq:
        with (
            sent_statements(db) as sent,
            pytest.raises(InvalidArgument, match="limit must be <= 10000"),
        ):
            await cq.list(limit=10_001)
        assert sent == []


@silent_refusal
async def test_purging_a_live_status_says_status_must_be_terminal(db: Database) -> None:
    async with db.client() as cq:
        with (
            sent_statements(db) as sent,
            pytest.raises(InvalidArgument, match="status must be terminal"),
        ):
            await cq.purge(status="queued")
        assert sent == []


async def test_a_wait_timeout_on_an_unclaimed_task_says_never_claimed_by_a_worker(
    db: Database,
) -> None:
    async with db.client() as cq:
        task = await cq.submit("nobody.serves.this")
        with pytest.raises(TaskTimeout, match="never claimed by a worker"):
            await cq.wait(task.id, timeout_ms=50, poll_ms=10)


# --- values that look like SQL or format strings -------------------------------------------

ODD_TEXT = [
    pytest.param("'; DROP TABLE cairnq_tasks; --", id="sql-drop"),
    pytest.param('" OR 1=1 --', id="sql-or"),
    pytest.param("%s", id="percent-s"),
    pytest.param("%(x)s", id="percent-named"),
    pytest.param("{}", id="braces"),
    pytest.param("$1", id="dollar-1"),
    pytest.param("$$", id="dollar-dollar"),
    pytest.param(":name", id="colon-param"),
    pytest.param("a\\b\\", id="backslash"),
    pytest.param("line1\nline2", id="newline"),
    pytest.param("مرحبا", id="rtl"),
    pytest.param("🚀", id="emoji"),
    pytest.param(varied_text(1000), id="1000-bytes"),
]


@pytest.mark.parametrize("value", ODD_TEXT)
async def test_odd_text_round_trips_verbatim_in_every_text_field(db: Database, value: str) -> None:
    async with db.client() as cq:
        task = await cq.submit(value, {"v": value}, queue=value, key=value, correlation_id=value)
        stored = await cq.get(task.id)
        by_key = await cq.get_by_key(value)
    assert stored is not None
    assert (stored.name, stored.queue, stored.correlation_id) == (value, value, value)
    assert stored.payload == {"v": value}
    assert by_key is not None
    assert by_key.id == task.id


@pytest.mark.parametrize("value", ODD_TEXT)
async def test_odd_text_works_as_an_exact_list_and_stats_filter(db: Database, value: str) -> None:
    async with db.client() as cq:
        decoy = await cq.submit("decoy", queue="decoy", correlation_id="decoy")
        task = await cq.submit(value, queue=value, correlation_id=value)
        by_name = await cq.list(name=value)
        by_queue = await cq.list(queue=value)
        by_correlation = await cq.list(correlation_id=value)
        stats = await cq.stats(value)
        everything = await cq.list()
    assert [t.id for t in by_name] == [task.id]
    assert [t.id for t in by_queue] == [task.id]
    assert [t.id for t in by_correlation] == [task.id]
    assert stats == {value: {"queued": 1, "running": 0, "succeeded": 0, "failed": 0, "canceled": 0}}
    assert {t.id for t in everything} == {task.id, decoy.id}


@pytest.mark.parametrize("value", ODD_TEXT)
async def test_odd_text_works_as_a_purge_filter_and_the_table_survives(
    db: Database, value: str
) -> None:
    clock = FakeClock(1_000_000)
    async with db.client(clock=clock) as cq:
        decoy = await cq.submit("decoy", queue="decoy")
        task = await cq.submit(value, queue=value, key=value)
        await cq.cancel(decoy.id)
        await cq.cancel(task.id)
        clock.advance(1_000)
        purged = await cq.purge(queue=value, name=value)
        after = await cq.submit("after", queue=value)
        remaining = await cq.list()
        by_key = await cq.get_by_key(value)
    assert purged == [task.id]
    assert {t.id for t in remaining} == {decoy.id, after.id}
    assert by_key is None


@pytest.mark.parametrize(
    "metadata",
    [[1, 2], "tags", 0, 4.5, True],
    ids=["list", "str", "int", "float", "bool"],
)
async def test_metadata_other_than_an_object_is_stored_as_given_with_one_warning_line(
    db: Database, metadata: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cairnq.client import _checks

    monkeypatch.setattr(_checks, "_WARNED_METADATA", set())
    async with db.client() as cq:
        with caplog.at_level(logging.WARNING, logger="cairnq.client"):
            first = await cq.submit("job", {}, metadata=metadata)
            second = await cq.submit("job", {}, metadata=metadata)
        for task in (first, second):
            stored = await cq.get(task.id)
            assert stored is not None and stored.metadata == metadata
    said = [r.getMessage() for r in caplog.records if "not a JSON object" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith(f"metadata is a {type(metadata).__name__} ")
