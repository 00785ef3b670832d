"""A lock between test processes over PostgreSQL connections, for the tests that open dozens.

The test server allows a hundred connections. A storm (``tests/chaos/test_storms.py``)
opens about fifty at once; a multi-process or chaos test, a dozen or two. Lane tests on
PostgreSQL hold this lock shared for their whole run and a storm holds it exclusive, so
a storm never runs beside another lane's PostgreSQL test, whatever the test processes.
The lock is a file lock (``flock``) in the system's temporary folder: every test run on
this machine shares the one server, so every run shares the lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator

PATH = os.path.join(tempfile.gettempdir(), "cairnq-tests-postgres-connections.lock")

_fd: int | None = None
_held = 0  # the mode this process holds: 0, fcntl.LOCK_SH or fcntl.LOCK_EX


@contextlib.contextmanager
def postgres_connections(kind: str, *, many: bool = False) -> Iterator[None]:
    """Hold the lock (exclusive when ``many``) while the block runs, on PostgreSQL only.

    Re-entrant within a process: a shared holder asking for ``many`` converts its lock
    (other holders finish their test first), and goes back to shared afterwards.
    """
    global _fd, _held
    if kind != "postgres":
        yield
        return
    want = fcntl.LOCK_EX if many else fcntl.LOCK_SH
    previous = _held
    if previous == fcntl.LOCK_EX or previous == want:
        yield
        return
    if _fd is None:
        _fd = os.open(PATH, os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(_fd, want)
    _held = want
    try:
        yield
    finally:
        fcntl.flock(_fd, previous or fcntl.LOCK_UN)
        _held = previous
