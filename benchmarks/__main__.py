"""``python -m benchmarks``: cairnq's workloads on both backends, peers alongside, one table.

Examples::

    python -m benchmarks                       # cairnq on SQLite and PostgreSQL
    python -m benchmarks --peers               # ... and PgQueuer + huey (own venv)
    python -m benchmarks --quick               # small sizes, to check it runs
    python -m benchmarks --baseline ../old     # an older checkout, run for run alongside

Every figure comes from work verified in the database afterwards; a workload
that did not finish its tasks aborts the run instead of printing a number.
Median of ``--runs`` runs (3 by default), each on a fresh database.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import cairnq_bench as bench

ROOT = Path(__file__).resolve().parents[1]

ROWS = [
    ("submit_single_per_s", "submit, one at a time (tasks/s)"),
    ("submit_single_sync_per_s", "submit, one at a time, blocking client (tasks/s)"),
    ("submit_synchronous", "SQLite synchronous while submitting (2 = FULL: fsync each commit)"),
    ("submit_concurrent_per_s", "submit, 100 concurrent (tasks/s)"),
    ("submit_bulk_per_s", "submit_many with keys/priorities/delays (tasks/s)"),
    ("submit_bulk_ids_per_s", "submit_many, ids only, with keys/priorities/delays (tasks/s)"),
    ("submit_bulk_plain_ids_per_s", "submit_many, ids only, plain tasks (no keys) (tasks/s)"),
    ("drain_1p_per_s", "drain, 1 worker process (tasks/s)"),
    ("drain_2p_per_s", "drain, 2 worker processes (tasks/s)"),
    ("drain_4p_per_s", "drain, 4 worker processes (tasks/s)"),
    ("drain_limits_none_per_s", "drain over 100 keys, no limits, 1 process (tasks/s)"),
    ("drain_limits_loose_per_s", "... with a per-key limit that never binds (tasks/s)"),
    ("drain_limits_one_per_s", "... with at most 1 running per key (tasks/s)"),
    ("latency_p50_ms", "submit -> handler start, p50 (ms)"),
    ("latency_p95_ms", "submit -> handler start, p95 (ms)"),
    ("latency_p99_ms", "submit -> handler start, p99 (ms)"),
    ("backlog_drain_ratio", "drain 1k due behind 20k delayed / empty"),
    ("idle_probe_us", "idle probe over 20k backing-off tasks (us)"),
    ("drain_1p_rss_mb", "worker RSS at concurrency 100 (MB)"),
]


def _cairnq(backend: str, folder: Path, sizes: dict[str, int]) -> dict[str, Any]:
    figures: dict[str, Any] = {}

    def fresh(name: str) -> str:
        return bench.fresh_url(backend, folder, name)

    figures.update(asyncio.run(bench.submit_single(fresh("single"), sizes["single"])))
    figures.update(bench.submit_single_sync(fresh("single-sync"), sizes["single"]))
    figures.update(asyncio.run(bench.submit_concurrent(fresh("concurrent"), sizes["single"])))
    figures.update(asyncio.run(bench.submit_bulk(fresh("bulk"), sizes["drain"])))
    figures.update(asyncio.run(bench.submit_bulk(fresh("bulk-ids"), sizes["drain"], ids_only=True)))
    figures.update(
        asyncio.run(
            bench.submit_bulk(fresh("bulk-plain"), sizes["drain"], keyed=False, ids_only=True)
        )
    )
    for processes in (1, 2, 4):
        figures.update(bench.drain(fresh(f"drain{processes}"), sizes["drain"], processes))
    for limits in ("none", "loose", "one"):
        figures.update(bench.drain_limited(fresh(f"limits-{limits}"), sizes["drain"], limits))
    figures.update(bench.latency(fresh("latency"), sizes["latency"]))
    figures.update(bench.backlog(fresh("backlog"), sizes["due"], sizes["backlog"]))
    figures.update(bench.probe_cost(fresh("probe"), sizes["backlog"]))
    return figures


def _peer(module: str, python: Path, args: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        [str(python), "-m", f"benchmarks.peers.{module}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        raise bench.BenchmarkError(f"{module} failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = set().union(*runs)
    return {k: statistics.median([r[k] for r in runs if k in r]) for k in keys}


def _format(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value < 10:
        return f"{value:.2f}"
    if isinstance(value, float) and value >= 1000:
        return f"{value / 1000:.1f}k"
    return f"{value:.0f}" if isinstance(value, float) else str(value)


def _commit(checkout: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    )
    dirty = subprocess.run(
        ["git", "-C", str(checkout), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return done.stdout.strip() + ("+changes" if dirty else "")


def _baseline(checkout: Path, backend: str, *, quick: bool) -> dict[str, Any]:
    """One run of the older checkout's own ``python -m benchmarks``, its figures as a dict."""
    command = [sys.executable, "-m", "benchmarks", "--backend", backend, "--runs", "1", "--json"]
    if quick:
        command.append("--quick")
    env = {**os.environ, "PYTHONPATH": str(checkout.resolve() / "src")}
    done = subprocess.run(
        command, cwd=checkout, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"the baseline run failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    text = done.stdout[done.stdout.index("\n{") + 1 :]
    columns: dict[str, dict[str, Any]] = json.loads(text)
    return columns[f"cairnq {backend}"]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--peers", action="store_true", help="also measure PgQueuer and huey")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small sizes, one run")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a checkout of an older commit (its src/ is imported): each run measures it "
        "first, then this tree, so both columns see the same machine state",
    )
    args = parser.parse_args()
    sizes = {"single": 1000, "drain": 10_000, "latency": 200, "due": 1000, "backlog": 20_000}
    runs = args.runs
    if args.quick:
        sizes = {"single": 200, "drain": 1000, "latency": 30, "due": 200, "backlog": 2000}
        runs = 1
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    columns: dict[str, dict[str, Any]] = {}
    folder = Path(tempfile.mkdtemp(prefix="cairnq-bench-"))
    for backend in backends:
        if args.baseline is not None:
            label = f"cairnq {backend} at {_commit(args.baseline)}"
            old, new = [], []
            for _ in range(runs):
                old.append(_baseline(args.baseline, backend, quick=args.quick))
                new.append(_cairnq(backend, folder, sizes))
            columns[label] = _median(old)
            columns[f"cairnq {backend} at {_commit(ROOT)}"] = _median(new)
        else:
            columns[f"cairnq {backend}"] = _median(
                [_cairnq(backend, folder, sizes) for _ in range(runs)]
            )
    if args.peers:
        from .peers.setup import ensure_venv

        python = ensure_venv(ROOT)
        peers: dict[str, Callable[[], dict[str, Any]]] = {}
        if "postgres" in backends:
            peers["PgQueuer postgres"] = lambda: _peer(
                "pgqueuer_bench",
                python,
                [
                    "--dsn",
                    bench.fresh_url("postgres", folder, "pgqueuer"),
                    "--tasks",
                    str(sizes["drain"]),
                    "--latency",
                    str(min(100, sizes["latency"])),
                ],
            )
        if "sqlite" in backends:
            peers["huey sqlite"] = lambda: _peer(
                "huey_bench",
                python,
                [
                    "--path",
                    str(folder / "huey.db"),
                    "--tasks",
                    str(sizes["drain"]),
                    "--single",
                    str(sizes["single"]),
                    "--latency",
                    str(min(100, sizes["latency"])),
                ],
            )
        for name, measure in peers.items():
            columns[name] = _median([measure() for _ in range(runs)])
    print(_table(columns, sizes, runs))
    if args.json:
        print(json.dumps(columns, indent=2))
    return 0


def _table(columns: dict[str, dict[str, Any]], sizes: dict[str, int], runs: int) -> str:
    names = list(columns)
    head = "| workload | " + " | ".join(names) + " |"
    rule = "|---|" + "---|" * len(names)
    body = [
        f"| {label} | " + " | ".join(_format(columns[n].get(key)) for n in names) + " |"
        for key, label in ROWS
        if any(key in columns[n] for n in names)
    ]
    machine = (
        f"{platform.node()}: {os.cpu_count()} cpus, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}; tasks={sizes['drain']}, median of {runs}"
    )
    return "\n".join([machine, "", head, rule, *body])


if __name__ == "__main__":
    sys.exit(main())
