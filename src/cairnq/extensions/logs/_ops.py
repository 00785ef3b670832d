"""What a handler logged, per attempt (extension table ``cairnq_task_logs``,
``x0023_logs.sql``): the lines an attempt buffers (``LogBuffer``), the ``attempt_end``
hook that writes them in the settlement's transaction (``record``), and the reads.

An attempt's lines are kept in the worker's memory, at most ``log_max_bytes`` of them
(the lines past the cap are counted, and a marker line says how many were cut), and
written with the attempt's settlement: one statement for every attempt the settlement
ended, none for a settlement whose attempts logged nothing. Lines of an attempt whose
worker died before settling it are lost with the worker.
"""

from __future__ import annotations

import json
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ... import kernel
from ..._checks import check_text
from ...errors import InvalidArgument
from ...kernel.points import AttemptEnd, Recovered
from ...protocol.steps import NOW, Call, Op, Row

LOGS_MIGRATION = "x0023_logs.sql"

DEFAULT_MAX_BYTES = 65_536
"""How many bytes of log lines one attempt keeps by default."""
MAX_MAX_BYTES = 16 * 1024 * 1024
LEVELS = ("debug", "info", "warning", "error", "critical")
CUT = "cut"
"""The level of the marker line that ends a log cut at its cap."""
# What a line costs beyond its text: its time, level and the JSON around them.
LINE_OVERHEAD = 40


def check_max_bytes(value: Any) -> int:
    """The ``log_max_bytes`` option: a whole number of bytes from 256 to 16 MiB.

    Raises:
        InvalidArgument: another type or value.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 256 <= value <= MAX_MAX_BYTES:
        raise InvalidArgument(
            f"log_max_bytes must be a whole number of bytes from 256 to {MAX_MAX_BYTES}, "
            f"like log_max_bytes=65536; got {value!r}"
        )
    return value


def check_level(value: Any) -> str:
    """A log line's level: one of ``LEVELS`` (any case).

    Raises:
        InvalidArgument: another value.
    """
    if isinstance(value, str) and value.lower() in LEVELS:
        return value.lower()
    raise InvalidArgument(f"log level must be one of {', '.join(LEVELS)}; got {value!r}")


def check_message(value: Any) -> str:
    """A log line's message: text.

    Raises:
        InvalidArgument: not text.
    """
    if not isinstance(value, str):
        raise InvalidArgument(
            f"a log message must be text (format it first: ctx.log(f'...')); got "
            f"{type(value).__name__}"
        )
    return value


# --- buffering -------------------------------------------------------------------------


class LogBuffer:
    """One attempt's lines, in memory until its settlement writes them.

    Once it holds a line it is listed in ``PENDING`` under its attempt's (task id, claim
    nonce), weakly: it goes from there with the attempt's context.
    """

    __slots__ = ("__weakref__", "_lock", "cap", "dropped", "key", "lines", "size")

    def __init__(self) -> None:
        self.key: tuple[str, int] | None = None
        self.cap = DEFAULT_MAX_BYTES
        self.lines: list[list[Any]] = []
        self.size = 0
        self.dropped = 0
        self._lock = threading.Lock()

    def add(self, key: tuple[str, int], level: str, message: str, source: str, cap: int) -> None:
        """Keep a line, or count it as dropped once ``cap`` bytes are kept."""
        cost = len(message.encode("utf-8", "replace")) + len(source) + LINE_OVERHEAD
        with self._lock:
            self.cap = cap
            if self.dropped:  # cut already: a log keeps no lines after a gap
                self.dropped += 1
                return
            if self.size + cost > cap:
                room = cap - self.size - len(source) - LINE_OVERHEAD
                if room < 64:
                    self.dropped += 1
                    return
                # The first line past the cap keeps what fits, then the log is cut.
                message = message.encode("utf-8", "replace")[:room].decode("utf-8", "ignore")
                self.dropped += 1
                cost = cap - self.size
            self.lines.append([int(time.time() * 1000), level, message, source])
            self.size += cost
            if self.key is None:
                self.key = key
                PENDING[key] = self

    def snapshot(self) -> list[list[Any]]:
        """The lines as the table keeps them, with the cut marker when lines were dropped."""
        with self._lock:
            lines = list(self.lines)
            if self.dropped:
                at = lines[-1][0] if lines else int(time.time() * 1000)
                words = (
                    f"log cut: {self.dropped} line(s) past the per-attempt cap of "
                    f"{self.cap} bytes were not kept"
                )
                lines.append([at, CUT, words, "cairnq"])
        return lines


PENDING: weakref.WeakValueDictionary[tuple[str, int], LogBuffer] = weakref.WeakValueDictionary()
"""The buffers holding lines, by (task id, claim nonce), across the process's workers."""


