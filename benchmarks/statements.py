"""``python -m benchmarks.statements``: where a PostgreSQL drain's server time goes.

One drain worker process (concurrency 100, ``until_idle``) works through
``--tasks`` queued no-op tasks on a fresh database whose statements the server
logs with their durations (``log_min_duration_statement = 0`` for that database
only). The log lines of that database are matched back to cairnq's statement
files and summed per statement: execution time, how many executions, and time
per task. ``COMMIT`` is listed on its own: it is where the server waits for its
write-ahead log to reach the disk.

``--lean`` runs the same drain a second time on a database where the seven
indexes of ``cairnq_tasks`` a claim and a settlement do not read are each
replaced by an empty index of the same name (``where false``; the installation
check looks for them by name). Every settled or claimed row otherwise writes an
entry into each of them; the difference between the two runs is what those
indexes cost. That database is for this measurement only: its purge and list
queries have lost their indexes.

The server log is read from ``--log`` (by default the Debian/Ubuntu cluster log,
``/var/log/postgresql/postgresql-<version>-main.log``), so this runs on the
machine that hosts PostgreSQL.
"""

from __future__ import annotations

import argparse
import collections
import glob
import re
import subprocess
import sys
import time
from pathlib import Path

import psycopg

from cairnq import SyncCairnQ
from cairnq.protocol.statements import statements

from .cairnq_bench import ROOT, BenchmarkError, fresh_url

DATABASE = "statements"
# Indexes of cairnq_tasks that neither the claim nor a settlement reads.
UNREAD_BY_DRAIN = (
    "cairnq_tasks_completed_idx",
    "cairnq_tasks_name_idx",
    "cairnq_tasks_root_idx",
    "cairnq_tasks_correlation_idx",
    "cairnq_tasks_queue_completed_idx",
    "cairnq_tasks_status_completed_idx",
    "cairnq_tasks_claim_name_idx",
)
_ENTRY = re.compile(r"\n(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")
_DURATION = re.compile(
    r"duration: ([0-9.]+) ms\s+(statement|execute [^:]*|bind [^:]*|parse [^:]*):\s*(.*)", re.S
)


def _normal(text: str) -> str:
    text = re.sub(r"--[^\n]*", " ", text)
    text = re.sub(r"%\(\w+\)s|\$\d+", "?", text)
    return " ".join(text.split())


def _catalogue() -> dict[str, str]:
    return {_normal(s.text): name for name, s in statements("postgres").items()}


def _default_log() -> str:
    found = sorted(glob.glob("/var/log/postgresql/postgresql-*-main.log"))
    if not found:
        raise SystemExit("no PostgreSQL log found; pass --log PATH")
    return found[-1]


def drain_profile(tasks: int, log_path: str, *, lean: bool) -> dict[str, tuple[int, float]]:
    """Run one drain; returns {statement: (executions, milliseconds)} from the server log."""
    url = fresh_url("postgres", Path("/tmp"), DATABASE)
    database = url.rsplit("/", 1)[1]
    with SyncCairnQ.connect(url) as cq:
        for start in range(0, tasks, 1000):
            cq.submit_many([("noop", {}) for _ in range(min(1000, tasks - start))])
    with psycopg.connect(url, autocommit=True) as conn:
        if lean:
            for index in UNREAD_BY_DRAIN:
                conn.execute(f"drop index {index}")
                conn.execute(f"create index {index} on cairnq_tasks (id) where false")
        conn.execute(f"alter database {database} set log_min_duration_statement = 0")
        conn.execute("checkpoint")
    log = Path(log_path)
    start_at = log.stat().st_size
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "benchmarks.worker_main", url, "100"],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    elapsed = time.perf_counter() - started
    with SyncCairnQ.connect(url) as cq:
        done = sum(s["succeeded"] for s in cq.stats().values())
    if done != tasks:
        raise BenchmarkError(f"the drain finished {done} of {tasks} tasks")
    text = log.read_bytes()[start_at:].decode(errors="replace")
    known = _catalogue()
    totals: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for entry in _ENTRY.split(text):
        if database not in entry.split("\n", 1)[0]:
            continue
        found = _DURATION.search(entry)
        if found is None:
            continue
        ms, kind, body = float(found.group(1)), found.group(2).split()[0], found.group(3)
        flat = _normal(body)
        name = known.get(flat) or (flat if flat.isupper() else flat[:40])
        totals[name][1] += ms
        if kind in ("statement", "execute"):
            totals[name][0] += 1
    totals["(wall time of the drain)"] = [1, elapsed * 1000]
    return {name: (int(n), ms) for name, (n, ms) in totals.items()}


def _print(title: str, tasks: int, profile: dict[str, tuple[int, float]]) -> None:
    wall = profile.pop("(wall time of the drain)")[1]
    total = sum(ms for _, ms in profile.values())
    print(
        f"\n{title}: {total:.0f} ms of statements for {tasks} tasks "
        f"({total * 1000 / tasks:.0f} us per task); drain wall time {wall:.0f} ms"
    )
    print("| statement | executions | ms | us per task |")
    print("|---|---|---|---|")
    for name, (n, ms) in sorted(profile.items(), key=lambda kv: -kv[1][1])[:12]:
        print(f"| {name} | {n} | {ms:.0f} | {ms * 1000 / tasks:.0f} |")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--log", help="the PostgreSQL server log file")
    parser.add_argument(
        "--lean", action="store_true", help="also drain without the indexes a drain never reads"
    )
    args = parser.parse_args()
    log_path = args.log or _default_log()
    _print("protocol schema", args.tasks, drain_profile(args.tasks, log_path, lean=False))
    if args.lean:
        _print(
            "without the 7 indexes a drain does not read",
            args.tasks,
            drain_profile(args.tasks, log_path, lean=True),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
