"""A worker's registration API: its handlers (``task``, ``register``), its listeners
(``subscribe``) and its call scopes (``add_call_scope``), mixed into ``Worker``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import EllipsisType
from typing import TYPE_CHECKING, Any, TypeVar, overload

from .. import extensions as _ext
from ..backoff import Retry
from ..client import CairnQ
from ..client._checks import task_or_name
from ..durations import Duration
from ..errors import InvalidArgument
from ..extensions import Extension
from ..models import TaskDef
from ._context import CallScope, Listener, Runtime
from ._options import check_cancel_grace
from ._registry import Handler, Registration, Registry

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._compat import TaskOptions

F = TypeVar("F", bound=Handler)
E = TypeVar("E", bound=Extension)


class Registering:
    """``task``, ``register``, ``subscribe`` and ``add_call_scope`` of a worker, on its
    ``registry``, its ``runtime`` and its extensions."""

    registry: Registry
    cancel_grace_ms: int | None
    client: CairnQ
    _runtime: Runtime
    _extensions: Sequence[Extension]

    @overload
    def task(self, fn: F, /) -> F: ...

    @overload
    def task(
        self,
        task: str | TaskDef[Any, Any] | None = None,
        /,
        *,
        name: str | TaskDef[Any, Any] | None = None,
        batch: int | None = None,
        concurrency: int | None = None,
        resource: str | None = None,
        cancel_grace: Duration | EllipsisType | None = ...,
        isolate: bool = False,
        max_attempts: int | None = None,
        retry: Retry | None = None,
        timeout: Duration | None = None,
        **options: Unpack[TaskOptions],
    ) -> Callable[[F], F]: ...

    def task(
        self,
        name_or_fn: Any = None,
        /,
        *,
        name: str | TaskDef[Any, Any] | None = None,
        batch: int | None = None,
        concurrency: int | None = None,
        resource: str | None = None,
        cancel_grace: Duration | EllipsisType | None = ...,
        isolate: bool = False,
        max_attempts: int | None = None,
        retry: Retry | None = None,
        timeout: Duration | None = None,
        **options: Unpack[TaskOptions],
    ) -> Any:
        """Register a handler: ``@worker.task``, ``@worker.task("name")``, ``@worker.task(defn)``.

        Args:
            name: The task name or a ``TaskDef`` as a keyword
                (``@worker.task(name="x")``, the reference SDK's spelling); give
                it positionally or by keyword, not both.
            batch: Deliver up to this many tasks per call as a list of contexts,
                ``batch=1`` included (a list of one); return ``{task_id: result}``
                (missing ids succeed with ``None``). Without ``batch`` the handler
                gets one context.
            concurrency: At most this many calls of this name at once in this worker.
            resource: A resource declared in ``Worker(resources=...)``: calls of
                this name count against its capacity, shared with other names.
            cancel_grace: How long a call of this name whose task was canceled
                may run on once the worker saw the cancel, before the worker stops
                it (the worker's ``cancel_grace`` when not given), a duration;
                ``None``: never stopped. An ``async def`` handler is stopped by
                cancelling its coroutine; a plain ``def`` one only when isolated.
            isolate: Run this plain ``def`` handler in a child process the
                worker can kill (on a cancel after ``cancel_grace``, past
                ``max_run_ms``): it gets a read-only ``ChildContext``, and must
                be a module-level function (the ``process`` extra, ``pebble``).
            max_attempts: Runs allowed for tasks of this name: written into the
                tasks this worker's client submits under the name, and the most a
                failure recorded by this worker retries (``docs/policies.md``).
            retry: A ``cairnq.Retry``: this name's backoff, jitter, maximum delay
                and errors not retried (the worker's settings where it leaves
                them ``None``).
            timeout: How long one run of this name may take, a duration (the
                worker's ``max_run_ms`` otherwise); past it the attempt fails as a
                retryable ``handler_timeout``.
            **options: The keywords its extensions take for a handler
                (``Extension.task_options``): ``max_snoozes``, how many times each
                task of this name may snooze (the worker's ``max_snoozes`` when
                not given).

        Returns:
            The handler, unchanged (or a decorator that registers one).

        A handler taking two positional parameters gets ``(ctx, payload)``, one
        gets ``(ctx)``. ``async def`` handlers run on the event loop; plain
        ``def`` handlers run in threads with a blocking ``SyncTaskContext``.

        Raises:
            InvalidArgument: the handler cannot take the context: a lone
                parameter named for the payload (``async def f(payload)``; name it
                ``ctx``, annotate it ``TaskContext``, or add ``payload``), no
                positional parameter, more than two required ones, or required
                keyword-only ones. The message shows both accepted forms.
                Also: the name given both positionally and as ``name=``,
                ``resource`` not declared in the worker's ``resources``, a bad
                ``cancel_grace``, ``max_attempts``, ``retry`` or ``timeout``, or
                ``isolate`` not a bool or given a handler it cannot run (``async
                def``, a batch, a lambda).

        Example::

            @worker.task(name="email.send", batch=1)
            async def send(contexts):
                return {ctx.task_id: "sent" for ctx in contexts}
        """
        if name is not None:
            if callable(name_or_fn) and not isinstance(name_or_fn, (str, TaskDef)):
                # @worker.task(fn, name=...) is not a decorator form: name it once.
                raise InvalidArgument("pass the task name or the handler to task(), not both")
            name_or_fn = task_or_name(name_or_fn, name, "task")
        if callable(name_or_fn) and not isinstance(name_or_fn, (str, TaskDef)):
            self.register(
                None,
                name_or_fn,
                batch=batch,
                concurrency=concurrency,
                resource=resource,
                cancel_grace=cancel_grace,
                isolate=isolate,
                max_attempts=max_attempts,
                retry=retry,
                timeout=timeout,
                **options,
            )
            return name_or_fn

        def decorate(fn: F) -> F:
            self.register(
                name_or_fn,
                fn,
                batch=batch,
                concurrency=concurrency,
                resource=resource,
                cancel_grace=cancel_grace,
                isolate=isolate,
                max_attempts=max_attempts,
                retry=retry,
                timeout=timeout,
                **options,
            )
            return fn

        return decorate

    def register(
        self,
        name: str | TaskDef[Any, Any] | None,
        fn: Handler,
        *,
        batch: int | None = None,
        concurrency: int | None = None,
        resource: str | None = None,
        cancel_grace: Duration | EllipsisType | None = ...,
        isolate: bool = False,
        max_attempts: int | None = None,
        retry: Retry | None = None,
        timeout: Duration | None = None,
        **options: Unpack[TaskOptions],
    ) -> Registration:
        """Register ``fn`` as the handler of ``name`` (the imperative ``task``).

        Args:
            name: The task name, or a ``TaskDef``.
            fn: ``fn(ctx, payload)`` or ``fn(ctx)``, async or plain.
            batch, concurrency, resource, cancel_grace, isolate, max_attempts, retry,
                timeout, options: As for ``task``.

        Returns:
            The ``Registration``.

        Raises:
            InvalidArgument: the name is taken, ``fn`` cannot take the context
                (see ``task``), ``resource`` is not declared in ``resources``, or an
                option's value is bad (nothing is registered).
            TypeError: a keyword no extension takes.

        Example::

            worker.register("email.send", send_email)
        """
        checked = _ext.task_options(self._extensions, options, "register()")
        grace = self.cancel_grace_ms if cancel_grace is ... else check_cancel_grace(cancel_grace)
        registration = self.registry.add(
            name,
            fn,
            batch=batch,
            concurrency=concurrency,
            resource=resource,
            options=checked,
            cancel_grace_ms=grace,
            isolate=isolate,
            max_attempts=max_attempts,
            retry=retry,
            timeout=timeout,
        )
        if registration.max_attempts is not None:
            # The client this worker is built on writes it into the name's submits.
            self.client.handler_attempts[registration.name] = registration.max_attempts
        return registration

    def _extension(self, kind: type[E]) -> E:
        """This worker's extension of class ``kind`` (a built-in's worker API keeps
        what it is given there)."""
        for extension in self._extensions:
            if isinstance(extension, kind):
                return extension
        raise LookupError(f"this worker runs no {kind.__name__}")

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(TaskEvent)`` for every task event here; returns an unsubscribe."""
        self._runtime.listeners.append(listener)
        return lambda: self._runtime.listeners.remove(listener)

    def add_call_scope(self, scope: CallScope) -> Callable[[], None]:
        """Run every handler call inside ``scope(contexts)``, a context manager.

        The scope is entered on the worker's event loop before the call's
        ``started`` events and exited once its settlements are written (or the
        call was abandoned), so every task event of the call arrives while it
        is open.
        Context variables it sets are visible to the handler, plain ``def``
        handlers in their threads included. Tracing uses it to make each
        attempt's span current. A scope that fails to enter goes to ``on_error``
        and the call runs without it.

        Args:
            scope: ``scope(list of TaskContext) -> context manager``.

        Returns:
            A function that removes the scope again.

        Raises:
            InvalidArgument: ``scope`` is not callable.

        Example::

            @contextlib.contextmanager
            def timed(contexts):
                started = time.monotonic()
                yield
                print(contexts[0].name, time.monotonic() - started)

            worker.add_call_scope(timed)
        """
        if not callable(scope):
            raise InvalidArgument(f"a call scope must be callable, got {scope!r}")
        scopes = self._runtime.scopes
        scopes.append(scope)

        def remove() -> None:
            if scope in scopes:
                scopes.remove(scope)

        return remove
