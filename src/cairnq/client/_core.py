"""What both clients share, written once: options, op-building and the wait procedure.

No IO happens here; ``_async.py`` (and the ``_sync.py`` half generated from it)
runs the operations.
"""

from __future__ import annotations

import datetime
import logging
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, overload

from .. import _ids, kernel
from .._checks import MAX_DELAY_MS, check_int
from .._clock import SYSTEM_CLOCK, Clock
from .._deprecated import renamed
from .._json import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, JsonCodec
from .._readiness import Readiness
from .._sealing import Codec, check_codec
from .._wait import next_poll_ms
from .._wakeups import Subscription
from ..backends import (
    Backend,
    SQLiteBackend,
    Synchronous,
    TransactionalRunner,
    clock_of,
    description_of,
    open_backend,
)
from ..backoff import check_definition
from ..backpressure import DEFAULT_MAX_QUEUE_WAIT_MS, DepthLimit, QueueGate
from ..durations import Duration, delay_ms_of, duration_or_ms, format_duration, point_ms
from ..errors import (
    InvalidArgument,
    TaskCanceled,
    TaskFailed,
    TaskTimeout,
    UnsupportedBackend,
)
from ..extensions import Endings, Extension, install
from ..hooks import SubmitHook
from ..kernel.procedures import Nap, Procedure, Run
from ..kernel.store_calls import StoreCall
from ..lineage import Lineage
from ..models import QueueActivity, QueueSummary, Task, TaskDef, TaskRef
from ..protocol.steps import Op
from ..store import TaskStore, replaced
from ._checks import check_metadata, handler_task, task_or_name

T = TypeVar("T")
C = TypeVar("C", bound="_ClientCore")
TaskList = list[Task]
IdList = list[str]
SummaryList = list[QueueSummary]
ActivityList = list[QueueActivity]

log = logging.getLogger("cairnq.client")

DEFAULT_WAIT_TIMEOUT_MS = 30_000
DEFAULT_POLL_MS = 100
DEFAULT_MAX_POLL_MS = 500
DEFAULT_WATCH_POLL_MS = 2000
_SUBMIT_DEFAULTS: dict[str, Any] = {
    "key": None,
    "queue": None,
    "conflict": "reuse",
    "max_attempts": None,
    "priority": None,
    "metadata": None,
    "delay_ms": None,
    "delay": None,
    "run_at": None,
    "parent_id": None,
    "root_id": None,
    "correlation_id": None,
    "lineage": None,
}
# What a submit_many dict may hold: the task, its payload and submit's options.
_ITEM_FIELDS = frozenset({"task", "payload", *_SUBMIT_DEFAULTS})
# The fields ``_named_item`` reads as they are, with no conversion.
_PLAIN_FIELDS = _ITEM_FIELDS - {"delay", "run_at", "lineage"}
WATCH_BUFFER = 1024


@dataclass(frozen=True)
class WatchSignal:
    """What ``watch`` yields: ``kind`` is ``"queued"`` (value: the queue),
    ``"done"`` (value: the task id) or ``"poll"`` (the timer; value empty)."""

    kind: Literal["queued", "done", "poll"]
    value: str


class _Connect:
    """``connect`` in both of its spellings, told apart by how it is reached.

    On the class, ``CairnQ.connect(url, **options)`` builds a client for a URL
    (cairnq's form). On an instance, ``await cq.connect()`` (``cq.connect()`` on
    ``SyncCairnQ``) opens that client and returns it, as ``open()`` does (the
    reference SDK's form).
    """

    @overload
    def __get__(self, obj: None, owner: type[C]) -> Callable[..., C]: ...

    @overload
    def __get__(self, obj: C, owner: type[C] | None = None) -> Callable[[], Any]: ...

    def __get__(self, obj: Any, owner: Any = None) -> Callable[..., Any]:
        if obj is not None:
            opener: Callable[[], Any] = obj.open

            def open_this(*args: Any, **options: Any) -> Any:
                if args or options:
                    raise InvalidArgument(
                        "connect() on a client opens that client and takes no arguments; "
                        f"to build a client for a URL, call {type(obj).__name__}.connect(url)"
                    )
                return opener()

            return open_this
        client_class = owner

        def connect(url: str | os.PathLike[str], **options: Any) -> Any:
            return client_class(url, **options)

        connect.__doc__ = _CONNECT_DOC
        connect.__qualname__ = f"{client_class.__name__}.connect"
        return connect


