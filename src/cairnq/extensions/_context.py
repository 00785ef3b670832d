"""What a handler's context offers the extensions that add methods to it, and how an
extension settles a signal a handler raises.

An extension's context methods are an async mixin in its own package
(``<name>/_context_async.py``); its blocking twin, each method run on the worker's loop
while the handler's thread waits, is generated from it (``<name>/_context_sync.py``, by
``scripts/generate_sync.py``). ``_builtins_context_async`` composes the built-ins'
mixins (and ``_builtins_context_sync`` their twins), and the worker's ``TaskContext``
and ``SyncTaskContext`` inherit the composition. A mixin types ``self`` as
``ContextHost`` (its twin as ``SyncHost``): the task, its lease, the worker's client and
the run's hooks, the task's extension options, the fenced write helpers and a slot for
the mixin's own state in one attempt, never the worker itself, which is a layer above.

A handler signal is an exception a handler raises (or lets through) to have its
attempt settled another way than failed (``raise Snooze(30)``). An extension
declares each of its signals with the ``Signal`` that settles the call's contexts
(``Extension.signals``); the worker's executor looks the raised exception's class
up in the table of its extensions' signals before treating it as a failure.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..backends import Backend
from ..kernel.points import Points
from ..models import Lease, Task
from ..protocol.steps import Op

if TYPE_CHECKING:
    from .._json import JsonCodec

T = TypeVar("T")
S = TypeVar("S")


class ClientHost(Protocol):
    """What a context's methods use of the worker's client (a ``CairnQ``)."""

    @property
    def backend(self) -> Backend: ...

    @property
    def codec(self) -> JsonCodec: ...


class RunHost(Protocol):
    """What every context of one worker shares (the worker's ``Runtime``)."""

    @property
    def client(self) -> ClientHost: ...

    @property
    def points(self) -> Points:
        """The kernel hooks the worker's settlements run."""
        ...


class ContextHost(Protocol):
    """What an extension's context methods use of a handler's context (``TaskContext``)."""

    task: Task
    lease: Lease
    # Whether its handler takes a list of contexts (``batch=``): one call, many tasks.
    batched: bool

    @property
    def _runtime(self) -> RunHost: ...

    @property
    def name(self) -> str: ...

    @property
    def worker_id(self) -> str: ...

    @property
    def claimed_at_ms(self) -> int:
        """When this attempt was claimed: the ``started`` of the attempt it ends."""
        ...

    @property
    def settled(self) -> bool: ...

    @property
    def lost_lease(self) -> bool: ...

    def mark_lost(self) -> None:
        """Refuse the handler's further writes (the lease is gone)."""
        ...

    def _guard(self) -> None:
        """Raise ``LostLease`` once the attempt is settled or its lease lost."""
        ...

    async def _owned(self, op: Op[T], *, force: bool = False) -> T:
        """Run a write fenced on this attempt; a ``LostLease`` marks it lost."""
        ...

    def _settled_as(
        self, row: Any, *, event: str | None = None, ending: tuple[str, str] | None = None
    ) -> Task:
        """Note that the write that returned ``row`` settled this attempt: ``event`` is
        the listeners' kind for a task queued again (``retried`` by default);
        ``ending`` the (outcome, words) the attempt's log line says."""
        ...

    async def _record_failure(self, envelope: dict[str, Any], *, retryable: bool) -> Task:
        """Fail this attempt with ``envelope`` (requeued with backoff when ``retryable``)."""
        ...

    def _child(
        self, task: Any, payload: Any, name: Any, options: dict[str, Any], where: str
    ) -> Any:
        """A child task's spec (a ``kernel.NewTask``), this task's lineage by default.

        Raises:
            InvalidArgument: a bad argument, or both ``task`` and ``name``.
            LostLease: the attempt's writes are refused.
        """
        ...

    def _option(self, name: str) -> object:
        """An extension option for this task (``Extension.task_options``, else
        ``Extension.options``): the handler's own when registered with one, else the
        worker's."""
        ...

    def _state(self, kind: Callable[[], S]) -> S:
        """This attempt's state of a mixin: ``kind()`` made on first use, then the same."""
        ...


class SyncHost(Protocol):
    """What the generated blocking twin of a mixin uses of a ``SyncTaskContext``."""

    @property
    def _inner(self) -> Any:
        """The async context (a ``TaskContext``) the blocking one runs on."""
        ...

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the worker's event loop; block until it is done."""
        ...


Settle = Callable[[ContextHost, Callable[[], Awaitable[object]]], Awaitable[None]]
"""``settle(ctx, write)``: the executor writes a settlement, retrying transient errors."""

Signal = Callable[[BaseException, Sequence[ContextHost], Settle], Awaitable[Exception | None]]
"""Settles a call whose handler raised the signal: ``signal(raised, contexts, settle)``.
A context the handler settled itself, or whose lease is lost, is to be left alone.
Returns ``None``, or the error that made it fail the attempts instead (the snooze's
``SchemaIncomplete``), which their log lines then name."""
