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
import gc
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

    def collected(phase: str, info: dict[str, int]) -> None:
        events.append((time.time(), f"gc{info['generation']} {phase}"))

    gc.callbacks.append(collected)


async def _worker(url: str) -> tuple[list[tuple[float, str]], float]:
    """The events, and the worker's CPU time (s) from ready to told to stop."""
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
            cpu = time.process_time()
            print("ready", flush=True)
            await asyncio.to_thread(sys.stdin.readline)
            cpu = time.process_time() - cpu
    return events, cpu


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


def _percentiles(values: list[float]) -> tuple[float, float, float]:
    values = sorted(values)
    return (
        statistics.median(values),
        values[max(0, int(len(values) * 0.9) - 1)],
        values[max(0, int(len(values) * 0.99) - 1)],
    )


def pickup(samples: int) -> dict[str, Any]:
    """One run of ``samples`` pickups, split into steps; see the module docstring.

    Returns ``steps`` (p50, p90, p99 in ms of each step), ``left_out`` (samples
    where a step was not seen), ``sequences`` (the worker's statement sequences
    from submit to handler start, most common first), ``beside`` (for each set of
    other statements the worker ran during a sample: how many samples, and their
    p50 and slowest total), ``slowest`` (the slowest 1%: total and what the worker
    did meanwhile), ``cpu_us`` (the worker's CPU time per sample, its idle work
    between samples included) and ``collections`` (the worker's garbage
    collections during the samples, by generation).
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
        recorded = json.loads(Path(out).read_text())
    events: list[tuple[float, str]] = sorted((t, what) for t, what in recorded["events"])
    runs = runs[20:]
    splits = [s for s in (_split(*run, events) for run in runs) if s is not None]
    if not splits:
        raise BenchmarkError("no sample showed every step")

    def during(sent: float, start: float) -> list[tuple[float, str]]:
        return [(t, what) for t, what in events if sent <= t <= start]

    sequences = collections.Counter(
        " ".join(what.split()[1] for _, what in during(sent, start) if what.startswith("start"))
        for sent, _, start in runs
    )
    beside: dict[str, list[float]] = collections.defaultdict(list)
    for sent, _, start in runs:
        others = sorted(
            {
                what.split()[1]
                for _, what in during(sent, start)
                if what.startswith("start") and " claim" not in what
            }
        )
        beside[" ".join(others) or "(the claim alone)"].append((start - sent) * 1000)
    slowest = sorted(runs, key=lambda run: run[2] - run[0])[-max(1, len(runs) // 100) :]
    first, last = runs[0][0], runs[-1][2]
    collections_seen = collections.Counter(
        what.split()[0] for t, what in events if first <= t <= last and what.endswith(" start")
    )
    return {
        "steps": {step: _percentiles([s[step] for s in splits]) for step in STEPS},
        "left_out": len(runs) - len(splits),
        "sequences": sequences.most_common(3),
        "beside": sorted(
            ((names, len(v), statistics.median(v), max(v)) for names, v in beside.items()),
            key=lambda row: -row[1],
        ),
        "slowest": [
            (
                (start - sent) * 1000,
                [f"{(t - sent) * 1000:.2f} {what}" for t, what in during(sent - 0.005, start)],
            )
            for sent, _, start in slowest
        ],
        "cpu_us": recorded["cpu_s"] / (samples + 20) * 1e6,
        "collections": dict(sorted(collections_seen.items())),
    }


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        events, cpu = asyncio.run(_worker(sys.argv[2]))
        Path(sys.argv[3]).write_text(json.dumps({"events": events, "cpu_s": cpu}))
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=400)
    args = parser.parse_args()
    found = pickup(args.samples)
    print(f"postgres: {args.samples} samples, {found['left_out']} left out\n")
    print("| step | p50 (ms) | p90 (ms) | p99 (ms) |\n|---|---|---|---|")
    for step, (p50, p90, p99) in found["steps"].items():
        print(f"| {step} | {p50:.2f} | {p90:.2f} | {p99:.2f} |")
    print("\nthe worker's statements from submit to handler start, most common first:")
    for sequence, count in found["sequences"]:
        print(f"  {count} x {sequence or '(none)'}")
    print("\nwhat else the worker ran during a sample: samples, total p50 / slowest (ms):")
    for names, count, p50, slowest in found["beside"]:
        print(f"  {count} x {names}: {p50:.2f} / {slowest:.2f}")
    print("\nthe slowest 1% of samples: what the worker did, ms from the submit:")
    for total, seen in found["slowest"]:
        print(f"  {total:.2f} ms: " + "; ".join(seen))
    gcs = ", ".join(f"{gen} x {n}" for gen, n in found["collections"].items()) or "none"
    print(f"\nworker CPU per sample: {found['cpu_us']:.0f} us; garbage collections: {gcs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
