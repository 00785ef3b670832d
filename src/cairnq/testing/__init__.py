"""Helpers for testing code that uses cairnq.

- ``FakeClock``: time that moves when the test says (delays, backoff, leases,
  schedules, retention all read the backend's clock).
- ``drain(worker)``: run every task that is due until the worker is idle; with
  ``clock=`` it also moves a ``FakeClock`` to each delayed task's start.
- ``inline(worker)``: a client whose ``submit`` runs the task before returning.
- ``assert_enqueued`` / ``assert_not_enqueued``: what code under test submitted.
- A pytest plugin (installed with cairnq) with the fixtures ``cairnq_sqlite`` and
  ``cairnq_postgres``: a fresh, migrated database per test.
"""

from __future__ import annotations

from ._clock import FakeClock
from ._helpers import Inline, assert_enqueued, assert_not_enqueued, drain, inline

__all__ = [
    "FakeClock",
    "Inline",
    "assert_enqueued",
    "assert_not_enqueued",
    "drain",
    "inline",
]
