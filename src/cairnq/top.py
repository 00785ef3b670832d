"""``cairnq top``: a live view of queues and running tasks.

``render_frame`` reads the database once and writes one frame; ``run_top``
calls it every interval until ``q`` is pressed, it is interrupted, or a fixed
number of times. Frames go to any text stream; the screen is cleared between
them only on a terminal. Keys are read from stdin only when it is a terminal
(put in cbreak mode meanwhile, and restored); otherwise top just waits.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from importlib import import_module
from typing import Any, TextIO

from .client import SyncCairnQ
from .durations import format_duration
from .extensions import Extension, builtins, waiting_counts, waiting_extensions
from .kernel import views as _reads
from .models import STATUSES, TERMINAL_STATUSES, Task

__all__ = [
    "Frame",
    "Section",
    "format_table",
    "percent",
    "progress_bar",
    "render_frame",
    "run_top",
    "terminal_keys",
]

CLEAR_SCREEN = "\x1b[H\x1b[2J"
BAR_WIDTH = 20
DEFAULT_RUNNING_ROWS = 20


@dataclass(frozen=True)
class Frame:
    """What one refresh saw: when (epoch ms) and the counts ``{queue: {status: n}}``.

    The next refresh compares its counts against these to compute throughput.
    """

    now_ms: int
    stats: dict[str, dict[str, int]] = field(default_factory=dict)
    scheduled: dict[str, int] = field(default_factory=dict)
    waiting: dict[str, int] = field(default_factory=dict)


def progress_bar(fraction: float | None, width: int = BAR_WIDTH) -> str:
    """``[#####...............]`` for ``fraction`` in [0, 1]; an empty bar for ``None``."""
    value = min(1.0, max(0.0, fraction or 0.0))
    filled = int(value * width + 0.5)
    return "[" + "#" * filled + "." * (width - filled) + "]"


def percent(fraction: float | None) -> str:
    """``42%`` for 0.42, ``-`` when a task reported no progress."""
    if fraction is None:
        return "-"
    return f"{int(min(1.0, max(0.0, fraction)) * 100 + 0.5)}%"


def format_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], *, right: Sequence[int] = ()
) -> list[str]:
    """Rows as aligned text lines (two spaces between columns); ``right`` are column indexes.

    The last column is not padded, so lines carry no trailing spaces.
    """
    widths = [len(h) for h in headers]
    for row in rows:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], len(cell))
    lines = []
    for row in [list(headers), *rows]:
        cells = []
        for index, cell in enumerate(row):
            last = index == len(row) - 1
            if index in right:
                cells.append(cell.rjust(widths[index]))
            else:
                cells.append(cell if last else cell.ljust(widths[index]))
        lines.append("  ".join(cells).rstrip())
    return lines


def _finished(counts: dict[str, int]) -> int:
    return sum(counts.get(status, 0) for status in TERMINAL_STATUSES)


def _throughput(queue: str, current: Frame, previous: Frame | None) -> str:
    if previous is None or current.now_ms <= previous.now_ms:
        return "-"
    before = _finished(previous.stats.get(queue, {}))
    # Purges and retries lower terminal counts; that is not negative throughput.
    done = max(0, _finished(current.stats[queue]) - before)
    return f"{done * 1000 / (current.now_ms - previous.now_ms):.1f}"


# The queue table's columns: queued tasks split into due now, scheduled for later (a delay,
# a retry's backoff) and waiting on something an extension holds (``waiting_counts``).
COLUMNS = ("queued", "scheduled", "waiting", *STATUSES[1:])


def _queue_lines(current: Frame, previous: Frame | None) -> list[str]:
    headers = ["QUEUE", *(c.upper() for c in COLUMNS), "DONE/S"]
    rows = []
    for queue, counts in sorted(current.stats.items()):
        later = current.scheduled.get(queue, 0)
        held = min(later, current.waiting.get(queue, 0))
        shown = {
            **counts,
            "queued": max(0, counts.get("queued", 0) - later),
            "scheduled": later - held,
            "waiting": held,
        }
        rows.append(
            [
                queue,
                *(str(shown.get(column, 0)) for column in COLUMNS),
                _throughput(queue, current, previous),
            ]
        )
    return format_table(headers, rows, right=range(1, len(headers)))


def _running_lines(tasks: Sequence[Task], now_ms: int) -> list[str]:
    rows = [
        [
            task.id,
            task.name,
            task.queue,
            f"{progress_bar(task.progress)} {percent(task.progress):>4}",
            format_duration(now_ms - task.created_at_ms),
            task.worker_id or "-",
            (task.message or "") + ("  (cancel requested)" if task.cancel_requested else ""),
        ]
        for task in tasks
    ]
    return format_table(["ID", "NAME", "QUEUE", "PROGRESS", "AGE", "WORKER", "MESSAGE"], rows)


