"""``python -m benchmarks.pickup``: where the time from submit to handler start goes.

The latency row of ``python -m benchmarks`` on PostgreSQL, split into its
steps. An idle worker process (concurrency 4) serves a fresh database; this
process submits one task at a time (``SyncCairnQ.submit``, 20 ms apart) and
waits for each. The worker records, on one clock (``time.time``), when each
database statement it runs starts and ends and, on PostgreSQL, when each
``cairnq_queued`` notification arrives; the handler records when it starts.
For each task, measured from just before ``submit`` is called:

- submit: until ``submit`` returns (the insert and its commit);
- news: until the ``cairnq_queued`` notification reaches the worker;
- to claim: from the news to the start of the claim's first statement;
- claim: the claim's statements, from the first start to the last end;
- to handler: from the claim's end to the handler's first line.

The worker's timing wraps private methods of cairnq's backends, so this
measures this checkout only; it adds two clock reads and two list appends per
statement. Samples where a step was not seen (a claim begun before the
notification arrived, for one) are left out and counted.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cairnq import CairnQ, SyncCairnQ, Worker

from .cairnq_bench import ROOT, BenchmarkError, fresh_url

STEPS = ("total", "submit", "news", "to claim", "claim", "to handler")


def _instrument(events: list[tuple[float, str]]) -> None:
    """Record statement starts and ends, and notifications, into ``events``."""
    from cairnq.backends import _pg_async, _postgres_core

    def timed(execute: Any) -> Any:
        async def run(self: Any, conn: Any, step: Any) -> Any:
            name = str(getattr(step, "statement", "script"))
            started = time.time()
            try:
                return await execute(self, conn, step)
            finally:
                events.append((started, "start " + name))
                events.append((time.time(), "end " + name))

        return run

    paths = _pg_async.AsyncPostgresPaths
    paths._execute_async = timed(paths._execute_async)  # type: ignore[method-assign]
    dispatch = _postgres_core._Listener._dispatch

    def heard(self: Any, note: Any) -> None:
        events.append((time.time(), "notify " + note.channel))
        dispatch(self, note)

    _postgres_core._Listener._dispatch = heard  # type: ignore[method-assign]


async def _worker(url: str) -> list[tuple[float, str]]:
    events: list[tuple[float, str]] = []
    _instrument(events)
    async with CairnQ.connect(url) as cq:
        worker = Worker(cq, concurrency=4)

        @worker.task
        async def stamp(ctx: Any, payload: Any) -> float:
            started = time.time()
            events.append((started, "handler"))
            return started

        async with worker.background():
            await asyncio.sleep(0.5)
            print("ready", flush=True)
            await asyncio.to_thread(sys.stdin.readline)
    return events


def _split(sent: float, back: float, start: float, events: list[Any]) -> dict[str, float] | None:
    seen = [(t, what) for t, what in events if sent <= t <= start]
    claims = [(t, what) for t, what in seen if " claim" in what]
    if not claims:
        return None
    claim_start = min(t for t, what in claims if what.startswith("start"))
    claim_end = max(t for t, what in claims if what.startswith("end"))
    notes = [t for t, what in seen if what == "notify cairnq_queued"]
    if not notes or notes[0] > claim_start:
        return None
    news = notes[0]
    ms = 1000.0
    return {
        "total": (start - sent) * ms,
        "submit": (back - sent) * ms,
        "news": (news - sent) * ms,
        "to claim": (claim_start - news) * ms,
        "claim": (claim_end - claim_start) * ms,
        "to handler": (start - claim_end) * ms,
    }


def pickup(samples: int) -> tuple[dict[str, tuple[float, float]], int, list[Any]]:
    """Medians and 90th percentiles (ms) of each step, samples left out, statements seen.

    The last item counts the worker's statement sequences from submit to handler
    start, most common first.
    """
    with tempfile.TemporaryDirectory() as folder:
        url = fresh_url("postgres", Path(folder), "pickup")
        SyncCairnQ.connect(url).close()
        out = str(Path(folder) / "events.json")
        worker = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.pickup", "--worker", url, out],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert worker.stdin is not None
        assert worker.stdout is not None
        if worker.stdout.readline().strip() != "ready":
            raise BenchmarkError("pickup worker did not start")
        runs = []
        with SyncCairnQ.connect(url) as cq:
            for _ in range(samples + 20):
                time.sleep(0.02)
                sent = time.time()
                task = cq.submit("stamp", {})
                back = time.time()
                done = cq.wait(task.id, timeout_ms=10_000, poll_ms=5, max_poll_ms=20)
                if done.status != "succeeded":
                    raise BenchmarkError("a pickup task did not succeed")
                runs.append((sent, back, float(done.result)))
        worker.stdin.write("\n")
        worker.stdin.flush()
        worker.wait(timeout=30)
        events = json.loads(Path(out).read_text())
    splits = [s for s in (_split(*run, events) for run in runs[20:]) if s is not None]
    if not splits:
        raise BenchmarkError("no sample showed every step")
    figures = {}
    for step in STEPS:
        values = sorted(s[step] for s in splits)
        figures[step] = (statistics.median(values), values[int(len(values) * 0.9) - 1])
    sequences = collections.Counter(
        " ".join(
            what.split()[1]
            for t, what in sorted(events)
            if sent <= t <= start and what.startswith("start")
        )
        for sent, _, start in runs[20:]
    )
    return figures, samples - len(splits), sequences.most_common(3)


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        events = asyncio.run(_worker(sys.argv[2]))
        Path(sys.argv[3]).write_text(json.dumps(events))
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=400)
    args = parser.parse_args()
    figures, left_out, sequences = pickup(args.samples)
    print(f"postgres: {args.samples} samples, {left_out} left out\n")
    print("| step | p50 (ms) | p90 (ms) |\n|---|---|---|")
    for step, (p50, p90) in figures.items():
        print(f"| {step} | {p50:.2f} | {p90:.2f} |")
    print("\nthe worker's statements from submit to handler start, most common first:")
    for sequence, count in sequences:
        print(f"  {count} x {sequence or '(none)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
