"""Deterministic crash points for fault tests: ``CAIRNQ_CRASHPOINT=name`` ends the
process with ``os._exit(137)`` (as SIGKILL would) when execution reaches ``name``.

Read once at import; with the variable unset every check is one comparison.
Names: ``after_claim`` (claim committed, handler not started), ``before_settle``
(handler returned, settlement not sent), ``before_commit:<op>`` and
``after_commit:<op>`` around the commit of a write operation (``claim``,
``complete``, ``fail``, ``heartbeat_batch``, ...). ``before_commit`` is always
reached with the write still uncommitted: on PostgreSQL an operation of one
statement, which otherwise autocommits, runs in a transaction of its own while
its ``before_commit`` point is armed.
"""

from __future__ import annotations

import os

ARMED: str | None = os.environ.get("CAIRNQ_CRASHPOINT") or None


def crashpoint(name: str) -> None:
    """Exit at once, without cleanup, if ``name`` is the armed crash point."""
    if ARMED is not None and name == ARMED:
        os._exit(137)


def around_commit(phase: str, op_name: str) -> None:
    """``before_commit:<op>`` / ``after_commit:<op>``; cheap when nothing is armed."""
    if ARMED is not None and f"{phase}:{op_name}" == ARMED:
        os._exit(137)
