"""PostgreSQL through an executor: the reference SDK's seam, for asyncpg or any driver.

A ``PgExecutor`` runs SQL with ``$n`` parameters (``query``), runs parameterless
scripts (``execute``), opens transactions (``transaction``) and may listen for
notifications (``listen``). ``create_pool_executor`` builds one on an asyncpg
pool (the ``asyncpg`` extra; ``_asyncpg_executor.py``). ``PgExecutorBackend`` runs cairnq's protocol
operations through any executor: each canonical statement's ``:name``
parameters become ``$n`` once per statement, a write operation of several
statements runs in one ``transaction()``, and wake-ups come from ``listen``
when the executor has it, from polling otherwise.

The executor is async: this backend serves ``CairnQ`` and ``Worker``. Its
blocking calls work only from another thread while the executor's event loop
runs (``SyncCairnQ`` refuses an executor).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import re
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from .. import _checks
from .._checks import MAX_IDENTIFIER_BYTES as MAX_IDENTIFIER_BYTES
from .._checks import SCHEMA_NAME as SCHEMA_NAME
from .._checks import check_schema as check_schema
from .._clock import Clock
from .._crashpoints import ARMED, around_commit
from .._wakeups import LISTEN_LINGER_S, WakeHub, hub_for
from ..errors import (
    CairnQError,
    DatabaseError,
    DatabaseUnavailable,
    InvalidArgument,
    ListenUnavailable,
    LostLease,
    StoreClosed,
    UnsupportedBackend,
)
from ..protocol.statements import Dialect, statements
from ..protocol.steps import (
    NOW,
    Call,
    Emit,
    Op,
    Rows,
    Script,
    Setup,
    adrive,
    arun_setup,
    is_single_statement,
)
from ._asyncpg_executor import PoolExecutor as PoolExecutor
from ._asyncpg_executor import create_pool_executor as create_pool_executor
from ._registry import opening
from .base import PLAIN_VALUES, LoopBinding, bind, missing_table

log = logging.getLogger("cairnq.postgres")

T = TypeVar("T")
V = TypeVar("V")

LISTEN_CHANNELS = ("cairnq_queued", "cairnq_done")
_CHANNEL = {"queued": "cairnq_queued", "done": "cairnq_done"}
_DRIVER_PLACEHOLDER = re.compile(r"%\(([A-Za-z_]\w*)\)s|%%")
_UNDEFINED_RELATION = re.compile(r'relation "(?:[^".]+\.)?([^".]+)" does not exist')
# SQLSTATEs: serialization failure and deadlock (worth another try), an undefined table.
_RETRYABLE_STATES = frozenset({"40001", "40P01"})
_UNDEFINED_TABLE = "42P01"
SYNC_REFUSED = (
    "a PgExecutor is async: use CairnQ.postgres(executor) or Worker.postgres(executor) "
    "from its event loop (SyncCairnQ cannot use it; give SyncCairnQ a DSN instead)"
)
JSON_DECODED = (
    "this PgExecutor decodes json/jsonb values; cairnq reads them as text (asyncpg's "
    "default): drop the json/jsonb type codec from the connections it uses"
)


@runtime_checkable
class PgSession(Protocol):
    """One place to run SQL: an executor, or a transaction's connection.

    Example::

        rows = await session.query("select id, status from cairnq_tasks where id = $1", [task_id])
    """

    async def query(self, text: str, values: Sequence[Any]) -> Sequence[Mapping[str, Any]]:
        """Run ``text`` with ``$1``, ``$2``... bound to ``values`` (``None`` is NULL).

        Returns:
            The rows, each a mapping of column name to value (json/jsonb as text).
        """
        ...

    async def execute(self, sql: str) -> Any:
        """Run ``sql`` without parameters; it may hold several statements."""
        ...


@runtime_checkable
class PgExecutor(PgSession, Protocol):
    """A PostgreSQL connection source cairnq runs its operations through.

    Besides ``PgSession``'s ``query`` and ``execute``: ``transaction()`` is an async
    context manager yielding a ``PgSession`` on one connection, committing on a
    normal exit and rolling back on an exception; ``close()`` releases it (cairnq
    never closes an executor it was given). An executor may also have
    ``listen(channels, on_notify, on_close) -> stop``: it calls
    ``on_notify(channel, payload)`` per notification and ``on_close()`` when the
    listening connection is lost; ``stop()`` ends listening. It raises
    ``ListenUnavailable`` when LISTEN can never work. Without ``listen``, cairnq polls.

    Example::

        executor = create_pool_executor("postgresql://localhost/app")
        async with CairnQ.postgres(executor) as cq:
            await cq.submit("email.send", {"to": "a@example.com"})
        await executor.close()
    """

    def transaction(self) -> AbstractAsyncContextManager[PgSession]:
        """A transaction on one connection, yielding the session to run its statements on."""
        ...

    async def close(self) -> None:
        """Release the executor's connections."""
        ...


