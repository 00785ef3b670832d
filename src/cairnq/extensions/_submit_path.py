"""Which path a single ``submit`` takes: the plain one for a task named by a string
with every option at its default, else the one that reads its options."""

from __future__ import annotations

from typing import Any, Protocol

from .. import kernel


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
