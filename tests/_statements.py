"""A tap on the SQL that reaches a database: proof that a refused call never got there.

``sent_statements(target)`` records, while it is open, every statement sent to
the database of ``target`` (a ``Database`` from ``tests/_db.py``, a backend, a
client or a worker)::

    with sent_statements(db) as sent:
        with pytest.raises(InvalidArgument):
            await cq.submit("")
    assert sent == []

A refusal that sends nothing is decided in Python before any backend code that
differs between databases runs, so checking it on one backend checks it on all.

On SQLite the tap is the connection's own trace callback (``sqlite3``'s
``set_trace_callback``: every statement the library runs, ``BEGIN``, ``COMMIT``
and pragmas included) on each connection the backend holds, and on each one it
opens while the tap is open; opening a connection counts as reaching the
database (``-- connect``). On every backend, an operation handed to it (``run``,
``arun``, ``run_on``, ``arun_on``, ``arun_around``) counts too (``-- run <op>``):
a call refused with nothing heard never reached the backend, so no backend can
change how it ends. On PostgreSQL the tap hears every statement and
transaction command any psycopg connection of this process sends while it is
open (psycopg's one place for each: ``BaseCursor._execute_send`` and
``BaseConnection._exec_command``), the backend's and any other; hearing too
much can only make a proof of silence fail, never pass.

``sent_anywhere(...)`` hears more: besides what ``sent_statements`` hears from
its targets, every database connection any code of this process opens while it
is open (``-- connect sqlite <database>`` for each ``sqlite3.connect``, whose
statements it then hears too; ``-- connect postgresql`` for each psycopg
connection, made through ``psycopg.connect`` or a connection class's ``connect``)
and every statement any psycopg connection sends. It is the proof for code that
opens connections of its own, such as a command run in-process.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cairnq.backends import SQLiteBackend

from ._db import Database

__all__ = ["reads_proven_elsewhere", "sent_anywhere", "sent_statements", "silent_refusal"]

silent_refusal = pytest.mark.parametrize("db", ["sqlite"], indirect=True)
"""Run a test on the ``db`` fixture's SQLite backend only.

For a test of a refusal that reaches no backend: its body proves it, asserting
that ``sent_statements`` heard nothing while the refused call ran (no statement,
no connection, no operation handed to the backend), so no backend can change
how the call ends and one run checks them all.
"""

reads_proven_elsewhere = pytest.mark.parametrize("db", ["sqlite"], indirect=True)
"""Run a test on the ``db`` fixture's SQLite backend only.

For a test of something computed in Python around the database (a header, a host
or origin check, a mount prefix, a redaction, an escape), whose every statement is
one that another test, named in a comment above it, checks on every backend.
"""


class _Heard(list[str]):
    """The statements heard, in order (a list, so ``assert sent == []`` reads plainly)."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()

    def hear(self, text: str) -> None:
        with self._lock:
            self.append(text)


def _backends(target: Any) -> list[Any]:
    if isinstance(target, Database):
        return list(target._sync_backends)
    if hasattr(target, "dialect") and hasattr(target, "run"):
        return [target]
    if hasattr(target, "backend"):
        return [target.backend]
    if hasattr(target, "client"):
        return _backends(target.client)
    raise TypeError(f"no backend to tap in {target!r}")


@contextlib.contextmanager
def _sqlite_tapped(backend: SQLiteBackend, heard: _Heard) -> Iterator[None]:
    traced: list[sqlite3.Connection] = []

    def trace(conn: sqlite3.Connection) -> None:
        try:
            conn.set_trace_callback(heard.hear)
        except sqlite3.ProgrammingError:
            return  # closed: it sends nothing more
        traced.append(conn)

    for conn in [backend._write_conn, *backend._read_conns]:
        if conn is not None:
            trace(conn)
    had = "_connect" in vars(backend)
    before = vars(backend).get("_connect")
    connect = backend._connect

    def tapped_connect(*, writer: bool) -> sqlite3.Connection:
        heard.hear(f"-- connect ({'writer' if writer else 'reader'})")
        conn = connect(writer=writer)
        trace(conn)
        return conn

    backend._connect = tapped_connect  # type: ignore[method-assign]
    try:
        yield
    finally:
        if had:
            backend._connect = before  # type: ignore[method-assign,assignment]
        else:
            del backend._connect
        for conn in traced:
            with contextlib.suppress(sqlite3.Error):
                conn.set_trace_callback(None)


_HAND_OFFS = ("run", "arun", "run_on", "arun_on", "arun_around")


@contextlib.contextmanager
def _hand_offs_tapped(backend: Any, heard: _Heard) -> Iterator[None]:
    """Each operation handed to ``backend`` while open, heard as ``-- run <op>``."""
    saved: list[tuple[str, bool, Any]] = []
    for name in _HAND_OFFS:
        method = getattr(backend, name, None)
        if method is None:
            continue
        saved.append((name, name in vars(backend), vars(backend).get(name)))
        setattr(backend, name, _heard_call(name, method, heard))
    try:
        yield
    finally:
        for name, had, before in saved:
            if had:
                setattr(backend, name, before)
            else:
                delattr(backend, name)


