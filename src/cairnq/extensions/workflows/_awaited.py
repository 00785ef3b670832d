"""The tasks a client made others wait for lately (``Awaited``): a worker built on
that client decides their dependents in the transaction that settles them, before its
look reads them.

A client notes the ids before the transaction that parks the waiting tasks
(``submit(depends_on=...)``, ``submit_graph``, ``ctx.gather``); a graph node whose key
returned an existing task is noted once that transaction committed (only then is its
id known). The worker reads the notes when it prepares a settlement (``Settler._flush``,
``kernel.complete``: the gate is read as the operation is built), not when the
settlement runs. A settlement prepared after the note decides, one that runs while the
parking transaction commits included; one prepared before it (a child's completion
already built when its parent gathers, a reused key's task settled before its note)
leaves the dependents to the sweep, which releases them within about a second more.
Only the worker's own client notes: what another ``CairnQ`` submits, in this process or
another, is decided by the worker's settlements once its look has read it (before
that, by the sweep).

The workflows' look reads the same ids from the database once a second (every
dependency of a parked task), so a note is needed only until a look after its commit:
a note is forgotten ``HORIZON_S`` after it was made. At most ``LIMIT`` ids are kept;
when more were noted within the horizon, the worker decides every settlement until
the horizon has passed (``everything``), as it does when the look finds too many.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Protocol

# Looks run once a second: five give a submission time to commit and a look to read it.
HORIZON_S = 5.0
LIMIT = 10_000


class Awaited:
    """The ids a client made others wait for within the last ``HORIZON_S``."""

    __slots__ = ("_full_until", "_ids", "_lock")

    def __init__(self) -> None:
        # Each id with when it was last noted (``time.monotonic``), oldest first.
        self._ids: dict[str, float] = {}
        self._full_until = 0.0
        self._lock = threading.Lock()

    def note(self, ids: Iterable[str]) -> None:
        """Note that tasks are about to wait for ``ids``."""
        now = time.monotonic()
        with self._lock:
            found = self._ids
            for task_id in ids:
                found.pop(task_id, None)
                found[task_id] = now
            while found:
                oldest = next(iter(found))
                if len(found) > LIMIT:
                    self._full_until = now + HORIZON_S
                elif found[oldest] >= now - HORIZON_S:
                    break
                del found[oldest]

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._ids

    def __bool__(self) -> bool:
        return bool(self._ids) or self.everything()

    def everything(self) -> bool:
        """Whether more than ``LIMIT`` ids were noted lately (every settlement decides)."""
        return self._full_until > 0.0 and time.monotonic() < self._full_until


class Noting(Protocol):
    """A client that keeps the ids it made others wait for (a ``CairnQ``)."""

    _awaited: Awaited | None


# Held while a client's first ``Awaited`` is made, so two threads noting at once share it.
_MAKING = threading.Lock()


def note(client: Noting, ids: Iterable[str]) -> None:
    """Note on ``client`` that tasks are about to wait for ``ids`` (from any thread)."""
    found = client._awaited
    if found is None:
        with _MAKING:
            found = client._awaited
            if found is None:
                found = client._awaited = Awaited()
    found.note(ids)
