"""``CairnQBackend``: Django's task framework on cairnq, on Django's own database."""

from __future__ import annotations

import datetime as dt
import importlib
import inspect
import threading
import traceback
from collections.abc import Iterable
from typing import Any

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.db import close_old_connections, connections
from django.utils import timezone

from ... import CairnQ, SyncCairnQ, Worker
from ...errors import TaskError as CairnQTaskError
from ...models import Task as CairnQTask
from ._api import (
    BaseTaskBackend,
    Task,
    TaskContext,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    set_field,
    task_enqueued,
    task_finished,
    task_started,
)
from ._settings import check_entry

__all__ = ["CairnQBackend"]

VENDORS = ("sqlite", "postgresql")
# libpq connection parameters Django's PostgreSQL backend may hand over; the rest
# (cursor_factory, context, prepare_threshold) belong to Django's own connection.
LIBPQ_KEYS = frozenset(
    {
        "dbname",
        "user",
        "password",
        "host",
        "hostaddr",
        "port",
        "passfile",
        "service",
        "options",
        "application_name",
        "connect_timeout",
        "client_encoding",
        "sslmode",
        "sslrootcert",
        "sslcert",
        "sslkey",
        "sslpassword",
        "target_session_attrs",
    }
)
STATUSES = {
    "queued": TaskResultStatus.READY,
    "running": TaskResultStatus.RUNNING,
    "succeeded": TaskResultStatus.SUCCESSFUL,
    "failed": TaskResultStatus.FAILED,
    "canceled": TaskResultStatus.FAILED,
}

# One client per database for the whole process: Django makes a backend object per
# thread, and each client holds a pool (PostgreSQL) or a writer thread (SQLite).
_clients: dict[tuple[str, str, str | None], SyncCairnQ] = {}
_clients_lock = threading.Lock()