_CONNECT_DOC = """A client for a database URL, or (on an instance) open this client.

``CairnQ.connect(url, **options)`` builds a client for ``sqlite:///tasks.db``,
``postgresql://...`` or a SQLite path; options other than the client's own go
to the backend. Nothing is opened until first use (or ``open()``).

``await cq.connect()`` on a client already built (``cq.connect()`` on
``SyncCairnQ``) connects and migrates it now and returns it, like ``open()``;
``close()`` ends it.

Args:
    url: The database URL or SQLite file path (class form only).
    **options: Client and backend options (class form only).

Returns:
    The client.

Raises:
    InvalidArgument: a URL or option cairnq cannot use.

Example::

    cq = CairnQ.connect("sqlite:///tasks.db")     # cairnq's form
    cq = CairnQ.sqlite("tasks.db")
    await cq.connect()                            # the reference SDK's form
"""


# The most task names a client remembers as checked; past it, it starts again.
CHECKED_NAMES = 1024


class _ClientCore:
    """State and op-building shared by both clients; performs no IO."""

    # The backend method that runs an operation on the application's connection.
    _RUN_ON = "run_on"

    def __init__(
        self,
        backend: Backend | TaskStore | str | os.PathLike[str],
        *,
        max_payload_bytes: int = DEFAULT_MAX_BYTES,
        max_json_depth: int = DEFAULT_MAX_DEPTH,
        max_queue_depth: DepthLimit = None,
        max_queue_wait_ms: int = DEFAULT_MAX_QUEUE_WAIT_MS,
        extensions: Sequence[Extension] = (),
        codec: Codec | None = None,
        **backend_options: Any,
    ) -> None:
        # Extensions outside cairnq: checked, and their statements and migrations added
        # before the backend opens (so opening it with migrate=True applies them).
        self.extensions = install(extensions)
        # Each extension's namespace on this client, by extension class, built on first use.
        self._namespaces: dict[type[Any], object] = {}
        store: TaskStore | None = None
        if isinstance(backend, TaskStore):
            # The reference's CairnQ(store): the client runs on the store's backend.
            store, backend = backend, backend.backend
        if isinstance(backend, (str, os.PathLike)):
            self.backend: Backend = open_backend(backend, **backend_options)
            self._owns_backend = True
        elif isinstance(backend, Backend):
            if backend_options:
                raise InvalidArgument(
                    f"backend options {sorted(backend_options)} only apply when given a URL"
                )
            self.backend = backend
            self._owns_backend = False
        else:
            raise InvalidArgument(
                f"expected a Backend, a TaskStore or a database URL, got {backend!r}"
            )
        self.gate = QueueGate(max_queue_depth, max_queue_wait_ms, extensions=self.extensions)
        # Whether the database has each extension's tables, by extension name, as last read.
        self._ready: dict[str, Readiness] = {}
        # The hooks of the writes that end tasks here (cancels, replacing submits).
        self._endings = Endings(self.extensions, self._readiness)
        if store is not None:
            # Backpressure lives on the store, so the store's own submits are gated too.
            if max_queue_depth is None:
                self.gate = store.gate
            else:
                store.gate = self.gate
        # Checked once per submit: with no hooks a submit does nothing more. The list is
        # the store's own (``store.submit`` runs the same hooks), shared, never copied.
        self.submit_hooks: list[SubmitHook] = [] if store is None else store.submit_hooks
        # Task names a plain submit has checked already (``_plain_spec``).
        self._checked_names: set[str] = set()
        # The max_attempts declared by handlers registered on workers built on this client
        # (``@worker.task(max_attempts=5)``), by task name: a submit of the name that gives
        # none writes it (``docs/policies.md``).
        self.handler_attempts: dict[str, int] = {}
        self.codec = JsonCodec(
            max_bytes=check_int(max_payload_bytes, "max_payload_bytes", low=1, high=2**31),
            max_depth=check_int(max_json_depth, "max_json_depth", low=1, high=10_000),
            sealer=check_codec(codec, "CairnQ"),
        )
        self._store = store

    @property
    def store(self) -> TaskStore:
        """The store layer over this client's backend (the reference SDK's ``cq.store``).

        The same store for the life of the client; it shares the client's backend,
        backpressure gate and submit hooks, and closing it leaves the backend open.
        A method replaced on it changes what the client and a worker over this
        client do (see ``cairnq.store``).

        Example::

            [task] = await cq.store.claim(queues=["default"], worker_id="w1")
        """
        if self._store is None:
            self._store = TaskStore(
                self.backend,
                codec=self.codec,
                gate=self.gate,
                extensions=self.extensions,
                submit_hooks=self.submit_hooks,
            )
        return self._store

    def _overriding(self, name: str) -> Any:
        """This client's store (a ``TaskStore``) when its method ``name`` is replaced
        (``cairnq.store``), else ``None``: the client then takes its own path.

        Only the async client calls a replaced method (the store's are coroutines);
        the blocking one, whose operations run with ``run_on``, always takes its own,
        so this says ``None`` there (typed ``Any``: the one source of both halves
        awaits the call in one and not the other).
        """
        store = self._store
        if store is None or self._RUN_ON != "arun_on" or not replaced(store, name):
            return None
        return store

    def _where(self) -> str:
        """The database in words, without any password."""
        return description_of(self.backend)

    def _readiness(self, name: str) -> Readiness:
        """Whether the database has the tables of the extension ``name``, as this client
        last read it (the extension's client part reads and notes it)."""
        found = self._ready.get(name)
        if found is None:
            found = self._ready[name] = Readiness()
        return found

    def _spec(self, task: Any, payload: Any, name: Any, options: dict[str, Any]) -> kernel.NewTask:
        """``submit``'s task, named as ``task=`` or ``name=``, with its kernel options."""
        return self._new_task(task_or_name(task, name, "submit"), payload, **options)

    def _plain_spec(self, task: str, payload: Any) -> kernel.NewTask:
        """``_spec`` of a task named by a string, every option at its default: the same
        task and the same errors, with no options to read; a name checked once is
        not checked again by this client."""
        if self.handler_attempts and task in self.handler_attempts:
            return self._new_task(task, payload, **_SUBMIT_DEFAULTS)
        names = self._checked_names
        if len(names) >= CHECKED_NAMES:
            names.clear()
        return kernel.new_plain_task(self.codec, task, payload, _ids.task_id(), names)

    @classmethod
    def sqlite(
        cls: type[C],
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = 5000,
        synchronous: Synchronous = "full",
        clock: Clock | None = None,
        migrate: bool = True,
        file_mode: int | None = 0o600,
        **options: Any,
    ) -> C:
        """A client on a SQLite file, created and migrated on first use.

        Args:
            path: The database file; its directory must exist.
            busy_timeout_ms: How long a write waits for another process's lock.
            synchronous: ``"full"`` (default, survives power loss) or ``"normal"``.
            clock: A clock for ``now_ms`` (tests pass a ``FakeClock``).
            migrate: Apply pending migrations when opening (default).
            file_mode: Permission bits of a database file it creates (``0o600``:
                its owner only; ``0o660`` to share it with a group; ``None``: the
                umask decides). The ``-wal`` and ``-shm`` files get the same.
            **options: Client options (``max_payload_bytes``, ``max_json_depth``).

        Raises:
            InvalidArgument: a bad option, or ``sqlite:tasks.db`` (a URL without ``///``).

        Example::

            cq = CairnQ.sqlite("tasks.db", file_mode=0o660)
        """
        backend = SQLiteBackend(
            path,
            busy_timeout_ms=busy_timeout_ms,
            synchronous=synchronous,
            clock=clock,
            migrate=migrate,
            file_mode=file_mode,
        )
        client = cls(backend, **options)
        client._owns_backend = True
        return client

    @classmethod
    def postgres(
        cls: type[C],
        source: Any,
        *,
        schema: str | None = None,
        min_size: int = 1,
        max_size: int = 10,
        clock: Clock | None = None,
        migrate: bool = True,
        listen: bool = True,
        connect_timeout: Duration | None = None,
        **options: Any,
    ) -> C:
        """A client on PostgreSQL (needs the ``postgres`` extra, or ``asyncpg`` for an executor).

        Args:
            source: A DSN, or the application's psycopg pool or connection
                (async pool/connection for ``CairnQ``, sync for ``SyncCairnQ``),
                or a ``PgExecutor`` such as ``create_pool_executor(dsn)`` (``CairnQ``
                only). cairnq uses an injected pool or executor and never closes it.
            schema: Schema of cairnq's tables: created if missing and pinned in
                ``search_path`` with a DSN; only checked with a pool, connection
                or executor.
            min_size, max_size: Size of the pool cairnq makes from a DSN.
            clock: Supply ``now_ms`` from this clock instead of the database's.
            migrate: Apply pending migrations on first use (default).
            listen: Use LISTEN/NOTIFY for wake-ups (default; a DSN, or an executor
                with ``listen``, is needed).
            connect_timeout: With a DSN, how long opening keeps trying to reach the
                server (``None``: 30 s): nothing listening, or a server restarting, is tried
                again until then; a refusal no wait can fix (no such database, role
                or password) fails at the first attempt. A duration, 1 s to 1 h.
            **options: Client options (``max_payload_bytes``, ``max_json_depth``).

        Raises:
            InvalidArgument: a bad schema name or ``connect_timeout``.
            DatabaseUnavailable: (on first use) no connection within ``connect_timeout``,
                or a refusal for good (``retryable`` false).
            UnsupportedBackend: a ``PgExecutor`` given to ``SyncCairnQ``.
            SchemaMismatch: (on first use) the connection sees another installation.

        Example::

            cq = CairnQ.postgres("postgresql://localhost/app", schema="jobs")
            cq = CairnQ.postgres(create_pool_executor("postgresql://localhost/app"))
        """
        from ..backends import EXECUTOR_SYNC_REFUSED, PgExecutorBackend, is_executor

        if is_executor(source):
            if cls._RUN_ON != "arun_on":
                raise UnsupportedBackend(EXECUTOR_SYNC_REFUSED)
            client = cls(
                PgExecutorBackend(
                    source, schema=schema, clock=clock, migrate=migrate, listen=listen
                ),
                **options,
            )
            client._owns_backend = True
            return client
        from ..backends import PostgresBackend

        timeouts: dict[str, Any] = {}
        if connect_timeout is not None:
            timeouts["connect_timeout"] = connect_timeout
        backend = PostgresBackend(
            source,
            schema=schema,
            min_size=min_size,
            max_size=max_size,
            clock=clock,
            migrate=migrate,
            listen=listen,
            **timeouts,
        )
        client = cls(backend, **options)
        client._owns_backend = True
        return client

    def add_submit_hook(self, hook: SubmitHook) -> Callable[[], None]:
        """Call ``hook(pending)`` for every task this client submits (see ``cairnq.hooks``).

        Hooks see ``submit``, ``submit_many`` and handlers' ``ctx.submit`` on a
        worker's client; they run in the order added and may add metadata keys.
        Metrics and tracing (``cairnq.telemetry``) attach themselves this way.

        Args:
            hook: ``hook(PendingSubmit) -> done | None``.

        Returns:
            A function that removes the hook again.

        Raises:
            InvalidArgument: ``hook`` is not callable.

        Example::

            remove = cq.add_submit_hook(lambda pending: print(pending.name) or None)
        """
        if not callable(hook):
            raise InvalidArgument(f"a submit hook must be callable, got {hook!r}")
        self.submit_hooks.append(hook)

        def remove() -> None:
            if hook in self.submit_hooks:
                self.submit_hooks.remove(hook)

        return remove

    def _clock(self) -> Clock:
        """The clock task times come from (the host's when the database keeps time)."""
        return clock_of(self.backend) or SYSTEM_CLOCK

    def _transactional(self, conn: Any) -> Any:
        """The backend's way to run an operation on the application's connection."""
        backend = self.backend
        if not isinstance(backend, TransactionalRunner):
            raise UnsupportedBackend(
                f"submitting inside the application's transaction needs a backend that "
                f"runs on the application's connection (SQLite, PostgreSQL); "
                f"the {backend.dialect} backend has no shared connection"
            )
        return backend.arun_on if self._RUN_ON == "arun_on" else backend.run_on

    connect: _Connect = _Connect()

    def _items(self, tasks: Iterable[SubmitItem]) -> list[kernel.NewTask]:
        """``submit_many``'s items, validated and encoded, their ids made for the lot at once."""
        items = tasks if isinstance(tasks, list) else list(tasks)
        return self._built(items, _ids.task_ids(len(items)), set())

    def _built(
        self, items: list[SubmitItem], ids: list[str], names: set[str]
    ) -> list[kernel.NewTask]:
        """``items`` validated and encoded with the ids ``ids``; ``names``: the task names
        already checked (added to)."""
        codec = self.codec
        specs = []
        for item, task_id in zip(items, ids, strict=True):
            if self.handler_attempts:
                specs.append(self._item(item, task_id))
            elif type(item) is tuple and len(item) == 2 and type(item[0]) is str:
                specs.append(kernel.new_plain_task(codec, item[0], item[1], task_id, names))
            elif (
                type(item) is dict
                and type(item.get("task")) is str
                and item.keys() <= _PLAIN_FIELDS
            ):
                specs.append(_named_item(codec, item, task_id))
            else:
                specs.append(self._item(item, task_id))
        return specs

    def _item(self, item: SubmitItem, task_id: str | None = None) -> kernel.NewTask:
        """A ``submit_many`` item: ``(task, payload)`` or a dict of ``submit``'s arguments."""
        if isinstance(item, tuple) and len(item) == 2:
            _no_options(item[0])
            return self._new_task(item[0], item[1], task_id=task_id, **_SUBMIT_DEFAULTS)
        if isinstance(item, dict):
            if "task" not in item:
                raise InvalidArgument("each submit_many dict needs a 'task' (the task name)")
            _no_options(item["task"])
            if not _ITEM_FIELDS.issuperset(item):
                unknown = set(item) - _ITEM_FIELDS
                raise InvalidArgument(
                    f"unknown submit_many fields: {sorted(unknown)} (a batch takes the task, "
                    f"its payload and the kernel's submit options; submit others alone)"
                )
            options = {**_SUBMIT_DEFAULTS, **item}
            task = options.pop("task")
            payload = options.pop("payload", None)
            return self._new_task(task, payload, task_id=task_id, **options)
        raise InvalidArgument(
            "submit_many takes (task, payload) pairs or dicts of submit arguments"
        )

    def _new_task(
        self,
        task: str | TaskDef[Any, Any] | Callable[..., Any],
        payload: Any,
        *,
        key: str | None,
        queue: str | None,
        conflict: str,
        max_attempts: int | None,
        priority: int | None,
        metadata: Any,
        delay_ms: int | None,
        delay: Duration | None,
        run_at: datetime.datetime | None,
        parent_id: str | None,
        root_id: str | None,
        correlation_id: str | None,
        lineage: Lineage | None,
        task_id: str | None = None,
    ) -> kernel.NewTask:
        if isinstance(task, TaskDef):
            name: Any = task.name
            queue = queue if queue is not None else task.queue
            # The whole definition is checked, even where this submit gives its own values.
            _, attempts, _ = check_definition(task.retry, task.max_attempts, task.timeout)
            if max_attempts is None:
                max_attempts = attempts
            priority = priority if priority is not None else task.priority
        elif callable(task) and not isinstance(task, str):
            name = handler_task(task)
        else:
            name = task
        if max_attempts is None and self.handler_attempts and isinstance(name, str):
            max_attempts = self.handler_attempts.get(name)
        metadata = check_metadata(metadata)
        start_ms = self._start_delay_ms(delay, run_at, delay_ms)
        if lineage is not None:
            # The three keywords alone need no Lineage: new_task checks them the same way.
            lineage = Lineage.of(
                lineage, parent_id=parent_id, root_id=root_id, correlation_id=correlation_id
            )
            parent_id, root_id = lineage.parent_id, lineage.root_id
            correlation_id = lineage.correlation_id
        return kernel.new_task(
            self.codec,
            name,
            payload,
            key=key,
            queue="default" if queue is None else queue,
            conflict=conflict,
            max_attempts=3 if max_attempts is None else max_attempts,
            priority=0 if priority is None else priority,
            metadata=metadata,
            delay_ms=start_ms,
            parent_id=parent_id,
            root_id=root_id,
            correlation_id=correlation_id,
            task_id=task_id,
        )

    def _start_delay_ms(self, delay: Any, run_at: Any, delay_ms: Any) -> Any:
        """How long from now a task waits: from at most one of ``delay``, ``run_at``, ``delay_ms``.

        ``run_at`` is measured against this client's clock; one in the past means now.
        ``delay_ms`` is passed on as given (``new_task`` checks it).

        Raises:
            InvalidArgument: more than one given, or a bad value.
        """
        given = [
            n
            for n, v in (("delay", delay), ("run_at", run_at), ("delay_ms", delay_ms))
            if v is not None
        ]
        if len(given) > 1:
            raise InvalidArgument(
                f"give at most one of delay=, run_at= and delay_ms=; got {', '.join(given)}"
            )
        if delay is not None:
            return delay_ms_of(delay, "delay")
        if run_at is not None:
            wait_ms = max(0, point_ms(run_at, "run_at") - self._clock().now_ms())
            if wait_ms > MAX_DELAY_MS:
                raise InvalidArgument(
                    f"run_at={run_at.isoformat()} is more than {format_duration(MAX_DELAY_MS)} away"
                )
            return wait_ms
        return 0 if delay_ms is None else delay_ms


