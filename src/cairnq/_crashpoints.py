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
no transaction open (so a frozen process holds no lock): on PostgreSQL, where
other calls of the process may be inside a write transaction of their own
meanwhile, the point waits for them to end (``writes_open``; counted only while
a pause point is armed).
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

ARMED: str | None = os.environ.get("CAIRNQ_CRASHPOINT") or None
PAUSE_ARMED: str | None = os.environ.get("CAIRNQ_PAUSEPOINT") or None
_paused = False
# Write transactions of this process open now, counted only while a pause point is armed.
_writes_open = 0
_writes_lock = threading.Lock()


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


def write_began() -> None:
    """A write transaction opens (call only while a pause point is armed)."""
    global _writes_open
    with _writes_lock:
        _writes_open += 1


def write_ended() -> None:
    """The write transaction ``write_began`` counted has ended."""
    global _writes_open
    with _writes_lock:
        _writes_open -= 1


def _pausing(name: str) -> bool:
    return PAUSE_ARMED is not None and name == PAUSE_ARMED and not _paused


async def apausepoint_when_quiet(name: str) -> None:
    """``pausepoint(name)``, once no other write transaction of this process is open."""
    if _pausing(name):
        # Polled, not an Event: threads of the blocking paths count here too.
        while _writes_open:  # noqa: ASYNC110
            await asyncio.sleep(0.001)
        pausepoint(name)


def pausepoint_when_quiet(name: str) -> None:
    """``pausepoint(name)``, once no other thread of this process has a write transaction open."""
    if _pausing(name):
        while _writes_open:
            time.sleep(0.001)
        pausepoint(name)
