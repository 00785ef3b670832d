"""CPU time spent by a local PostgreSQL server, read from ``/proc``.

``ServerCpu(database)`` measures, between ``start()`` and ``stop()``:

- ``database_s``: the processes serving ``database`` (the backends of its
  connections and its autovacuum workers, whose process titles name it). A
  backend lives as long as its connection, so most start and end inside the
  window: they are sampled every ``interval_s`` while it is open, and a
  backend's CPU after its last sample (its own exit) is not counted;
- ``shared_s``: the server's own long-lived processes (postmaster, checkpointer,
  background writer, WAL writer, launchers), whose work, WAL writing above all,
  is shared by every database on the server;
- ``server_s``: every process of the server, exited ones included (through the
  postmaster's ``cutime + cstime``, which gain each backend's CPU when it is
  reaped): this holds other clients' work on the same server too.

Linux only; a server running elsewhere reads as zero.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

TICK_S = 1 / os.sysconf("SC_CLK_TCK")


@dataclass
class _Stat:
    name: str
    ppid: int
    cpu_s: float  # utime + stime
    children_s: float  # cutime + cstime: children it has reaped


def _stat(pid: int) -> _Stat | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 2 :].split()
    # fields[0] is the state (field 3 of proc(5)); ppid is field 4, utime..cstime 14-17.
    ticks = [int(f) for f in fields[11:15]]
    return _Stat(
        name, int(fields[1]), (ticks[0] + ticks[1]) * TICK_S, (ticks[2] + ticks[3]) * TICK_S
    )


def _title(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return raw.replace(b"\0", b" ").decode(errors="replace").split()


def postmasters() -> list[int]:
    """Pids of the ``postgres`` processes whose parent is not a ``postgres`` process."""
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None and stat.name == "postgres":
                stats[int(entry)] = stat
    return [pid for pid, stat in stats.items() if stat.ppid not in stats]


def _children(postmaster: int) -> list[int]:
    try:
        text = Path(f"/proc/{postmaster}/task/{postmaster}/children").read_text()
    except OSError:
        return [
            int(e)
            for e in os.listdir("/proc")
            if e.isdigit() and (s := _stat(int(e))) is not None and s.ppid == postmaster
        ]
    return [int(p) for p in text.split()]


def _is_client(title: list[str]) -> bool:
    """A backend serving a client connection, or a worker of one database."""
    words = " ".join(title)
    return "autovacuum worker" in words or any("(" in w or w == "[local]" for w in title)


class ServerCpu:
    """The server's CPU between ``start`` and ``stop``, split as the module says."""

    def __init__(self, database: str, interval_s: float = 0.05) -> None:
        self.database = database
        self.interval_s = interval_s
        self.masters = postmasters()
        self._seen: dict[int, tuple[float, float]] = {}  # pid -> (cpu at first sight, latest)
        self._fixed: dict[int, float] = {}
        self._server = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _server_total(self) -> float:
        total = 0.0
        for master in self.masters:
            stat = _stat(master)
            if stat is None:
                continue
            total += stat.cpu_s + stat.children_s
            for child in _children(master):
                child_stat = _stat(child)
                total += 0.0 if child_stat is None else child_stat.cpu_s
        return total

    def _sample(self, *, first: bool = False) -> None:
        for master in self.masters:
            for pid in _children(master):
                known = self._seen.get(pid)
                if known is None and self.database not in _title(pid):
                    continue
                stat = _stat(pid)
                if stat is None:
                    continue
                if known is None:
                    # A backend first seen after the start began inside the window.
                    self._seen[pid] = (stat.cpu_s if first else 0.0, stat.cpu_s)
                else:
                    self._seen[pid] = (known[0], stat.cpu_s)

    def _fixed_now(self) -> dict[int, float]:
        now = {}
        for master in self.masters:
            for pid in [master, *_children(master)]:
                title = _title(pid)
                stat = _stat(pid)
                if stat is not None and (pid == master or not _is_client(title)):
                    now[pid] = stat.cpu_s
        return now

    def _poll(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def start(self) -> None:
        self._server = self._server_total()
        self._fixed = self._fixed_now()
        self._sample(first=True)
        self._thread.start()

    def stop(self) -> dict[str, float]:
        """Seconds of CPU: ``database_s``, ``shared_s`` and ``server_s``."""
        self._stop.set()
        self._thread.join()
        self._sample()
        fixed = self._fixed_now()
        return {
            "database_s": sum(last - first for first, last in self._seen.values()),
            "shared_s": sum(fixed[pid] - cpu for pid, cpu in self._fixed.items() if pid in fixed),
            "server_s": self._server_total() - self._server,
        }
