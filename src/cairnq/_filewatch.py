"""Cross-process wake-ups for SQLite: notice another process's commit without polling.

Every commit in WAL mode writes the ``-wal`` file. On Linux an inotify watch on
the database's directory reports that write at once; a thread blocked in
``poll()`` on the inotify descriptor costs nothing while nothing happens. Each
change pokes the process's wake hub, and waiters look at the database again.
Elsewhere there is no watcher, and waiting falls back to polling.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import struct
import sys
import threading
from collections.abc import Callable

log = logging.getLogger("cairnq.sqlite")

IN_MODIFY = 0x00000002
IN_CREATE = 0x00000100
IN_MOVED_TO = 0x00000080
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
_EVENT = struct.Struct("iIII")
TRAILING_MS = (2, 10, 40)


class FileWatcher:
    """Calls ``on_change()``, from its own thread, when one of ``names`` in ``folder`` changes."""

    def __init__(self, folder: str, names: set[str], on_change: Callable[[], None]) -> None:
        self._names = {name.encode() for name in names}
        self._on_change = on_change
        import ctypes
        import ctypes.util

        self._stop_read, self._stop_write = os.pipe()
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        self._fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        mask = IN_MODIFY | IN_CREATE | IN_MOVED_TO
        if libc.inotify_add_watch(self._fd, os.fsencode(folder), mask) < 0:
            os.close(self._fd)
            raise OSError(ctypes.get_errno(), f"cannot watch {folder}")
        self._thread = threading.Thread(target=self._run, name="cairnq-sqlite-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        poller.register(self._stop_read, select.POLLIN)
        stopper = select.poll()
        stopper.register(self._stop_read, select.POLLIN)
        pending: list[int] = []
        while True:
            # A commit writes its WAL frames, syncs them, and only then becomes visible
            # to readers, so a waiter woken by the write may look too early. After a
            # burst of writes, a few more wake-ups follow as the file stays quiet.
            ready = {fd for fd, _ in poller.poll(pending[0] if pending else None)}
            if self._stop_read in ready:
                return
            if not ready:
                pending.pop(0)
                self._on_change()
            elif self._fd in ready and self._drain():
                self._on_change()
                # One commit is many writes, each its own event (this process's own
                # commits too): while they keep coming, they are read together once
                # per TRAILING_MS[0] instead of waking this thread once each.
                while True:
                    if stopper.poll(TRAILING_MS[0]):
                        return
                    more = self._drain()
                    self._on_change()
                    if not more:
                        break
                pending = list(TRAILING_MS[1:])

    def _drain(self) -> bool:
        """Read every pending event; whether any concerned a watched file."""
        hit = False
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return hit
            offset = 0
            while offset + _EVENT.size <= len(data):
                _, _, _, length = _EVENT.unpack_from(data, offset)
                name = data[offset + _EVENT.size : offset + _EVENT.size + length].rstrip(b"\0")
                hit = hit or name in self._names
                offset += _EVENT.size + length

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._stop_write, b"x")
        self._thread.join(timeout=5)
        for fd in (self._fd, self._stop_read, self._stop_write):
            with contextlib.suppress(OSError):
                os.close(fd)


def watch_database(path: str, on_change: Callable[[], None]) -> FileWatcher | None:
    """A watcher for a SQLite file's commits, or ``None`` where inotify is unavailable."""
    if not sys.platform.startswith("linux"):
        return None
    folder = os.path.dirname(os.path.abspath(path)) or "."
    base = os.path.basename(path)
    try:
        return FileWatcher(folder, {base, base + "-wal"}, on_change)
    except (OSError, AttributeError) as exc:
        log.info("no cross-process wake-ups for %s (%s); waiting polls", path, exc)
        return None
