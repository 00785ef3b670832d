# generated from src/cairnq/backends/_pg_async.py by scripts/generate_sync.py; do not edit
"""The PostgreSQL backend's blocking paths: ``PostgresBackend`` mixes them in."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any, TypeVar

from .._crashpoints import (
    ARMED,
    PAUSE_ARMED,
    around_commit,
    pausepoint_when_quiet,
    write_began,
    write_ended,
)
from ..errors import StoreClosed, UnsupportedBackend
from ..protocol.steps import (
    Call,
    Emit,
    Op,
    Rows,
    Script,
    drive,
    is_pipelined,
    is_single_statement,
    read_ahead,
    run_setup,
)
from ._pg_errors import translate as _translate
from ._pg_pool import hand_out_most_recent_first
from ._postgres_core import (
    CONNECT_POLL_S,
    POOL_CONNECT_ERRORS,
    SYNC_NO_CONNECTION,
    SYNC_POOL_NAME,
    SYNC_WRAPS_OTHER,
    PostgresCore,
    _autocommits,
    _configure_json,
    _cursor_json_as_text,
    _has_columns,
    _joins_callers_transaction,
    _op_name,
    _require_psycopg_connection,
    _runs_apart,
    dict_row,
    psycopg,
    psycopg_pool,
    sql,
)
from ._registry import opening

T = TypeVar("T")


class SyncPostgresPaths(PostgresCore):
    """Opening, running operations and the application's transaction: one half of the backend."""

    def _configure_sync(self, conn: psycopg.Connection[Any]) -> None:
        _configure_json(conn)
        if self.schema is not None:
            conn.execute(sql.SQL("set search_path to {}").format(sql.Identifier(self.schema)))

    def open(self) -> None:
        """Connect and migrate now rather than on first use."""
        self._check_loop()
        if self._state == "closed":
            raise StoreClosed("this PostgreSQL backend was closed")
        with self._sync_setup_guard():
            if self._sync_source is None:
                if self._dsn is None:
                    raise UnsupportedBackend(SYNC_WRAPS_OTHER)
                pool = psycopg_pool.ConnectionPool(
                    self._conninfo(self.role),
                    min_size=self.min_size,
                    max_size=self.max_size,
                    kwargs={"autocommit": True},
                    configure=self._configure_sync,
                    open=False,
                    name=SYNC_POOL_NAME + self._pool_suffix,
                )
                hand_out_most_recent_first(pool)
                try:
                    if self.schema is not None and self.migrate:
                        self._create_schema_sync()
                    pool.open(wait=False)
                    started = time.monotonic()
                    while True:
                        try:
                            with pool.connection(timeout=CONNECT_POLL_S):
                                break
                        except psycopg_pool.PoolTimeout:
                            self._still_unreachable(SYNC_POOL_NAME + self._pool_suffix, started)
                except BaseException as exc:
                    pool.close()
                    raise _translate(exc) from exc
                finally:
                    POOL_CONNECT_ERRORS.forget(SYNC_POOL_NAME + self._pool_suffix)
                self._sync_source = pool
                self._guard_pool(pool)
            if not self._setup_done:
                self.migrations_applied = run_setup(
                    self._setup(), lambda step: self._run_now(step.op, write=step.write)
                )
                self._setup_done = True
            if self._state == "new":
                self._state = "open"
            self._start_listening()

    def _create_schema_sync(self) -> None:
        try:
            with psycopg.Connection.connect(self._conninfo("migrate"), autocommit=True) as conn:
                conn.execute(self._create_schema_sql())
        except psycopg.Error as exc:
            raise self._connect_failed(exc) from exc

    def run(self, op: Op[T], *, write: bool) -> T:
        """Run ``op`` (in one transaction when ``write``), opening the backend if needed."""
        self._check_loop()
        if self._state != "open" or self._sync_source is None:
            self.open()
        return self._run_now(op, write=write)

    def _run_now(self, op: Op[T], *, write: bool) -> T:
        counted = PAUSE_ARMED is not None and write
        if counted:
            pausepoint_when_quiet(f"before_write:{_op_name(op)}")
            write_began()

        def attempt() -> tuple[T, list[Emit]]:
            with self._sync_connection() as conn:
                return self._drive_on(conn, op, write=write)

        source = self._sync_source
        try:
            if (
                ARMED is None
                and is_single_statement(op)
                and isinstance(source, psycopg_pool.ConnectionPool)
            ):
                value, emits = self._bounded(lambda: self._run_alone(source, op, write=write))
            else:
                value, emits = self._bounded(attempt)
        except BaseException as exc:
            raise _translate(exc) from exc
        finally:
            if counted:
                write_ended()
        self.hub.publish(emits)
        return value

    def _run_alone(
        self, pool: psycopg_pool.ConnectionPool[Any], op: Op[T], *, write: bool
    ) -> tuple[T, list[Emit]]:
        """Run one-statement ``op`` on a connection of ``pool``, taken and given back directly.

        On an autocommit connection the statement commits as it runs, so the
        connection's own context (a commit, or a rollback after an error) has
        nothing to do; the pool still discards a connection returned broken.
        Any other connection runs ``op`` as ``_adrive_on`` does.
        """
        conn = pool.getconn()
        if not conn.autocommit:
            # Not a connection of cairnq's own pool: the pool's context commits or rolls
            # back what the op leaves open (``with conn`` would close it).
            pool.putconn(conn)
            with self._sync_connection() as held:
                return self._drive_on(held, op, write=write)
        try:

            def execute(step: Call | Script) -> Rows:
                return self._execute_sync(conn, step)

            with self._watch(conn):
                return drive(op, execute)
        finally:
            pool.putconn(conn)

    def _drive_on(
        self,
        conn: psycopg.Connection[Any],
        op: Op[T],
        *,
        write: bool,
        commits: bool = True,
    ) -> tuple[T, list[Emit]]:
        """Run ``op`` on ``conn``; a write commits here unless ``commits`` is false.

        With ``commits=False`` the caller's open transaction holds the commit, and
        the caller passes the ``before_commit``/``after_commit`` crash points.
        """

        def execute(step: Call | Script) -> Rows:
            return self._execute_sync(conn, step)

        with self._watch(conn):
            if not write:
                return drive(op, execute)
            # Inside the caller's transaction a single statement needs no savepoint.
            alone = (
                _autocommits(op, conn) if commits else is_single_statement(op) and conn.autocommit
            )
            if alone:
                result = drive(op, execute)
                if ARMED is not None and commits:
                    around_commit("after_commit", _op_name(op))
                return result
            if commits and is_pipelined(op):
                return self._drive_pipelined(conn, op)
            with conn.transaction():
                result = drive(op, execute)
                if ARMED is not None and commits:
                    around_commit("before_commit", _op_name(op))
            if ARMED is not None and commits:
                around_commit("after_commit", _op_name(op))
            return result

    def _drive_pipelined(self, conn: psycopg.Connection[Any], op: Op[T]) -> tuple[T, list[Emit]]:
        """Run write ``op`` in pipeline mode, in a transaction (see ``Pipelined``).

        The begin, each ``discard`` step and the commit are queued on the
        connection; the client waits for the server only at a step whose rows
        the operation reads, and at the end. Calls that may commit apart
        (``Call.apart``) at the start of what is left of the operation are queued
        outside a transaction block, as long as they come: the server runs each run
        of them as an implicit transaction, committed at the sync after its last
        statement, each statement with a snapshot taken as it starts. What follows
        them, if anything, runs in a transaction as above.
        """
        name = _op_name(op)
        emits: list[Emit] = []
        apart = _runs_apart(op, conn)
        with conn.pipeline() as pipeline:

            def execute(step: Call | Script) -> Rows:
                if isinstance(step, Script):
                    pipeline.sync()
                    return self._execute_sync(conn, step)
                text, params = self._params(step)
                cur = conn.cursor(row_factory=dict_row)
                _cursor_json_as_text(conn, cur)
                cur.execute(text, params)
                if step.discard:
                    return []
                pipeline.sync()
                return cur.fetchall() if _has_columns(cur) else []

            while apart:
                ahead = read_ahead(op)
                if not ahead.apart:
                    op = ahead.whole()
                    break
                for call in ahead.apart:
                    rows = execute(call)
                emits += ahead.emits
                op = ahead.rest(rows)
                if ahead.ended:
                    if ARMED is not None:
                        around_commit("after_commit", name)
                    return ahead.value, emits
            with conn.transaction():
                value, later = drive(op, execute)
                if ARMED is not None:
                    around_commit("before_commit", name)
        if ARMED is not None:
            around_commit("after_commit", name)
        return value, emits + later

    @contextlib.contextmanager
    def _sync_connection(self) -> Iterator[psycopg.Connection[Any]]:
        source = self._sync_source
        if isinstance(source, psycopg_pool.ConnectionPool):
            with source.connection() as conn:
                yield conn
        elif isinstance(source, psycopg.Connection):
            with self._sync_conn_guard():
                yield source
        else:
            raise StoreClosed(SYNC_NO_CONNECTION)

    def _execute_sync(self, conn: psycopg.Connection[Any], step: Call | Script) -> Rows:
        if isinstance(step, Script):
            conn.execute(step.source.encode())
            return []
        text, params = self._params(step)
        cur = conn.cursor(row_factory=dict_row)
        _cursor_json_as_text(conn, cur)
        cur.execute(text, params)
        return cur.fetchall() if _has_columns(cur) else []

    def run_on(self, conn: psycopg.Connection[Any], op: Op[T]) -> T:
        """Run ``op`` on the caller's connection, as part of the caller's transaction.

        Nothing is committed here: the work becomes visible when the caller
        commits and disappears if it rolls back. Inside an open transaction the
        operation runs in a savepoint, so its own failure leaves the caller's
        transaction usable. On an autocommit connection outside a transaction
        block it runs in a transaction of its own. Wake-ups come from the NOTIFY
        trigger at the caller's commit.

        Raises:
            SchemaMismatch: the connection's current schema is not this backend's.
            UnsupportedBackend: ``conn`` is no psycopg connection (a ``sqlite3`` one).
        """
        _require_psycopg_connection(conn)
        self._check_loop()
        if not self._setup_done:
            self.open()
        try:
            if self.schema is not None:
                drive(
                    opening().installation_check(self.schema),
                    lambda step: self._execute_sync(conn, step),
                )
            if _joins_callers_transaction(conn):
                value, _ = drive(op, lambda step: self._execute_sync(conn, step))
            else:
                with conn.transaction():
                    value, _ = drive(op, lambda step: self._execute_sync(conn, step))
        except BaseException as exc:
            raise _translate(exc) from exc
        return value
