"""``python -m benchmarks.features``: the drain's cost under schedules, dependencies and limits.

Examples::

    python -m benchmarks.features                     # both backends, 10,000 tasks, median of 3
    python -m benchmarks.features --backend sqlite --runs 5
    python -m benchmarks.features --quick             # 1,000 tasks, one run: does it work?
    python -m benchmarks.features --variants "kernel only" --runs 5   # beside the plain drain

Each variant drains ``--tasks`` no-op tasks with one worker process
(concurrency 100, ``run(until_idle=True)``) on a fresh database, timed as
``python -m benchmarks.scaling`` times its drains (from a go signal after the
process has started and connected, until it has drained), and is checked in the
database afterwards (every task succeeded). The variants take turns within each
run (each run starting one variant later than the run before), so each is compared
with the plain drain of the same run:

- plain: independent tasks;
- schedule: the worker also declares an every-second schedule, evaluated each
  second while it drains (its slots' tasks go to a queue no worker serves, so
  their number is shown but they are not run);
- chains: the tasks as ``tasks / 2`` chains of 2, each second task depending on
  the first (``submit_graph``), so half the tasks are released by a completion;
- fan-in: groups of 100, 99 independent tasks and one depending on all 99;
- keys, limit never binds, 1 per key: the tasks' payloads spread over 100 keys
  (``payload.k``), with no limit, with ``Limit.concurrency(1_000_000, key=
  "payload.k")``, and with the same at 1 (the worker modes ``loose`` and ``one``
  of ``benchmarks/worker_main.py``, as ``python -m benchmarks``'s limit rows);
- no attempt history: the plain drain with ``Worker(extensions=[History(record=False)])``, so every
  extension is installed and none is in use (the plain drain records each attempt);
- kernel only: the plain drain on a database migrated with the protocol's and the
  kernel's migrations only (no extension's), every process opened with
  ``migrate=False``: each built-in extension steps aside, so this is the kernel
  alone, against every extension installed and unused (the row above);
- tables only: the plain drain on a database with every migration, the worker
  running no extension (its registry of built-ins emptied): beside the two rows
  above, it tells what the extensions' tables cost from what their worker parts do.

Printed per variant: tasks/s (the median, and the slowest and fastest run: the noise
band), the worker's CPU per task (user + system; SQLite's
work included, as it runs in the worker), on PostgreSQL the server's CPU per
task for the database, and both throughput and CPU per task (worker plus
server) relative to the plain drain. On a busy machine the CPU ratio is the
steadier of the two.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cairnq import SyncCairnQ
from cairnq.extensions import builtins
from cairnq.protocol.statements import migrations
from cairnq.workflows import Graph

from .cairnq_bench import BenchmarkError, _count, fresh_url
from .scaling import _rate, per_task, run_children

KEYS = 100
GROUP = 100  # fan-in: GROUP - 1 independent tasks and one after all of them


def _plain(cq: SyncCairnQ, count: int) -> None:
    for start in range(0, count, 1000):
        cq.submit_many([("noop", {}) for _ in range(min(1000, count - start))])


def _keyed(cq: SyncCairnQ, count: int) -> None:
    for start in range(0, count, 1000):
        cq.submit_many(
            [("noop", {"k": f"k{(start + i) % KEYS}"}) for i in range(min(1000, count - start))]
        )


def _chains(cq: SyncCairnQ, count: int) -> None:
    for start in range(0, count // 2, 250):
        graph = Graph()
        for chain in range(start, min(count // 2, start + 250)):
            graph.add(f"a{chain}", "noop", {"chain": chain})
            graph.add(f"b{chain}", "noop", {"chain": chain}, after=[f"a{chain}"])
        cq.submit_graph(graph)


def _fan_in(cq: SyncCairnQ, count: int) -> None:
    for group in range(count // GROUP):
        graph = Graph()
        names = [f"part{i}" for i in range(GROUP - 1)]
        for name in names:
            graph.add(name, "noop", {"group": group})
        graph.add("all", "noop", {"group": group}, after=names)
        cq.submit_graph(graph)


def _kernel_only(url: str) -> None:
    """Apply to the fresh database at ``url`` the protocol's migrations and the x-migrations
    no built-in extension owns (the kernel's), each recorded in the ledger as cairnq would."""
    owned = {name for extension in builtins() for name in extension.migrations}
    dialect = "sqlite" if url.startswith("sqlite") else "postgres"
    wanted = [m for m in migrations(dialect) if not m.name.startswith("x") or m.name not in owned]
    ledger = (
        "create table if not exists cairnq_migrations "
        "(name text primary key, applied_at_ms bigint not null)"
    )
    if dialect == "sqlite":
        import contextlib
        import sqlite3

        with contextlib.closing(sqlite3.connect(url[len("sqlite:///") :])) as conn:
            conn.execute(ledger)
            for migration in wanted:
                conn.executescript(migration.source)
                conn.execute("insert into cairnq_migrations values (?, 0)", (migration.name,))
            conn.commit()
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(ledger)
        for migration in wanted:
            pg.execute(migration.source.encode())
            pg.execute("insert into cairnq_migrations values (%s, 0)", (migration.name,))


# name -> (how the tasks are submitted, the worker's mode)
VARIANTS: dict[str, tuple[Callable[[SyncCairnQ, int], None], str]] = {
    "plain": (_plain, "none"),
    "no attempt history": (_plain, "unrecorded"),
    "kernel only": (_plain, "kernel"),
    "tables only": (_plain, "bare"),
    "schedule": (_plain, "schedule"),
    "chains": (_chains, "none"),
    "fan-in": (_fan_in, "none"),
    "keys": (_keyed, "none"),
    "limit never binds": (_keyed, "loose"),
    "1 per key": (_keyed, "one"),
}


def drain_variant(url: str, count: int, variant: str) -> dict[str, float]:
    """One drain of ``count`` tasks submitted as ``variant`` says; all must succeed."""
    submit, mode = VARIANTS[variant]
    options: dict[str, Any] = {}
    if mode == "kernel":
        _kernel_only(url)
        options["migrate"] = False
    with SyncCairnQ.connect(url, **options) as cq:
        submit(cq, count)
    figures = run_children(url, [["benchmarks.worker_main", url, "100", mode]])
    done = _count(url, "succeeded", **options)
    if done != count:
        raise BenchmarkError(f"the {variant} drain finished {done} of {count} tasks")
    out = per_task(figures, count)
    if mode == "schedule":
        with SyncCairnQ.connect(url) as cq:
            if not any(s.name == "bench-tick" for s in cq.schedules.list()):
                raise BenchmarkError("the schedule was not stored")
            out["slots"] = cq.stats("ticks").get("ticks", {}).get("queued", 0)
    return out


def measure(
    backend: str, folder: Path, count: int, runs: int, variants: list[str]
) -> dict[str, dict[str, float]]:
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    for run in range(runs):
        # Each run starts one variant later, so no variant always follows the same one
        # (a drain runs faster or slower after another on a busy machine).
        for name in variants[run % len(variants) :] + variants[: run % len(variants)]:
            url = fresh_url(backend, folder, f"feature-{name.replace(' ', '-')}")
            samples[name].append(drain_variant(url, count, name))
    figures = {}
    for name, runs_ in samples.items():
        row = {key: statistics.median(s[key] for s in runs_) for key in runs_[0]}
        # The noise band: the slowest and the fastest of the runs.
        row["per_s_min"] = min(s["per_s"] for s in runs_)
        row["per_s_max"] = max(s["per_s"] for s in runs_)
        figures[name] = row
    return figures


def _cpu(row: dict[str, float]) -> float:
    """CPU µs per task: the worker's, and the PostgreSQL server's for this database."""
    return row["cairnq_us"] + row.get("database_us", 0.0) + row.get("shared_us", 0.0)


def table(backend: str, figures: dict[str, dict[str, float]]) -> str:
    postgres = backend == "postgres"
    head = ["drain, 1 worker process", "tasks/s (slowest-fastest run)", "worker CPU µs/task"]
    head += ["server CPU µs/task"] if postgres else []
    head += ["throughput / plain", "CPU per task / plain"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    plain = figures["plain"]
    for name, row in figures.items():
        label = name
        if "slots" in row:
            label += f" ({row['slots']:.0f} slot{'s' * (row['slots'] != 1)} submitted)"
        band = f"{_rate(row['per_s_min'])}-{_rate(row['per_s_max'])}"
        cells = [label, f"{_rate(row['per_s'])} ({band})", f"{row['cairnq_us']:.0f}"]
        if postgres:
            cells.append(f"{row['database_us'] + row['shared_us']:.0f}")
        cells.append(f"{row['per_s'] / plain['per_s']:.2f}")
        cells.append(f"{_cpu(row) / _cpu(plain):.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.features",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--tasks", type=int, default=10_000, help="tasks per drain (10,000)")
    parser.add_argument("--runs", type=int, default=3, help="median of this many (3)")
    parser.add_argument("--quick", action="store_true", help="1,000 tasks, one run")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    parser.add_argument(
        "--variants",
        help="comma-separated variants to run beside the plain drain (default: all)",
    )
    args = parser.parse_args()
    variants = list(VARIANTS)
    if args.variants:
        chosen = [v.strip() for v in args.variants.split(",")]
        unknown = [v for v in chosen if v not in VARIANTS]
        if unknown:
            raise SystemExit(f"unknown variant(s) {unknown}; one of {', '.join(VARIANTS)}")
        variants = ["plain", *(v for v in chosen if v != "plain")]
    count, runs = (1000, 1) if args.quick else (args.tasks, args.runs)
    if count % GROUP:
        raise SystemExit(f"--tasks must be a multiple of {GROUP}")
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    folder = Path(tempfile.mkdtemp(prefix="cairnq-features-"))
    print(
        f"{platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"tasks={count}, median of {runs}; load average {os.getloadavg()[0]:.2f} at the start"
    )
    results: dict[str, Any] = {}
    for backend in backends:
        results[backend] = measure(backend, folder, count, runs, variants)
        print(f"\n{backend} (load average {os.getloadavg()[0]:.2f} at the end):\n")
        print(table(backend, results[backend]), flush=True)
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