SubmitItem = tuple[Any, Any] | dict[str, Any]


def _no_options(task: Any) -> None:
    """Refuse a batch item of a ``TaskDef`` with ``options``: they are keywords only a
    single ``submit`` takes."""
    if isinstance(task, TaskDef) and task.options:
        raise InvalidArgument(
            f"a batch submit takes no TaskDef options ({', '.join(sorted(task.options))}): "
            f"submit such a task alone (submit())"
        )


def _named_item(codec: JsonCodec, item: dict[str, Any], task_id: str) -> kernel.NewTask:
    """A ``submit_many`` dict naming its task by a string: ``_item`` without its detours."""
    get = item.get
    queue, max_attempts, priority = get("queue"), get("max_attempts"), get("priority")
    return kernel.new_task(
        codec,
        item["task"],
        get("payload"),
        key=get("key"),
        queue="default" if queue is None else queue,
        conflict=get("conflict", "reuse"),
        max_attempts=3 if max_attempts is None else max_attempts,
        priority=0 if priority is None else priority,
        metadata=check_metadata(get("metadata")),
        delay_ms=0 if get("delay_ms") is None else get("delay_ms"),
        parent_id=get("parent_id"),
        root_id=get("root_id"),
        correlation_id=get("correlation_id"),
        task_id=task_id,
    )