class CairnQBackend(BaseTaskBackend):  # type: ignore[misc]
    """A Django tasks backend storing tasks in cairnq's tables of a Django database.

    ``Task.enqueue`` writes the task on Django's own connection to that database,
    inside whatever transaction is open there: a task enqueued in
    ``transaction.atomic()`` exists exactly when the block commits and never if
    it rolls back. SQLite and PostgreSQL databases are supported. Results come
    back through ``TaskResult`` (``get_result``, ``refresh``); ``manage.py
    cairnq_worker`` runs the tasks.

    Settings (``TASKS[alias]["OPTIONS"]``):
        DATABASE: The ``DATABASES`` alias holding the tasks (``"default"``).
        SCHEMA: PostgreSQL only: the schema of cairnq's tables (default: the
            connection's ``search_path``).
        MAX_ATTEMPTS: Runs allowed per task, counting crashed ones (3).
        TASK_MODULES: Modules the worker imports to find tasks, besides each
            installed app's ``tasks`` module.

    Raises:
        ImproperlyConfigured: (when the backend is made, at start-up with the
            app installed) the database alias is not in ``DATABASES``, or its
            engine is neither SQLite nor PostgreSQL, or a key of the entry or of
            its ``OPTIONS`` is unknown (``"QUEUE"``: the message names
            ``"QUEUES"``), or a value is of the wrong type (``MAX_ATTEMPTS: "3"``).

    Example::

        TASKS = {
            "default": {
                "BACKEND": "cairnq.contrib.django.CairnQBackend",
                "QUEUES": ["default", "emails"],
                "OPTIONS": {"DATABASE": "default"},
            }
        }
    """

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        settings = check_entry(alias, params)
        super().__init__(alias, params)
        self.database: str = settings.database
        self.schema: str | None = settings.schema
        self.max_attempts: int | None = settings.max_attempts
        self.task_modules: list[str] = settings.task_modules
        if self.database not in connections.settings:
            raise ImproperlyConfigured(
                f"TASKS[{alias!r}] stores tasks in the database {self.database!r}, which "
                f"DATABASES does not define (it has {sorted(connections.settings)}); set "
                f"TASKS[{alias!r}]['OPTIONS']['DATABASE'] to one of those"
            )
        vendor = connections[self.database].vendor
        if vendor not in VENDORS:
            raise ImproperlyConfigured(
                f"TASKS[{alias!r}] stores tasks in the database {self.database!r}, a {vendor} "
                "database; cairnq runs on SQLite and PostgreSQL"
            )
        if vendor == "sqlite" and self.schema is not None:
            raise ImproperlyConfigured(
                f"TASKS[{alias!r}]['OPTIONS']['SCHEMA'] is for PostgreSQL; the database "
                f"{self.database!r} is SQLite"
            )

    # --- the database -----------------------------------------------------------------

    @property
    def vendor(self) -> str:
        """``"sqlite"`` or ``"postgresql"``: the engine of the tasks' database."""
        return str(connections[self.database].vendor)

    def target(self) -> str:
        """What cairnq's own connections open: the SQLite file, or a libpq conninfo.

        Read each time, since Django's test runner renames the database.
        """
        connection = connections[self.database]
        if connection.vendor == "sqlite":
            return str(connection.settings_dict["NAME"])
        from ...backends import make_dsn

        params = connection.get_connection_params()
        return make_dsn("", **{k: v for k, v in params.items() if k in LIBPQ_KEYS})

    def client(self) -> SyncCairnQ:
        """The process's blocking cairnq client on the tasks' database (made once)."""
        key = (self.vendor, self.target(), self.schema)
        with _clients_lock:
            found = _clients.get(key)
            if found is None:
                if key[0] == "sqlite":
                    found = SyncCairnQ.sqlite(key[1])
                else:
                    found = SyncCairnQ.postgres(key[1], schema=self.schema, min_size=1, max_size=4)
                _clients[key] = found
            return found

    def async_client(self) -> CairnQ:
        """A new async client on the tasks' database (for a worker or the dashboard)."""
        if self.vendor == "sqlite":
            return CairnQ.sqlite(self.target())
        return CairnQ.postgres(self.target(), schema=self.schema)

    # --- enqueue and results ----------------------------------------------------------

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        """Store ``task`` with its arguments on Django's connection, in its transaction.

        Raises:
            InvalidTaskError: the task does not suit this backend (Django's checks).
            SerializationError: the arguments are not JSON.
        """
        self.validate_task(task)
        connection = connections[self.database]
        connection.ensure_connection()
        delay_ms = 0
        if task.run_after is not None:
            delay_ms = max(0, int((task.run_after - timezone.now()).total_seconds() * 1000))
        stored = self.client().submit(
            task.module_path,
            {"args": list(args), "kwargs": dict(kwargs)},
            queue=task.queue_name,
            priority=task.priority,
            max_attempts=self.max_attempts,
            delay_ms=delay_ms,
            metadata={"django_backend": self.alias},
            conn=connection.connection,
        )
        result = self.result_of(task, stored)
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult:
        """The ``TaskResult`` of the cairnq task ``result_id``, as stored now.

        Raises:
            TaskResultDoesNotExist: no such task (or it was purged), or its
                function can no longer be imported.
        """
        stored = self.client().get(result_id)
        if stored is None:
            raise TaskResultDoesNotExist(result_id)
        try:
            task = load_task(stored.name)
        except ImportError as exc:
            raise TaskResultDoesNotExist(
                f"task {result_id} runs {stored.name!r}, which cannot be imported: {exc}"
            ) from exc
        return self.result_of(task, stored)

    def result_of(self, task: Task, stored: CairnQTask) -> TaskResult:
        """Django's ``TaskResult`` for a cairnq task."""
        payload = stored.payload if isinstance(stored.payload, dict) else {}
        attempted = stored.attempt > 0
        errors = []
        if stored.status in ("failed", "canceled"):
            errors.append(error_of(stored))
        result = TaskResult(
            task=task,
            id=stored.id,
            status=STATUSES[stored.status],
            enqueued_at=when(stored.created_at_ms),
            started_at=when(stored.updated_at_ms) if stored.status == "running" else None,
            last_attempted_at=when(stored.updated_at_ms) if attempted else None,
            finished_at=when(stored.completed_at_ms),
            args=list(payload.get("args", [])),
            kwargs=dict(payload.get("kwargs", {})),
            backend=self.alias,
            errors=errors,
            worker_ids=[stored.worker_id or ""] * stored.attempt,
        )
        if stored.status == "succeeded":
            set_field(result, "_return_value", stored.result)
        return result

    # --- the worker -------------------------------------------------------------------

    def find_tasks(self, modules: Iterable[str] = ()) -> dict[str, Task]:
        """The tasks in installed apps' ``tasks`` modules, ``TASK_MODULES`` and ``modules``.

        Raises:
            ImproperlyConfigured: a module named in ``TASK_MODULES`` or ``modules``
                cannot be imported, or an app's ``tasks`` module fails to import.
        """
        found: dict[str, Task] = {}
        named = [*self.task_modules, *modules]
        for name in named:
            try:
                module = importlib.import_module(name)
            except ImportError as exc:
                raise ImproperlyConfigured(
                    f"the task module {name!r} cannot be imported: {exc}"
                ) from exc
            found.update(self._tasks_in(module))
        for config in apps.get_app_configs():
            name = f"{config.name}.tasks"
            try:
                module = importlib.import_module(name)
            except ModuleNotFoundError as exc:
                if exc.name == name:
                    continue
                raise ImproperlyConfigured(f"{name} cannot be imported: {exc}") from exc
            found.update(self._tasks_in(module))
        return found

    def _tasks_in(self, module: Any) -> dict[str, Task]:
        # Every task counts, whatever backend it names: ``task.using(backend=...)``
        # sends any task to any backend, and the queues decide what a worker claims.
        return {
            value.module_path: value for value in vars(module).values() if isinstance(value, Task)
        }

    def worker(
        self,
        tasks: dict[str, Task],
        *,
        queues: Iterable[str] | None = None,
        concurrency: int = 1,
        **options: Any,
    ) -> Worker:
        """A cairnq ``Worker`` on the tasks' database running ``tasks`` (see ``find_tasks``).

        Raises:
            ImproperlyConfigured: ``tasks`` is empty (the worker would run nothing).
        """
        if not tasks:
            raise ImproperlyConfigured(
                f"no tasks were found for the task backend {self.alias!r}, so a worker "
                "would run nothing: define them with @task in an installed app's tasks.py, "
                f"list their modules in TASKS[{self.alias!r}]['OPTIONS']['TASK_MODULES'], "
                "or pass --module"
            )
        chosen = sorted(queues if queues is not None else self.queues or {"default"})
        client = self.async_client()
        client._owns_backend = True
        worker = Worker(client, queues=chosen, concurrency=concurrency, **options)
        worker._owns_client = True
        for name, task in tasks.items():
            worker.register(name, self._handler(task))
        return worker

    def _handler(self, task: Task) -> Any:
        backend = self

        if inspect.iscoroutinefunction(task.func):

            async def run_async(ctx: Any, payload: Any) -> Any:
                args, kwargs = payload.get("args", []), payload.get("kwargs", {})
                context = backend._started(task, ctx)
                try:
                    if task.takes_context:
                        value = await task.func(context, *args, **kwargs)
                    else:
                        value = await task.func(*args, **kwargs)
                except Exception as exc:
                    backend._finished(context, exc=exc)
                    raise failure(exc) from exc
                backend._finished(context, value=value)
                return value

            return run_async

        def run(ctx: Any, payload: Any) -> Any:
            # A plain task runs in a worker thread, with that thread's Django connections.
            close_old_connections()
            args, kwargs = payload.get("args", []), payload.get("kwargs", {})
            context = backend._started(task, ctx)
            try:
                if task.takes_context:
                    value = task.func(context, *args, **kwargs)
                else:
                    value = task.func(*args, **kwargs)
            except Exception as exc:
                backend._finished(context, exc=exc)
                raise failure(exc) from exc
            else:
                backend._finished(context, value=value)
                return value
            finally:
                for connection in connections.all(initialized_only=True):
                    connection.close()

        return run

    def _started(self, task: Task, ctx: Any) -> TaskContext:
        """The attempt's Django context, after sending ``task_started`` for it."""
        context = self._context(task, ctx)
        task_started.send(type(self), task_result=context.task_result)
        return context

    def _finished(
        self, context: TaskContext, *, value: Any = None, exc: Exception | None = None
    ) -> None:
        """Send ``task_finished`` for the attempt that ``context`` ran: its value or error."""
        result = context.task_result
        set_field(result, "finished_at", timezone.now())
        if exc is None:
            set_field(result, "status", TaskResultStatus.SUCCESSFUL)
            set_field(result, "_return_value", value)
        else:
            set_field(result, "status", TaskResultStatus.FAILED)
            result.errors.append(error_of_exception(exc))
        task_finished.send(type(self), task_result=result)

    def _context(self, task: Task, ctx: Any) -> TaskContext:
        now = timezone.now()
        payload = ctx.payload if isinstance(ctx.payload, dict) else {}
        result = TaskResult(
            task=task,
            id=ctx.task_id,
            status=TaskResultStatus.RUNNING,
            enqueued_at=None,
            started_at=now,
            last_attempted_at=now,
            finished_at=None,
            args=list(payload.get("args", [])),
            kwargs=dict(payload.get("kwargs", {})),
            backend=self.alias,
            errors=[],
            worker_ids=[ctx.worker_id] * ctx.attempt,
        )
        return TaskContext(task_result=result)


