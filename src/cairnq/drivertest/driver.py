"""The one fixture the driver suite needs: ``driver``, an object of this protocol."""

from __future__ import annotations

from typing import Any, Protocol

from .._clock import Clock
from ..backends import Backend
from ..protocol.statements import Dialect

TRANSITION_COLUMNS = (
    "seq",
    "tbl",
    "op",
    "task_id",
    "key",
    "old_status",
    "new_status",
    "old_attempt",
    "new_attempt",
    "old_worker",
    "new_worker",
    "old_lease",
    "new_lease",
    "new_updated",
    "new_cancel",
    "old_completed",
    "new_completed",
    "max_attempts",
    "new_error_code",
    "new_result",
    "old_queue",
    "token",
    "db_time",
    "txid",
)
"""The columns of a transition-log row, as the chaos checker reads them."""


class Driver(Protocol):
    """One fresh, empty database of one backend, for one test.

    The ``driver`` fixture of a backend's test module returns one per test and
    drops the database afterwards. Everything the suite needs that is not a
    protocol operation (emptying the tables, the transition log) is the
    driver's, because it is SQL of the driver's dialect.
    """

    label: str
    """A short name for test ids, e.g. ``"sqlite"``."""

    dialect: Dialect
    """The dialect whose statements and migrations the backend runs."""

    def open(self, *, clock: Clock | None = None) -> Backend:
        """A new backend on this test's database, opened (migrated); the caller closes it.

        Every backend it returns sees the same data. ``clock`` is handed to the
        backend (a ``FakeClock`` in the state machine and the scenarios).
        """
        ...

    def wipe(self) -> None:
        """Delete every row of ``cairnq_task_keys`` and ``cairnq_tasks``; keep the schema."""
        ...

    def install_transition_log(self) -> None:
        """Add the history triggers to this (migrated) database.

        Every insert, update and delete of ``cairnq_tasks`` and ``cairnq_task_keys``
        (and of ``cairnq_leases``, where it exists) writes one row to the log, in the
        same transaction.
        """
        ...

    def transitions(self) -> list[dict[str, Any]]:
        """The transition log, oldest first: dicts with the ``TRANSITION_COLUMNS`` keys."""
        ...