@dataclass(frozen=True)
class Section:
    """What an extension adds to a frame of ``cairnq top`` (its ``cli`` module's
    ``top_section(client, queue=..., now_ms=...)`` gives it, or ``None``).

    Attributes:
        lines: The lines; none shows nothing.
        head: Under the header line; else under the queues, after a blank line.
    """

    lines: Sequence[str]
    head: bool = False


def _sections(
    client: SyncCairnQ, extensions: Sequence[Extension], queue: str | None, now_ms: int
) -> list[Section]:
    """The sections of cairnq's extensions, the client's and ``extensions``, in that
    order (an extension named twice once), each with lines."""
    named = {e.name: e for e in (*builtins(), *client.extensions, *extensions)}
    found = []
    for extension in named.values():
        module = None if extension.cli is None else import_module(extension.cli)
        section = getattr(module, "top_section", None)
        part = None if section is None else section(client, queue=queue, now_ms=now_ms)
        if part is not None and part.lines:
            found.append(part)
    return found


def render_frame(
    client: SyncCairnQ,
    out: TextIO,
    previous: Frame | None,
    now_ms: int,
    *,
    queue: str | None = None,
    title: str = "",
    max_running: int = DEFAULT_RUNNING_ROWS,
    width: int | None = None,
    extensions: Sequence[Extension] = (),
) -> Frame:
    """Read the counts and the running tasks once, write one frame to ``out``, return it.

    Args:
        client: Where to read.
        out: The stream to write to; cleared first when it is a terminal.
        previous: The frame before this one (``None`` for the first): throughput is
            the change in finished (succeeded, failed, canceled) counts per queue
            since then, per second.
        now_ms: This frame's time in epoch milliseconds (task ages, throughput).
        queue: Show only this queue.
        title: Shown in the header (e.g. which database).
        max_running: Most running tasks listed.
        width: Cut lines to this many characters (``None``: never).
        extensions: Extensions whose sections are shown besides those of cairnq's own
            and of the client's (``Section``).

    Queued tasks show as ``QUEUED`` when due, ``SCHEDULED`` when not yet due (delayed,
    or retries in backoff) and ``WAITING`` when not yet due because they wait on
    something an extension holds (an event, a sleep: ``docs/backpressure.md``). Each
    extension's ``Section`` goes under the header or under the queues (presence's
    flags, on an ``unserved:`` line each, due tasks of a name no live cairnq worker
    serves on their queue).

    Returns:
        This frame, to pass as ``previous`` next time.
    """
    later = client.backend.run(_reads.not_due(), write=False)
    counting = waiting_counts(waiting_extensions(client.extensions), queue)
    held = client.backend.run(counting, write=False)
    sections = _sections(client, extensions, queue, now_ms)
    current = Frame(now_ms, client.stats(queue), later, held)
    running = client.list(status="running", queue=queue, limit=max_running)
    total_running = sum(counts.get("running", 0) for counts in current.stats.values())
    clock = datetime.fromtimestamp(now_ms / 1000).astimezone().strftime("%H:%M:%S %Z")
    header = "  ".join(part for part in ("cairnq top", title, clock) if part)
    lines = [header]
    lines += [line for section in sections if section.head for line in section.lines]
    lines.append("")
    if current.stats:
        lines += _queue_lines(current, previous)
    else:
        lines.append("no tasks" + (f" in queue {queue!r}" if queue else ""))
    for section in sections:
        if not section.head:
            lines += ["", *section.lines]
    lines += ["", f"running: {total_running}"]
    if running:
        lines += _running_lines(running, now_ms)
    if total_running > len(running):
        lines.append(f"... and {total_running - len(running)} more")
    if width is not None:
        lines = [line[:width] for line in lines]
    text = "\n".join(lines) + "\n"
    if _is_terminal(out):
        text = CLEAR_SCREEN + text
    else:
        text += "\n"
    out.write(text)
    out.flush()
    return current


def _is_terminal(out: TextIO) -> bool:
    isatty = getattr(out, "isatty", None)
    return bool(isatty and isatty())


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


Keys = Callable[[float], "str | None"]
"""Waits up to the given seconds for a key press; returns the key, or ``None`` if none came."""

QUIT_KEYS = frozenset("qQ")