def is_executor(source: object) -> bool:
    """Whether ``source`` is a ``PgExecutor`` (not a DSN, pool or connection of psycopg's)."""
    return not isinstance(source, str) and isinstance(source, PgExecutor)


def positional(text: str) -> tuple[str, tuple[str, ...]]:
    """A statement's driver text (``%(name)s``) with ``$n`` placeholders instead.

    Returns:
        The text, and the parameter names in ``$n`` order (each name once).
    """
    order: dict[str, int] = {}

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "%"
        if name not in order:
            order[name] = len(order) + 1
        return f"${order[name]}"

    return _DRIVER_PLACEHOLDER.sub(replace, text), tuple(order)


def _translate(exc: BaseException) -> BaseException:
    """A driver's error as a ``cairnq.errors`` one, told apart by SQLSTATE; others pass."""
    if isinstance(exc, CairnQError) or not isinstance(exc, Exception):
        return exc
    state = getattr(exc, "sqlstate", None)
    if not isinstance(state, str):
        if _is_pool_closed(exc):
            return StoreClosed(f"the executor's connection pool was closed: {exc}")
        if isinstance(exc, (OSError, ConnectionError)) or _is_connection_error(exc):
            return DatabaseUnavailable(f"PostgreSQL connection failed: {exc}")
        return exc
    if state in _RETRYABLE_STATES:
        return DatabaseError(f"PostgreSQL aborted the transaction: {exc}", retryable=True)
    if state == _UNDEFINED_TABLE:
        relation = _UNDEFINED_RELATION.search(str(exc))
        if relation and relation.group(1).startswith("cairnq_"):
            return missing_table(relation.group(1))
    if state.startswith("08"):
        return DatabaseUnavailable(f"PostgreSQL connection failed: {exc}")
    return DatabaseError(f"PostgreSQL error: {exc}")


def _is_pool_closed(exc: BaseException) -> bool:
    """asyncpg's pool, closed or closing, says so in an ``InterfaceError``: for good."""
    return type(exc).__name__ == "InterfaceError" and str(exc).lower() in {
        "pool is closed",
        "pool is closing",
    }