def _heard_call(name: str, method: Callable[..., Any], heard: _Heard) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        op = args[-1] if args else None
        heard.hear(f"-- {name} {getattr(op, '__name__', type(op).__name__)}")
        return method(*args, **kwargs)

    return call


@contextlib.contextmanager
def _psycopg_tapped(heard: _Heard) -> Iterator[None]:
    from psycopg import _connection_base, _cursor_base, client_cursor

    def text_of(query: Any, conn: Any) -> str:
        if isinstance(query, bytes | bytearray | memoryview):
            return bytes(query).decode(errors="replace")
        if isinstance(query, str):
            return query
        as_bytes = getattr(query, "as_bytes", None)
        if as_bytes is not None:
            return bytes(as_bytes(conn)).decode(errors="replace")
        return repr(query)

    def around_send(original: Callable[..., Any]) -> Callable[..., Any]:
        def send(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            heard.hear(text_of(query.query, cursor.connection))
            return original(cursor, query, *args, **kwargs)

        return send

    def around_command(original: Callable[..., Any]) -> Callable[..., Any]:
        def command(conn: Any, text: Any, *args: Any, **kwargs: Any) -> Any:
            heard.hear(text_of(text, conn))
            return original(conn, text, *args, **kwargs)

        return command

    patches = [
        (_cursor_base.BaseCursor, "_execute_send", around_send),
        (client_cursor.ClientCursorMixin, "_execute_send", around_send),
        (_connection_base.BaseConnection, "_exec_command", around_command),
    ]
    saved = [(owner, name, vars(owner)[name]) for owner, name, _ in patches]
    for owner, name, wrap in patches:
        setattr(owner, name, wrap(vars(owner)[name]))
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


@contextlib.contextmanager
def _connects_tapped(heard: _Heard) -> Iterator[None]:
    """Each connection this process opens while open, heard; a new SQLite one traced too."""
    import psycopg

    connect_sqlite = sqlite3.connect

    def tapped_sqlite(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        heard.hear(f"-- connect sqlite {database}")
        conn: sqlite3.Connection = connect_sqlite(database, *args, **kwargs)
        conn.set_trace_callback(heard.hear)
        return conn

    def around_connect(owner: type[Any]) -> Any:
        original = vars(owner)["connect"].__func__

        def connect(cls: Any, *args: Any, **kwargs: Any) -> Any:
            heard.hear("-- connect postgresql")
            return original(cls, *args, **kwargs)

        return classmethod(connect)

    owners: list[Any] = [psycopg.Connection, psycopg.AsyncConnection]
    saved = [(owner, vars(owner)["connect"]) for owner in owners]
    connect_psycopg = psycopg.connect
    sqlite3.connect = tapped_sqlite  # type: ignore[assignment]
    for owner in owners:
        owner.connect = around_connect(owner)
    psycopg.connect = psycopg.Connection.connect
    try:
        yield
    finally:
        sqlite3.connect = connect_sqlite
        psycopg.connect = connect_psycopg
        for owner, original in saved:
            owner.connect = original


@contextlib.contextmanager
def sent_anywhere(*targets: Any) -> Iterator[list[str]]:
    """What ``sent_statements(*targets)`` hears, and every connection this process opens.

    Every statement any psycopg connection sends is heard, and every statement sent on
    a SQLite connection opened while the block runs.
    """
    with sent_statements(*targets, anywhere=True) as heard:
        yield heard


@contextlib.contextmanager
def sent_statements(*targets: Any, anywhere: bool = False) -> Iterator[list[str]]:
    """Every statement the targets' databases receive while the block runs, in order.

    A ``Database`` target covers every backend it has made and every one it
    makes while the block runs.
    """
    heard = _Heard()
    with contextlib.ExitStack() as stack:
        backends = [backend for target in targets for backend in _backends(target)]
        if (
            anywhere
            or any(not isinstance(backend, SQLiteBackend) for backend in backends)
            or any(isinstance(target, Database) and target.kind == "postgres" for target in targets)
        ):
            stack.enter_context(_psycopg_tapped(heard))
        if anywhere:
            stack.enter_context(_connects_tapped(heard))
        for backend in backends:
            stack.enter_context(_hand_offs_tapped(backend, heard))
            if isinstance(backend, SQLiteBackend):
                stack.enter_context(_sqlite_tapped(backend, heard))
        for target in targets:
            if isinstance(target, Database):
                stack.enter_context(_new_backends_tapped(target, heard, stack))
        yield heard


@contextlib.contextmanager
def _new_backends_tapped(
    db: Database, heard: _Heard, stack: contextlib.ExitStack
) -> Iterator[None]:
    make = db.backend

    def tapped_backend(**options: Any) -> Any:
        backend = make(**options)
        stack.enter_context(_hand_offs_tapped(backend, heard))
        if isinstance(backend, SQLiteBackend):
            stack.enter_context(_sqlite_tapped(backend, heard))
        return backend

    db.backend = tapped_backend  # type: ignore[method-assign]
    try:
        yield
    finally:
        del db.backend
