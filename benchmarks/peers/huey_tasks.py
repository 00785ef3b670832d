"""The huey app the benchmark's consumer imports: ``benchmarks.peers.huey_tasks.huey``.

huey finds a task by its module and name, so the tasks live here, in a module
that both the client (``huey_bench``) and the consumer import under the same
name, as huey's docs advise.  The consumer gets the SQLite file through the
``BENCH_HUEY_PATH`` environment variable; the client calls ``make_huey(path)``.
"""

from __future__ import annotations

import os
import time
from typing import Any

from huey import SqliteHuey


def make_huey(path: str) -> Any:
    """A ``SqliteHuey`` on ``path`` with huey's defaults (results stored, WAL, fsync as
    SQLite's default), and the benchmark's two tasks."""
    huey = SqliteHuey("bench", filename=path)

    @huey.task(name="noop")
    def noop(i: int) -> int:
        # Returns its argument so that its result lands in huey's result store,
        # where the benchmark checks that every task ran (huey stores no result
        # for a task that returns None).
        return i

    @huey.task(name="stamp")
    def stamp() -> float:
        return time.time()

    huey.bench_tasks = {"noop": noop, "stamp": stamp}
    return huey


huey = make_huey(os.environ["BENCH_HUEY_PATH"]) if "BENCH_HUEY_PATH" in os.environ else None
