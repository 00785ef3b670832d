"""SQLite: a blocking caller's write runs on its own thread when the writer is idle.

The writer thread's guarantees hold on that path too: one transaction under the
write lock, wake-ups only after COMMIT, a failure undoes only its own write, and
a closed or lost backend refuses. A blocking caller that finds the writer busy
joins the writer thread's queue instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from cairnq import DatabaseUnavailable, StoreClosed, kernel
from cairnq._json import JsonCodec
from cairnq.backends import SQLiteBackend
from cairnq.protocol.steps import Call, Emit, Op

from ._db import Database

WRITER_THREAD = "cairnq-sqlite-write"


def new_spec(name: str = "job", **options: Any) -> kernel.NewTask:
    return kernel.new_task(JsonCodec(), name, {}, **options)


def count_rows(db: Database) -> int:
    with contextlib.closing(sqlite3.connect(str(db.path))) as conn:
        return int(conn.execute("select count(*) from cairnq_tasks").fetchone()[0])


def insert_then_raise(spec: kernel.NewTask, error: BaseException) -> Op[None]:
    """Insert a task, announce it, then fail before the operation ends."""
    yield Call("insert_task", spec.insert_params())
    yield Emit("queued", spec.queue)
    raise error


def insert_then_wait(
    spec: kernel.NewTask, entered: threading.Event, go: threading.Event
) -> Op[str]:
    """Insert a task, then hold the open transaction until ``go`` is set."""
    rows = yield Call("insert_task", spec.insert_params())
    entered.set()
    if not go.wait(30):
        raise TimeoutError("the test never let the write finish")
    return str(rows[0]["id"])


@pytest.fixture
def backend(sqlite_db: Database) -> Iterator[SQLiteBackend]:
    made = sqlite_db.backend()
    assert isinstance(made, SQLiteBackend)
    made.open()
    yield made
    made.close()


def publishing_threads(backend: SQLiteBackend) -> tuple[list[str], Any]:
    """The name of the thread each wake-up is published on, and the subscription."""
    threads: list[str] = []

    def match(emit: Emit) -> bool:
        threads.append(threading.current_thread().name)
        return True

    return threads, backend.hub.subscribe(match)


def test_a_blocking_write_runs_on_the_calling_thread_when_the_writer_is_idle(
    backend: SQLiteBackend,
) -> None:
    threads, sub = publishing_threads(backend)
    with sub:
        backend.run(kernel.insert(new_spec()), write=True)
    assert threads == [threading.current_thread().name]


def test_a_blocking_writes_wake_up_is_published_only_after_its_commit(
    sqlite_db: Database, backend: SQLiteBackend
) -> None:
    committed_at_publish: list[int] = []

    def match(emit: Emit) -> bool:
        committed_at_publish.append(count_rows(sqlite_db))  # another connection's view
        return True

    with backend.hub.subscribe(match):
        backend.run(kernel.insert(new_spec()), write=True)
    assert committed_at_publish == [1]


def test_a_failed_blocking_write_undoes_only_itself_and_publishes_nothing(
    sqlite_db: Database, backend: SQLiteBackend
) -> None:
    before = backend.run(kernel.insert(new_spec()), write=True)
    threads, sub = publishing_threads(backend)
    with sub, pytest.raises(ValueError, match="boom"):
        backend.run(insert_then_raise(new_spec(), ValueError("boom")), write=True)
    assert threads == []
    after = backend.run(kernel.insert(new_spec()), write=True)
    with contextlib.closing(sqlite3.connect(str(sqlite_db.path))) as conn:
        ids = {row[0] for row in conn.execute("select id from cairnq_tasks")}
    assert ids == {before.id, after.id}


def test_an_interrupted_blocking_write_rolls_back_and_lets_the_next_write_through(
    sqlite_db: Database, backend: SQLiteBackend
) -> None:
    with pytest.raises(KeyboardInterrupt):
        backend.run(insert_then_raise(new_spec(), KeyboardInterrupt()), write=True)
    assert count_rows(sqlite_db) == 0

    async def from_a_loop() -> None:
        await backend.arun(kernel.insert(new_spec()), write=True)

    threading_error: list[BaseException] = []

    def in_thread() -> None:
        try:
            asyncio.run(from_a_loop())
        except BaseException as exc:  # reported below
            threading_error.append(exc)

    other = threading.Thread(target=in_thread)
    other.start()
    other.join(30)
    assert threading_error == []
    backend.run(kernel.insert(new_spec()), write=True)
    assert count_rows(sqlite_db) == 2


def test_a_blocking_write_while_the_writer_is_busy_is_run_by_the_writer_thread(
    backend: SQLiteBackend,
) -> None:
    entered, go = threading.Event(), threading.Event()

    async def hold_the_writer() -> None:
        def work(conn: sqlite3.Connection) -> None:
            entered.set()
            go.wait(30)

        await backend.arun_around(work, lambda _: kernel.insert(new_spec()))

    holder = threading.Thread(target=asyncio.run, args=(hold_the_writer(),))
    holder.start()
    try:
        assert entered.wait(30)
        threads, sub = publishing_threads(backend)
        with sub:
            submitter = threading.Thread(
                target=backend.run, args=(kernel.insert(new_spec()),), kwargs={"write": True}
            )
            submitter.start()
            wait_until(lambda: not backend._jobs.empty(), "the blocking write joined the queue")
            go.set()
            submitter.join(30)
            holder.join(30)
        assert threads == [WRITER_THREAD, WRITER_THREAD]
    finally:
        go.set()
        holder.join(30)


def wait_until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting until {what}")
        time.sleep(0.001)


def test_the_writer_thread_waits_for_a_blocking_write_in_progress(
    sqlite_db: Database, backend: SQLiteBackend
) -> None:
    entered, go = threading.Event(), threading.Event()
    results: list[Any] = []

    def blocking() -> None:
        results.append(backend.run(insert_then_wait(new_spec(), entered, go), write=True))

    async def queued() -> None:
        results.append(await backend.arun(kernel.insert(new_spec()), write=True))

    first = threading.Thread(target=blocking)
    first.start()
    assert entered.wait(30)
    second = threading.Thread(target=asyncio.run, args=(queued(),))
    second.start()
    wait_until(lambda: backend._writer_busy, "the writer thread took the queued write")
    go.set()
    first.join(30)
    second.join(30)
    assert len(results) == 2
    assert count_rows(sqlite_db) == 2


def test_a_blocking_write_does_not_overtake_writes_waiting_for_the_writer_thread(
    backend: SQLiteBackend,
) -> None:
    entered, go = threading.Event(), threading.Event()
    published: list[tuple[str, str]] = []

    def match(emit: Emit) -> bool:
        published.append((emit.value, threading.current_thread().name))
        return True

    def blocking() -> None:
        backend.run(insert_then_wait(new_spec(), entered, go), write=True)
        backend.run(kernel.insert(new_spec(queue="blocking")), write=True)

    async def queued() -> None:
        await backend.arun(kernel.insert(new_spec(queue="queued")), write=True)

    with backend.hub.subscribe(match):
        first = threading.Thread(target=blocking)
        first.start()
        assert entered.wait(30)
        second = threading.Thread(target=asyncio.run, args=(queued(),))
        second.start()
        wait_until(lambda: backend._writer_busy, "the writer thread took the queued write")
        go.set()
        first.join(30)
        second.join(30)
    assert published == [("queued", WRITER_THREAD), ("blocking", WRITER_THREAD)]


def test_blocking_and_async_writes_from_many_threads_each_key_gets_one_task(
    sqlite_db: Database, backend: SQLiteBackend
) -> None:
    keys = [f"key-{i}" for i in range(20)]
    seen: list[tuple[str, str]] = []
    errors: list[BaseException] = []

    def blocking() -> None:
        try:
            for key in keys:
                task = backend.run(kernel.submit(new_spec(key=key)), write=True)
                seen.append((key, task.id))
                seen.append(("plain", backend.run(kernel.insert(new_spec()), write=True).id))
        except BaseException as exc:  # reported below
            errors.append(exc)

    async def concurrent() -> None:
        for key in keys:
            tasks = await asyncio.gather(
                backend.arun(kernel.submit(new_spec(key=key)), write=True),
                backend.arun(kernel.insert(new_spec()), write=True),
                backend.arun(kernel.insert(new_spec()), write=True),
            )
            seen.append((key, tasks[0].id))
            seen.extend(("plain", task.id) for task in tasks[1:])

    def in_a_loop() -> None:
        try:
            asyncio.run(concurrent())
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=blocking) for _ in range(3)]
    threads.append(threading.Thread(target=in_a_loop))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    by_key: dict[str, set[str]] = {}
    for key, task_id in seen:
        by_key.setdefault(key, set()).add(task_id)
    assert all(len(by_key[key]) == 1 for key in keys)
    plain = [task_id for key, task_id in seen if key == "plain"]
    assert len(plain) == len(set(plain)) == 3 * 20 + 2 * 20
    assert count_rows(sqlite_db) == len(keys) + len(plain)


def test_close_waits_for_a_blocking_write_in_progress_then_refuses_writes(
    sqlite_db: Database, backend: SQLiteBackend
) -> None:
    entered, go = threading.Event(), threading.Event()
    written: list[str] = []

    def write() -> None:
        written.append(backend.run(insert_then_wait(new_spec(), entered, go), write=True))

    writer = threading.Thread(target=write)
    writer.start()
    assert entered.wait(30)
    closer = threading.Thread(target=backend.close)
    closer.start()
    wait_until(lambda: backend._state == "closed", "close began, with the write still open")
    go.set()
    writer.join(30)
    closer.join(30)
    assert len(written) == 1
    assert count_rows(sqlite_db) == 1
    with pytest.raises(StoreClosed):
        backend.run(kernel.insert(new_spec()), write=True)


def test_a_blocking_write_is_refused_once_the_file_was_replaced(
    sqlite_db: Database, backend: SQLiteBackend
) -> None:
    path = sqlite_db.path
    assert path is not None
    backend.run(kernel.insert(new_spec()), write=True)
    other = path.with_name("other.db")
    with contextlib.closing(sqlite3.connect(other)) as conn:
        conn.execute("create table t (x)")
    other.replace(path)
    threads, sub = publishing_threads(backend)
    with sub, pytest.raises(DatabaseUnavailable):
        backend.run(kernel.insert(new_spec()), write=True)
    assert threads == []


def test_an_awaited_write_cancelled_before_the_writer_takes_it_up_is_not_written(
    backend: SQLiteBackend, sqlite_db: Database
) -> None:
    async def scenario() -> None:
        entered, go = threading.Event(), threading.Event()
        holding = asyncio.ensure_future(
            backend.arun(insert_then_wait(new_spec(), entered, go), write=True)
        )
        assert await asyncio.get_running_loop().run_in_executor(None, entered.wait, 30)
        queued = asyncio.ensure_future(backend.arun(kernel.insert(new_spec()), write=True))
        await asyncio.sleep(0)  # a turn of the loop: it waits in the writer's queue now
        queued.cancel()
        go.set()
        await holding
        with pytest.raises(asyncio.CancelledError):
            await queued
        # Queued after the cancelled one: once it is written, the writer has passed it.
        await backend.arun(kernel.insert(new_spec()), write=True)

    asyncio.run(scenario())
    assert count_rows(sqlite_db) == 2