def _is_connection_error(exc: BaseException) -> bool:
    """asyncpg's lost-connection errors carry no SQLSTATE; they are told by class name."""
    return type(exc).__name__ in {"ConnectionDoesNotExistError", "InterfaceError"} and (
        "connection" in str(exc).lower()
    )


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class PgExecutorBackend:
    """cairnq's PostgreSQL protocol run through a ``PgExecutor`` (asyncpg or any driver).

    Args:
        executor: The executor; cairnq never closes it unless ``owns_executor``.
        schema: The schema holding cairnq's tables: only checked (the executor's
            connections must already have it first in ``search_path``).
        clock: Supply ``now_ms`` from this clock instead of the database's.
        migrate: Apply pending migrations on open (default); otherwise only check.
        repair: With ``migrate``, apply again the recorded migrations whose
            objects are missing (see ``cairnq.migrate``).
        listen: Wake waiters through ``executor.listen`` when it has one (default).
        owns_executor: Close the executor when the backend closes.

    Raises:
        InvalidArgument: ``executor`` is no ``PgExecutor``, or a bad schema name.

    Example::

        backend = PgExecutorBackend(create_pool_executor(dsn))
        async with CairnQ(backend) as cq:
            await cq.submit("report.build", {"month": "2026-11"})
    """

    dialect: Dialect = "postgres"
    # A lone claim statement runs autocommitted (OneStatementClaims).
    runs_lone_claims = True

    def __init__(
        self,
        executor: PgExecutor,
        *,
        schema: str | None = None,
        clock: Clock | None = None,
        migrate: bool = True,
        repair: bool = False,
        listen: bool = True,
        owns_executor: bool = False,
    ) -> None:
        if not is_executor(executor):
            raise InvalidArgument(
                "expected a PgExecutor (query, execute, transaction, close), "
                f"got {type(executor).__name__}"
            )
        self.executor = executor
        self.schema = check_schema(schema)
        self.clock = clock
        self.migrate = migrate
        self.repair = _checks.check_repair(repair, migrate)
        self.migrations_applied: list[str] = []
        self._listen_enabled = listen and callable(getattr(executor, "listen", None))
        self._owns_executor = owns_executor
        self.hub: WakeHub = hub_for(f"pgexecutor:{id(executor)}|{self.schema or ''}")
        self._statements = statements("postgres")
        self._compiled: dict[str, tuple[str, tuple[str, ...]]] = {}
        self._state: Literal["new", "open", "closed"] = "new"
        self._setup_done = False
        self._setup_lock: asyncio.Lock | None = None
        self._loops = LoopBinding()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listen_task: asyncio.Task[None] | None = None
        self._listening = False
        self._demand_changed = asyncio.Event()
        self._channels: frozenset[str] = frozenset()

    def __repr__(self) -> str:
        name = type(self.executor).__name__
        return f"<PgExecutorBackend {name} schema={self.schema!r} {self._state}>"

    @property
    def label(self) -> str:
        """The database in a few words: ``PostgreSQL (executor)``."""
        return "PostgreSQL (executor)"

    @property
    def description(self) -> str:
        """The database in words for banners and errors; the executor holds the address."""
        where = f", schema {self.schema}" if self.schema else ""
        return f"PostgreSQL through {type(self.executor).__name__}{where}"

    @property
    def listening(self) -> bool:
        """Whether ``executor.listen`` is delivering wake-ups (else waiters poll)."""
        return self._listening

    @property
    def listening_channels(self) -> frozenset[str]:
        """The wake-up channels (``"queued"``, ``"done"``) ``executor.listen`` is on now."""
        return self._channels

    @property
    def home_loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the backend is bound to, while it runs (else ``None``).

        Async calls must come from this loop; other threads hand their coroutines
        to it (``asyncio.run_coroutine_threadsafe``).
        """
        loop = self._loop
        if loop is None or loop.is_closed() or not loop.is_running():
            return None
        return loop

    # --- the async half ------------------------------------------------------------

    def _bind_loop(self) -> None:
        self._loops.check()
        self._loop = asyncio.get_running_loop()

    async def aopen(self) -> None:
        """Check the installation and migrate (or verify) through the executor; idempotent.

        Raises:
            SchemaMismatch: the executor's connections see another installation.
            UnsupportedBackend: the executor decodes json/jsonb values.
            StoreClosed: the backend was closed.
        """
        self._bind_loop()
        if self._state == "closed":
            raise StoreClosed("this PostgreSQL executor backend was closed")
        if self._setup_lock is None:
            self._setup_lock = asyncio.Lock()
        async with self._setup_lock:
            if not self._setup_done:
                await self._check_json_wire_form()
                self.migrations_applied = await arun_setup(
                    self._setup(), lambda step: self._arun_now(step.op, write=step.write)
                )
                self._setup_done = True
            if self._state == "new":
                self._state = "open"
            self._start_listening()

    async def _check_json_wire_form(self) -> None:
        try:
            rows = await self.executor.query("select '\"cairnq\"'::jsonb as v", [])
        except BaseException as exc:
            raise _translate(exc) from exc
        if rows[0]["v"] != '"cairnq"':
            raise UnsupportedBackend(JSON_DECODED)

    def _setup(self) -> Setup:
        steps = opening()
        return steps.setup(
            "postgres",
            migrate=self.migrate,
            repair=self.repair,
            installation_check=steps.installation_check(self.schema),
        )

    async def arun(self, op: Op[T], *, write: bool) -> T:
        """Run ``op`` through the executor (in one transaction when it writes more than once)."""
        self._bind_loop()
        if self._state != "open":
            await self.aopen()
        return await self._arun_now(op, write=write)

    async def _arun_now(self, op: Op[T], *, write: bool) -> T:
        try:
            if write and not is_single_statement(op):
                async with self.executor.transaction() as session:
                    value, emits = await adrive(op, lambda step: self._execute(session, step))
                    if ARMED is not None:
                        around_commit("before_commit", _op_name(op))
            else:
                value, emits = await adrive(op, lambda step: self._execute(self.executor, step))
        except BaseException as exc:
            raise _translate(exc) from exc
        if ARMED is not None and write:
            around_commit("after_commit", _op_name(op))
        self.hub.publish(emits)
        return value

    async def _execute(self, session: PgSession, step: Call | Script) -> Rows:
        if isinstance(step, Script):
            await session.execute(step.source)
            return []
        statement = self._statements[step.statement]
        compiled = self._compiled.get(step.statement)
        if compiled is None:
            compiled = self._compiled[step.statement] = positional(statement.text)
        text, names = compiled
        params = bind(statement, step.params, self._adapt, unchanged=PLAIN_VALUES)
        rows = await session.query(text, [params[name] for name in names])
        return [dict(row) for row in rows] if rows else []

    def _adapt(self, name: str, value: Any) -> Any:
        if value is NOW:
            return None if self.clock is None else self.clock.now_ms()
        if isinstance(value, tuple):
            return list(value)
        return value

    async def arun_around_write(
        self,
        before: Op[bool],
        write: Callable[[PgSession], Awaitable[V]],
        after: Callable[[V | None], Op[T]],
    ) -> T:
        """Run ``before``, ``await write(session)`` (unless ``before`` returned true) and
        ``after(its value)`` in one transaction of the executor.

        ``before`` runs first, so whatever it locks (the attempt's row, in
        ``ctx.succeed_in``) stays locked until the commit; whatever raises rolls
        back ``write``'s changes with the rest.
        """
        self._bind_loop()
        if self._state != "open":
            await self.aopen()
        emits: list[Emit] = []
        try:
            async with self.executor.transaction() as session:
                skip, _ = await adrive(before, lambda step: self._execute(session, step))
                value = None if skip else await write(session)
                op = after(value)
                result, emits = await adrive(op, lambda step: self._execute(session, step))
                if ARMED is not None:
                    around_commit("before_commit", _op_name(op))
            if ARMED is not None:
                around_commit("after_commit", _op_name(op))
        except LostLease:
            raise
        except BaseException as exc:
            raise _translate(exc) from exc
        self.hub.publish(emits)
        return result

    async def arun_on(self, conn: PgSession, op: Op[T]) -> T:
        """Run ``op`` on a session of the application's transaction; the application commits.

        ``conn`` is the session ``executor.transaction()`` yielded. The operation
        runs in a savepoint, so its own failure leaves the application's
        transaction usable. Wake-ups come from the NOTIFY trigger at its commit.

        Raises:
            SchemaMismatch: the session's current schema is not this backend's.
        """
        self._bind_loop()
        if not self._setup_done:
            await self.aopen()
        try:
            if self.schema is not None:
                await adrive(
                    opening().installation_check(self.schema),
                    lambda step: self._execute(conn, step),
                )
            await conn.execute("savepoint cairnq_op")
            try:
                value, _ = await adrive(op, lambda step: self._execute(conn, step))
            except BaseException:
                await conn.execute("rollback to savepoint cairnq_op")
                raise
            await conn.execute("release savepoint cairnq_op")
        except BaseException as exc:
            raise _translate(exc) from exc
        return value

    def run_on(self, conn: Any, op: Op[T]) -> T:
        """Refused: an executor's sessions are async (``SyncCairnQ`` cannot use one)."""
        raise UnsupportedBackend(SYNC_REFUSED)

    def _start_listening(self) -> None:
        if self._listen_enabled and self._listen_task is None:
            self.hub.add_tap(self)
            self._listen_task = asyncio.ensure_future(self._listen_loop())

    def demand_changed(self) -> None:
        """The hub's needed channels changed: the listen loop looks again (any thread)."""
        loop, changed = self._loop, self._demand_changed
        if loop is None:
            return
        if asyncio._get_running_loop() is loop:
            changed.set()
        else:  # a closed loop raises RuntimeError: nobody listens there any more
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(changed.set)

    async def _listen_loop(self) -> None:
        """Listen through the executor on the channels the hub needs; listen again when lost.

        A change of the needed channels starts a new ``listen`` before stopping the
        old one, so the channels both cover miss nothing; with none needed (after
        ``LISTEN_LINGER_S``) nothing listens. A failed attempt is retried after
        1 s, doubling to 30 s. After every restart from a loss the hub is poked
        once, so waiters catch up on anything sent while no one listened.
        """
        listen = self.executor.listen  # type: ignore[attr-defined]

        def on_notify(channel: str, payload: str) -> None:
            if channel == "cairnq_queued":
                self.hub.publish([Emit("queued", payload)])
            elif channel == "cairnq_done":
                self.hub.publish([Emit("done", payload)])

        delay = 1.0
        live: frozenset[str] = frozenset()
        stop: Callable[[], Any] | None = None
        lost = asyncio.Event()
        recovering = False
        # Until listen fails, the hub counts on it: a waiter waits for its channel.
        self._listening = True
        self.hub.tap_live(self, live)
        try:
            while True:
                self._demand_changed.clear()
                needed, shrinks = self.hub.channels_needed(LISTEN_LINGER_S)
                if lost.is_set():
                    log.info("LISTEN connection lost; listening again")
                    self.hub.tap_live(self, frozenset())
                    lost, recovering, live = asyncio.Event(), True, frozenset()
                    self._channels = live
                    await self._stop_listen(stop)
                    stop = None
                if needed != live:
                    if live - needed:
                        self.hub.tap_live(self, live & needed)
                    fresh = asyncio.Event()
                    try:
                        started = (
                            await _maybe_await(
                                listen([_CHANNEL[c] for c in sorted(needed)], on_notify, fresh.set)
                            )
                            if needed
                            else None
                        )
                    except ListenUnavailable as exc:
                        log.warning("LISTEN is unavailable (%s); cairnq falls back to polling", exc)
                        return
                    except Exception as exc:
                        log.info("LISTEN failed (%s); trying again in %.0f s", exc, delay)
                        self.hub.tap_down(self)
                        self._listening = False
                        await asyncio.sleep(delay)
                        delay = min(30.0, delay * 2)
                        self._listening = True
                        self.hub.tap_live(self, live)
                        recovering = True
                        continue
                    delay = 1.0
                    await self._stop_listen(stop)
                    stop, lost, live = started, fresh, needed
                    self._channels = live
                    self.hub.tap_live(self, live)
                    if recovering:
                        recovering = False
                        self.hub.poke()
                waits = [asyncio.ensure_future(self._demand_changed.wait())]
                waits.append(asyncio.ensure_future(lost.wait()))
                timeout = None if shrinks is None else max(0.0, shrinks - time.monotonic())
                try:
                    await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for waiting in waits:
                        waiting.cancel()
        finally:
            self._listening = False
            self._channels = frozenset()
            self.hub.tap_down(self)
            await self._stop_listen(stop)

    async def _stop_listen(self, stop: Callable[[], Any] | None) -> None:
        if stop is not None:
            with contextlib.suppress(Exception):
                await _maybe_await(stop())

    async def aclose(self) -> None:
        """Stop listening, and close the executor if this backend owns it."""
        own_loop = self._loops.check_close()
        self._state = "closed"
        if not own_loop:
            self.hub.remove_tap(self)
            self._listen_task = None
            return
        self.hub.remove_tap(self)
        if self._listen_task is not None:
            self._listen_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._listen_task
            self._listen_task = None
        if self._owns_executor:
            await self.executor.close()

    # --- the blocking half: only from another thread while the executor's loop runs ------

    def _blocking(self, work: Coroutine[Any, Any, T]) -> T:
        loop = self._loop
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or loop.is_closed() or not loop.is_running() or running is loop:
            work.close()
            raise UnsupportedBackend(SYNC_REFUSED)
        return asyncio.run_coroutine_threadsafe(work, loop).result()

    def open(self) -> None:
        """``aopen`` from another thread, while the executor's event loop runs."""
        self._blocking(self.aopen())

    def run(self, op: Op[T], *, write: bool) -> T:
        """``arun`` from another thread, while the executor's event loop runs."""
        return self._blocking(self.arun(op, write=write))

    def close(self) -> None:
        """``aclose`` from another thread while the executor's loop runs; else only mark closed."""
        loop = self._loop
        if loop is not None and loop.is_running() and not _on_loop(loop):
            asyncio.run_coroutine_threadsafe(self.aclose(), loop).result()
            return
        self._state = "closed"
        if self._listen_task is not None and not self._listen_task.done():
            log.warning(
                "close() cannot stop listening from the event loop; use "
                "'await backend.aclose()' (or 'await client.close()')"
            )


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _op_name(op: Op[Any]) -> str:
    return str(getattr(op, "__name__", ""))
