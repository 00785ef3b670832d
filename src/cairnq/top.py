"""``cairnq top``: a live view of queues and running tasks.

``render_frame`` reads the database once and writes one frame; ``run_top``
calls it every interval until interrupted (or a fixed number of times). Frames
go to any text stream; the screen is cleared between them only on a terminal.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TextIO

from .client import SyncCairnQ
from .durations import format_duration
from .models import STATUSES, TERMINAL_STATUSES, Task

__all__ = ["Frame", "format_table", "percent", "progress_bar", "render_frame", "run_top"]

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


def _queue_lines(current: Frame, previous: Frame | None) -> list[str]:
    headers = ["QUEUE", *(s.upper() for s in STATUSES), "DONE/S"]
    rows = [
        [
            queue,
            *(str(counts.get(status, 0)) for status in STATUSES),
            _throughput(queue, current, previous),
        ]
        for queue, counts in sorted(current.stats.items())
    ]
    return format_table(headers, rows, right=range(1, len(headers)))


def _running_lines(tasks: Sequence[Task], now_ms: int) -> list[str]:
    rows = [
        [
            task.name,
            task.queue,
            f"{progress_bar(task.progress)} {percent(task.progress):>4}",
            format_duration(now_ms - task.created_at_ms),
            task.worker_id or "-",
            (task.message or "") + ("  (cancel requested)" if task.cancel_requested else ""),
        ]
        for task in tasks
    ]
    return format_table(["NAME", "QUEUE", "PROGRESS", "AGE", "WORKER", "MESSAGE"], rows)


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

    Returns:
        This frame, to pass as ``previous`` next time.
    """
    current = Frame(now_ms, client.stats(queue))
    running = client.list(status="running", queue=queue, limit=max_running)
    total_running = sum(counts.get("running", 0) for counts in current.stats.values())
    clock = datetime.fromtimestamp(now_ms / 1000).strftime("%H:%M:%S")
    header = "  ".join(part for part in ("cairnq top", title, clock) if part)
    lines = [header, ""]
    if current.stats:
        lines += _queue_lines(current, previous)
    else:
        lines.append("no tasks" + (f" in queue {queue!r}" if queue else ""))
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


def run_top(
    client: SyncCairnQ,
    out: TextIO,
    *,
    interval: float = 2.0,
    queue: str | None = None,
    title: str = "",
    refreshes: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], int] = _now_ms,
) -> int:
    """Render a frame every ``interval`` seconds until interrupted, or ``refreshes`` times.

    On a terminal, lines are cut to its width. Ctrl-C raises ``KeyboardInterrupt``
    out of here as usual.

    Returns:
        The number of frames rendered.
    """
    previous: Frame | None = None
    frames = 0
    while True:
        width = shutil.get_terminal_size().columns if _is_terminal(out) else None
        previous = render_frame(
            client, out, previous, clock(), queue=queue, title=title, width=width
        )
        frames += 1
        if refreshes is not None and frames >= refreshes:
            return frames
        sleep(interval)