def load_task(name: str) -> Task:
    """The Django ``Task`` stored under ``name`` (its module path).

    Raises:
        ImportError: the module or the attribute is missing, or it is no task.
    """
    module_name, _, attribute = name.rpartition(".")
    module = importlib.import_module(module_name)
    value = getattr(module, attribute, None)
    if not isinstance(value, Task):
        raise ImportError(f"{name!r} is not a Django task")
    return value


def failure(exc: Exception) -> CairnQTaskError:
    """A task's exception as cairnq records it, with the class path Django reports."""
    kind = type(exc)
    return CairnQTaskError(
        str(exc) or kind.__name__,
        code="handler_error",
        retryable=True,
        type=kind.__name__,
        details={
            "exception_class_path": f"{kind.__module__}.{kind.__qualname__}",
            "traceback": "".join(traceback.format_exception(kind, exc, exc.__traceback__))[-4000:],
        },
    )


def error_of_exception(exc: Exception) -> TaskError:
    """Django's ``TaskError`` for an exception a task raised in this process."""
    kind = type(exc)
    return TaskError(
        exception_class_path=f"{kind.__module__}.{kind.__qualname__}",
        traceback="".join(traceback.format_exception(kind, exc, exc.__traceback__)),
    )


def error_of(stored: CairnQTask) -> TaskError:
    """Django's ``TaskError`` for a failed or canceled cairnq task."""
    error = stored.error or {}
    details = error.get("details") if isinstance(error.get("details"), dict) else {}
    assert isinstance(details, dict)
    path = details.get("exception_class_path")
    if not isinstance(path, str):
        path = "cairnq.errors.TaskError"
    trace = details.get("traceback")
    if not isinstance(trace, str):
        trace = str(error.get("message") or stored.status)
    return TaskError(exception_class_path=path, traceback=trace)


def when(ms: int | None) -> dt.datetime | None:
    """A cairnq time (ms since the epoch) as an aware datetime."""
    return None if ms is None else dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc)
