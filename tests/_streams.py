"""Reading a child process's output line by line, as it is written."""

from __future__ import annotations

import queue
import threading
import time
from typing import IO


class Lines:
    """A stream of a child process, read line by line on a thread.

    ``until`` waits for a line holding some text; the pipe is closed once the
    child closes its end (``close`` also waits for that).
    """

    def __init__(self, stream: IO[str]) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self.stream = stream
        self.thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        """After the process ended: finish reading, then close the pipe."""
        self.thread.join(60)
        self.stream.close()

    def _pump(self, stream: IO[str]) -> None:
        with stream:
            for line in stream:
                self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def until(self, text: str, within_s: float) -> str:
        """The first line holding ``text``, read within ``within_s``; fails otherwise."""
        deadline = time.monotonic() + within_s
        for line in self.seen:
            if text in line:
                return line
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._queue.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                break
            self.seen.append(line)
            if text in line:
                return line
        raise AssertionError(f"no line with {text!r} within {within_s} s: {self.seen}")

    def rest(self, within_s: float) -> list[str]:
        """Every line read so far and up to the end of the stream (the child closed it),
        read within ``within_s``; fails otherwise."""
        deadline = time.monotonic() + within_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._queue.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                self._queue.put(None)
                return self.seen
            self.seen.append(line)
        raise AssertionError(f"the stream did not end within {within_s} s: {self.seen}")