def run_top(
    client: SyncCairnQ,
    out: TextIO,
    *,
    interval: float = 2.0,
    queue: str | None = None,
    title: str = "",
    refreshes: int | None = None,
    extensions: Sequence[Extension] = (),
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], int] = _now_ms,
    keys: Keys | None = None,
) -> int:
    """Render a frame every ``interval`` seconds until ``q``, an interrupt, or ``refreshes``.

    On a terminal, lines are cut to its width. Ctrl-C raises ``KeyboardInterrupt``
    out of here as usual.

    Args:
        extensions: Extensions whose sections are shown besides cairnq's own and the
            client's (``render_frame``).
        keys: Where key presses come from (``q`` quits at once). ``None``: stdin
            when it is a terminal, read without blocking; otherwise no keys, and
            ``sleep`` waits between frames.

    Returns:
        The number of frames rendered.

    Example::

        run_top(SyncCairnQ.sqlite("tasks.db"), sys.stdout, interval=1.0)
    """
    with contextlib.ExitStack() as stack:
        if keys is None:
            keys = stack.enter_context(terminal_keys())
        previous: Frame | None = None
        frames = 0
        while True:
            width = shutil.get_terminal_size().columns if _is_terminal(out) else None
            previous = render_frame(
                client,
                out,
                previous,
                clock(),
                queue=queue,
                title=title,
                width=width,
                extensions=extensions,
            )
            frames += 1
            if refreshes is not None and frames >= refreshes:
                return frames
            if keys is None:
                sleep(interval)
            elif _quit_pressed(keys, interval):
                return frames


def _quit_pressed(keys: Keys, interval: float) -> bool:
    """Wait out ``interval`` for keys; ``True`` as soon as a quit key comes."""
    deadline = time.monotonic() + interval
    while (left := deadline - time.monotonic()) > 0:
        key = keys(left)
        if key is not None and key in QUIT_KEYS:
            return True
    return False


@contextlib.contextmanager
def terminal_keys() -> Iterator[Keys | None]:
    """Single key presses from stdin while it is a terminal (cbreak mode, restored after);
    ``None`` when stdin is not a terminal or the platform has no ``termios``."""
    stdin = sys.stdin
    try:
        fd = stdin.fileno()
        interactive = os.isatty(fd)
    except (AttributeError, OSError, ValueError):
        interactive = False
    try:
        import termios
        import tty
    except ImportError:  # pragma: no cover - not on POSIX
        interactive = False
    if not interactive:
        yield None
        return
    saved = termios.tcgetattr(fd)
    # SIGTERM and SIGHUP end the process through the ``finally`` below, so the
    # terminal is restored on every exit, not only on q, Ctrl-C or an error.
    signals = _SignalLatch(signal.SIGTERM, signal.SIGHUP)
    tty.setcbreak(fd)

    def read_key(timeout: float) -> str | None:
        signals.exit_if_received()
        ready, _, _ = select.select([fd, signals.fd], [], [], max(0.0, timeout))
        signals.exit_if_received()
        if signals.fd in ready:
            signals.drain()
        if fd not in ready:
            return None
        data = os.read(fd, 1)
        if not data:  # the terminal hung up: nothing more will come
            select.select([signals.fd], [], [], max(0.0, timeout))
            signals.exit_if_received()
            signals.drain()
            return None
        return data.decode("utf-8", "replace")

    try:
        yield read_key
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        signals.close()


class _SignalLatch:
    """Turns ``signals`` into ``SystemExit`` (exit 128 + signal number) at the key wait.

    The handler only notes the signal and writes a byte to a pipe that the key
    wait selects on; raising from the handler itself could land between a
    lock's acquire and its release anywhere in the client, leaving the lock held
    and the exit hung. Outside the main thread no handler is installed.
    """

    def __init__(self, *signals: signal.Signals) -> None:
        self.received: int | None = None
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        self._previous: dict[signal.Signals, Any] = {}
        os.set_blocking(self._read, False)
        self._wakeup: int | None = None
        if threading.current_thread() is threading.main_thread():
            for sig in signals:
                self._previous[sig] = signal.signal(sig, self._note)
            # The kernel may hand a signal to another thread (the SQLite writer's);
            # its handler then runs only once the main thread runs Python again, so
            # the wakeup fd wakes the key wait at once, whichever thread took it.
            self._wakeup = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)

    @property
    def fd(self) -> int:
        """Readable once a signal has been received."""
        return self._read

    def _note(self, signum: int, frame: object) -> None:
        self.received = signum
        with contextlib.suppress(OSError):  # full or closed: one byte already wakes the wait
            os.write(self._write, b"\0")

    def exit_if_received(self) -> None:
        if self.received is not None:
            raise SystemExit(128 + self.received)

    def drain(self) -> None:
        """Empty the pipe (a wakeup byte of another signal would wake every wait)."""
        with contextlib.suppress(OSError):
            while os.read(self._read, 512):
                pass

    def close(self) -> None:
        """Put the previous handlers back and close the pipe."""
        if self._wakeup is not None:
            signal.set_wakeup_fd(self._wakeup)
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        os.close(self._read)
        os.close(self._write)


def __getattr__(name: str) -> Any:
    """A name an extension's ``cli`` module lists in its ``top_names`` (the helpers of
    its section, which this module once held)."""
    for extension in () if name.startswith("__") else builtins():
        module = None if extension.cli is None else import_module(extension.cli)
        if name in getattr(module, "top_names", ()):
            return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
