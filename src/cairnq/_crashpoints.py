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

``CAIRNQ_PAUSEPOINT=name`` instead freezes the whole process (it sends itself
SIGSTOP) the first time execution reaches ``name``, for a test to resume with
SIGCONT. The thread that reached the point then waits for the file named by
``CAIRNQ_PAUSEPOINT_RESUME`` to exist, since a stop takes hold of each thread
only when the kernel next looks: without the wait, that thread could run on.
``before_write:<op>`` is a write operation about to start, after every check the
process makes on its own and before anything of it reaches the database, with
no transaction open (so a frozen process holds no lock).
"""

from __future__ import annotations

import os
import signal
import time

ARMED: str | None = os.environ.get("CAIRNQ_CRASHPOINT") or None
PAUSE_ARMED: str | None = os.environ.get("CAIRNQ_PAUSEPOINT") or None
_paused = False


def crashpoint(name: str) -> None:
    """Exit at once, without cleanup, if ``name`` is the armed crash point."""
    if ARMED is not None and name == ARMED:
        os._exit(137)


def around_commit(phase: str, op_name: str) -> None:
    """``before_commit:<op>`` / ``after_commit:<op>``; cheap when nothing is armed."""
    if ARMED is not None and f"{phase}:{op_name}" == ARMED:
        os._exit(137)


def pausepoint(name: str) -> None:
    """Stop this process (SIGSTOP to itself) the first time the armed pause point is reached.

    The calling thread goes on only once the resume file exists (see the module).
    """
    global _paused
    if PAUSE_ARMED is not None and name == PAUSE_ARMED and not _paused:
        _paused = True
        resume = os.environ.get("CAIRNQ_PAUSEPOINT_RESUME", "")
        os.kill(os.getpid(), signal.SIGSTOP)
        while resume and not os.path.exists(resume):
            time.sleep(0.002)
