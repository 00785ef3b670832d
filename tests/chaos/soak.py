"""The soak: every fault mixed on a random schedule for minutes, then the checker.

Run from the repository root (not part of CI)::

    python -m tests.chaos.soak --minutes 10 --backend sqlite --seed 1
    python -m tests.chaos.soak --minutes 10 --backend postgres --seed 1

SQLite faults: kill -9 and SIGSTOP/SIGCONT of workers, a foreign process holding
the write lock past the busy budget. PostgreSQL (a private cluster started with
initdb): kill -9 and SIGSTOP of workers, sessions terminated, and the server
crashed (``pg_ctl stop -m immediate``) and restarted. Prints one line of figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from .._db import Database, admin_connect
from .harness import Config, Run
from .pgcluster import Cluster
from .test_sqlite_faults import HOLD_LOCK


def _redeliveries(events: list[dict[str, Any]]) -> tuple[list[float], list[float]]:
    """Runs of a task that started again although its previous run was never settled.

    Returns (windows, overlaps) in seconds: from the unsettled run's start to the
    next run's start, and how long the two ran at once (0 when the first had
    ended). A retry after a recorded failure is not a redelivery. All times come
    from one host's monotonic clock, which every process shares.
    """
    starts: dict[tuple[str, int], float] = {}
    ends: dict[tuple[str, int], float] = {}
    settled: set[tuple[str, int]] = set()
    for event in events:
        key = (event.get("task"), event.get("attempt"))
        if event["event"] == "handler_start":
            starts[key] = event["t"]  # type: ignore[index]
        elif event["event"] == "handler_end":
            ends[key] = event["t"]  # type: ignore[index]
        elif event["event"] == "settle_ok":
            settled.add(key)  # type: ignore[arg-type]
    windows, overlaps = [], []
    for (task, attempt), started in starts.items():
        following = starts.get((task, attempt + 1))
        if following is None or (task, attempt) in settled:
            continue
        windows.append(following - started)
        ended = ends.get((task, attempt))
        overlaps.append(max(0.0, ended - following) if ended is not None else 0.0)
    return windows, overlaps


def soak(
    db: Database, folder: Path, minutes: float, seed: int, cluster: Cluster | None
) -> dict[str, Any]:
    rng = random.Random(seed)
    config = Config(
        workers=3,
        concurrency=6,
        lease_ms=1500,
        heartbeat_ms=300,
        clients=2,
        tasks_per_client=10**6,
        keys=50,
        mix=(12, 2, 1, 2),
        sleep_ms=(5, 200),
        seed=seed,
        busy_ms=1000,
        quiescence_s=180,
        op_timeout_s=10.0,
    )
    run = Run(db, folder, config)
    faults: Counter[str] = Counter()
    try:
        for _ in range(config.workers):
            run.start_worker()
        run.start_clients(gap_ms=40)
        deadline = time.monotonic() + minutes * 60
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(1.0, 3.0))
            kinds = ["kill", "pause"] + (["lock"] if db.kind == "sqlite" else ["sessions", "crash"])
            kind = rng.choice(kinds)
            alive = run.live_workers()
            if kind == "kill" and alive:
                run.kill_worker(rng.choice(alive))
                run.start_worker()
            elif kind == "pause" and alive:
                victim = rng.choice(alive)
                run.signal_worker(victim, signal.SIGSTOP)
                time.sleep(rng.uniform(0.5, 3.0))
                run.signal_worker(victim, signal.SIGCONT)
            elif kind == "lock":
                subprocess.run(
                    [sys.executable, "-c", HOLD_LOCK, str(db.path), str(rng.uniform(0.5, 2.5))],
                    stdout=subprocess.DEVNULL,
                    check=False,
                )
            elif kind == "sessions":
                with admin_connect(db.url) as admin:
                    admin.execute(
                        "select pg_terminate_backend(pid) from pg_stat_activity where "
                        "application_name like 'cairnq-%' and pid <> pg_backend_pid()"
                    )
            elif kind == "crash" and cluster is not None:
                cluster.crash()
                time.sleep(rng.uniform(1.0, 3.0))
                cluster.start()
            faults[kind] += 1
        for proc in run.clients:
            proc.send_signal(signal.SIGTERM)
        for proc in run.clients:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        quiescent = run.quiesce(keep_workers=3)
    finally:
        run.stop()
    report = run.check(quiescent=quiescent)
    from .history import load

    windows, overlaps = _redeliveries(load(sorted(folder.glob("*.jsonl"))))
    figures = {
        "backend": db.kind,
        "minutes": minutes,
        "seed": seed,
        "valid": report.valid,
        "violations": len(report.violations),
        "faults": dict(faults),
        **{k: v for k, v in report.counters.items() if k != "faults"},
        "redeliveries": len(windows),
        "redelivery_window_s_max": round(max(windows), 2) if windows else 0,
        "redelivery_window_s_median": round(sorted(windows)[len(windows) // 2], 2)
        if windows
        else 0,
        "overlapping_runs": sum(o > 0 for o in overlaps),
        "overlap_s_max": round(max(overlaps), 3) if overlaps else 0,
    }
    if not report.valid:
        figures["first_violations"] = [str(v) for v in report.violations[:5]]
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="cairnq-soak-"))
    if args.backend == "sqlite":
        figures = soak(Database.sqlite(folder / "soak.db"), folder, args.minutes, args.seed, None)
    else:
        with Cluster() as cluster:
            db = Database.postgres(cluster.dsn, "soak")
            figures = soak(db, folder, args.minutes, args.seed, cluster)
    figures["histories"] = str(folder)
    print(json.dumps(figures))
    return 0 if figures["valid"] else 1


if __name__ == "__main__":
    sys.exit(main())