def _waiting(
    lookup: Callable[[], Op[TaskRef | None]],
    sub: Subscription,
    *,
    task_id: str | None,
    key: str | None,
    timeout_ms: int | None,
    poll_ms: int,
    max_poll_ms: int,
    clock: Clock,
    where: str = "this database",
    seen: Callable[[str | None], None] | None = None,
    timeout: Duration | None = None,
) -> Procedure[Task]:
    """The wait loop, shared by both clients: probe the status, nap, grow the interval.

    A nap ends early when this process settles a task (the subscription), so a
    waiter in the same process as the worker sees the result at once. ``seen``
    is told the id of the task each look found (``None``: none), before the nap.
    The timeout is ``timeout`` (a duration) or ``timeout_ms``, at most one of them.
    """
    timeout_ms = wait_timeout_ms(timeout, timeout_ms)
    interval = check_int(poll_ms, "poll_ms", low=1)
    ceiling = max(interval, check_int(max_poll_ms, "max_poll_ms", low=1))
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        sub.clear()
        ref: TaskRef | None = yield Run(lookup())
        if seen is not None:
            seen(None if ref is None else ref.id)
        if ref is not None and ref.status in ("succeeded", "failed", "canceled"):
            # A store's replaced ``get`` answers this read (``cairnq.store``).
            task: Task | None = yield Run(StoreCall(kernel.get(ref.id), "get", (ref.id,)))
            if task is not None and task.is_terminal:
                return task
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            snapshot = None if ref is None else (yield Run(kernel.get(ref.id)))
            raise TaskTimeout(
                task_id or (ref.id if ref else None),
                timeout_ms=timeout_ms,
                task=snapshot,
                key=key,
                detail=why_not_done(snapshot, key, clock.now_ms(), where),
            )
        yield Nap(min(interval / 1000, remaining))
        interval = next_poll_ms(interval, ceiling)