def in_use() -> bool:
    """Whether an attempt of this process holds lines to write (the hook's gate)."""
    return len(PENDING) > 0


def record(ended: Sequence[AttemptEnd], recovered: Recovered | None) -> Op[None]:
    """The ``attempt_end`` hook: write the lines of each attempt a settlement ended, in
    its transaction, in one statement (nothing for attempts that logged nothing, or a
    recovery: a recovered attempt's lines died with its worker)."""
    rows = []
    for end in ended:
        buffer = PENDING.get((end.lease.id, end.lease.token))
        if buffer is not None:
            rows.append(
                [
                    end.lease.id,
                    end.lease.token,
                    end.lease.attempt,
                    buffer.snapshot(),
                    buffer.dropped,
                ]
            )
    if rows:
        encoded = json.dumps(rows, ensure_ascii=False, separators=(",", ":"))
        yield Call("logs_record", {"rows": encoded, "now_ms": NOW})


# --- reads -----------------------------------------------------------------------------


@dataclass(frozen=True)
class LogLine:
    """One line a handler logged.

    Attributes:
        at_ms: When it was logged (epoch ms, the worker's clock).
        level: ``debug``, ``info``, ``warning``, ``error``, ``critical``, or ``cut``
            for the marker that ends a log cut at its cap.
        message: The text.
        source: ``ctx.log`` for the handler's own lines, else the name of the standard
            logger that emitted it (``capture_logging``).
    """

    at_ms: int
    level: str
    message: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "at_ms": self.at_ms,
            "level": self.level,
            "message": self.message,
            "source": self.source,
        }


@dataclass(frozen=True)
class AttemptLog:
    """What a handler logged in one attempt.

    Attributes:
        task_id: The task.
        claim: The claim's nonce (an ``Attempt``'s ``claim``).
        attempt: The attempt number.
        lines: The lines kept, in order (the last a ``cut`` marker when lines were dropped).
        dropped: How many lines past the cap were not kept.
        recorded_at_ms: When the attempt's settlement wrote them.
    """

    task_id: str
    claim: int
    attempt: int
    lines: list[LogLine]
    dropped: int
    recorded_at_ms: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "attempt": self.attempt,
            "lines": [line.to_dict() for line in self.lines],
            "dropped": self.dropped,
            "recorded_at_ms": self.recorded_at_ms,
        }


def log_of(task_id: str, row: Row) -> AttemptLog:
    """An ``AttemptLog`` from a ``logs_list`` row."""
    try:
        raw = json.loads(str(row["lines"]))
    except ValueError:
        raw = []
    lines = [
        LogLine(int(item[0]), str(item[1]), str(item[2]), str(item[3]))
        for item in raw
        if isinstance(item, list) and len(item) == 4
    ]
    return AttemptLog(
        task_id,
        int(row["claim"]),
        int(row["attempt"]),
        lines,
        int(row["dropped"]),
        int(row["recorded_at_ms"]),
    )


def logs_ready() -> Op[bool]:
    """Whether the database has the logs' table (``x0023_logs.sql``)."""
    applied = yield from kernel.applied_migrations()
    return LOGS_MIGRATION in applied


def logs(task_id: Any) -> Op[list[AttemptLog]]:
    """What a task's handlers logged, per attempt, in the order the attempts ended
    (empty without the table); validated eagerly.

    Raises:
        InvalidArgument: a bad task id.
    """
    return _logs(check_text(task_id, "task id") or "")


def _logs(task_id: str) -> Op[list[AttemptLog]]:
    ready = yield from logs_ready()
    if not ready:
        return []
    rows = yield Call("logs_list", {"id": task_id})
    return [log_of(task_id, r) for r in rows]
