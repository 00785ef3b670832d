"""Which path a single ``submit`` takes: the plain one for a task named by a string
with every option at its default, else the one that reads its options; and what a
submit writes besides its tasks, in their transaction, whatever path it takes
(``also``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar

from .. import kernel
from ..models import Task
from ..protocol.steps import Op

T = TypeVar("T")

Stored = Callable[[Sequence[Task]], Op[object]]
"""Work in a submit's transaction after its tasks are stored, given the stored tasks
(a reused key's task among them, with its own id)."""

Also = Callable[[Sequence[kernel.NewTask]], "Stored | None"]
"""What a submit writes besides its tasks, given them (as the submit hooks left
them): the ``Stored`` work to run after them, or ``None`` for nothing (the submit's
operation is then left as it is)."""

# The ``Also`` of the submit running in this context (set by ``also`` around one
# ``submit`` call, read where its operation is built: ``with_also``).
_ALSO: ContextVar[Also | None] = ContextVar("cairnq_submit_also", default=None)


@contextmanager
def also(write: Also | None) -> Iterator[None]:
    """Within the block, the operation of the submit the block runs also runs ``write``
    (nothing changes for ``None``)."""
    if write is None:
        yield
        return
    token = _ALSO.set(write)
    try:
        yield
    finally:
        _ALSO.reset(token)


def with_also(op: Op[T], specs: Sequence[kernel.NewTask]) -> Op[T]:
    """``op`` (which stores ``specs``), followed in its transaction by the ``Also`` of
    the submit running in this context; ``op`` itself when there is none."""
    pending = _ALSO.get()
    if pending is None:
        return op
    _ALSO.set(None)  # once: the submit's own tasks, not another submit it leads to
    write = pending(specs)
    if write is None:
        return op
    return _then(op, write)


def _then(op: Op[T], write: Stored) -> Op[T]:
    stored = yield from op
    tasks: list[Any] = stored if isinstance(stored, list) else [stored]
    yield from write(tasks)
    return stored


class SpecMaker(Protocol):
    """The two ways a client turns a submit into the kernel's task."""

    def _spec(
        self, task: Any, payload: Any, name: Any, options: dict[str, Any]
    ) -> kernel.NewTask: ...

    def _plain_spec(self, task: str, payload: Any) -> kernel.NewTask: ...


def spec_for_submit(
    client: SpecMaker,
    task: Any,
    payload: Any,
    name: Any,
    key: str | None,
    queue: str | None,
    conflict: str,
    max_attempts: int | None,
    priority: int | None,
    metadata: Any,
    delay_ms: int | None,
    delay: Any,
    run_at: Any,
    parent_id: str | None,
    root_id: str | None,
    correlation_id: str | None,
    lineage: Any,
) -> kernel.NewTask:
    """``submit``'s task: ``_plain_spec`` for a task named by a string with every
    option at its default (no options to gather), else ``_spec``. Positional, so a
    plain submit builds no mapping of its options."""
    if (
        type(task) is str
        and name is None
        and key is None
        and queue is None
        and conflict == "reuse"
        and max_attempts is None
        and priority is None
        and metadata is None
        and delay_ms is None
        and delay is None
        and run_at is None
        and parent_id is None
        and root_id is None
        and correlation_id is None
        and lineage is None
    ):
        return client._plain_spec(task, payload)
    options = {
        "key": key,
        "queue": queue,
        "conflict": conflict,
        "max_attempts": max_attempts,
        "priority": priority,
        "metadata": metadata,
        "delay_ms": delay_ms,
        "delay": delay,
        "run_at": run_at,
        "parent_id": parent_id,
        "root_id": root_id,
        "correlation_id": correlation_id,
        "lineage": lineage,
    }
    return client._spec(task, payload, name, options)
