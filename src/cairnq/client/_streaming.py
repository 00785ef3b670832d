"""A batch ``submit_many_ids`` builds part by part while it writes it.

On a backend whose server runs pipelined statements as they arrive
(``StreamedBatches``: PostgreSQL), the client builds (validates and encodes) each part
of a large batch while the server inserts the one before, so the batch costs about
the server's time alone. The keys are read from the items beforehand, to be locked
before the first part is written (``kernel.submit_many_ids_streamed``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .. import _ids, kernel
from .._checks import check_text
from ..backends import Backend, StreamedBatches
from ..backpressure import QueueGate
from ..errors import InvalidArgument

# Items per part: large enough that a part's statement costs little beside its rows,
# small enough that the server starts inserting soon after the call.
STREAM_PART = 250

Build = Callable[[list[Any], list[str], set[str]], list[kernel.NewTask]]
"""Builds items with their ids, given the task names already checked (added to)."""


@dataclass(frozen=True)
class StreamPlan:
    """A batch built part by part: its keys, sorted, and whether an item may replace the
    task its key points at."""

    keys: list[str]
    replaces: bool


class Submitter(Protocol):
    """What decides whether a client's batch may stream."""

    @property
    def backend(self) -> Backend: ...

    @property
    def submit_hooks(self) -> Sequence[object]: ...

    @property
    def gate(self) -> QueueGate: ...


def stream_plan(client: Submitter, items: list[Any], conn: Any) -> StreamPlan | None:
    """How ``client.submit_many_ids`` builds ``items`` part by part while it writes them,
    or ``None`` when it builds them whole first: a batch of one part, on the
    application's connection (``conn``), with a submit hook or a queue depth limit to
    see the whole batch, on a backend that does not stream; or an item that is no pair
    or dict, or a bad key (the whole batch is then built first and its first bad item
    named, as on every backend).
    """
    backend = client.backend
    if (
        len(items) <= STREAM_PART
        or conn is not None
        or client.submit_hooks
        or client.gate.gates_any
        or not (isinstance(backend, StreamedBatches) and backend.streams_batches)
    ):
        return None
    keys: set[str] = set()
    replaces = False
    for item in items:
        if type(item) is dict:
            key = item.get("key")
            if key is None:
                continue
            try:
                check_text(key, "key")
            except InvalidArgument:
                return None
            keys.add(key)
            replaces = replaces or item.get("conflict") == "replace"
        elif type(item) is not tuple:
            return None
    return StreamPlan(sorted(keys), replaces)


def parts(items: list[Any], build: Build) -> Iterator[list[kernel.NewTask]]:
    """``items`` built ``STREAM_PART`` at a time, as the writer asks for them; the ids
    are made for the lot at once (one monotonic run, as a batch built whole)."""
    ids = _ids.task_ids(len(items))
    names: set[str] = set()
    for start in range(0, len(items), STREAM_PART):
        end = start + STREAM_PART
        yield build(items[start:end], ids[start:end], names)