class DoneWake:
    """``wait``'s sleep through a store's replaced ``task_done_wake(task_id, timeout_ms)``.

    A nap of the wait procedure becomes one call of it; the blocking ``wait`` (which
    calls no replaced store method) falls back to the subscription. For
    ``wait_by_key`` the task is the one the key pointed at on the last look
    (``follow``); while the key points at none, the nap is the subscription's.
    """

    def __init__(self, store: TaskStore, task_id: str | None, sub: Subscription) -> None:
        self._store = store
        self._task_id = task_id
        self._sub = sub

    def follow(self, task_id: str | None) -> None:
        """Sleep on ``task_id`` from now (the task the key points at; ``None``: none)."""
        self._task_id = task_id

    def wait(self, timeout_s: float) -> bool:
        """Block on the subscription (no store method is called from a thread)."""
        return self._sub.wait(timeout_s)

    async def wait_async(self, timeout_s: float) -> bool:
        """Sleep in ``task_done_wake``, up to ``timeout_s``."""
        if self._task_id is None:
            return await self._sub.wait_async(timeout_s)
        await self._store.task_done_wake(self._task_id, max(0, round(timeout_s * 1000)))
        return False


def activity_spans(
    window: Duration | None, bucket: Duration | None, window_ms: Any, bucket_ms: Any
) -> tuple[int, int]:
    """``activity``'s window and bucket in milliseconds (an hour, five minutes by
    default); the old ``window_ms``/``bucket_ms`` warn once each, kept one release.

    Raises:
        InvalidArgument: both spellings of one, or a bad value (named as given).
    """
    for old, new, value in (("window_ms", "window", window_ms), ("bucket_ms", "bucket", bucket_ms)):
        if value is not None:
            renamed(f"cq.activity({old}=...)", f"cq.activity({new}=...) (a duration)")
    window_of = duration_or_ms(window, window_ms, "window", low_ms=1, high_ms=2**62)
    bucket_of = duration_or_ms(bucket, bucket_ms, "bucket", low_ms=1, high_ms=2**62)
    return window_of or 3_600_000, bucket_of or 300_000


