"""The JSON boundary: ``JsonCodec`` on its own, and stored JSON Python cannot read."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from cairnq import SerializationError
from cairnq._json import JsonCodec

from ._db import Database
from ._statements import sent_statements, silent_refusal

CODEC = JsonCodec()
DEEP_3000 = "[" * 3000 + "]" * 3000


def nested_lists(levels: int) -> Any:
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


# --- encoding ------------------------------------------------------------------------------


def test_encode_is_compact_with_no_spaces_after_separators() -> None:
    assert CODEC.encode({"a": [1, 2], "b": {"c": None}}) == '{"a":[1,2],"b":{"c":null}}'


def test_encode_keeps_non_ascii_as_utf8_text_rather_than_escapes() -> None:
    assert CODEC.encode({"greeting": "héllo 🚀"}) == '{"greeting":"héllo 🚀"}'


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("s3://x", '"s3://x"'),
        ("42", '"42"'),
        (42, "42"),
        (True, "true"),
        (None, "null"),
    ],
    ids=["url-string", "numeric-string", "int", "true", "null"],
)
def test_top_level_scalar_encodes_as_that_scalar(value: Any, text: str) -> None:
    assert CODEC.encode(value) == text


@pytest.mark.parametrize(
    "value", ["s3://x", "42", 42, True, None], ids=["url", "numeric-string", "int", "true", "null"]
)
def test_top_level_scalar_round_trips_with_its_type(value: Any) -> None:
    decoded = JsonCodec.decode(CODEC.encode(value))
    assert decoded == value
    assert type(decoded) is type(value)


def test_tuple_encodes_as_a_list() -> None:
    text = CODEC.encode({"pair": (1, "two")})
    assert text == '{"pair":[1,"two"]}'
    assert JsonCodec.decode(text) == {"pair": [1, "two"]}


def test_non_string_dict_keys_become_strings() -> None:
    assert CODEC.encode({1: "a", 2.5: "b", None: "c"}) == '{"1":"a","2.5":"b","null":"c"}'


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ({"1": "b", 1: "c"}, "'1'"),
        ({"true": 0, True: 1}, "'true'"),
        ({None: 0, "null": 1}, "'null'"),
        ({2.5: 0, "2.5": 1}, "'2.5'"),
        ({"rows": [{"x": {"-7": 0, -7: 1}}]}, "'-7'"),
    ],
    ids=["int", "bool", "none", "float", "nested-in-a-list"],
)
def test_encode_refuses_keys_that_would_be_written_twice_naming_the_key(
    value: Any, key: str
) -> None:
    with pytest.raises(SerializationError, match=f"has the key {key} twice"):
        CODEC.encode(value, what="payload")


def test_string_keys_that_look_like_numbers_are_not_duplicates() -> None:
    assert CODEC.encode({"1": "a", "true": "b", "x": ["1", "2"]}) == (
        '{"1":"a","true":"b","x":["1","2"]}'
    )


def test_encode_optional_of_none_is_none_not_the_text_null() -> None:
    assert CODEC.encode_optional(None) is None


def test_encode_optional_of_a_falsy_value_encodes_it() -> None:
    assert CODEC.encode_optional(0) == "0"
    assert CODEC.encode_optional([]) == "[]"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_encode_rejects_non_finite_floats(value: float) -> None:
    with pytest.raises(SerializationError, match="payload"):
        CODEC.encode({"x": value}, what="payload")


def test_encode_names_what_it_was_encoding_in_the_error() -> None:
    with pytest.raises(SerializationError, match=r"^metadata "):
        CODEC.encode({1, 2}, what="metadata")


def test_encode_rejects_an_escaped_nul_character() -> None:
    with pytest.raises(SerializationError, match="NUL"):
        CODEC.encode({"x": "a\x00b"})


def test_encode_rejects_a_backslash_followed_by_a_nul_character() -> None:
    with pytest.raises(SerializationError, match="NUL"):
        CODEC.encode("\\\x00")


def test_encode_accepts_the_literal_text_backslash_u0000() -> None:
    text = CODEC.encode("\\u0000")
    assert JsonCodec.decode(text) == "\\u0000"


def test_encode_rejects_a_lone_surrogate() -> None:
    with pytest.raises(SerializationError, match="surrogate"):
        CODEC.encode("\ud800")


def test_encode_accepts_nesting_at_the_depth_limit() -> None:
    codec = JsonCodec(max_depth=3)
    assert codec.encode(nested_lists(3)) == "[[[0]]]"


def test_encode_rejects_nesting_one_past_the_depth_limit() -> None:
    codec = JsonCodec(max_depth=3)
    with pytest.raises(SerializationError, match="nested 4 levels"):
        codec.encode(nested_lists(4))


def test_brackets_inside_strings_do_not_count_towards_depth() -> None:
    codec = JsonCodec(max_depth=1)
    assert codec.encode(["[[[{{{"]) == '["[[[{{{"]'


def test_encode_of_nesting_deeper_than_python_recursion_is_serialization_error() -> None:
    with pytest.raises(SerializationError):
        CODEC.encode(nested_lists(100_000))


def test_encode_accepts_exactly_max_bytes() -> None:
    codec = JsonCodec(max_bytes=5)
    assert codec.encode("abc") == '"abc"'


def test_encode_rejects_one_byte_over_max_bytes() -> None:
    codec = JsonCodec(max_bytes=5)
    with pytest.raises(SerializationError, match="6 bytes"):
        codec.encode("abcd")


def test_max_bytes_counts_utf8_bytes_not_characters() -> None:
    codec = JsonCodec(max_bytes=5)
    with pytest.raises(SerializationError, match="6 bytes"):
        codec.encode("éé")  # 4 characters of text, 6 bytes


# --- decoding what another writer stored ------------------------------------------------------


def test_decode_of_none_is_none() -> None:
    assert JsonCodec.decode(None) is None


def test_decode_reads_the_json_null_text_as_none() -> None:
    assert JsonCodec.decode("null") is None


def test_decode_reads_a_large_finite_float() -> None:
    assert JsonCodec.decode("1e308") == 1e308


@pytest.mark.parametrize("text", ["1e999", "-1e999", '{"x":[1e400]}'])
def test_decode_of_a_number_that_overflows_a_float_is_serialization_error(text: str) -> None:
    with pytest.raises(SerializationError, match="out of range"):
        JsonCodec.decode(text)


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", '{"x":NaN}'])
def test_decode_of_a_non_finite_literal_is_serialization_error(text: str) -> None:
    with pytest.raises(SerializationError, match="is not JSON"):
        JsonCodec.decode(text)


def test_decode_of_3000_deep_nesting_is_serialization_error_not_recursion_error() -> None:
    with pytest.raises(SerializationError) as excinfo:
        JsonCodec.decode(DEEP_3000)
    assert not isinstance(excinfo.value, RecursionError)


def test_decode_of_invalid_json_is_serialization_error_carrying_the_task_id() -> None:
    with pytest.raises(SerializationError) as excinfo:
        JsonCodec.decode('{"a":', what="result", task_id="task_01ABC")
    assert excinfo.value.task_id == "task_01ABC"
    assert "stored result of task task_01ABC" in str(excinfo.value)


def test_decode_error_without_a_task_id_has_task_id_none() -> None:
    with pytest.raises(SerializationError) as excinfo:
        JsonCodec.decode("not json")
    assert excinfo.value.task_id is None


# --- a stored row Python cannot read ----------------------------------------------------------


def overwrite_payload(db: Database, task_id: str, text: str) -> None:
    """Write ``text`` into the task's payload behind cairnq's back, as another writer could."""
    if db.kind == "sqlite":
        assert db.path is not None
        conn = sqlite3.connect(db.path, timeout=10)
        try:
            with conn:
                conn.execute("update cairnq_tasks set payload = ? where id = ?", (text, task_id))
        finally:
            conn.close()
        return
    import psycopg
    from psycopg import sql

    with psycopg.connect(db.url, autocommit=True) as conn:
        conn.execute(sql.SQL("set search_path to {}").format(sql.Identifier(db.schema or "")))
        conn.execute("update cairnq_tasks set payload = %s::jsonb where id = %s", (text, task_id))


def unreadable_payload(db: Database) -> str:
    """JSON the database keeps as written but Python cannot read back.

    SQLite keeps the text verbatim, and its ``json_valid`` CHECK accepts ``1e999``
    (but refuses nesting past 1000 levels). PostgreSQL ``jsonb`` would turn
    ``1e999`` into a 1000-digit integer Python reads fine, but keeps a 3000-deep array.
    """
    return '{"x":1e999}' if db.kind == "sqlite" else DEEP_3000


async def test_get_of_a_row_with_unreadable_payload_raises_serialization_error(
    db: Database,
) -> None:
    async with db.client() as cq:
        task = await cq.submit("job", {"ok": True})
        overwrite_payload(db, task.id, unreadable_payload(db))
        with pytest.raises(SerializationError) as excinfo:
            await cq.get(task.id)
    assert excinfo.value.task_id == task.id
    assert task.id in str(excinfo.value)
    assert "payload" in str(excinfo.value)


async def test_get_of_a_sqlite_row_nested_3000_deep_raises_serialization_error(
    sqlite_db: Database,
) -> None:
    # SQLite's json_valid CHECK refuses nesting past 1000 levels, so only a writer
    # that turned CHECK constraints off can leave this behind.
    assert sqlite_db.path is not None
    async with sqlite_db.client() as cq:
        task = await cq.submit("job")
        conn = sqlite3.connect(sqlite_db.path, timeout=10)
        try:
            conn.execute("pragma ignore_check_constraints = on")
            with conn:
                conn.execute(
                    "update cairnq_tasks set payload = ? where id = ?", (DEEP_3000, task.id)
                )
        finally:
            conn.close()
        with pytest.raises(SerializationError) as excinfo:
            await cq.get(task.id)
    assert excinfo.value.task_id == task.id


async def test_status_probe_of_a_row_with_unreadable_payload_still_works(db: Database) -> None:
    async with db.client() as cq:
        task = await cq.submit("job", {"ok": True})
        overwrite_payload(db, task.id, unreadable_payload(db))
        ref = await cq.get_status(task.id)
    assert ref is not None
    assert (ref.id, ref.status) == (task.id, "queued")


# --- numbers through the database -----------------------------------------------------------


async def test_integers_beyond_64_bits_round_trip(db: Database) -> None:
    payload = [2**70, -(2**70), 2**63 - 1]
    async with db.client() as cq:
        task = await cq.submit("job", payload)
        stored = await cq.get(task.id)
    assert stored is not None
    assert stored.payload == payload
    assert all(type(v) is int for v in stored.payload)


async def test_ordinary_floats_round_trip_as_floats(db: Database) -> None:
    payload = [0.1, 1.0, 1 / 3, -2.5, 123456.789]
    async with db.client() as cq:
        task = await cq.submit("job", payload)
        stored = await cq.get(task.id)
    assert stored is not None
    assert [repr(v) for v in stored.payload] == [repr(v) for v in payload]


async def test_floats_written_with_an_exponent_read_back_unchanged(db: Database) -> None:
    payload = [1e16, 1e300, 2.5e-8, 1.5]
    async with db.client() as cq:
        task = await cq.submit("job", payload)
        stored = await cq.get(task.id)
    assert stored is not None
    assert [repr(v) for v in stored.payload] == [repr(v) for v in payload]


# --- keys written twice, refused on every way in ---------------------------------------------


@silent_refusal
async def test_a_payload_whose_keys_would_be_written_twice_is_refused_before_any_write(
    db: Database,
) -> None:
    async with db.client() as cq:
        with (
            sent_statements(db) as sent,
            pytest.raises(SerializationError, match="payload has the key '1' twice"),
        ):
            await cq.submit("job", {"1": "b", 1: "c"})
        assert sent == []
        assert await cq.list() == []


@silent_refusal
async def test_metadata_whose_keys_would_be_written_twice_is_refused_before_any_write(
    db: Database,
) -> None:
    async with db.client() as cq:
        with (
            sent_statements(db) as sent,
            pytest.raises(SerializationError, match="metadata has the key 'true' twice"),
        ):
            await cq.submit("job", {}, metadata={"tags": {"true": 1, True: 2}})
        assert sent == []
        assert await cq.list() == []


async def test_a_result_whose_keys_would_be_written_twice_fails_the_task_naming_the_key(
    db: Database,
) -> None:
    worker = db.worker(poll_interval_ms=20)
    worker.register("job", lambda ctx: {"1": "b", 1: "c"})
    async with db.client() as cq, worker.background():
        task = await cq.submit("job", {}, max_attempts=3)
        done = await cq.wait(task.id, timeout_ms=10_000, poll_ms=20)
    await worker.close()
    assert (done.status, done.attempt, done.result) == ("failed", 1, None)
    assert done.error["code"] == "unserializable_result"
    assert "result has the key '1' twice" in done.error["message"]