def wait_timeout_ms(timeout: Duration | None, timeout_ms: int | None) -> int:
    """A wait's timeout in milliseconds: ``timeout`` (a duration), or ``timeout_ms`` (the
    reference SDK's int ms), or 30 s.

    Raises:
        InvalidArgument: both given, or a bad value (named as given).
    """
    ms = duration_or_ms(timeout, timeout_ms, "timeout", high_ms=2**62)
    return DEFAULT_WAIT_TIMEOUT_MS if ms is None else ms


def never_claimed(task: Task, where: str) -> str:
    """Why a task that was never claimed is still waiting, naming the database."""
    return (
        f"still queued and never claimed by a worker; is a worker serving queue {task.queue!r} "
        f"with a handler for {task.name!r} on {where}?"
    )


def delayed(task: Task, now_ms: int) -> str:
    """Why a task submitted with a delay is still waiting: it is not due yet."""
    return (
        f"still queued (attempt {task.attempt}/{task.max_attempts}), next run in "
        f"~{format_duration(task.run_at_ms - now_ms)}: it was submitted with a delay, and no "
        "worker may claim it before then"
    )


def why_not_done(
    task: Task | None, key: str | None, now_ms: int, where: str = "this database"
) -> str:
    """Why ``task`` (the last snapshot read, or ``None``) is not finished, in one line."""
    if task is None:
        if key:
            return "no task under this key — never submitted, or already purged?"
        return "no task with that id exists"
    if task.is_queued and task.attempt == 0:
        if task.run_at_ms > now_ms:
            return delayed(task, now_ms)
        return never_claimed(task, where)
    if task.is_queued:
        wait_ms = max(0, task.run_at_ms - now_ms)
        return (
            f"still queued (attempt {task.attempt}/{task.max_attempts}), next run in "
            f"~{format_duration(wait_ms)}: it waits for another attempt"
        )
    if task.cancel_requested:
        return "cancel requested; waiting for the handler to stop"
    return f"still running on {task.worker_id} (attempt {task.attempt}/{task.max_attempts})"


def _outcome(task: Task) -> Any:
    """What ``call`` returns for a finished task, or the error it raises."""
    if task.is_succeeded:
        return task.result
    if task.is_canceled:
        raise TaskCanceled(task.id)
    raise TaskFailed(task.error, task_id=task.id)
